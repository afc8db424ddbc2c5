//! What one run contributes to a history: its commit, when it ran and was added, its scenario,
//! and per cell the median over rounds of every gated figure and every headline figure (those
//! the exports and the Markdown summary show). A ratio gate's own figure, the median over
//! rounds of `figure(numerator) / figure(denominator)`, is kept too, under the pseudo-cell
//! `numerator/denominator`.

use std::path::Path;
use std::process::Command;

use serde::{Deserialize, Serialize};

use ackbench_reports::figures::{self, View};
use ackbench_reports::results::Results;

use crate::gates::round_ratios;
use crate::scenario::{GateCheck, Scenario};
use crate::trend::stats::median;

/// The version of the record's layout.
pub const RECORD_FORMAT: u32 = 1;

/// One run of a history.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    pub format: u32,
    /// The commit the run measured, when known.
    pub commit: Option<String>,
    /// When the run was added to the history (RFC 3339): the series' order.
    pub added_at: String,
    /// When the run started (RFC 3339, from its results).
    pub started_at: String,
    pub scenario: String,
    /// False when the run was interrupted.
    pub complete: bool,
    pub figures: Vec<FigurePoint>,
}

/// One figure of one cell in one run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FigurePoint {
    pub cell: String,
    /// The figure's key (`ack_commits_per_ack`, `latency_ms.ack.p99`).
    pub figure: String,
    /// The median over the run's rounds.
    pub value: f64,
    /// A gate of the scenario judges this figure of this cell.
    pub gated: bool,
}

/// A gate's figure and the cells it judges it on (the pseudo-cell of a ratio among them).
struct GatedFigure {
    figure: String,
    cells: Vec<String>,
    ratio: Option<(String, String)>,
}

impl RunRecord {
    /// The record of `results`, measured at `commit`, added at `added_at`.
    pub fn from_results(
        results: &Results,
        commit: Option<String>,
        added_at: String,
    ) -> Result<RunRecord, String> {
        if results.cells.is_empty() {
            return Err("it holds no cells: there is nothing to keep".into());
        }
        if !results.complete {
            return Err(
                "the run was interrupted: its figures cover part of its windows, not kept".into(),
            );
        }
        if let Some(shards) = results.meta.shards.as_ref().filter(|s| s.index.is_some()) {
            return Err(format!(
                "it is one shard of run {}: its figures are a slice of the load; keep the merge (`ackbench merge`)",
                shards.run_id
            ));
        }
        let gated = gated_figures(results);
        let mut points = Vec::new();
        for cell in &results.cells {
            let mut keys: Vec<String> = headline_figures();
            for g in gated.iter().filter(|g| g.cells.contains(&cell.name)) {
                if !keys.contains(&g.figure) {
                    keys.push(g.figure.clone());
                }
            }
            for key in keys {
                let Some(value) = cell.summary.figures.get(&key).map(|s| s.median) else {
                    continue;
                };
                let is_gated = gated
                    .iter()
                    .any(|g| g.figure == key && g.cells.contains(&cell.name));
                push_finite(&mut points, &cell.name, &key, value, is_gated);
            }
        }
        for g in &gated {
            if let Some((num, den)) = &g.ratio {
                if let Ok(ratios) = round_ratios(results, &g.figure, num, den) {
                    push_finite(
                        &mut points,
                        &format!("{num}/{den}"),
                        &g.figure,
                        median(&ratios),
                        true,
                    );
                }
            }
        }
        Ok(RunRecord {
            format: RECORD_FORMAT,
            commit,
            added_at,
            started_at: results.meta.started_at.clone(),
            scenario: results.meta.scenario.name.clone(),
            complete: results.complete,
            figures: points,
        })
    }
}

fn push_finite(points: &mut Vec<FigurePoint>, cell: &str, figure: &str, value: f64, gated: bool) {
    if value.is_finite() {
        points.push(FigurePoint {
            cell: cell.to_string(),
            figure: figure.to_string(),
            value,
            gated,
        });
    }
}

/// The headline figures: those exported for history tools and shown in the Markdown summary.
fn headline_figures() -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for d in figures::shown_in(View::Export)
        .into_iter()
        .chain(figures::shown_in(View::Markdown))
    {
        if !keys.iter().any(|k| k == d.key) {
            keys.push(d.key.to_string());
        }
    }
    keys
}

/// The figures the scenario recorded in `results` gates on, with their cells. A scenario that
/// no longer parses gates nothing here (said on stderr): its headline figures are still kept.
fn gated_figures(results: &Results) -> Vec<GatedFigure> {
    let scenario = match Scenario::parse(&results.meta.scenario.text, &results.meta.scenario.path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "ackbench: the scenario recorded in the results does not parse ({e}); keeping its headline figures only"
            );
            return Vec::new();
        }
    };
    scenario
        .gates
        .iter()
        .map(|gate| {
            let figure = gate.figure.name();
            match &gate.check {
                GateCheck::Ratio {
                    numerator,
                    denominator,
                    ..
                } => GatedFigure {
                    figure,
                    cells: vec![
                        numerator.name().to_string(),
                        denominator.name().to_string(),
                        format!("{}/{}", numerator.name(), denominator.name()),
                    ],
                    ratio: Some((numerator.name().to_string(), denominator.name().to_string())),
                },
                GateCheck::Baseline { cell, .. } => GatedFigure {
                    figure,
                    cells: vec![cell.name().to_string()],
                    ratio: None,
                },
            }
        })
        .collect()
}

/// The commit a run measured: `--commit`, else the one its results recorded, else the
/// checkout's `HEAD` when `git` can tell, else unknown.
pub fn commit_of(given: Option<&str>, results: &Results) -> Result<Option<String>, String> {
    if let Some(c) = given {
        let c = c.trim();
        if c.is_empty() || c.chars().any(char::is_whitespace) {
            return Err(format!("--commit `{c}` is not a commit"));
        }
        return Ok(Some(c.to_string()));
    }
    if let Some(c) = results
        .meta
        .git_revision
        .as_deref()
        .filter(|c| !c.is_empty())
    {
        return Ok(Some(c.to_string()));
    }
    Ok(git_head(Path::new(".")))
}

fn git_head(dir: &Path) -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}
