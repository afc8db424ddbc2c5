//! Faults in the report: a row per fault step of every cell round (when it fired and ended,
//! its recovery time, any note), and the marks the time-series charts draw for them.

use super::chart::FaultMark;
use crate::results::Results;

/// One fault step as the report's faults table lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRow {
    pub cell: String,
    pub round: u32,
    pub kind: String,
    pub at_secs: f64,
    pub ended_secs: f64,
    pub recovery_secs: Option<f64>,
    /// `3.0 s`, or why there is none (`not within the window`, `skipped`).
    pub recovery_text: String,
    pub note: String,
}

/// Every fault of every cell round, in cell and round order.
pub(super) fn fault_rows(r: &Results) -> Vec<FaultRow> {
    let mut rows = Vec::new();
    for c in &r.cells {
        for round in &c.rounds {
            for f in &round.faults {
                rows.push(FaultRow {
                    cell: c.name.clone(),
                    round: round.round,
                    kind: f.kind.clone(),
                    at_secs: f.at_secs,
                    ended_secs: f.ended_secs,
                    recovery_secs: f.recovery_secs,
                    recovery_text: recovery_text(f.recovery_secs, &f.note),
                    note: f.note.clone(),
                });
            }
        }
    }
    rows
}

fn recovery_text(recovery: Option<f64>, note: &str) -> String {
    match recovery {
        Some(s) => format!("{s:.1} s"),
        None if note.starts_with("skipped") => "skipped".into(),
        None => "not within the window".into(),
    }
}

/// The marks of the time-series charts: each distinct fault span (by kind and whole seconds,
/// so the same fault in several cells or rounds is marked once), from its first firing to its
/// latest end.
pub(super) fn fault_marks(results: &[&Results]) -> Vec<FaultMark> {
    let mut marks: Vec<FaultMark> = Vec::new();
    let fired = results
        .iter()
        .flat_map(|r| r.cells.iter())
        .flat_map(|c| c.rounds.iter())
        .flat_map(|round| round.faults.iter())
        .filter(|f| !f.note.starts_with("skipped"));
    for f in fired {
        let same = |m: &&mut FaultMark| m.label == f.kind && m.from.round() == f.at_secs.round();
        match marks.iter_mut().find(same) {
            Some(m) => {
                m.from = m.from.min(f.at_secs);
                m.to = m.to.max(f.ended_secs);
            }
            None => marks.push(FaultMark {
                from: f.at_secs,
                to: f.ended_secs,
                label: f.kind.clone(),
            }),
        }
    }
    marks.sort_by(|a, b| a.from.total_cmp(&b.from));
    marks
}
