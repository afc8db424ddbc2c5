//! "At a glance": per cell, each accelerator's effect on the figure its gate judges (ack commits
//! per acked message for fusion, PostgreSQL time per acked message for the registry), all commits
//! saved, ack latency, throughput and the audit. In an open-loop run throughput is judged
//! against the offered rate, not against another cell: a cell that kept up is not slower because
//! another drained a bigger warm-up backlog in its window, and the backlog each cell carried
//! into the window is shown and taken out of its ack rate.

use super::format::{format_number, group_thousands};
use super::tables::{commits_saved_text, figure_cell, figure_def, paced, FigureCell};
use super::BASELINE;
use crate::results::{CellResults, Results, RoundResults};
use crate::stats::Spread;

/// Share of the offered rate a round must push to count as keeping up (a batch's rounding at
/// low rates costs a few percent).
const PUSHED_SHARE: f64 = 0.9;

/// A row of the "at a glance" table: what a cell does against the baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct GlanceRow {
    pub cell: String,
    /// Fusion's gate figure: ack-procedure commits per acked message.
    pub ack_commits_per_ack: FigureCell,
    /// The registry's gate figure: PostgreSQL execution ms per acked message.
    pub pg_ms_per_ack: FigureCell,
    pub commits_per_ack: FigureCell,
    /// e.g. "saves 912 commits per 1,000 acked messages (91% fewer)".
    pub commits_saved_text: String,
    pub ack_p50: FigureCell,
    pub ack_p99: FigureCell,
    /// Uncoloured in an open-loop run: its pace says whether the cell kept up.
    pub ack_throughput: FigureCell,
    pub pace: Pace,
    /// e.g. "kept up with 250 msg/s offered; 498 acks/s without the warm-up backlog it drained
    /// (1,582 at 1 s)".
    pub pace_text: String,
    /// The backlog 1 s into the window (median over rounds), when the series has it.
    pub backlog_at_start: Option<f64>,
    pub lost: u64,
    pub duplicates: u64,
    pub lost_text: String,
}

/// Whether a cell kept up with the offered rate, every round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Every round pushed the offered rate and ended its window with no more backlog than it
    /// started with (plus a second's offer).
    KeptUp,
    /// Some round pushed less, or its backlog grew.
    FellBehind,
    /// A closed loop (nothing offered), or no per-second series to judge by.
    NotJudged,
}

/// The "at a glance" rows: what each cell does against the baseline.
pub(super) fn glance_rows(r: &Results) -> Vec<GlanceRow> {
    let base = r.cell(BASELINE);
    r.cells
        .iter()
        .map(|c| {
            let get = |k: &str| figure_cell(figure_def(k).expect("known figure"), c, base);
            let cpa = get("commits_per_ack");
            let (pace, pace_text) = pace(c, r.meta.offered_rate);
            let ack_throughput = paced(get("ack_throughput"), r);
            let a = &c.summary.audit;
            GlanceRow {
                cell: c.name.clone(),
                ack_commits_per_ack: get("ack_commits_per_ack"),
                pg_ms_per_ack: get("pg_exec_ms_per_ack"),
                commits_saved_text: commits_saved_text(c, base, &cpa),
                commits_per_ack: cpa,
                ack_p50: get("latency_ms.ack.p50"),
                ack_p99: get("latency_ms.ack.p99"),
                ack_throughput,
                pace,
                pace_text,
                backlog_at_start: median(c.rounds.iter().filter_map(backlog_at_start)),
                lost: a.lost,
                duplicates: a.duplicates,
                lost_text: match a.lost {
                    0 => "0 lost".into(),
                    n => format!("{} LOST", group_thousands(n as f64)),
                },
            }
        })
        .collect()
}

/// The backlog at the window's first per-second sample, when known.
fn backlog_at_start(r: &RoundResults) -> Option<f64> {
    r.series
        .first()
        .map(|s| s.backlog)
        .filter(|b| b.is_finite())
}

/// The backlog at the window's last sample, when known.
fn backlog_at_end(r: &RoundResults) -> Option<f64> {
    r.series.last().map(|s| s.backlog).filter(|b| b.is_finite())
}

/// Whether a round kept up with `offered` msg/s: pushed it, and its backlog did not grow by
/// more than a second's offer over the window. None without a series.
fn round_kept_up(r: &RoundResults, offered: f64) -> Option<bool> {
    let (start, end) = (backlog_at_start(r)?, backlog_at_end(r)?);
    let pushed = r.figures.push_throughput >= PUSHED_SHARE * offered;
    Some(pushed && end <= start + offered.max(1.0))
}

/// A round's ack rate without the backlog it drained: what it acked of the load offered in
/// the window, from its first per-second sample on (the backlog is known at each sample's end,
/// so the seconds after the first are those whose drain is known). Acks count (message, group)
/// pairs, as the backlog does.
fn ack_rate_without_backlog(r: &RoundResults) -> Option<f64> {
    let (first, later) = r.series.split_first()?;
    let last = later.last()?;
    let secs = last.t - first.t;
    let acked: f64 = later.iter().map(|s| s.acked).sum::<f64>() / later.len() as f64;
    let drained = (backlog_at_start(r)? - backlog_at_end(r)?).max(0.0);
    (secs > 0.0 && acked.is_finite()).then(|| acked - drained / secs)
}

/// The cell's pace against the offered rate, and its words.
fn pace(c: &CellResults, offered: Option<f64>) -> (Pace, String) {
    let Some(offered) = offered.filter(|o| *o > 0.0) else {
        return (Pace::NotJudged, "closed loop: as fast as it went".into());
    };
    let kept: Vec<bool> = c
        .rounds
        .iter()
        .filter_map(|r| round_kept_up(r, offered))
        .collect();
    let offered_words = format!("{} msg/s offered", format_number(offered));
    if kept.is_empty() {
        return (
            Pace::NotJudged,
            format!("{offered_words}; no per-second series to judge by"),
        );
    }
    if kept.iter().any(|k| !k) {
        return (
            Pace::FellBehind,
            format!("fell behind the {offered_words}: its backlog grew"),
        );
    }
    let steady = median(c.rounds.iter().filter_map(ack_rate_without_backlog));
    let backlog = median(c.rounds.iter().filter_map(backlog_at_start)).unwrap_or(0.0);
    let text = match steady {
        Some(s) if backlog >= 1.0 => format!(
            "kept up with {offered_words}; {} acks/s without the warm-up backlog it drained \
             ({} at 1 s)",
            format_number(s),
            group_thousands(backlog)
        ),
        _ => format!("kept up with {offered_words}"),
    };
    (Pace::KeptUp, text)
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = values.collect();
    (!v.is_empty()).then(|| Spread::of(&v).median)
}
