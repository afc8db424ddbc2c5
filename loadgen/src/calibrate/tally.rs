//! calibration.json and its markdown table: per gate, the false alarms of the A/A runs and,
//! per injected regression, the runs that caught it.
//!
//! ```text
//! { calibration_version, scenario, runs, rounds, duration_secs, warmup_secs, git_revision,
//!   gates: [ { gate, figure, bound, regression,
//!              aa: { runs, false_alarms, inconclusive, not_judged, estimates },
//!              regressions: [ { regression, setting, words, targets, runs, caught,
//!                               inconclusive, not_judged, estimates } ] } ] }
//! ```
//!
//! `estimates` are each run's `[estimate, low, high]` (the gate's 95 % interval; `null` where
//! a run had none). A false alarm is an A/A run whose gate failed; a catch, a run with the
//! regression injected whose gate failed. Inconclusive and not judged runs are neither.

use std::path::Path;

use serde::{Deserialize, Serialize};

use ackbench_reports::results::{GateOutcome, GateVerdict};

use super::regression::{self, Regression};
use crate::gates::Evaluation;
use crate::scenario::{Gate, GateCheck, Scenario};

pub const CALIBRATION_VERSION: u32 = 1;

/// Runs of one condition as one gate saw them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Outcomes {
    pub runs: u32,
    pub failed: u32,
    pub inconclusive: u32,
    pub not_judged: u32,
    /// Per run `[estimate, low, high]`, `None` where it had no interval.
    pub estimates: Vec<Option<[f64; 3]>>,
}

impl Outcomes {
    fn add(&mut self, v: Option<&GateVerdict>) {
        self.runs += 1;
        match v.map(|v| v.outcome()) {
            Some(GateOutcome::Failed) => self.failed += 1,
            Some(GateOutcome::Inconclusive) => self.inconclusive += 1,
            Some(GateOutcome::Held) => {}
            Some(GateOutcome::NotJudged) | None => self.not_judged += 1,
        }
        self.estimates.push(
            v.and_then(|v| v.interval)
                .map(|i| [i.estimate, i.low, i.high]),
        );
    }
}

/// A/A runs of one gate.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AaTally {
    pub runs: u32,
    pub false_alarms: u32,
    pub inconclusive: u32,
    pub not_judged: u32,
    pub estimates: Vec<Option<[f64; 3]>>,
}

/// One injected regression's runs as one gate saw them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RegressionTally {
    pub regression: String,
    /// `VARIABLE=value` of the broker.
    pub setting: String,
    pub words: String,
    /// Whether this is the regression the gate exists to catch.
    pub targets: bool,
    pub runs: u32,
    pub caught: u32,
    pub inconclusive: u32,
    pub not_judged: u32,
    pub estimates: Vec<Option<[f64; 3]>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GateTally {
    pub gate: String,
    pub figure: String,
    /// `<= 0.9`, `>= 1.2`, `in [a, b]`.
    pub bound: String,
    /// The regression it exists to catch.
    pub regression: String,
    pub aa: AaTally,
    pub regressions: Vec<RegressionTally>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Calibration {
    pub calibration_version: u32,
    pub scenario: String,
    /// Runs asked per condition.
    pub runs: u32,
    pub rounds: u32,
    pub duration_secs: f64,
    pub warmup_secs: f64,
    pub git_revision: Option<String>,
    pub gates: Vec<GateTally>,
    /// Stopped by Ctrl-C: the counts cover the runs that finished.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

impl Calibration {
    pub fn new(scenario: &Scenario, runs: u32, regressions: &[Regression]) -> Calibration {
        let gates = scenario
            .gates
            .iter()
            .map(|g| {
                let own = regression::for_gate(g, extra_cost(regressions));
                GateTally {
                    gate: g.name.clone(),
                    figure: g.figure.name(),
                    bound: bound(g),
                    regression: own.name().to_string(),
                    aa: AaTally::default(),
                    regressions: regressions
                        .iter()
                        .map(|r| RegressionTally {
                            regression: r.name().to_string(),
                            setting: {
                                let (k, v) = r.setting();
                                format!("{k}={v}")
                            },
                            words: r.words(),
                            targets: *r == own,
                            runs: 0,
                            caught: 0,
                            inconclusive: 0,
                            not_judged: 0,
                            estimates: Vec::new(),
                        })
                        .collect(),
                }
            })
            .collect();
        Calibration {
            calibration_version: CALIBRATION_VERSION,
            scenario: scenario.name.clone(),
            runs,
            rounds: scenario.run.rounds,
            duration_secs: scenario.run.duration_secs,
            warmup_secs: scenario.run.warmup_secs,
            git_revision: crate::meta::git_revision(),
            gates,
            interrupted: false,
        }
    }

    /// Tallies one run's evaluation under `condition` (None: A/A). An incomplete run counts its
    /// gates as not judged.
    pub fn add(&mut self, condition: Option<Regression>, eval: &Evaluation, complete: bool) {
        for g in &mut self.gates {
            let verdict = eval
                .verdicts
                .iter()
                .find(|v| v.gate == g.gate)
                .filter(|_| complete);
            let mut o = Outcomes::default();
            o.add(verdict);
            match condition {
                None => {
                    let aa = &mut g.aa;
                    aa.runs += 1;
                    aa.false_alarms += o.failed;
                    aa.inconclusive += o.inconclusive;
                    aa.not_judged += o.not_judged;
                    aa.estimates.extend(o.estimates);
                }
                Some(r) => {
                    if let Some(t) = g.regressions.iter_mut().find(|t| t.regression == r.name()) {
                        t.runs += 1;
                        t.caught += o.failed;
                        t.inconclusive += o.inconclusive;
                        t.not_judged += o.not_judged;
                        t.estimates.extend(o.estimates);
                    }
                }
            }
        }
    }

    /// Every gate raised no false alarm in its A/A runs and caught its own regression in every
    /// run (and at least one run of each was made).
    pub fn every_gate_calibrated(&self) -> bool {
        self.gates.iter().all(|g| {
            let own = g.regressions.iter().find(|r| r.targets);
            g.aa.runs > 0
                && g.aa.false_alarms == 0
                && g.aa.not_judged == 0
                && own.is_some_and(|r| r.runs > 0 && r.caught == r.runs)
        })
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The table: per gate, its A/A false alarms and what it caught of its own regression
    /// (and of the others).
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "Calibration of {}: {} run(s) per condition, {} round(s) of {} s each\n\n\
             | gate | bound | A/A false alarms | regression it catches | caught | other regressions |\n\
             |---|---|---|---|---|---|\n",
            self.scenario, self.runs, self.rounds, self.duration_secs
        );
        for g in &self.gates {
            let own = g.regressions.iter().find(|r| r.targets);
            let others: Vec<String> = g
                .regressions
                .iter()
                .filter(|r| !r.targets)
                .map(|r| format!("{}: {}/{}", r.regression, r.caught, r.runs))
                .collect();
            md.push_str(&format!(
                "| {} | {} {} | {}/{}{} | {} | {} | {} |\n",
                g.gate,
                g.figure,
                g.bound,
                g.aa.false_alarms,
                g.aa.runs,
                aside(g.aa.inconclusive, g.aa.not_judged),
                own.map_or("—".to_string(), |r| r.words.clone()),
                own.map_or("—".to_string(), |r| format!(
                    "{}/{}{}",
                    r.caught,
                    r.runs,
                    aside(r.inconclusive, r.not_judged)
                )),
                match others.is_empty() {
                    true => "—".to_string(),
                    false => others.join(", "),
                }
            ));
        }
        md
    }
}

/// ` (1 inconclusive, 1 not judged)` where any.
fn aside(inconclusive: u32, not_judged: u32) -> String {
    let mut parts = Vec::new();
    if inconclusive > 0 {
        parts.push(format!("{inconclusive} inconclusive"));
    }
    if not_judged > 0 {
        parts.push(format!("{not_judged} not judged"));
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!(" ({})", parts.join(", ")),
    }
}

/// The extra cost among `regressions`, else the default.
fn extra_cost(regressions: &[Regression]) -> u64 {
    regressions
        .iter()
        .find_map(|r| match r {
            Regression::AckExtraCost(us) => Some(*us),
            _ => None,
        })
        .unwrap_or(regression::DEFAULT_EXTRA_COST_US)
}

/// A ratio gate's bound in words.
fn bound(g: &Gate) -> String {
    match &g.check {
        GateCheck::Ratio { max, min, .. } => match (max, min) {
            (Some(m), None) => format!("<= {m}"),
            (None, Some(m)) => format!(">= {m}"),
            (Some(a), Some(b)) => format!("in [{b}, {a}]"),
            (None, None) => "any".into(),
        },
        GateCheck::Baseline { tolerance, .. } => format!("within {tolerance} of the baseline"),
    }
}
