//! "By broker topology": every cell that ran against several brokers (or in a run of several
//! topologies) with the figures the topology moves: the registry's hit rate, fusion rows per
//! commit, PostgreSQL time and ack commits per acked message, broker CPU per request, and the
//! ack rate, each with its ratio to the same accelerator cell on the run's first topology;
//! beside them, how the requests spread over the brokers and each broker's hit rate.

use super::format::{format_value, group_thousands};
use super::tables::{figure_cell, figure_def, FigureCell};
use crate::figures::{FigureDef, Format};
use crate::results::{CellResults, Results};

/// The figures the topology table shows, in column order.
pub const TOPOLOGY_FIGURES: [&str; 6] = [
    "registry_hit_rate",
    "fusion_rows_per_commit",
    "pg_exec_ms_per_ack",
    "ack_commits_per_ack",
    "broker_cpu_us_per_request",
    "ack_throughput",
];

/// What the table's figures mean.
pub const TOPOLOGY_NOTE: &str = "Each topology runs its brokers on the cell's one database. \
     Round robin hands every request to the next broker, as a plain load balancer does, so an \
     ack usually reaches a broker other than the one whose pop leased the batch: that broker's \
     registry has no entry for it and the ack takes the hash path. Sticky routing keeps each \
     worker on one broker (session affinity). Ack fusion only folds the acks one broker \
     receives. Totals over the cell's brokers; medians over rounds; × is the ratio to the same \
     accelerator cell on the first topology, taken round by round.";

/// The table: one row per cell with a topology, grouped by accelerator cell.
#[derive(Debug, Clone, PartialEq)]
pub struct TopologyTable {
    pub figures: Vec<&'static FigureDef>,
    pub rows: Vec<TopologyRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TopologyRow {
    pub cell: String,
    /// The accelerator cell (`registry+fusion`, ..., `none`).
    pub accelerators: String,
    /// `1`, `3rr`, `3sticky`.
    pub topology: String,
    pub instances: u32,
    /// `single`, `round_robin` or `sticky`.
    pub routing: String,
    /// The row the ratios are taken to (the accelerator cell's first topology); `None` for
    /// that row itself.
    pub compared_with: Option<String>,
    pub figures: Vec<FigureCell>,
    /// Each broker's share of the cell's requests over every round (empty with one broker).
    pub brokers: Vec<BrokerShare>,
    /// The shares in a few words: `34% · 33% · 33% of 12 000 requests`.
    pub brokers_text: String,
    /// Each broker's peer notifications over every round (`peers_text`).
    pub peers_text: String,
}

/// One broker of a cell, over every round.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerShare {
    pub url: String,
    pub requests: f64,
    /// Of the cell's requests.
    pub share: f64,
    /// Its registry's hits / (hits + misses); NaN without registry traffic.
    pub registry_hit_rate: f64,
    /// Peer notifications it sent, events of its peers' it applied, notifications it dropped
    /// (NaN when it reported none of them in any round).
    pub peer_sent: f64,
    pub peer_applied: f64,
    pub peer_dropped: f64,
}

/// The table, when some cell of the run carries a topology (`[broker] instances`, `routing`
/// or `topologies` set); `None` for a run of one broker per cell.
pub fn topology_table(r: &Results) -> Option<TopologyTable> {
    let cells: Vec<&CellResults> = r.cells.iter().filter(|c| c.topology.is_some()).collect();
    if cells.is_empty() {
        return None;
    }
    let figures: Vec<&'static FigureDef> = TOPOLOGY_FIGURES
        .iter()
        .map(|k| figure_def(k).expect("a catalogue figure"))
        .collect();
    let mut ordered = cells.clone();
    ordered.sort_by_key(|c| first_index_of_accelerators(&cells, c));
    let rows = ordered
        .iter()
        .map(|c| row(c, first_of_accelerators(&cells, c), &figures))
        .collect();
    Some(TopologyTable { figures, rows })
}

fn accelerators(c: &CellResults) -> &str {
    c.topology.as_ref().map_or("", |t| t.accelerators.as_str())
}

/// The first cell of the run with the same accelerators: the one the others are compared with.
fn first_of_accelerators<'a>(cells: &[&'a CellResults], c: &CellResults) -> &'a CellResults {
    cells
        .iter()
        .find(|o| accelerators(o) == accelerators(c))
        .expect("the cell itself")
}

fn first_index_of_accelerators(cells: &[&CellResults], c: &CellResults) -> usize {
    cells
        .iter()
        .position(|o| accelerators(o) == accelerators(c))
        .unwrap_or(0)
}

fn row(c: &CellResults, base: &CellResults, figures: &[&'static FigureDef]) -> TopologyRow {
    let t = c.topology.as_ref().expect("cells with a topology");
    let compared = (base.name != c.name).then_some(base);
    let brokers = broker_shares(c);
    TopologyRow {
        cell: c.name.clone(),
        accelerators: t.accelerators.clone(),
        topology: t.label.clone(),
        instances: t.instances,
        routing: t.routing.clone(),
        compared_with: compared.map(|b| b.name.clone()),
        figures: figures
            .iter()
            .map(|d| figure_cell(d, c, compared))
            .collect(),
        brokers_text: shares_text(&brokers),
        peers_text: peers_text(&brokers),
        brokers,
    }
}

/// Each broker's requests and registry hits added over the cell's rounds.
pub fn broker_shares(c: &CellResults) -> Vec<BrokerShare> {
    let n = c.rounds.iter().map(|r| r.brokers.len()).max().unwrap_or(0);
    let mut shares: Vec<BrokerShare> = (0..n)
        .map(|i| {
            let each = c.rounds.iter().filter_map(|r| r.brokers.get(i));
            let (mut requests, mut hits, mut misses, mut url) = (0.0, 0.0, 0.0, String::new());
            let mut peers = [f64::NAN; 3];
            for b in each {
                requests += finite(b.requests);
                hits += finite(b.registry_hits);
                misses += finite(b.registry_misses);
                url.clone_from(&b.url);
                let reported = [
                    b.peer_notifications_sent,
                    b.peer_events_applied,
                    b.peer_notifications_dropped,
                ];
                for (sum, v) in peers.iter_mut().zip(reported) {
                    if v.is_finite() {
                        *sum = finite(*sum) + v;
                    }
                }
            }
            BrokerShare {
                url,
                requests,
                share: f64::NAN,
                registry_hit_rate: if hits + misses > 0.0 {
                    hits / (hits + misses)
                } else {
                    f64::NAN
                },
                peer_sent: peers[0],
                peer_applied: peers[1],
                peer_dropped: peers[2],
            }
        })
        .collect();
    let total: f64 = shares.iter().map(|s| s.requests).sum();
    for s in &mut shares {
        s.share = if total > 0.0 {
            s.requests / total
        } else {
            f64::NAN
        };
    }
    shares
}

fn finite(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

/// `sent 1 200 · applied 2 400 · dropped 0` per broker, joined by ` | `; `—` with one broker
/// or when no broker reported peer notifications.
fn peers_text(shares: &[BrokerShare]) -> String {
    if shares.iter().all(|s| s.peer_sent.is_nan()) {
        return "—".into();
    }
    let count = |v: f64| {
        if v.is_finite() {
            group_thousands(v)
        } else {
            "—".into()
        }
    };
    shares
        .iter()
        .map(|s| {
            format!(
                "sent {} · applied {} · dropped {}",
                count(s.peer_sent),
                count(s.peer_applied),
                count(s.peer_dropped)
            )
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// `34% · 33% · 33% of 12 000 requests`, or `—` with one broker.
fn shares_text(shares: &[BrokerShare]) -> String {
    if shares.is_empty() {
        return "—".into();
    }
    let parts: Vec<String> = shares
        .iter()
        .map(|s| format_value(s.share, Format::Percent))
        .collect();
    let total: f64 = shares.iter().map(|s| s.requests).sum();
    format!(
        "{} of {} requests",
        parts.join(" · "),
        group_thousands(total)
    )
}
