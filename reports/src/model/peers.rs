//! "Against the peers": each broker cell set beside each peer queue (PGMQ, PgQ, procrastinate, pg-boss) that ran in the
//! same rounds, on the figures a planner compares queues by, with the ratio to the peer taken
//! round by round. Peers are driven straight over SQL, without the HTTP round trip the broker
//! cells pay; the table says so.

use super::tables::{figure_cell, figure_def, FigureCell};
use crate::figures::FigureDef;
use crate::results::Results;

/// The peer cells, by name.
pub const PEERS: [&str; 4] = ["pgmq", "pgq", "procrastinate", "pgboss"];

/// The figures the peer tables show, in column order.
pub const PEER_FIGURES: [&str; 6] = [
    "ack_throughput",
    "commits_per_ack",
    "wal_syncs_per_ack",
    "pg_exec_ms_per_ack",
    "latency_ms.ack.p99",
    "latency_ms.e2e.p99",
];

/// What the peers' figures mean beside the broker's.
pub const PEER_NOTE: &str = "Peers are driven straight over SQL by the load generator (no HTTP \
     round trip, no broker process), which favours them. Their \"ack\" is how each answers a \
     consumed message: PGMQ's delete, set_vt or archive; PgQ's finish_batch (one per batch) or \
     event_retry; procrastinate's finish_job or retry_job, one per job; pg-boss's complete or fail over \
     the batch. PgQ runs one consumer \
     per group and ticks every 100 ms; procrastinate fetches one job per call, so a pop of N is \
     up to N fetch_job calls. An external cell is a running broker driven over the same HTTP \
     wire as the broker cells, on its own database.";

/// One peer against the broker cells of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerTable {
    pub peer: String,
    pub figures: Vec<&'static FigureDef>,
    /// The peer's own row first (no ratios), then every broker cell with its ratio to the peer.
    pub rows: Vec<PeerRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PeerRow {
    pub cell: String,
    pub is_peer: bool,
    pub figures: Vec<FigureCell>,
}

/// Whether `cell` is shown as a peer: a peer queue, or a running broker added as a cell.
fn is_peer_like(cell: &crate::results::CellResults) -> bool {
    cell.external || PEERS.contains(&cell.name.as_str())
}

/// One table per peer (and per external cell) that ran; empty when none did.
pub fn peer_tables(r: &Results) -> Vec<PeerTable> {
    let figures: Vec<&'static FigureDef> = PEER_FIGURES
        .iter()
        .map(|k| figure_def(k).expect("a catalogue figure"))
        .collect();
    let broker_cells: Vec<_> = r.cells.iter().filter(|c| !is_peer_like(c)).collect();
    let peers = PEERS
        .iter()
        .filter_map(|p| r.cell(p))
        .chain(r.cells.iter().filter(|c| c.external));
    peers
        .map(|peer| {
            let row = |cell: &crate::results::CellResults, base| PeerRow {
                cell: cell.name.clone(),
                is_peer: cell.name == peer.name,
                figures: figures.iter().map(|d| figure_cell(d, cell, base)).collect(),
            };
            let mut rows = vec![row(peer, None)];
            rows.extend(broker_cells.iter().map(|c| row(c, Some(peer))));
            PeerTable {
                peer: peer.name.clone(),
                figures: figures.clone(),
                rows,
            }
        })
        .collect()
}
