//! The latency charts: percentile spectra and log-bucket histograms, from each cell's HDR
//! histograms merged over rounds (never averaged).

use hdrhistogram::Histogram;

use super::chart::{cell_legend, Axis, ChartBody, ChartSpec, Line, Mark, Run, Scale};
use crate::figures::Format;
use crate::results::{CellResults, Results};
use crate::stats::decode_histogram;

/// A cell's histogram of an operation over all rounds: the summary's merged one, or the rounds'
/// merged here.
fn merged_histogram(
    c: &CellResults,
    op: &str,
    warnings: &mut Vec<String>,
) -> Option<Histogram<u64>> {
    let mut warn = |e: String| warnings.push(format!("{} {op} histogram: {e}", c.name));
    if let Some(text) = c.summary.histograms.get(op) {
        match decode_histogram(text) {
            Ok(h) => return Some(h),
            Err(e) => warn(e),
        }
    }
    let mut merged: Option<Histogram<u64>> = None;
    for r in &c.rounds {
        let Some(text) = r.histograms.get(op) else {
            continue;
        };
        match decode_histogram(text) {
            Ok(h) => match merged.as_mut() {
                None => merged = Some(h),
                Some(m) => {
                    if let Err(e) = m.add(&h) {
                        warn(format!("round {} cannot be merged: {e:?}", r.round));
                    }
                }
            },
            Err(e) => warn(format!("round {}: {e}", r.round)),
        }
    }
    merged
}

/// Deepest percentile drawn: 99.9999%.
const SPECTRUM_DECADES: u32 = 6;
const SPECTRUM_STEPS_PER_DECADE: u32 = 20;

/// (quantile, latency in ms) from p = 0 to the deepest quantile the sample count resolves.
pub fn spectrum_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    let n = h.len();
    if n == 0 {
        return Vec::new();
    }
    let ms = |us: u64| us as f64 / 1000.0;
    let deepest = 1.0 - 1.0 / n as f64;
    let mut points = Vec::new();
    for k in 0..=SPECTRUM_DECADES * SPECTRUM_STEPS_PER_DECADE {
        let p = 1.0 - 10f64.powf(-(k as f64) / SPECTRUM_STEPS_PER_DECADE as f64);
        if p > deepest {
            break;
        }
        points.push((p, ms(h.value_at_quantile(p))));
    }
    let last_p = points.last().map(|p| p.0).unwrap_or(0.0);
    if deepest > last_p && deepest <= 1.0 - 10f64.powi(-(SPECTRUM_DECADES as i32)) {
        points.push((deepest, ms(h.max())));
    }
    points
}

/// What the end-to-end latency counts, said under its charts.
pub const E2E_NOTE: &str = "End-to-end counts each producer message from its intended send time \
    to its ack's answer, for the messages acked in the measured window: a message pushed in the \
    warm-up and still queued when the window opened counts its wait, so a warm-up backlog raises \
    it. Prefilled messages carry no send time and are not counted.";

/// `how` with the end-to-end note after it when `op` is `e2e`.
fn with_e2e_note(how: String, op: &str) -> String {
    match op {
        "e2e" => format!("{how} {E2E_NOTE}"),
        _ => how,
    }
}

fn op_name(op: &str) -> &str {
    match op {
        "e2e" => "end-to-end (intended push to ack)",
        other => other,
    }
}

pub(super) fn spectrum_chart(
    runs: &[(Run, &Results)],
    cells: &[String],
    op: &str,
    warnings: &mut Vec<String>,
) -> ChartSpec {
    let mut lines = Vec::new();
    for (run, r) in runs {
        for name in cells {
            let Some(c) = r.cell(name) else { continue };
            if let Some(h) = merged_histogram(c, op, warnings) {
                lines.push(Line {
                    cell: name.clone(),
                    run: *run,
                    faint: false,
                    points: spectrum_points(&h),
                });
            }
        }
    }
    ChartSpec {
        id: format!("spectrum-{op}"),
        title: format!("Latency percentile spectrum: {}", op_name(op)),
        how_to_read: with_e2e_note(format!(
            "{} latency at each percentile, from the histograms of all rounds merged (never averaged). Each step right is ten times rarer (90% → 99% → 99.9%); lower is better, and a curve that climbs at the right has a heavy tail.",
            capitalise(op_name(op))
        ), op),
        x: Axis {
            label: "percentile (log scale of 1/(1−p))".into(),
            scale: Scale::Percentile,
        },
        y: Axis {
            label: "latency (ms, log scale)".into(),
            scale: Scale::Log,
        },
        value_format: Format::Ms,
        body: ChartBody::Lines(lines),
        legend: cell_legend(cells, Mark::Line),
        wide: false,
        y_max: None,
        faults: Vec::new(),
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// Buckets per decade of the latency histograms.
const HISTOGRAM_BUCKETS_PER_DECADE: f64 = 10.0;

/// Counts of a histogram in the log buckets `first..=last` (bucket k covers
/// 10^(k/b)..10^((k+1)/b) microseconds).
fn bucket_counts(h: &Histogram<u64>, first: i64, last: i64) -> Vec<u64> {
    let b = HISTOGRAM_BUCKETS_PER_DECADE;
    let mut counts = vec![0u64; (last - first + 1) as usize];
    for v in h.iter_recorded() {
        let us = v.value_iterated_to().max(1) as f64;
        let i = ((us.log10() * b).floor() as i64).clamp(first, last) - first;
        counts[i as usize] += v.count_at_value();
    }
    counts
}

/// The outline of a histogram's buckets as a step line: (ms, share %) points, from and back to
/// zero.
fn bucket_outline(h: &Histogram<u64>, first: i64, last: i64) -> Vec<(f64, f64)> {
    let b = HISTOGRAM_BUCKETS_PER_DECADE;
    let total = h.len() as f64;
    let mut points = Vec::new();
    for (i, n) in bucket_counts(h, first, last).iter().enumerate() {
        let k = (first + i as i64) as f64;
        let x0 = 10f64.powf(k / b) / 1000.0;
        let x1 = 10f64.powf((k + 1.0) / b) / 1000.0;
        let share = *n as f64 / total * 100.0;
        if points.is_empty() {
            points.push((x0, 0.0));
        }
        points.push((x0, share));
        points.push((x1, share));
    }
    if let Some(&(x, _)) = points.last() {
        points.push((x, 0.0));
    }
    points
}

/// One outline per cell, on buckets shared by every cell's histogram.
fn histogram_lines(hists: &[(String, Histogram<u64>)]) -> Vec<Line> {
    if hists.is_empty() {
        return Vec::new();
    }
    let lo = hists.iter().map(|(_, h)| h.min().max(1)).min().unwrap_or(1) as f64;
    let hi = hists.iter().map(|(_, h)| h.max().max(1)).max().unwrap_or(1) as f64;
    let b = HISTOGRAM_BUCKETS_PER_DECADE;
    let (first, last) = (
        (lo.log10() * b).floor() as i64,
        (hi.log10() * b).floor() as i64,
    );
    hists
        .iter()
        .map(|(name, h)| Line {
            cell: name.clone(),
            run: Run::A,
            faint: false,
            points: bucket_outline(h, first, last),
        })
        .collect()
}

pub(super) fn histogram_chart(
    r: &Results,
    cells: &[String],
    op: &str,
    warnings: &mut Vec<String>,
) -> ChartSpec {
    let hists: Vec<(String, Histogram<u64>)> = cells
        .iter()
        .filter_map(|n| {
            let c = r.cell(n)?;
            let h = merged_histogram(c, op, warnings)?;
            (!h.is_empty()).then(|| (n.clone(), h))
        })
        .collect();
    let unit = if op == "e2e" { "messages" } else { "requests" };
    ChartSpec {
        id: format!("histogram-{op}"),
        title: format!("Latency histogram: {}", op_name(op)),
        how_to_read: with_e2e_note(format!(
            "Share of {unit} in each latency bucket (10 buckets per decade of a log axis), all rounds merged. The peak is the typical latency; mass to its right is the tail."
        ), op),
        x: Axis {
            label: "latency (ms, log scale)".into(),
            scale: Scale::Log,
        },
        y: Axis {
            label: format!("share of {unit} (%)"),
            scale: Scale::Linear,
        },
        value_format: Format::Number,
        body: ChartBody::Lines(histogram_lines(&hists)),
        legend: cell_legend(cells, Mark::Line),
        wide: false,
        y_max: None,
        faults: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spectrum_stops_where_the_samples_do() {
        let mut h = crate::stats::new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 10).unwrap();
        }
        let pts = spectrum_points(&h);
        assert_eq!(pts[0].0, 0.0);
        let (p, v) = *pts.last().unwrap();
        assert!((p - 0.999).abs() < 1e-9, "{p}");
        assert!((v - 10.0).abs() < 0.05, "{v}");
        assert!(pts.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }
}
