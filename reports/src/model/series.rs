//! The charts over time: commits and acks per second of the measured window, the median over
//! rounds at each second, with each round faint behind it.

use std::collections::BTreeMap;

use super::chart::{cell_legend, Axis, ChartBody, ChartSpec, LegendItem, Line, Mark, Run, Scale};
use super::faults::fault_marks;
use crate::figures::Format;
use crate::results::{CellResults, Results, RoundResults};
use crate::stats::Spread;

#[derive(Clone, Copy)]
pub(super) enum SeriesKind {
    Commits,
    Acks,
}

/// Longest line drawn from a per-second series (the median line, and each round's faint line);
/// longer ones are averaged into buckets, which keeps the report small for long runs.
const MAX_SERIES_POINTS: usize = 400;
const MAX_ROUND_POINTS: usize = 200;

fn downsample(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    downsample_to(points, MAX_SERIES_POINTS)
}

fn downsample_to(points: Vec<(f64, f64)>, max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max {
        return points;
    }
    let per = points.len().div_ceil(max);
    points
        .chunks(per)
        .map(|c| {
            let n = c.len() as f64;
            (
                c.iter().map(|p| p.0).sum::<f64>() / n,
                c.iter().map(|p| p.1).sum::<f64>() / n,
            )
        })
        .collect()
}

fn round_series(round: &RoundResults, kind: SeriesKind) -> Vec<(f64, f64)> {
    round
        .series
        .iter()
        .map(|s| {
            (
                s.t,
                match kind {
                    SeriesKind::Commits => s.commits,
                    SeriesKind::Acks => s.acked,
                },
            )
        })
        .filter(|(t, v)| t.is_finite() && v.is_finite())
        .collect()
}

/// The median over rounds at each second (rounds aligned on the whole second).
fn median_series(rounds: &[Vec<(f64, f64)>]) -> Vec<(f64, f64)> {
    let mut by_second: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for r in rounds {
        for (t, v) in r {
            by_second.entry(t.round() as i64).or_default().push(*v);
        }
    }
    by_second
        .into_iter()
        .map(|(t, vs)| (t as f64, Spread::of(&vs).median))
        .collect()
}

/// A cell's lines: each round faint behind (when asked and there are several), then the median.
fn cell_lines(run: Run, c: &CellResults, kind: SeriesKind, with_rounds: bool) -> Vec<Line> {
    let line = |faint, points| Line {
        cell: c.name.clone(),
        run,
        faint,
        points,
    };
    let rounds: Vec<Vec<(f64, f64)>> = c.rounds.iter().map(|x| round_series(x, kind)).collect();
    let mut lines = Vec::new();
    if with_rounds && c.rounds.len() > 1 {
        for pts in &rounds {
            lines.push(line(true, downsample_to(pts.clone(), MAX_ROUND_POINTS)));
        }
    }
    lines.push(line(false, downsample(median_series(&rounds))));
    lines
}

/// The sentence on what the lines are, which depends on runs and rounds.
fn rounds_note(compared: bool, faint_rounds: bool, several_rounds: bool) -> &'static str {
    match (compared, faint_rounds) {
        (true, _) => " Each line is the median over a run's rounds at each second; solid: run A, dashed: run B.",
        (false, true) => " Thick lines: median over rounds at each second; thin lines: each round.",
        (false, false) if several_rounds => " Lines: median over rounds at each second.",
        _ => "",
    }
}

/// Id, title, y axis and how to read the chart of a kind of series.
fn words(
    kind: SeriesKind,
    rounds_note: &str,
) -> (&'static str, &'static str, &'static str, String) {
    match kind {
        SeriesKind::Commits => (
            "commit-rate",
            "Commit rate over time",
            "commits/s (writing transactions)",
            format!(
                "Writing transactions committed per second of the measured window (warm-up excluded), lag-free (pg_snapshot_xmax).{rounds_note} At the same ack throughput, a lower line means fewer commits per ack."
            ),
        ),
        SeriesKind::Acks => (
            "ack-rate",
            "Ack throughput over time",
            "acked messages/s",
            format!(
                "Messages acknowledged per second of the measured window.{rounds_note} Dips show stalls; a steady line means the cell kept up."
            ),
        ),
    }
}

pub(super) fn series_chart(
    runs: &[(Run, &Results)],
    cells: &[String],
    kind: SeriesKind,
    with_rounds: bool,
) -> ChartSpec {
    let several_rounds = runs
        .iter()
        .any(|(_, r)| r.cells.iter().any(|c| c.rounds.len() > 1));
    let lines: Vec<Line> = runs
        .iter()
        .flat_map(|(run, r)| {
            let cells = cells.iter().filter_map(|name| r.cell(name));
            cells.flat_map(move |c| cell_lines(*run, c, kind, with_rounds))
        })
        .collect();
    let faint_rounds = with_rounds && several_rounds;
    let mut legend = cell_legend(cells, Mark::Line);
    if faint_rounds {
        legend.push(LegendItem {
            label: "thin: single rounds".into(),
            cell: None,
            mark: Mark::FaintLine,
        });
    }
    let note = rounds_note(runs.len() > 1, faint_rounds, several_rounds);
    let (id, title, y, mut how) = words(kind, note);
    let results: Vec<&Results> = runs.iter().map(|(_, r)| *r).collect();
    let faults = fault_marks(&results);
    if !faults.is_empty() {
        how.push_str(" Shaded bands: fault steps, from when each fired to when it ended.");
    }
    ChartSpec {
        id: id.into(),
        title: title.into(),
        how_to_read: how,
        x: Axis {
            label: "time in the measured window (s)".into(),
            scale: Scale::Linear,
        },
        y: Axis {
            label: y.into(),
            scale: Scale::Linear,
        },
        value_format: Format::Number,
        body: ChartBody::Lines(lines),
        legend,
        wide: true,
        y_max: None,
        faults,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_series_are_downsampled() {
        let pts: Vec<(f64, f64)> = (0..1000).map(|i| (i as f64, 1.0)).collect();
        let d = downsample(pts);
        assert!(d.len() <= MAX_SERIES_POINTS);
        assert!(d.iter().all(|p| p.1 == 1.0));
    }
}
