//! Faults in the report: a row per fault step of every cell round (when it fired and ended,
//! its recovery time, any note), the vacuum state over time around each `hold_xmin`, and the
//! marks the time-series charts draw for them.

use super::chart::FaultMark;
use crate::results::{Results, VacuumSample};

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

/// Rows of vacuum samples the report shows per `hold_xmin` fault at most (evenly spaced, the
/// samples as the hold began and ended always among them).
const VACUUM_ROWS: usize = 16;

/// One vacuum reading around a `hold_xmin` fault, as the report lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct VacuumRow {
    pub cell: String,
    pub round: u32,
    /// Seconds from the window's start.
    pub t: f64,
    /// `before`, `held` or `after` the hold.
    pub phase: &'static str,
    pub dead_tuples: f64,
    pub table_bytes: f64,
    pub index_bytes: f64,
    pub autovacuums: f64,
    pub bystander_ms: f64,
}

/// The vacuum readings of every `hold_xmin` fault, thinned to `VACUUM_ROWS` each.
pub(super) fn vacuum_rows(r: &Results) -> Vec<VacuumRow> {
    let mut rows = Vec::new();
    for c in &r.cells {
        for round in &c.rounds {
            for f in round.faults.iter().filter(|f| !f.vacuum.is_empty()) {
                let phase = |t: f64| match t {
                    t if t < f.at_secs => "before",
                    t if t <= f.ended_secs => "held",
                    _ => "after",
                };
                for s in thinned(&f.vacuum, f.at_secs, f.ended_secs) {
                    rows.push(VacuumRow {
                        cell: c.name.clone(),
                        round: round.round,
                        t: s.t,
                        phase: phase(s.t),
                        dead_tuples: s.dead_tuples,
                        table_bytes: s.table_bytes,
                        index_bytes: s.index_bytes,
                        autovacuums: s.autovacuums,
                        bystander_ms: s.bystander_ms,
                    });
                }
            }
        }
    }
    rows
}

/// Evenly spaced samples, at most `VACUUM_ROWS`, with the last before `at` and before `ended`
/// (the hold's edges) and the very last kept.
fn thinned(samples: &[VacuumSample], at: f64, ended: f64) -> Vec<VacuumSample> {
    let stride = samples.len().div_ceil(VACUUM_ROWS - 3).max(1);
    let edge = |t: f64| samples.iter().rposition(|s| s.t <= t);
    let keep: Vec<bool> = (0..samples.len())
        .map(|i| {
            i % stride == 0
                || i + 1 == samples.len()
                || Some(i) == edge(at)
                || Some(i) == edge(ended)
        })
        .collect();
    samples
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(s, _)| *s)
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(n: usize) -> Vec<VacuumSample> {
        (0..n)
            .map(|i| VacuumSample {
                t: i as f64,
                dead_tuples: i as f64 * 10.0,
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn a_long_hold_is_thinned_keeping_its_edges_and_the_last_sample() {
        let kept = thinned(&samples(3000), 600.4, 2400.2);
        assert!(kept.len() <= VACUUM_ROWS, "{}", kept.len());
        let times: Vec<f64> = kept.iter().map(|s| s.t).collect();
        for edge in [0.0, 600.0, 2400.0, 2999.0] {
            assert!(times.contains(&edge), "{edge} kept: {times:?}");
        }
        assert!(times.windows(2).all(|w| w[0] < w[1]), "in time order");
        assert_eq!(
            thinned(&samples(5), 1.0, 3.0).len(),
            5,
            "a short one is whole"
        );
    }
}
