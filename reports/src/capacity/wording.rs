//! The capacity report in words: amounts as the sentences write them, one sentence per cell
//! (what it sustains within the target, where and why it stopped), the run's headline and its
//! warnings. The load generator prints the same sentences.

use std::fmt::Write as _;

use super::{CapacityCell, CapacityResults, Criteria, Step};
use crate::model::format_number;

/// A rate or a latency as the sentences write it: `50`, `337.5`, `4,200`.
pub fn amount(v: f64) -> String {
    if !v.is_finite() {
        "—".into()
    } else if v.abs() >= 1000.0 || v != v.round() {
        format_number(v)
    } else {
        format!("{v:.0}")
    }
}

/// One sentence per cell: what it sustains within the target, and where and why it stopped.
pub fn cell_sentence(cell: &CapacityCell, c: &Criteria) -> String {
    let slo = amount(c.slo_p99_ms);
    let reasons = |s: &Step| {
        s.failed
            .iter()
            .map(|f| f.detail.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut text = match (cell.sustained_rate, cell.knee()) {
        (_, None) if cell.steps.is_empty() => {
            format!("{}: no step completed ({}).", cell.name, cell.stopped)
        }
        (Some(r), Some(k)) => format!(
            "{} sustains {} msg/s at p99 <= {slo} ms; at {} msg/s it does not ({}).",
            cell.name,
            amount(r),
            amount(k.offered_rate),
            reasons(k)
        ),
        (Some(r), None) => format!(
            "{} sustains {} msg/s at p99 <= {slo} ms, the highest rate tried: its knee lies above.",
            cell.name,
            amount(r)
        ),
        (None, Some(k)) => format!(
            "{} sustains none of the rates tried at p99 <= {slo} ms: at {} msg/s, the lowest, {}.",
            cell.name,
            amount(k.offered_rate),
            reasons(k)
        ),
        (None, None) => format!("{}: no step was judged ({}).", cell.name, cell.stopped),
    };
    if let Some(later) = cell.held_after_knee() {
        let _ = write!(
            text,
            " A later step ({} msg/s) held again: the knee is noisy.",
            amount(later.offered_rate)
        );
    }
    if cell.knee().is_some_and(|k| !k.loadgen_warnings.is_empty()) {
        text.push_str(
            " The load generator was near its own limit at the knee, so the broker's knee may lie higher.",
        );
    }
    text
}

/// The run in one line: "registry+fusion sustains 4,200 msg/s at p99 <= 50 ms; none sustains
/// 1,900".
pub fn headline(r: &CapacityResults) -> String {
    let slo = amount(r.criteria.slo_p99_ms);
    let parts: Vec<String> = r
        .cells
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let unit = if i == 0 {
                format!(" msg/s at p99 <= {slo} ms")
            } else {
                String::new()
            };
            match (c.sustained_rate, c.knee()) {
                (Some(rate), Some(_)) => format!("{} sustains {}{unit}", c.name, amount(rate)),
                (Some(rate), None) => format!(
                    "{} sustains at least {}{unit} (knee not reached)",
                    c.name,
                    amount(rate)
                ),
                (None, Some(k)) => format!(
                    "{} sustains none of the rates tried (lowest {}{unit})",
                    c.name,
                    amount(k.offered_rate)
                ),
                (None, None) => format!("{} has no judged step", c.name),
            }
        })
        .collect();
    if parts.is_empty() {
        "no cell was measured".into()
    } else {
        parts.join("; ")
    }
}

/// Every warning of the run: whole-run ones, then each cell's loadgen warnings by step.
pub fn all_warnings(r: &CapacityResults) -> Vec<String> {
    let mut out = r.warnings.clone();
    for c in &r.cells {
        for s in &c.steps {
            for w in &s.loadgen_warnings {
                let line = format!("{} at {} msg/s: {w}", c.name, amount(s.offered_rate));
                if !out.contains(&line) {
                    out.push(line);
                }
            }
        }
    }
    out
}

/// The step of `c` measured again because the host slowed it, in one sentence (none when there
/// was none).
pub fn remeasured_note(c: &CapacityCell) -> Option<String> {
    if c.remeasured.is_empty() {
        return None;
    }
    let steps: Vec<String> = c
        .remeasured
        .iter()
        .map(|s| {
            format!(
                "step {} at {} msg/s (the host took {:.0} %)",
                s.index,
                amount(s.offered_rate),
                100.0 * s.host_steal_share
            )
        })
        .collect();
    Some(format!(
        "Measured again, its verdict not counted: {}. It failed while the host took CPU time from this machine (steal), which slows a latency-bound step beyond its share; the step measured after it at the same rate counts (one such step per search).",
        steps.join("; ")
    ))
}
