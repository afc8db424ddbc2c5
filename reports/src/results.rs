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
//! rounds): that is what `Figures<T>` expresses. Gates address a figure by its key
//! (`ack_commits_per_ack`, or `latency_ms.ack.p99`) through `Figures::get`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CellResults {
    /// `registry+fusion`, `registry`, `fusion` or `none`.
    pub name: String,
    pub registry: bool,
    pub fusion: bool,
    pub rounds: Vec<RoundResults>,
    pub summary: Summary,
}

/// Every figure of a cell, as numbers in a round (`T = f64`) or spreads in a summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(bound(deserialize = "T: serde::Deserialize<'de> + Nan"))]
pub struct Figures<T: Nan> {
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub acked_messages: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub ack_requests: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub pushed_messages: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub push_requests: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub popped_messages: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub pop_requests: T,
    /// Acked messages per second of the measured window.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub ack_throughput: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub push_throughput: T,
    /// `pg_stat_database.xact_commit` delta of the benchmark database.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub commits: T,
    /// Writing transactions (`pg_snapshot_xmax` delta): lag-free, excludes read-only commits.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub write_commits: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub commits_per_sec: T,
    /// All of the database's commits per acked message.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub commits_per_ack: T,
    /// Top-level calls of the ack procedures (each its own transaction) per acked message.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub ack_commits_per_ack: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub commits_per_ack_request: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub wal_records: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub wal_bytes: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub wal_syncs: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub wal_syncs_per_ack: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub wal_syncs_per_commit: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub wal_bytes_per_ack: T,
    /// `pg_stat_statements` total execution ms of the broker's procedures per acked message.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub pg_exec_ms_per_ack: T,
    /// The same, split by procedure (the ack procedures, push, pop, ...).
    #[serde(deserialize_with = "crate::stats::nullable_map")]
    pub pg_exec_ms_per_ack_by_procedure: BTreeMap<String, T>,
    /// Registry hits / (hits + misses) over the window, from the broker's `/metrics`.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub registry_hit_rate: T,
    /// Fusion rows per flush commit over the window, from the broker's `/metrics`.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub fusion_rows_per_commit: T,
    /// Redeliveries (deliveries beyond the first of a transactionId) in the window.
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub redeliveries: T,
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub errors: T,
    /// Client-side latency (open loop: from the intended send time).
    pub latency_ms: BTreeMap<String, Percentiles<T>>,
    /// Open loop only: latency from the actual send time (coordinated omission not corrected).
    #[serde(default)]
    pub latency_uncorrected_ms: BTreeMap<String, Percentiles<T>>,
    /// Per procedure of `storage.md`, keyed without the schema (`log_ack_multi_v1`): top-level
    /// calls, execution ms, rows, WAL bytes.
    pub statements: BTreeMap<String, Statement<T>>,
    /// CPU microseconds of the load generator itself per HTTP request it sent in the window
    /// (push, pop, empty pops included, and ack requests).
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub loadgen_cpu_us_per_op: T,
    /// CPU of the broker process over the window, in cores (embedded brokers only).
    #[serde(deserialize_with = "crate::stats::nullable")]
    pub broker_cpu_cores: T,
    /// CPU microseconds of the broker process per HTTP request it served in the window
    /// (embedded brokers only; absent before schema version 2).
    #[serde(
        default = "crate::stats::absent",
        deserialize_with = "crate::stats::nullable"
    )]
    pub broker_cpu_us_per_request: T,
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

impl Percentiles<f64> {
    fn get(&self, key: &str) -> Option<f64> {
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
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Audit {
    pub pushed: u64,
    pub acked: u64,
    pub dead_lettered: u64,
    pub dropped: u64,
    pub lost: u64,
    /// Deliveries beyond the first of a transactionId (at-least-once redeliveries).
    pub duplicates: u64,
    /// True when the drain finished: every partition's cursor reached its end, no live lease.
    pub drained: bool,
}

impl Audit {
    pub fn passed(&self) -> bool {
        self.lost == 0
    }

    pub fn add(&mut self, other: &Audit) {
        self.pushed += other.pushed;
        self.acked += other.acked;
        self.dead_lettered += other.dead_lettered;
        self.dropped += other.dropped;
        self.lost += other.lost;
        self.duplicates += other.duplicates;
        self.drained = self.drained && other.drained;
    }
}

/// One second of the measured window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SecondSample {
    /// Seconds since the start of the measured window.
    pub t: f64,
    /// Writing transactions committed in this second (lag-free `pg_snapshot_xmax` delta).
    pub commits: f64,
    /// Top-level calls of the ack procedures in this second (`pg_stat_statements`).
    pub ack_commits: f64,
    pub pushed: f64,
    pub acked: f64,
    pub ack_p99_ms: f64,
    /// Messages pushed and not yet acked, dead-lettered or dropped.
    pub backlog: f64,
    pub errors: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RoundResults {
    pub round: u32,
    pub complete: bool,
    pub window_secs: f64,
    #[serde(flatten)]
    pub figures: Figures<f64>,
    /// The broker's `/metrics` deltas over the window, by series name.
    pub broker_metrics: BTreeMap<String, f64>,
    pub audit: Audit,
    pub series: Vec<SecondSample>,
    /// Serialized HDR histograms (base64 V2, microseconds) by operation: push, pop, ack, e2e,
    /// and `<op>_uncorrected` for open-loop runs.
    pub histograms: BTreeMap<String, String>,
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
    pub threshold: f64,
    pub passed: bool,
    pub detail: String,
}

impl Figures<f64> {
    /// A figure by its key: a top-level name, `latency_ms.<op>.<pct>`,
    /// `statements.<procedure>.<field>` or `pg_exec_ms_per_ack_by_procedure.<procedure>`.
    pub fn get(&self, key: &str) -> Option<f64> {
        let parts: Vec<&str> = key.split('.').collect();
        match parts.as_slice() {
            ["latency_ms", op, pct] => self.latency_ms.get(*op)?.get(pct),
            ["latency_uncorrected_ms", op, pct] => self.latency_uncorrected_ms.get(*op)?.get(pct),
            ["statements", proc_, field] => {
                let s = self.statements.get(*proc_)?;
                Some(match *field {
                    "calls" => s.calls,
                    "total_exec_ms" => s.total_exec_ms,
                    "rows" => s.rows,
                    "wal_bytes" => s.wal_bytes,
                    _ => return None,
                })
            }
            ["pg_exec_ms_per_ack_by_procedure", proc_] => {
                self.pg_exec_ms_per_ack_by_procedure.get(*proc_).copied()
            }
            [name] => self.scalar(name),
            _ => None,
        }
    }

    fn scalar(&self, name: &str) -> Option<f64> {
        Some(match name {
            "acked_messages" => self.acked_messages,
            "ack_requests" => self.ack_requests,
            "pushed_messages" => self.pushed_messages,
            "push_requests" => self.push_requests,
            "popped_messages" => self.popped_messages,
            "pop_requests" => self.pop_requests,
            "ack_throughput" => self.ack_throughput,
            "push_throughput" => self.push_throughput,
            "commits" => self.commits,
            "write_commits" => self.write_commits,
            "commits_per_sec" => self.commits_per_sec,
            "commits_per_ack" => self.commits_per_ack,
            "ack_commits_per_ack" => self.ack_commits_per_ack,
            "commits_per_ack_request" => self.commits_per_ack_request,
            "wal_records" => self.wal_records,
            "wal_bytes" => self.wal_bytes,
            "wal_syncs" => self.wal_syncs,
            "wal_syncs_per_ack" => self.wal_syncs_per_ack,
            "wal_syncs_per_commit" => self.wal_syncs_per_commit,
            "wal_bytes_per_ack" => self.wal_bytes_per_ack,
            "pg_exec_ms_per_ack" => self.pg_exec_ms_per_ack,
            "registry_hit_rate" => self.registry_hit_rate,
            "fusion_rows_per_commit" => self.fusion_rows_per_commit,
            "redeliveries" => self.redeliveries,
            "errors" => self.errors,
            "loadgen_cpu_us_per_op" => self.loadgen_cpu_us_per_op,
            "broker_cpu_cores" => self.broker_cpu_cores,
            "broker_cpu_us_per_request" => self.broker_cpu_us_per_request,
            _ => return None,
        })
    }
}

/// The names `Figures::get` accepts at the top level (for validating gates and CLI input).
pub const SCALAR_FIGURES: &[&str] = &[
    "acked_messages",
    "ack_requests",
    "pushed_messages",
    "push_requests",
    "popped_messages",
    "pop_requests",
    "ack_throughput",
    "push_throughput",
    "commits",
    "write_commits",
    "commits_per_sec",
    "commits_per_ack",
    "ack_commits_per_ack",
    "commits_per_ack_request",
    "wal_records",
    "wal_bytes",
    "wal_syncs",
    "wal_syncs_per_ack",
    "wal_syncs_per_commit",
    "wal_bytes_per_ack",
    "pg_exec_ms_per_ack",
    "registry_hit_rate",
    "fusion_rows_per_commit",
    "redeliveries",
    "errors",
    "loadgen_cpu_us_per_op",
    "broker_cpu_cores",
    "broker_cpu_us_per_request",
];

/// Builds a summary's figures from its rounds: each figure's spread over rounds.
pub fn summarize(rounds: &[&Figures<f64>]) -> Figures<Spread> {
    let spread = |f: &dyn Fn(&Figures<f64>) -> f64| {
        Spread::of(&rounds.iter().map(|r| f(r)).collect::<Vec<_>>())
    };
    let keys_of = |m: &dyn Fn(&Figures<f64>) -> Vec<String>| {
        let mut keys: Vec<String> = rounds.iter().flat_map(|r| m(r)).collect();
        keys.sort();
        keys.dedup();
        keys
    };
    let latency = |pick: fn(&Figures<f64>) -> &BTreeMap<String, Percentiles<f64>>| {
        keys_of(&|r| pick(r).keys().cloned().collect())
            .into_iter()
            .map(|op| {
                let p = |g: fn(&Percentiles<f64>) -> f64| {
                    let op = op.clone();
                    spread(&move |r| pick(r).get(&op).map(g).unwrap_or(f64::NAN))
                };
                let summary = Percentiles {
                    count: p(|x| x.count),
                    mean: p(|x| x.mean),
                    p50: p(|x| x.p50),
                    p90: p(|x| x.p90),
                    p99: p(|x| x.p99),
                    p999: p(|x| x.p999),
                    max: p(|x| x.max),
                };
                (op, summary)
            })
            .collect()
    };
    let statements = keys_of(&|r| r.statements.keys().cloned().collect())
        .into_iter()
        .map(|name| {
            let s = |g: fn(&Statement<f64>) -> f64| {
                let name = name.clone();
                spread(&move |r| r.statements.get(&name).map(g).unwrap_or(0.0))
            };
            let st = Statement {
                calls: s(|x| x.calls),
                total_exec_ms: s(|x| x.total_exec_ms),
                rows: s(|x| x.rows),
                wal_bytes: s(|x| x.wal_bytes),
            };
            (name, st)
        })
        .collect();
    let by_procedure = keys_of(&|r| r.pg_exec_ms_per_ack_by_procedure.keys().cloned().collect())
        .into_iter()
        .map(|name| {
            let n = name.clone();
            (
                name,
                spread(&move |r| {
                    r.pg_exec_ms_per_ack_by_procedure
                        .get(&n)
                        .copied()
                        .unwrap_or(0.0)
                }),
            )
        })
        .collect();
    Figures {
        acked_messages: spread(&|r| r.acked_messages),
        ack_requests: spread(&|r| r.ack_requests),
        pushed_messages: spread(&|r| r.pushed_messages),
        push_requests: spread(&|r| r.push_requests),
        popped_messages: spread(&|r| r.popped_messages),
        pop_requests: spread(&|r| r.pop_requests),
        ack_throughput: spread(&|r| r.ack_throughput),
        push_throughput: spread(&|r| r.push_throughput),
        commits: spread(&|r| r.commits),
        write_commits: spread(&|r| r.write_commits),
        commits_per_sec: spread(&|r| r.commits_per_sec),
        commits_per_ack: spread(&|r| r.commits_per_ack),
        ack_commits_per_ack: spread(&|r| r.ack_commits_per_ack),
        commits_per_ack_request: spread(&|r| r.commits_per_ack_request),
        wal_records: spread(&|r| r.wal_records),
        wal_bytes: spread(&|r| r.wal_bytes),
        wal_syncs: spread(&|r| r.wal_syncs),
        wal_syncs_per_ack: spread(&|r| r.wal_syncs_per_ack),
        wal_syncs_per_commit: spread(&|r| r.wal_syncs_per_commit),
        wal_bytes_per_ack: spread(&|r| r.wal_bytes_per_ack),
        pg_exec_ms_per_ack: spread(&|r| r.pg_exec_ms_per_ack),
        pg_exec_ms_per_ack_by_procedure: by_procedure,
        registry_hit_rate: spread(&|r| r.registry_hit_rate),
        fusion_rows_per_commit: spread(&|r| r.fusion_rows_per_commit),
        redeliveries: spread(&|r| r.redeliveries),
        errors: spread(&|r| r.errors),
        latency_ms: latency(|r| &r.latency_ms),
        latency_uncorrected_ms: latency(|r| &r.latency_uncorrected_ms),
        statements,
        loadgen_cpu_us_per_op: spread(&|r| r.loadgen_cpu_us_per_op),
        broker_cpu_cores: spread(&|r| r.broker_cpu_cores),
        broker_cpu_us_per_request: spread(&|r| r.broker_cpu_us_per_request),
    }
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
    fn figures_are_addressable_by_key() {
        let f = round(100.0, 7.5);
        assert_eq!(f.get("acked_messages"), Some(100.0));
        assert_eq!(f.get("latency_ms.ack.p99"), Some(7.5));
        assert_eq!(f.get("statements.log_ack_multi_v1.calls"), Some(10.0));
        assert_eq!(f.get("nope"), None);
        for name in SCALAR_FIGURES {
            assert!(f.get(name).is_some(), "{name}");
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
            audit: Audit::default(),
            series: vec![],
            histograms: BTreeMap::new(),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["acked_messages"], 10.0);
        assert_eq!(v["latency_ms"]["ack"]["p99"], 1.0);
        let back: RoundResults = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn a_figure_older_documents_lack_reads_as_nan() {
        let r = RoundResults {
            round: 1,
            complete: true,
            window_secs: 10.0,
            figures: round(10.0, 1.0),
            broker_metrics: BTreeMap::new(),
            audit: Audit::default(),
            series: vec![],
            histograms: BTreeMap::new(),
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
