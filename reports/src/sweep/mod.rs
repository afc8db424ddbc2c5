//! Capacity sweeps: the `sweep.json` document `ackbench sweep` writes (this file: its schema),
//! the cost model that predicts each knee from measured costs (`cost_model`), and the HTML page
//! rendered from the document alone (`page`).
//!
//! A sweep runs the capacity knee search at every point of a grid of settings (scenario keys,
//! PostgreSQL settings, cores given to PostgreSQL and the broker), `repeats` times, and keeps
//! per point and cell the knee's interval over the repeats, the costs per message at the knee,
//! and what the cost model predicts there.

pub mod cost_model;
mod page;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::capacity::{Criteria, Plan};
use crate::results::RunMeta;
use crate::stats::{absent, nullable};
use cost_model::{Costs, Limit, ModelError, Offer, Prediction};

pub use page::render_sweep;

/// The version of `sweep.json` this build writes and reads.
pub const SWEEP_SCHEMA_VERSION: u32 = 1;
/// The `kind` of a sweep document.
pub const SWEEP_KIND: &str = "ackbench-sweep";

/// The knee over the repeats of a search: the middle sustained rate and the lowest and highest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Knee {
    /// The median sustained rate over the repeats (msg/s); `None` when none sustained anything.
    pub sustained: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// Each repeat's sustained rate, in the order run (`None`: even the floor failed).
    pub repeats: Vec<Option<f64>>,
}

impl Knee {
    /// The interval of `repeats`.
    pub fn of(repeats: Vec<Option<f64>>) -> Knee {
        let held: Vec<f64> = repeats.iter().flatten().copied().collect();
        let spread = crate::stats::Spread::of(&held);
        let finite = |v: f64| v.is_finite().then_some(v);
        Knee {
            sustained: finite(spread.median),
            low: finite(spread.min),
            high: finite(spread.max),
            repeats,
        }
    }

    /// (high − low) / sustained: the spread of the repeats.
    pub fn spread(&self) -> Option<f64> {
        Some((self.high? - self.low?) / self.sustained?)
    }
}

/// One cell at one point.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PointCell {
    pub name: String,
    pub knee: Knee,
    /// Ack or end-to-end p99, whichever is higher, at the sustained step (mean over repeats, ms).
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub p99_ms: f64,
    /// Costs per answered message at the highest sustained step (mean over repeats).
    pub costs: Costs,
    /// What the cost model predicts on what this point offered.
    pub predicted_knee: Option<f64>,
    pub limited_by: Option<String>,
    /// Every cap the model weighed (the lowest is `predicted_knee`).
    #[serde(default)]
    pub limits: Vec<Limit>,
    /// Why each repeat's search ended.
    #[serde(default)]
    pub stopped: Vec<String>,
    /// Every repeat bracketed the knee (a sustained rate below a failing one); otherwise the
    /// knee is a bound (every rate up to `--max` held, or even `--min` failed) and is left out of
    /// the model's error.
    #[serde(default)]
    pub bracketed: bool,
}

/// One point of the grid.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SweepPoint {
    /// The point's value of every sweep key (as text).
    pub settings: BTreeMap<String, String>,
    /// False when a crash may lose commits already acknowledged (`synchronous_commit` off or
    /// `fsync` off).
    pub durable: bool,
    /// What the machine offered at this point (the model's input).
    pub offer: Offer,
    pub cells: Vec<PointCell>,
}

/// What the machine offered the whole sweep, as measured at its start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MachineOffer {
    pub cores: f64,
    #[serde(deserialize_with = "nullable")]
    pub fsync_per_sec: f64,
    /// How the fsync rate was found (`probe: 200 single-row INSERTs ...`, `--fsync-per-sec`).
    pub fsync_source: String,
}

/// What the machine measured just before one search: its fsync rate and how fast PostgreSQL
/// computes. The same code runs slower when the machine is busy elsewhere (on a cloud host, a
/// neighbour on the same physical core), so knees searched at different speeds differ for that
/// reason too.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SearchProbe {
    /// The point, 1-based in the grid's order.
    pub point: usize,
    /// The repeat, 1-based.
    pub repeat: u32,
    /// Single-row commits per second, each waiting for its own WAL flush.
    #[serde(deserialize_with = "nullable")]
    pub fsync_per_sec: f64,
    /// The fastest of the CPU probe's runs (ms): lower is faster.
    #[serde(deserialize_with = "nullable")]
    pub cpu_ms: f64,
}

/// How far the CPU probe may move over a sweep before the sweep says its knees were searched at
/// different speeds (the slowest run over the fastest, minus one).
pub const CPU_DRIFT_WARNING: f64 = 0.10;

/// A warning when the probes before the searches show the machine's speed moved by more than
/// `CPU_DRIFT_WARNING`.
pub fn machine_drift(probes: &[SearchProbe]) -> Option<String> {
    let range = |values: Vec<f64>| {
        let v: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (v.len() >= 2 && lo > 0.0).then_some((lo, hi))
    };
    let (fast, slow) = range(probes.iter().map(|p| p.cpu_ms).collect())?;
    if slow / fast - 1.0 <= CPU_DRIFT_WARNING {
        return None;
    }
    let fsync = match range(probes.iter().map(|p| p.fsync_per_sec).collect()) {
        Some((lo, hi)) => format!(
            "; the fsync probe ran {}-{} commits/s",
            crate::model::format_number(lo),
            crate::model::format_number(hi)
        ),
        None => String::new(),
    };
    Some(format!(
        "the machine's speed moved during the sweep: PostgreSQL's CPU probe took {:.1}-{:.1} ms before the searches (the slowest {:.0}% over the fastest){fsync}. Knees searched at different speeds differ for that reason as well as for their settings (`probes` in sweep.json)",
        fast,
        slow,
        (slow / fast - 1.0) * 100.0
    ))
}

/// `sweep.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SweepResults {
    /// Always `ackbench-sweep`.
    pub kind: String,
    pub schema_version: u32,
    /// False when the sweep was interrupted or broke (points are missing).
    pub complete: bool,
    pub meta: RunMeta,
    pub criteria: Criteria,
    pub plan: Plan,
    pub repeats: u32,
    pub machine: MachineOffer,
    /// The sweep keys, in the grid's order.
    pub keys: Vec<String>,
    pub points: Vec<SweepPoint>,
    /// Predicted against measured over every point and cell with both.
    pub model_error: Option<ModelError>,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The machine probed before each search, in the order run (empty in older documents and
    /// when no PostgreSQL of this run's was measured).
    #[serde(default)]
    pub probes: Vec<SearchProbe>,
}

impl SweepResults {
    /// Reads a sweep document, refusing other kinds and versions with a reason.
    pub fn from_json(text: &str) -> Result<SweepResults, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        match v.get("kind").and_then(|k| k.as_str()) {
            Some(SWEEP_KIND) => {}
            Some(other) => {
                return Err(format!(
                    "not a sweep document (kind `{other}`, expected `{SWEEP_KIND}`)"
                ))
            }
            None => return Err(format!("not a sweep document (no `kind` `{SWEEP_KIND}`)")),
        }
        match v.get("schema_version").and_then(|x| x.as_u64()) {
            Some(n) if n == SWEEP_SCHEMA_VERSION as u64 => {}
            other => {
                return Err(format!(
                    "sweep schema_version {} is not supported (this build reads {SWEEP_SCHEMA_VERSION})",
                    other.map(|n| n.to_string()).unwrap_or_else(|| "missing".into())
                ))
            }
        }
        serde_json::from_value(v).map_err(|e| format!("sweep.json: {e}"))
    }

    /// The document as pretty JSON (NaN written as `null`).
    pub fn to_json(&self) -> Result<String, String> {
        serde_json::to_string_pretty(self).map_err(|e| e.to_string())
    }

    /// (predicted, measured) for every point and cell whose knee was bracketed.
    pub fn predicted_measured(&self) -> Vec<(f64, f64)> {
        self.points
            .iter()
            .flat_map(|p| &p.cells)
            .filter(|c| c.bracketed)
            .map(|c| {
                (
                    c.predicted_knee.unwrap_or(f64::NAN),
                    c.knee.sustained.unwrap_or(f64::NAN),
                )
            })
            .collect()
    }

    /// The points' settings in one line each (`pg.synchronous_commit=off consumers.count=4`).
    pub fn point_label(p: &SweepPoint) -> String {
        match p.settings.is_empty() {
            true => "(the scenario as written)".into(),
            false => p
                .settings
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// Whether settings keep acknowledged commits across a crash: not with `synchronous_commit`
/// off or `fsync` off (given as sweep keys or as the server's own settings).
pub fn durable(settings: &BTreeMap<String, String>, server: &BTreeMap<String, String>) -> bool {
    let value = |name: &str| {
        settings
            .get(&format!("pg.{name}"))
            .or_else(|| server.get(name))
            .map(|v| v.to_ascii_lowercase())
    };
    let off = |v: Option<String>| matches!(v.as_deref(), Some("off" | "false" | "0" | "no"));
    !(off(value("synchronous_commit")) || off(value("fsync")))
}

/// A prediction as the document keeps it: the knee, what limits it, every cap weighed.
pub fn prediction_fields(p: Option<Prediction>) -> (Option<f64>, Option<String>, Vec<Limit>) {
    match p {
        Some(p) => (Some(p.rate), Some(p.limited_by), p.limits),
        None => (None, None, Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(cpu_ms: f64, fsync_per_sec: f64) -> SearchProbe {
        SearchProbe {
            point: 1,
            repeat: 1,
            fsync_per_sec,
            cpu_ms,
        }
    }

    #[test]
    fn a_machine_that_slowed_down_during_the_sweep_is_named_and_a_steady_one_is_not() {
        let steady = [
            probe(40.0, 3000.0),
            probe(43.0, 3500.0),
            probe(41.0, f64::NAN),
        ];
        assert_eq!(machine_drift(&steady), None);
        assert_eq!(machine_drift(&[probe(40.0, 3000.0)]), None, "one probe");
        let slowed = [
            probe(40.0, 3000.0),
            probe(52.0, 3600.0),
            probe(f64::NAN, 2900.0),
        ];
        let w = machine_drift(&slowed).expect("a 30 % slower machine is named");
        assert!(w.contains("40.0-52.0 ms"), "{w}");
        assert!(w.contains("30%"), "{w}");
        assert!(w.contains("2,900-3,600 commits/s"), "{w}");
    }

    #[test]
    fn the_knee_is_the_median_with_its_interval() {
        let k = Knee::of(vec![Some(300.0), None, Some(100.0), Some(200.0)]);
        assert_eq!(
            (k.sustained, k.low, k.high),
            (Some(200.0), Some(100.0), Some(300.0))
        );
        assert_eq!(k.spread(), Some(1.0));
        let k = Knee::of(vec![Some(100.0), Some(200.0)]);
        assert_eq!(k.sustained, Some(150.0));
        assert_eq!(Knee::of(vec![None]).sustained, None);
    }

    #[test]
    fn synchronous_commit_off_is_not_durable() {
        let s = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        let none = BTreeMap::new();
        assert!(durable(&s("pg.synchronous_commit", "on"), &none));
        assert!(!durable(&s("pg.synchronous_commit", "off"), &none));
        assert!(!durable(&none, &s("fsync", "off")));
        assert!(durable(
            &s("pg.synchronous_commit", "local"),
            &s("synchronous_commit", "off")
        ));
    }

    #[test]
    fn other_documents_are_refused_with_a_reason() {
        assert!(SweepResults::from_json("{}")
            .unwrap_err()
            .contains("not a sweep document"));
        let e = SweepResults::from_json(r#"{"kind":"ackbench-capacity"}"#).unwrap_err();
        assert!(e.contains("kind `ackbench-capacity`"), "{e}");
        let e =
            SweepResults::from_json(r#"{"kind":"ackbench-sweep","schema_version":9}"#).unwrap_err();
        assert!(e.contains("schema_version 9"), "{e}");
        assert!(SweepResults::from_json("nope")
            .unwrap_err()
            .contains("not JSON"));
    }
}
