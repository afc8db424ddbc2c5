//! Capacity planning: the `capacity.json` document `ackbench capacity` writes (this file: its
//! schema), the sentences that sum up each cell (`wording`), its charts as specs (`charts`) and
//! the HTML report `capacity.html` rendered from the document alone (`page`).
//!
//! A capacity run steps the offered producer rate up, cell by cell (each step on a fresh queue
//! with its own warm-up), and judges each step: it is sustained when the producers achieved at
//! least 95% of the offered rate, the consumers answered at least 95% of it per consumer group,
//! the backlog did not grow by more than 5% of what was offered, and ack and end-to-end p99 stayed
//! within the latency target. A cell's capacity is the highest sustained rate before its first
//! failing step (the knee). The types live here, beside `results`, because both the load
//! generator (which writes them) and the report (which reads them) need them.

mod charts;
mod page;
mod wording;

use serde::{Deserialize, Serialize};

use crate::results::RunMeta;
use crate::stats::{absent, nullable};

pub use charts::{chart_specs, render_chart};
pub use page::render_capacity;
pub use wording::{all_warnings, amount, cell_sentence, headline};

/// The version of `capacity.json` this build writes and reads.
pub const CAPACITY_SCHEMA_VERSION: u32 = 1;
/// The `kind` of a capacity document (a results file has none), so neither is mistaken for the
/// other.
pub const CAPACITY_KIND: &str = "ackbench-capacity";
/// The longest a lengthened window grows, as a multiple of `Plan::step_secs`.
pub const MAX_WINDOW_FACTOR: f64 = 3.0;

/// What makes a step sustained, and when the load generator warns about itself.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Criteria {
    /// Ack and end-to-end p99 must be at most this (ms).
    pub slo_p99_ms: f64,
    /// Pushed messages/s must reach this share of the offered rate.
    pub min_achieved_ratio: f64,
    /// Answered (message, group) obligations/s must reach this share of offered × groups.
    pub min_answered_ratio: f64,
    /// The backlog may grow by at most this share of the obligations offered in the window.
    pub max_backlog_growth_ratio: f64,
    /// Warn when the load generator used more CPU than this (cores) over a window.
    pub loadgen_cpu_warn_cores: f64,
    /// Warn when the producers' schedule lag p99 exceeded this (ms).
    pub schedule_lag_warn_ms: f64,
}

impl Default for Criteria {
    fn default() -> Criteria {
        Criteria {
            slo_p99_ms: 50.0,
            min_achieved_ratio: 0.95,
            min_answered_ratio: 0.95,
            max_backlog_growth_ratio: 0.05,
            loadgen_cpu_warn_cores: 0.85,
            schedule_lag_warn_ms: 10.0,
        }
    }
}

impl Criteria {
    /// The default criteria with latency target `slo_p99_ms`.
    pub fn with_slo(slo_p99_ms: f64) -> Criteria {
        Criteria {
            slo_p99_ms,
            ..Criteria::default()
        }
    }
}

/// The ladder of rates and how each step was run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Plan {
    pub start_rate: f64,
    pub step_factor: f64,
    pub max_rate: f64,
    /// The floor of the search: below it a cell is reported as failing everything (msg/s).
    #[serde(default)]
    pub min_rate: f64,
    /// The search ends once failing / sustained <= 1 + precision.
    #[serde(default)]
    pub precision: f64,
    /// The upward ladder from the start, msg/s (the search also steps down from the start by
    /// the same factor, and bisects between a sustained and a failing rate).
    pub rates: Vec<f64>,
    /// Warm-up of each step, excluded from its figures (s).
    pub warmup_secs: f64,
    /// The measured window of each step (s).
    pub step_secs: f64,
    /// After each rejection close to the knee (a failing rate within one step factor of a
    /// sustained one), later windows lengthen by this share of `step_secs`, up to
    /// `MAX_WINDOW_FACTOR` × (0: fixed windows).
    #[serde(default)]
    pub window_growth: f64,
    pub producers: u32,
    pub producer_batch: u32,
    /// Consumers per group (in queue mode: in total).
    pub consumers: u32,
    pub consumer_groups: u32,
    /// Messages per partition prefilled into each step's queue before its warm-up.
    pub prefill_per_partition: u64,
    /// The first rate of a cell whose search starts elsewhere than `start_rate`, by cell name
    /// (a sweep starts a cell where its search at the same point, or the point before, found
    /// the knee).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub cell_starts: std::collections::BTreeMap<String, f64>,
}

/// A condition a step can fail.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// Pushed messages/s below the share of the offered rate.
    Achieved,
    /// Consumers did not keep up: answered obligations/s below the share of offered × groups.
    Answered,
    /// The backlog grew by more than its allowance.
    Backlog,
    /// Ack p99 above the target (or none measured).
    AckP99,
    /// End-to-end p99 above the target (or none measured).
    E2eP99,
}

impl Condition {
    pub fn label(self) -> &'static str {
        match self {
            Condition::Achieved => "achieved rate",
            Condition::Answered => "acks keep up",
            Condition::Backlog => "backlog",
            Condition::AckP99 => "ack p99",
            Condition::E2eP99 => "e2e p99",
        }
    }
}

/// A failed condition, with the numbers that failed it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Failure {
    pub condition: Condition,
    /// E.g. `ack p99 180 ms > 50 ms`.
    pub detail: String,
}

/// One step: an offered rate held for a warm-up and a measured window, and its verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Step {
    /// 1-based position in the ladder.
    pub index: u32,
    /// Offered producer rate, msg/s.
    pub offered_rate: f64,
    #[serde(deserialize_with = "nullable")]
    pub window_secs: f64,
    /// Consumer groups (each consumes every message; obligations are per group).
    pub consumer_groups: u32,
    /// Messages offered in the window (offered rate × window).
    #[serde(deserialize_with = "nullable")]
    pub offered_messages: f64,
    #[serde(deserialize_with = "nullable")]
    pub pushed_messages: f64,
    /// Pushed (queued) messages/s.
    #[serde(deserialize_with = "nullable")]
    pub achieved_push_rate: f64,
    /// First successful acks of (message, group) per second.
    #[serde(deserialize_with = "nullable")]
    pub acked_rate: f64,
    /// (message, group) obligations resolved per second: acked, dead-lettered or dropped.
    #[serde(deserialize_with = "nullable")]
    pub answered_rate: f64,
    /// Obligations not yet resolved, at the window's start and end.
    #[serde(deserialize_with = "nullable")]
    pub backlog_start: f64,
    #[serde(deserialize_with = "nullable")]
    pub backlog_end: f64,
    #[serde(deserialize_with = "nullable")]
    pub backlog_growth: f64,
    /// Push p99 from the intended send time (coordinated omission corrected).
    #[serde(deserialize_with = "nullable")]
    pub push_p99_ms: f64,
    /// Push p99 from the actual send (the request's own time).
    #[serde(deserialize_with = "nullable")]
    pub push_uncorrected_p99_ms: f64,
    #[serde(deserialize_with = "nullable")]
    pub ack_p50_ms: f64,
    #[serde(deserialize_with = "nullable")]
    pub ack_p99_ms: f64,
    #[serde(deserialize_with = "nullable")]
    pub e2e_p50_ms: f64,
    #[serde(deserialize_with = "nullable")]
    pub e2e_p99_ms: f64,
    /// End-to-end p99 of messages acked on their first delivery: the figure the SLO judges.
    /// Messages the workload itself failed or nacked wait out a retry by design; overload shows
    /// as backlog growth and as this p99. Absent (NaN) in documents that predate it.
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub e2e_first_p99_ms: f64,
    /// `pg_stat_database.xact_commit` delta per second (lags ~1 s at each edge).
    #[serde(deserialize_with = "nullable")]
    pub commits_per_sec: f64,
    /// `pg_snapshot_xmax` delta per second: writing transactions, lag-free.
    #[serde(deserialize_with = "nullable")]
    pub write_commits_per_sec: f64,
    /// CPU the load generator used over the window, in cores.
    #[serde(deserialize_with = "nullable")]
    pub loadgen_cpu_cores: f64,
    /// CPU the broker used over the window, in cores (NaN for an external broker).
    #[serde(deserialize_with = "nullable")]
    pub broker_cpu_cores: f64,
    /// p99 of the delay from a batch's intended send time to its actual send start (ms).
    #[serde(deserialize_with = "nullable")]
    pub schedule_lag_p99_ms: f64,
    /// Each producer's interval between batches at this rate (ms): a producer sends one batch
    /// at a time, so pushes slower than this make it late.
    #[serde(deserialize_with = "nullable")]
    pub producer_interval_ms: f64,
    /// Client errors in the window.
    #[serde(deserialize_with = "nullable")]
    pub errors: f64,
    /// CPU PostgreSQL's processes used over the window, in cores (NaN when not measured: an
    /// external server, or an older document).
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub pg_cpu_cores: f64,
    /// Execution time of the database's top-level statements per second (`pg_stat_statements`,
    /// ms/s).
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub pg_exec_ms_per_sec: f64,
    /// WAL syncs (`pg_stat_wal.wal_sync`) per second.
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub wal_syncs_per_sec: f64,
    /// WAL bytes per second.
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub wal_bytes_per_sec: f64,
    /// The share of the machine's CPU time the host took over the window (`/proc/stat` steal;
    /// NaN where the kernel does not account it, and in older documents).
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub host_steal_share: f64,
    pub sustained: bool,
    /// The conditions that failed (empty when sustained).
    #[serde(default)]
    pub failed: Vec<Failure>,
    /// The load generator was near its own limit in this step.
    #[serde(default)]
    pub loadgen_warnings: Vec<String>,
}

impl Step {
    /// The commit rate charted: writing transactions (lag-free), else `xact_commit`.
    pub fn charted_commits(&self) -> f64 {
        if self.write_commits_per_sec.is_finite() {
            self.write_commits_per_sec
        } else {
            self.commits_per_sec
        }
    }

    /// The p99 a step is judged by: its ack p99 or its judged end-to-end p99, whichever is
    /// higher.
    pub fn judged_p99_ms(&self) -> f64 {
        self.ack_p99_ms.max(self.judged_e2e_p99_ms())
    }

    /// The end-to-end p99 the SLO judges: first deliveries' when measured, else every message's
    /// (documents that predate the split).
    pub fn judged_e2e_p99_ms(&self) -> f64 {
        if self.e2e_first_p99_ms.is_finite() {
            self.e2e_first_p99_ms
        } else {
            self.e2e_p99_ms
        }
    }

    /// Answered obligations/s per consumer group (comparable with the offered rate).
    pub fn answered_per_group(&self) -> f64 {
        self.answered_rate / self.consumer_groups.max(1) as f64
    }
}

/// One cell's ladder and what it found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct CapacityCell {
    pub name: String,
    pub registry: bool,
    pub fusion: bool,
    /// Every step whose verdict counts, lowest rate first.
    pub steps: Vec<Step>,
    /// A failing step measured again at the same rate because the host took at least
    /// `HOST_STEAL_WARN` of the machine's CPU in its window (the first such step of the search,
    /// if any): its verdict does not count, the step measured after it does.
    #[serde(default)]
    pub remeasured: Vec<Step>,
    /// The highest sustained offered rate before the first failing step.
    pub sustained_rate: Option<f64>,
    /// The offered rate of the first failing step.
    pub knee_rate: Option<f64>,
    /// Why the search ended (`knee bracketed: ...`, `every rate up to --max ...`, `even the
    /// floor --min ... failed`, ...).
    pub stopped: String,
}

impl CapacityCell {
    /// The first failing step.
    pub fn knee(&self) -> Option<&Step> {
        self.steps.iter().find(|s| !s.sustained)
    }

    /// The step of the sustained rate (the last sustained one before the knee).
    pub fn capacity_step(&self) -> Option<&Step> {
        self.steps.iter().take_while(|s| s.sustained).last()
    }

    /// What limited the cell: the conditions its knee step failed.
    pub fn limited_by(&self) -> Vec<Condition> {
        self.knee()
            .map(|k| k.failed.iter().map(|f| f.condition).collect())
            .unwrap_or_default()
    }

    /// A step above the knee that held again (the knee is noisy there).
    pub fn held_after_knee(&self) -> Option<&Step> {
        self.steps
            .iter()
            .skip_while(|s| s.sustained)
            .find(|s| s.sustained)
    }
}

/// `capacity.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CapacityResults {
    /// Always `ackbench-capacity`.
    pub kind: String,
    pub schema_version: u32,
    /// False when the run was interrupted (cells or steps are missing).
    pub complete: bool,
    /// Run metadata as in `results.json` (`rounds` is 1; the notes say how capacity is measured).
    pub meta: RunMeta,
    pub criteria: Criteria,
    pub plan: Plan,
    pub cells: Vec<CapacityCell>,
    /// Whole-run warnings: the load generator near its limit, coarse windows, ...
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl CapacityResults {
    /// Reads a capacity document, refusing other kinds and versions with a reason.
    pub fn from_json(text: &str) -> Result<CapacityResults, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        match v.get("kind").and_then(|k| k.as_str()) {
            Some(CAPACITY_KIND) => {}
            Some(other) => {
                return Err(format!(
                    "not a capacity document (kind `{other}`, expected `{CAPACITY_KIND}`)"
                ))
            }
            None => return Err(
                "not a capacity document (no `kind`; a results.json is read by `ackbench report`)"
                    .to_string(),
            ),
        }
        match v.get("schema_version").and_then(|x| x.as_u64()) {
            Some(n) if n == CAPACITY_SCHEMA_VERSION as u64 => {}
            other => {
                return Err(format!(
                    "capacity schema_version {} is not supported (this build reads {CAPACITY_SCHEMA_VERSION})",
                    other.map(|n| n.to_string()).unwrap_or_else(|| "missing".into())
                ))
            }
        }
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    /// The document as pretty JSON (NaN written as `null`).
    pub fn to_json(&self) -> Result<String, String> {
        serde_json::to_string_pretty(self).map_err(|e| e.to_string())
    }

    pub fn cell(&self, name: &str) -> Option<&CapacityCell> {
        self.cells.iter().find(|c| c.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::charts::{REFERENCE, REFERENCE_GREY};
    use super::*;
    use crate::charts::cell_colour_hex;

    fn step(index: u32, rate: f64, sustained: bool) -> Step {
        Step {
            index,
            offered_rate: rate,
            window_secs: 10.0,
            consumer_groups: 1,
            achieved_push_rate: rate,
            answered_rate: if sustained { rate } else { rate * 0.5 },
            ack_p99_ms: if sustained { 5.0 } else { 120.0 },
            e2e_p99_ms: f64::NAN,
            e2e_first_p99_ms: f64::NAN,
            write_commits_per_sec: rate / 4.0,
            commits_per_sec: f64::NAN,
            sustained,
            failed: if sustained {
                vec![]
            } else {
                vec![Failure {
                    condition: Condition::AckP99,
                    detail: "ack p99 120 ms > 50 ms".into(),
                }]
            },
            ..Default::default()
        }
    }

    fn doc() -> CapacityResults {
        CapacityResults {
            kind: CAPACITY_KIND.into(),
            schema_version: CAPACITY_SCHEMA_VERSION,
            complete: true,
            meta: RunMeta::default(),
            criteria: Criteria::default(),
            plan: Plan::default(),
            cells: vec![
                CapacityCell {
                    name: "registry+fusion".into(),
                    steps: vec![
                        step(1, 1000.0, true),
                        step(2, 2000.0, true),
                        step(3, 4200.0, true),
                        step(4, 8000.0, false),
                    ],
                    sustained_rate: Some(4200.0),
                    knee_rate: Some(8000.0),
                    stopped: "reached --max".into(),
                    ..Default::default()
                },
                CapacityCell {
                    name: "none".into(),
                    steps: vec![step(1, 1900.0, true), step(2, 3800.0, false)],
                    sustained_rate: Some(1900.0),
                    knee_rate: Some(3800.0),
                    stopped: "2 consecutive failing steps".into(),
                    ..Default::default()
                },
            ],
            warnings: vec![],
        }
    }

    #[test]
    fn headline_reads_like_the_issue() {
        assert_eq!(
            headline(&doc()),
            "registry+fusion sustains 4,200 msg/s at p99 <= 50 ms; none sustains 1,900"
        );
        let s = cell_sentence(&doc().cells[1], &Criteria::default());
        assert_eq!(
            s,
            "none sustains 1,900 msg/s at p99 <= 50 ms; at 3,800 msg/s it does not (ack p99 120 ms > 50 ms)."
        );
    }

    #[test]
    fn json_round_trips_with_nan_as_null() {
        let d = doc();
        let text = d.to_json().unwrap();
        assert!(text.contains("\"e2e_p99_ms\": null"));
        let back = CapacityResults::from_json(&text).unwrap();
        assert!(back.cells[0].steps[0].e2e_p99_ms.is_nan());
        assert_eq!(back.to_json().unwrap(), text);
        assert!(CapacityResults::from_json("{\"schema_version\":1}")
            .unwrap_err()
            .contains("not a capacity document"));
    }

    #[test]
    fn renders_three_charts_with_reference_lines_in_grey() {
        let html = render_capacity(&doc()).unwrap();
        for id in ["capacity-achieved", "capacity-p99", "capacity-commits"] {
            assert!(html.contains(&format!("id=\"chart-{id}\"")), "{id}");
        }
        assert!(html.contains(REFERENCE_GREY));
        assert!(!html.contains(&cell_colour_hex(REFERENCE)));
        assert!(html.contains("#0072B2"), "registry+fusion's colour");
    }

    #[test]
    fn a_step_measured_again_is_named_on_the_page_and_kept_in_the_document() {
        let mut d = doc();
        assert!(!render_capacity(&d).unwrap().contains("Measured again"));
        let mut slowed = step(4, 8000.0, false);
        slowed.host_steal_share = 0.14;
        d.cells[0].remeasured = vec![slowed];
        d.cells[0].steps[3].index = 5;
        let html = render_capacity(&d).unwrap();
        assert!(
            html.contains("Measured again, its verdict not counted: step 4 at 8,000 msg/s (the host took 14 %)"),
            "{html}"
        );
        let back = CapacityResults::from_json(&d.to_json().unwrap()).unwrap();
        assert_eq!(back.cells[0].remeasured.len(), 1);
        assert_eq!(back.cells[0].remeasured[0].host_steal_share, 0.14);
        // A document from before the field reads with none.
        let mut v: serde_json::Value = serde_json::from_str(&doc().to_json().unwrap()).unwrap();
        v["cells"][0].as_object_mut().unwrap().remove("remeasured");
        v["cells"][0]["steps"][0]
            .as_object_mut()
            .unwrap()
            .remove("host_steal_share");
        let old = CapacityResults::from_json(&v.to_string()).unwrap();
        assert!(old.cells[0].remeasured.is_empty());
        assert!(old.cells[0].steps[0].host_steal_share.is_nan());
    }

    #[test]
    fn user_text_on_the_capacity_page_is_escaped() {
        let mut d = doc();
        d.meta.scenario.name = "<b>cap</b>".into();
        d.meta.scenario.text = "rate = 1 # </pre><script>x()</script>".into();
        d.meta.notes = vec!["<img src=x>".into()];
        d.cells[1].stopped = "<i>stopped</i>".into();
        let html = render_capacity(&d).unwrap();
        assert!(!html.contains("<script>") && !html.contains("<img") && !html.contains("<b>cap"));
        assert!(!html.contains("<i>stopped"));
        assert!(html.contains("&lt;/pre&gt;&lt;script&gt;x()&lt;/script&gt;"));
    }
}
