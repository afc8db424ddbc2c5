//! `results.json`: the versioned document one `ackbench run` writes.
//!
//! Layout (documented for users in `reports/RESULTS.md`):
//!
//! ```text
//! { schema_version, complete, meta: {...},
//!   cells: [ { name, registry, fusion,
//!              rounds: [ { round, complete, window_secs, <figures>, audit, series, histograms } ],
//!              summary: { rounds, <figures as {median,min,max}>, audit, histograms } } ],
//!   gates: [ ... ] }
//! ```
//!
//! `<figures>` are the same keys in a round (plain numbers) and in the summary (a `Spread` over
//! rounds): that is what `Figures<T>` expresses; its scalar fields are declared by the figure
//! catalogue (`crate::figures`). Gates address a figure by its key (`ack_commits_per_ack`, or
//! `latency_ms.ack.p99`) through `Figures::get`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::figures::Figures;
use crate::figures::ScalarFigure;
use crate::stats::{Nan, Spread};

/// Bumped whenever a reader of an older document could misread a newer one. Version 2 added
/// `broker_cpu_us_per_request`; version 1 documents still read (the figure is NaN there).
pub const SCHEMA_VERSION: u32 = 2;

/// The oldest `schema_version` this build still reads.
pub const OLDEST_READABLE_SCHEMA: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Results {
    pub schema_version: u32,
    /// False when the run was interrupted (Ctrl-C) or a cell could not finish.
    pub complete: bool,
    pub meta: RunMeta,
    pub cells: Vec<CellResults>,
    /// Gate verdicts of the scenario's gates, when they were evaluated.
    #[serde(default)]
    pub gates: Vec<GateVerdict>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RunMeta {
    pub tool_version: String,
    pub git_revision: Option<String>,
    /// ISO-8601 UTC.
    pub started_at: String,
    pub finished_at: String,
    pub scenario: ScenarioMeta,
    pub seed: u64,
    pub rounds: u32,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    /// Cells in the order they ran within each round.
    pub cell_order: Vec<String>,
    pub machine: Machine,
    pub postgres: PostgresMeta,
    pub broker: BrokerMeta,
    /// Anything the reader should know about how figures were taken (lagging counters, etc.).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Sharded load generation: this document is one shard's (`index` set) or the merge of
    /// `count` shards (`index` absent); absent for a run of one process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<ShardsMeta>,
    /// The producers' open-loop rate in messages/s (every producer together); absent for a
    /// closed loop. The report judges each cell's throughput against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_rate: Option<f64>,
}

/// Which slice of a sharded run a document holds (see `RunMeta::shards`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ShardsMeta {
    /// The run id every shard was given (`--run-id`): it names the queues they share.
    pub run_id: String,
    /// How many shards the run was split into.
    pub count: u32,
    /// This shard's index, from 0; absent in a merged document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
}

impl ShardsMeta {
    /// `shard 1/3 of run X` or `merged from 3 shards of run X`.
    pub fn words(&self) -> String {
        match self.index {
            Some(i) => format!("shard {i}/{} of run {}", self.count, self.run_id),
            None => format!("merged from {} shards of run {}", self.count, self.run_id),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ScenarioMeta {
    pub name: String,
    pub path: String,
    /// The scenario file as run (after command-line overrides are noted in `overrides`).
    pub text: String,
    /// xxh3_64 of `text`, hex.
    pub hash: String,
    #[serde(default)]
    pub overrides: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Machine {
    pub cores: usize,
    pub hostname: String,
    pub os: String,
    pub memory_bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PostgresMeta {
    pub version: String,
    /// True when the load generator started its own throwaway cluster.
    pub embedded: bool,
    /// fsync, synchronous_commit, shared_buffers, wal_level, wal_buffers, max_wal_size,
    /// commit_delay, wal_sync_method, full_page_writes, ...
    pub settings: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct BrokerMeta {
    pub version: String,
    /// True when the run targeted an external broker (`--broker-url`).
    pub external: bool,
    pub url: Option<String>,
    pub binary: Option<String>,
    /// The target profile driven: `ackbench`, `queen-log` or `queen-rows`, and how it was learnt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_kind: Option<String>,
    /// How the broker's answers departed from this workspace's wire, with how many answers
    /// showed each departure over the whole run (empty for a broker that speaks it exactly).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub wire_variants: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CellResults {
    /// `registry+fusion`, `registry`, `fusion` or `none`.
    pub name: String,
    pub registry: bool,
    pub fusion: bool,
    /// The brokers this cell ran against, when the scenario sets a topology other than one
    /// broker (`[broker] instances`, `routing`, `topologies`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyMeta>,
    /// A running broker added as a cell (`ackbench run --external`): shown beside the peers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external: bool,
    pub rounds: Vec<RoundResults>,
    pub summary: Summary,
}

/// How many brokers a cell ran on its one database and how the clients reached them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TopologyMeta {
    /// `1`, `3rr`, `3sticky`: what the cell's name carries after `@` when a run has several.
    pub label: String,
    pub instances: u32,
    /// `single` (one broker), `round_robin` or `sticky`.
    pub routing: String,
    /// The accelerator cell (`registry+fusion`, ..., `none`) without the topology.
    pub accelerators: String,
}

/// One broker's share of a cell round's window, from its own `/metrics` and process (recorded
/// when a cell runs several brokers; the round's figures are the totals over all of them).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct BrokerFigures {
    pub url: String,
    /// HTTP requests it served (`queen_requests_total`, every route).
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub requests: f64,
    /// Ack groups its registry answered, and those that took the SQL path.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub registry_hits: f64,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub registry_misses: f64,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub registry_hit_rate: f64,
    /// Ack items by the path that answered them (`queen_acks_total{path}`).
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub acks_registry: f64,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub acks_hash: f64,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub fusion_flushes: f64,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub fusion_rows_per_commit: f64,
    /// CPU seconds of its process over the window, and per request it served.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub cpu_secs: f64,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub cpu_us_per_request: f64,
    /// Peer notifications over the window (`queen_peer_*_total`): payloads it sent, payloads
    /// it received from the other brokers, their events it applied, and payloads it dropped as
    /// malformed. NaN when the broker does not report them.
    #[serde(default = "not_reported", deserialize_with = "crate::stats::nullable")]
    pub peer_notifications_sent: f64,
    #[serde(default = "not_reported", deserialize_with = "crate::stats::nullable")]
    pub peer_notifications_received: f64,
    #[serde(default = "not_reported", deserialize_with = "crate::stats::nullable")]
    pub peer_events_applied: f64,
    #[serde(default = "not_reported", deserialize_with = "crate::stats::nullable")]
    pub peer_notifications_dropped: f64,
    /// Other brokers' leases whose delivered hashes it took into its ack registry (so their
    /// acks hit here), and deliveries it refused because their seal did not verify
    /// (`queen_peer_deliveries_{adopted,refused}_total`). NaN when not reported.
    #[serde(default = "not_reported", deserialize_with = "crate::stats::nullable")]
    pub peer_deliveries_adopted: f64,
    #[serde(default = "not_reported", deserialize_with = "crate::stats::nullable")]
    pub peer_deliveries_refused: f64,
}

/// A figure a results document written before it existed does not carry.
fn not_reported() -> f64 {
    f64::NAN
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(bound(deserialize = "T: serde::Deserialize<'de> + Nan"))]
pub struct Percentiles<T: Nan> {
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub count: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub mean: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub p50: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub p90: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub p99: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub p999: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub max: T,
}

impl<T: Nan + Copy> Percentiles<T> {
    /// A percentile by its name in a key (`p99`), `count` or `mean`.
    pub fn get(&self, key: &str) -> Option<T> {
        Some(match key {
            "count" => self.count,
            "mean" => self.mean,
            "p50" => self.p50,
            "p90" => self.p90,
            "p99" => self.p99,
            "p999" => self.p999,
            "max" => self.max,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(bound(deserialize = "T: serde::Deserialize<'de> + Nan"))]
pub struct Statement<T: Nan> {
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub calls: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub total_exec_ms: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub rows: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub wal_bytes: T,
}

/// What became of every pushed message of a cell.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Audit {
    pub pushed: u64,
    pub acked: u64,
    pub dead_lettered: u64,
    pub dropped: u64,
    /// Obligations unresolved after a drain that finished: proven lost.
    pub lost: u64,
    /// Obligations unresolved when the drain did not finish (the run was cut short or the drain
    /// timed out): still in flight, neither proven delivered nor proven lost.
    #[serde(default)]
    pub undrained: u64,
    /// Of the obligations unresolved when the drain did not finish, those the system's own
    /// storage was seen to hold unfinished afterwards (a peer's job table, read by
    /// transactionId): waiting where they were put, neither delivered nor lost. Not counted in
    /// `undrained`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub still_queued: u64,
    /// Deliveries beyond the first of a transactionId (at-least-once redeliveries).
    pub duplicates: u64,
    /// True when the drain finished: every partition's cursor reached its end, no live lease.
    pub drained: bool,
    /// True when the target's DLQ listing could not be read: the audit could not check that
    /// what the broker answered `dlq: true` for is in the DLQ.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dlq_unchecked: bool,
    /// Of `dead_lettered`, those the broker answered `dlq: true` for whose DLQ row went
    /// unchecked (`dlq_unchecked`): counted dead-lettered on the broker's word, not lost.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dead_lettered_unconfirmed: u64,
    /// Obligations delivered exactly once and resolved (acked, dead-lettered or dropped).
    #[serde(default)]
    pub exactly_once: u64,
    /// Whether the client's history of deliveries was checked for the guarantees below (false:
    /// results written before the checks existed; every cell, a peer's too, keeps a history).
    #[serde(default)]
    pub history_checked: bool,
    /// What the target promises, so which of the counts below fail the run.
    #[serde(default)]
    pub promises: Promises,
    /// (message, group) pairs delivered that no push of this run sent: never obligations.
    #[serde(default)]
    pub unexpected: u64,
    /// (message, group) pairs whose push failed or timed out on the client but were delivered.
    #[serde(default)]
    pub recovered: u64,
    /// First deliveries of one producer's messages in one partition out of the producer's
    /// order within one pop answer (one lease).
    #[serde(default)]
    pub order_violations: u64,
    /// First deliveries out of the producer's order across pop answers (lease changes), proven
    /// by time: allowed, but counted.
    #[serde(default)]
    pub reorderings_across_leases: u64,
    /// Pops that took a (partition, group) while another consumer certainly held it.
    #[serde(default)]
    pub lease_overlaps: u64,
    /// Acks answered success under a lease that had certainly passed to another consumer.
    #[serde(default)]
    pub stale_acks_accepted: u64,
    /// (message, group) pairs delivered again after an ack of theirs was answered success.
    #[serde(default)]
    pub ack_regressions: u64,
    /// A few first examples per guarantee count, by the count's name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub examples: BTreeMap<String, Vec<String>>,
}

/// What a target promises beyond at-least-once delivery: the guarantees whose breaking fails
/// a run. Every target promises that nothing is lost and nothing is invented.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Promises {
    /// One producer's messages in one partition are delivered in its order.
    pub order: bool,
    /// One consumer at a time holds a (partition, group).
    pub lease_exclusive: bool,
    /// An ack under a lease that passed to another consumer is refused.
    pub fencing: bool,
    /// A message whose ack was answered success is not delivered to that group again.
    pub ack_durable: bool,
}

impl Promises {
    /// Every guarantee the checks judge.
    pub const ALL: Promises = Promises {
        order: true,
        lease_exclusive: true,
        fencing: true,
        ack_durable: true,
    };
}

/// How many first examples the audit keeps per guarantee count.
pub const EXAMPLES_KEPT: usize = 3;

/// One guarantee the audit judges: its count's name, what it checks, and whether the target
/// promises it (a count that fails the run when above zero).
#[derive(Debug, Clone, PartialEq)]
pub struct Guarantee {
    pub name: &'static str,
    pub checks: &'static str,
    pub count: u64,
    /// Above zero fails the run.
    pub promised: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Audit {
    /// No message proven lost (an undrained cell proves nothing either way).
    pub fn passed(&self) -> bool {
        self.lost == 0
    }

    /// Passed and drained: every obligation was resolved, so the cell proves there was no loss.
    pub fn proven(&self) -> bool {
        self.passed() && self.undrained == 0
    }

    /// What the audit could not check, in words; empty when it checked everything.
    pub fn unchecked_words(&self) -> String {
        if !self.dlq_unchecked {
            return String::new();
        }
        format!(
            "the DLQ listing could not be read, so {} dead letters rest on the broker's dlq answers, unconfirmed",
            self.dead_lettered_unconfirmed
        )
    }

    /// Every guarantee judged, in the report's order, with its count and whether it is promised.
    pub fn guarantees(&self) -> Vec<Guarantee> {
        let p = self.promises;
        let g = |name, checks, count, promised| Guarantee {
            name,
            checks,
            count,
            promised,
        };
        vec![
            g(
                "lost",
                "every obligation acked, dead-lettered or dropped by policy",
                self.lost,
                true,
            ),
            g(
                "unexpected",
                "nothing delivered that no push sent",
                self.unexpected,
                true,
            ),
            g(
                "recovered",
                "pushes that failed on the client but were delivered (counted)",
                self.recovered,
                false,
            ),
            g(
                "order_violations",
                "one producer's messages in one partition in order within a lease",
                self.order_violations,
                p.order,
            ),
            g(
                "reorderings_across_leases",
                "the same order across lease changes (counted)",
                self.reorderings_across_leases,
                false,
            ),
            g(
                "lease_overlaps",
                "one consumer at a time holds a (partition, group)",
                self.lease_overlaps,
                p.lease_exclusive,
            ),
            g(
                "stale_acks_accepted",
                "an ack under a lease passed to another consumer is refused",
                self.stale_acks_accepted,
                p.fencing,
            ),
            g(
                "ack_regressions",
                "a message acked with success is not delivered to its group again",
                self.ack_regressions,
                p.ack_durable,
            ),
        ]
    }

    /// The promised guarantees broken, by name with their counts (lost included).
    pub fn broken(&self) -> Vec<(&'static str, u64)> {
        self.guarantees()
            .into_iter()
            .filter(|g| g.promised && g.count > 0)
            .map(|g| (g.name, g.count))
            .collect()
    }

    /// Of the obligations, the share delivered exactly once (NaN when there were none).
    pub fn exactly_once_fraction(&self) -> f64 {
        match self.pushed {
            0 => f64::NAN,
            n => self.exactly_once as f64 / n as f64,
        }
    }

    pub fn add(&mut self, other: &Audit) {
        self.exactly_once += other.exactly_once;
        self.add_guarantees(other);
        self.pushed += other.pushed;
        self.acked += other.acked;
        self.dead_lettered += other.dead_lettered;
        self.dropped += other.dropped;
        self.lost += other.lost;
        self.undrained += other.undrained;
        self.still_queued += other.still_queued;
        self.duplicates += other.duplicates;
        self.drained = self.drained && other.drained;
        self.dead_lettered_unconfirmed += other.dead_lettered_unconfirmed;
        self.dlq_unchecked |= other.dlq_unchecked;
    }

    /// Adds another history's guarantee counts and examples (another round's, or another
    /// shard's of the same round), not its ledger counts.
    pub fn add_guarantees(&mut self, other: &Audit) {
        self.history_checked |= other.history_checked;
        if other.history_checked {
            self.promises = other.promises;
        }
        self.unexpected += other.unexpected;
        self.recovered += other.recovered;
        self.order_violations += other.order_violations;
        self.reorderings_across_leases += other.reorderings_across_leases;
        self.lease_overlaps += other.lease_overlaps;
        self.stale_acks_accepted += other.stale_acks_accepted;
        self.ack_regressions += other.ack_regressions;
        for (name, examples) in &other.examples {
            let kept = self.examples.entry(name.clone()).or_default();
            let room = EXAMPLES_KEPT.saturating_sub(kept.len());
            kept.extend(examples.iter().take(room).cloned());
        }
    }
}

/// One second of the measured window. A counter that could not be read that second (the
/// PostgreSQL connection lost to a `restart_postgres` fault) is NaN, written as `null`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SecondSample {
    /// Seconds since the start of the measured window.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub t: f64,
    /// Writing transactions committed in this second (lag-free `pg_snapshot_xmax` delta).
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub commits: f64,
    /// Top-level calls of the ack procedures in this second (`pg_stat_statements`).
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub ack_commits: f64,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub pushed: f64,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub acked: f64,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub ack_p99_ms: f64,
    /// Messages pushed and not yet acked, dead-lettered or dropped.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub backlog: f64,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub errors: f64,
    /// PostgreSQL execution time of the ack procedures in this second, in ms
    /// (`pg_stat_statements`); NaN in documents written before it was sampled.
    #[serde(
        default = "crate::stats::absent",
        deserialize_with = "crate::stats::nullable"
    )]
    pub ack_exec_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RoundResults {
    pub round: u32,
    pub complete: bool,
    pub window_secs: f64,
    #[serde(flatten)]
    pub figures: Figures<f64>,
    /// The broker's `/metrics` deltas over the window, by series name (with several brokers:
    /// counters added over all of them, gauges the first one's).
    pub broker_metrics: BTreeMap<String, f64>,
    /// Each broker's figures, when the cell ran several (empty with one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub brokers: Vec<BrokerFigures>,
    pub audit: Audit,
    pub series: Vec<SecondSample>,
    /// Serialized HDR histograms (base64 V2, microseconds) by operation: push, pop, ack, e2e,
    /// and `<op>_uncorrected` for open-loop runs.
    pub histograms: BTreeMap<String, String>,
    /// The fault steps injected in the window, in the order they fired.
    #[serde(default)]
    pub faults: Vec<FaultEvent>,
    /// How the broker's answers departed from this workspace's wire in this round (warm-up to
    /// drain), answers per departure; empty when they did not.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub wire_variants: BTreeMap<String, u64>,
    /// Per minute of a long window (longer than `MINUTES_AFTER_SECS`): the figures over time;
    /// empty for a shorter one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub minutes: Vec<MinuteSample>,
}

/// A measured window longer than this many seconds records its figures per minute.
pub const MINUTES_AFTER_SECS: f64 = 120.0;

/// One minute of a long measured window (the last one may be shorter): achieved rates,
/// latency percentiles per operation from that minute's samples alone, the backlog and the
/// load generator's resident memory at its end. A figure that could not be read is NaN,
/// written as `null`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct MinuteSample {
    /// The minute's number, from 1.
    pub minute: u32,
    /// Its end, in seconds since the window's start, and its length in seconds.
    pub t: f64,
    pub secs: f64,
    /// Messages per second pushed, popped and acked over the minute.
    pub pushed: f64,
    pub popped: f64,
    pub acked: f64,
    /// Requests that failed in the minute.
    pub errors: f64,
    /// (message, group) obligations outstanding at the minute's end.
    pub backlog: f64,
    /// Latency of the minute by operation (push, pop, ack, e2e, ...).
    pub latency: BTreeMap<String, MinuteLatency>,
    /// The load generator's resident memory at the minute's end, in MiB (`VmRSS`).
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub rss_mib: f64,
}

/// One operation's latency over one minute, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct MinuteLatency {
    pub count: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// One fault step as it happened in a round's window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct FaultEvent {
    /// `kill_broker`, `restart_postgres`, `pause_broker` or `pause_consumers`.
    pub kind: String,
    /// When it fired, in seconds from the window's start.
    pub at_secs: f64,
    /// When it ended (the broker healthy again, the pause over, PostgreSQL back).
    pub ended_secs: f64,
    /// What happened besides (skipped and why, a failure to restore).
    #[serde(default)]
    pub note: String,
    /// Seconds from the end until the per-second ack rate was back within 10 % of its level
    /// before the fault; `None` when it did not come back within the window (or was skipped).
    #[serde(default)]
    pub recovery_secs: Option<f64>,
    /// `hold_xmin`: the cell database's vacuum state sampled each second of the whole window
    /// (before, during and after the hold); empty for the other kinds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vacuum: Vec<VacuumSample>,
}

/// One reading of a database's vacuum state: its user tables (the broker's or a peer's) added
/// up, and how long a bystander query took.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct VacuumSample {
    /// Seconds from the window's start.
    pub t: f64,
    /// `pg_stat_user_tables.n_dead_tup`, summed.
    pub dead_tuples: f64,
    /// `pg_stat_user_tables.n_live_tup`, summed.
    pub live_tuples: f64,
    /// `pg_table_size` of every user table (heap and TOAST), summed, in bytes.
    pub table_bytes: f64,
    /// `pg_indexes_size` of every user table, summed, in bytes.
    pub index_bytes: f64,
    /// `autovacuum_count`, summed: autovacuum runs so far.
    pub autovacuums: f64,
    /// How long the bystander query took (a bounded scan of the busiest table), in ms.
    pub bystander_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub rounds: u32,
    #[serde(flatten)]
    pub figures: Figures<Spread>,
    /// Audits of every round added up.
    pub audit: Audit,
    /// Every round's histograms merged, by operation.
    pub histograms: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GateVerdict {
    pub gate: String,
    pub kind: String,
    pub measured: Spread,
    /// NaN (`null`) where a gate has no bound to show.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub threshold: f64,
    pub passed: bool,
    pub detail: String,
    /// The gate does not apply to the target run (a ratio between accelerator cells against a
    /// broker without accelerator toggles): neither held nor failed, `passed` stays true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_applicable: bool,
    /// The gate could not be judged (a cell it needs did not run: left out by `--cells`, or the
    /// run was interrupted before it; a figure without a value; no baseline): neither held nor
    /// failed, `passed` stays true and `detail` says why.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_judged: bool,
    /// The interval around the gated figure (a ratio between cells, or now / baseline), when
    /// the run had the data for one; absent in documents written before gates had intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<GateInterval>,
    /// The interval straddles the bound: neither held nor failed; `passed` stays true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inconclusive: bool,
}

/// A confidence interval around a gated figure: the estimate (geometric mean of the rounds'
/// figures) and the bounds, at `level` (0.95).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GateInterval {
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub estimate: f64,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub low: f64,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub high: f64,
    pub level: f64,
    /// Rounds the interval was drawn from.
    pub rounds: u32,
}

impl GateInterval {
    /// `0.412 [0.371, 0.458]`.
    pub fn words(&self) -> String {
        format!("{:.4} [{:.4}, {:.4}]", self.estimate, self.low, self.high)
    }
}

/// A gate's outcome, the same word in the terminal, results.json's readers and the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateOutcome {
    Held,
    Failed,
    /// The interval straddles the bound: the run cannot tell.
    Inconclusive,
    /// Not judged, or not applicable to the target: neither held nor failed.
    NotJudged,
}

impl GateOutcome {
    /// `held`, `FAILED`, `inconclusive` or `not judged`.
    pub fn word(self) -> &'static str {
        match self {
            GateOutcome::Held => "held",
            GateOutcome::Failed => "FAILED",
            GateOutcome::Inconclusive => "inconclusive",
            GateOutcome::NotJudged => "not judged",
        }
    }
}

impl GateVerdict {
    pub fn outcome(&self) -> GateOutcome {
        match (self.not_applicable || self.not_judged, self.passed) {
            (true, _) => GateOutcome::NotJudged,
            (false, true) if self.inconclusive => GateOutcome::Inconclusive,
            (false, true) => GateOutcome::Held,
            (false, false) => GateOutcome::Failed,
        }
    }

    /// `held`, `FAILED`, `inconclusive` or `not judged`.
    pub fn word(&self) -> &'static str {
        self.outcome().word()
    }
}

impl<T: Nan + Copy> Statement<T> {
    /// A field by its name in a key (`calls`, `total_exec_ms`, `rows`, `wal_bytes`).
    pub fn get(&self, key: &str) -> Option<T> {
        Some(match key {
            "calls" => self.calls,
            "total_exec_ms" => self.total_exec_ms,
            "rows" => self.rows,
            "wal_bytes" => self.wal_bytes,
            _ => return None,
        })
    }
}

impl<T: Nan + Copy> Figures<T> {
    /// A figure by its key: a catalogue name (`crate::figures`), `latency_ms.<op>.<pct>`,
    /// `latency_uncorrected_ms.<op>.<pct>`, `statements.<procedure>.<field>` or
    /// `pg_exec_ms_per_ack_by_procedure.<procedure>`.
    pub fn get(&self, key: &str) -> Option<T> {
        let parts: Vec<&str> = key.split('.').collect();
        match parts.as_slice() {
            ["latency_ms", op, pct] => self.latency_ms.get(*op)?.get(pct),
            ["latency_uncorrected_ms", op, pct] => self.latency_uncorrected_ms.get(*op)?.get(pct),
            ["statements", proc_, field] => self.statements.get(*proc_)?.get(field),
            ["pg_exec_ms_per_ack_by_procedure", proc_] => {
                self.pg_exec_ms_per_ack_by_procedure.get(*proc_).copied()
            }
            [name] => ScalarFigure::from_name(name).map(|s| *self.scalar(s)),
            _ => None,
        }
    }
}

/// The spread over rounds of one number picked from each round.
fn spread_of(rounds: &[&Figures<f64>], pick: impl Fn(&Figures<f64>) -> f64) -> Spread {
    Spread::of(&rounds.iter().map(|r| pick(r)).collect::<Vec<_>>())
}

/// The keys of a map over all rounds, sorted.
fn keys_of<V>(
    rounds: &[&Figures<f64>],
    map: impl Fn(&Figures<f64>) -> &BTreeMap<String, V>,
) -> Vec<String> {
    let mut keys: Vec<String> = rounds.iter().flat_map(|r| map(r).keys().cloned()).collect();
    keys.sort();
    keys.dedup();
    keys
}

type LatencyMap<T> = BTreeMap<String, Percentiles<T>>;

fn summarize_latency(
    rounds: &[&Figures<f64>],
    pick: fn(&Figures<f64>) -> &LatencyMap<f64>,
) -> LatencyMap<Spread> {
    let field = |op: &str, g: fn(&Percentiles<f64>) -> f64| {
        spread_of(rounds, |r| pick(r).get(op).map(g).unwrap_or(f64::NAN))
    };
    keys_of(rounds, pick)
        .into_iter()
        .map(|op| {
            let summary = Percentiles {
                count: field(&op, |x| x.count),
                mean: field(&op, |x| x.mean),
                p50: field(&op, |x| x.p50),
                p90: field(&op, |x| x.p90),
                p99: field(&op, |x| x.p99),
                p999: field(&op, |x| x.p999),
                max: field(&op, |x| x.max),
            };
            (op, summary)
        })
        .collect()
}

fn summarize_statements(rounds: &[&Figures<f64>]) -> BTreeMap<String, Statement<Spread>> {
    let field = |name: &str, g: fn(&Statement<f64>) -> f64| {
        spread_of(rounds, |r| r.statements.get(name).map(g).unwrap_or(0.0))
    };
    keys_of(rounds, |r| &r.statements)
        .into_iter()
        .map(|name| {
            let st = Statement {
                calls: field(&name, |x| x.calls),
                total_exec_ms: field(&name, |x| x.total_exec_ms),
                rows: field(&name, |x| x.rows),
                wal_bytes: field(&name, |x| x.wal_bytes),
            };
            (name, st)
        })
        .collect()
}

fn summarize_by_procedure(rounds: &[&Figures<f64>]) -> BTreeMap<String, Spread> {
    keys_of(rounds, |r| &r.pg_exec_ms_per_ack_by_procedure)
        .into_iter()
        .map(|name| {
            let s = spread_of(rounds, |r| {
                let by = &r.pg_exec_ms_per_ack_by_procedure;
                by.get(&name).copied().unwrap_or(0.0)
            });
            (name, s)
        })
        .collect()
}

/// Builds a summary's figures from its rounds: each figure's spread over rounds.
pub fn summarize(rounds: &[&Figures<f64>]) -> Figures<Spread> {
    let mut out = Figures::<Spread> {
        pg_exec_ms_per_ack_by_procedure: summarize_by_procedure(rounds),
        latency_ms: summarize_latency(rounds, |r| &r.latency_ms),
        latency_uncorrected_ms: summarize_latency(rounds, |r| &r.latency_uncorrected_ms),
        statements: summarize_statements(rounds),
        ..Default::default()
    };
    for &s in ScalarFigure::ALL {
        *out.scalar_mut(s) = spread_of(rounds, |r| *r.scalar(s));
    }
    out
}

impl Results {
    /// Reads and checks a results file.
    pub fn from_json(text: &str) -> Result<Results, String> {
        let probe: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| format!("not a results file (invalid JSON): {e}"))?;
        match probe.get("schema_version").and_then(|v| v.as_u64()) {
            Some(v) if (OLDEST_READABLE_SCHEMA as u64..=SCHEMA_VERSION as u64).contains(&v) => {}
            Some(v) => {
                return Err(format!(
                    "results schema_version {v} is not supported (this build reads \
                     {OLDEST_READABLE_SCHEMA} to {SCHEMA_VERSION})"
                ))
            }
            None => return Err("not a results file: no schema_version".into()),
        }
        serde_json::from_value(probe)
            .map_err(|e| format!("results file does not match schema {SCHEMA_VERSION}: {e}"))
    }

    pub fn cell(&self, name: &str) -> Option<&CellResults> {
        self.cells.iter().find(|c| c.name == name)
    }
}

/// Reads a results file, naming the file in any error.
pub fn read(path: &std::path::Path) -> Result<Results, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Results::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes `results` to `path` as pretty-printed JSON, naming the file in any error.
pub fn write(results: &Results, path: &std::path::Path) -> Result<(), String> {
    let text = serde_json::to_string_pretty(results).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(acks: f64, p99: f64) -> Figures<f64> {
        let mut f = Figures {
            acked_messages: acks,
            ack_commits_per_ack: 1.0 / acks,
            ..Default::default()
        };
        f.latency_ms.insert(
            "ack".into(),
            Percentiles {
                p99,
                ..Default::default()
            },
        );
        f.statements.insert(
            "log_ack_multi_v1".into(),
            Statement {
                calls: acks / 10.0,
                ..Default::default()
            },
        );
        f
    }

    #[test]
    fn a_results_file_reads_back_as_written_and_errors_name_the_file() {
        let dir = std::env::temp_dir().join(format!("ackbench-results-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("results.json");
        let written = Results {
            schema_version: SCHEMA_VERSION,
            complete: true,
            meta: RunMeta {
                seed: 7,
                ..Default::default()
            },
            cells: Vec::new(),
            gates: Vec::new(),
        };
        write(&written, &path).unwrap();
        assert_eq!(read(&path).unwrap(), written);
        let missing = read(&dir.join("missing.json")).unwrap_err();
        assert!(missing.contains("missing.json"), "{missing}");
        std::fs::write(&path, "{}").unwrap();
        let refused = read(&path).unwrap_err();
        assert!(refused.contains("results.json") && refused.contains("no schema_version"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn figures_are_addressable_by_key() {
        let f = round(100.0, 7.5);
        assert_eq!(f.get("acked_messages"), Some(100.0));
        assert_eq!(f.get("latency_ms.ack.p99"), Some(7.5));
        assert_eq!(f.get("statements.log_ack_multi_v1.calls"), Some(10.0));
        assert_eq!(f.get("nope"), None);
        for d in crate::figures::all() {
            let known = d.key.starts_with("latency_ms.") && !d.key.starts_with("latency_ms.ack.");
            assert!(known || f.get(d.key).is_some(), "{}", d.key);
        }
    }

    #[test]
    fn summary_is_median_min_max_over_rounds() {
        let rounds = [round(100.0, 5.0), round(300.0, 9.0), round(200.0, 7.0)];
        let refs: Vec<&Figures<f64>> = rounds.iter().collect();
        let s = summarize(&refs);
        assert_eq!(
            s.acked_messages,
            Spread {
                median: 200.0,
                min: 100.0,
                max: 300.0
            }
        );
        assert_eq!(
            s.latency_ms["ack"].p99,
            Spread {
                median: 7.0,
                min: 5.0,
                max: 9.0
            }
        );
        assert_eq!(s.statements["log_ack_multi_v1"].calls.median, 20.0);
    }

    #[test]
    fn round_figures_flatten_into_the_round_object() {
        let r = RoundResults {
            round: 1,
            complete: true,
            window_secs: 10.0,
            figures: round(10.0, 1.0),
            broker_metrics: BTreeMap::new(),
            brokers: Vec::new(),
            audit: Audit::default(),
            series: vec![],
            histograms: BTreeMap::new(),
            faults: Vec::new(),
            wire_variants: BTreeMap::new(),
            minutes: Vec::new(),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["acked_messages"], 10.0);
        assert_eq!(v["latency_ms"]["ack"]["p99"], 1.0);
        let back: RoundResults = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn a_second_with_unread_counters_round_trips_as_nan() {
        let second = SecondSample {
            t: 1.0,
            commits: f64::NAN,
            acked: 5.0,
            ..Default::default()
        };
        let text = serde_json::to_string(&second).unwrap();
        assert!(text.contains("\"commits\":null"), "{text}");
        let back: SecondSample = serde_json::from_str(&text).unwrap();
        assert!(back.commits.is_nan() && back.acked == 5.0);
    }

    #[test]
    fn a_figure_older_documents_lack_reads_as_nan() {
        let r = RoundResults {
            round: 1,
            complete: true,
            window_secs: 10.0,
            figures: round(10.0, 1.0),
            broker_metrics: BTreeMap::new(),
            brokers: Vec::new(),
            audit: Audit::default(),
            series: vec![],
            histograms: BTreeMap::new(),
            faults: Vec::new(),
            wire_variants: BTreeMap::new(),
            minutes: Vec::new(),
        };
        let mut v = serde_json::to_value(&r).unwrap();
        v.as_object_mut()
            .unwrap()
            .remove("broker_cpu_us_per_request");
        let back: RoundResults = serde_json::from_value(v).unwrap();
        assert!(back.figures.broker_cpu_us_per_request.is_nan());
        assert_eq!(back.figures.acked_messages, 10.0);
    }

    #[test]
    fn newer_schema_versions_are_refused() {
        let e = Results::from_json(r#"{"schema_version": 99}"#).unwrap_err();
        assert!(e.contains("schema_version 99 is not supported"), "{e}");
    }
}
