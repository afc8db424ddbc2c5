//! The capacity report's three charts as specs, against the offered rate: achieved rates,
//! p99 latency and commits per second, with each cell's capacity and knee marked and the
//! reference lines (y = x, the latency target) drawn grey.

use super::wording::amount;
use super::{CapacityCell, CapacityResults, Step};
use crate::charts::{cell_colour_hex, render_svg};
use crate::model::{Axis, ChartBody, ChartSpec, Format, LegendItem, Line, Mark, Run, Scale};

/// The series name of reference lines (y = x, the target): drawn, then recoloured grey.
pub(super) const REFERENCE: &str = "reference";
pub(super) const REFERENCE_GREY: &str = "#9A9A9A";

/// The three charts of the report, in page order.
pub fn chart_specs(r: &CapacityResults) -> Vec<ChartSpec> {
    vec![achieved_chart(r), latency_chart(r), commits_chart(r)]
}

/// Markers for the cells' capacities (a diamond at the highest sustained step) and knees (a
/// cross at the first failing step), drawn as small polylines on the chart's own axes.
struct Markers {
    x_span: f64,
    y_span: f64,
    y_log: bool,
}

impl Markers {
    fn new(points: &[(f64, f64)], y_log: bool) -> Markers {
        let ax: Vec<f64> = points
            .iter()
            .filter(|p| p.0 > 0.0)
            .map(|p| p.0.log10())
            .collect();
        let ay: Vec<f64> = points.iter().filter_map(|p| to_axis(p.1, y_log)).collect();
        let span = |v: &[f64], fallback: f64| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if hi - lo > 1e-9 {
                hi - lo
            } else {
                fallback
            }
        };
        let y_fallback = if y_log {
            0.6
        } else {
            ay.iter()
                .copied()
                .fold(0.0f64, |a, b| a.max(b.abs()))
                .max(1.0)
        };
        Markers {
            x_span: span(&ax, 0.6),
            y_span: span(&ay, y_fallback),
            y_log,
        }
    }

    fn back(&self, ax: f64, ay: f64) -> (f64, f64) {
        let y = if self.y_log {
            10f64.powf(ay)
        } else {
            ay.max(0.0)
        };
        (10f64.powf(ax), y)
    }

    fn half(&self) -> (f64, f64) {
        (self.x_span * 0.02, self.y_span * 0.04)
    }

    fn diamond(&self, cell: &str, x: f64, y: f64) -> Option<Line> {
        let (ax, ay) = (x.log10(), to_axis(y, self.y_log)?);
        let (hx, hy) = self.half();
        let pts = [
            (ax - hx, ay),
            (ax, ay + hy),
            (ax + hx, ay),
            (ax, ay - hy),
            (ax - hx, ay),
        ];
        Some(self.line(cell, &pts))
    }

    fn cross(&self, cell: &str, x: f64, y: f64) -> Option<[Line; 2]> {
        let (ax, ay) = (x.log10(), to_axis(y, self.y_log)?);
        let (hx, hy) = self.half();
        Some([
            self.line(cell, &[(ax - hx, ay - hy), (ax + hx, ay + hy)]),
            self.line(cell, &[(ax - hx, ay + hy), (ax + hx, ay - hy)]),
        ])
    }

    fn line(&self, cell: &str, axis_points: &[(f64, f64)]) -> Line {
        Line {
            cell: cell.to_string(),
            run: Run::A,
            faint: false,
            points: axis_points.iter().map(|(a, b)| self.back(*a, *b)).collect(),
        }
    }
}

fn to_axis(v: f64, log: bool) -> Option<f64> {
    let t = if log {
        if v > 0.0 {
            v.log10()
        } else {
            return None;
        }
    } else {
        v
    };
    t.is_finite().then_some(t)
}

type Pick = fn(&Step) -> f64;

/// The lines of one figure: per cell a solid line (`solid`), optionally a dashed one
/// (`dashed`), and the capacity and knee markers on the solid line.
fn cell_lines(r: &CapacityResults, solid: Pick, dashed: Option<Pick>, y_log: bool) -> Vec<Line> {
    let series = |c: &CapacityCell, f: Pick| -> Vec<(f64, f64)> {
        c.steps
            .iter()
            .map(|s| (s.offered_rate, f(s)))
            .filter(|(x, y)| x.is_finite() && y.is_finite() && (!y_log || *y > 0.0))
            .collect()
    };
    let mut all: Vec<(f64, f64)> = Vec::new();
    for c in &r.cells {
        all.extend(series(c, solid));
        if let Some(d) = dashed {
            all.extend(series(c, d));
        }
    }
    let markers = Markers::new(&all, y_log);
    let mut lines = Vec::new();
    for c in &r.cells {
        lines.push(Line {
            cell: c.name.clone(),
            run: Run::A,
            faint: false,
            points: series(c, solid),
        });
        if let Some(d) = dashed {
            lines.push(Line {
                cell: c.name.clone(),
                run: Run::B,
                faint: false,
                points: series(c, d),
            });
        }
        if let Some(s) = c.capacity_step() {
            lines.extend(markers.diamond(&c.name, s.offered_rate, solid(s)));
        }
        if let Some(k) = c.knee() {
            lines.extend(
                markers
                    .cross(&c.name, k.offered_rate, solid(k))
                    .into_iter()
                    .flatten(),
            );
        }
    }
    lines
}

fn offered_range(r: &CapacityResults) -> Option<(f64, f64)> {
    let rates = r
        .cells
        .iter()
        .flat_map(|c| c.steps.iter())
        .map(|s| s.offered_rate)
        .filter(|x| x.is_finite() && *x > 0.0);
    let (lo, hi) = rates.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    lo.is_finite().then_some((lo, hi))
}

fn cell_legend(r: &CapacityResults) -> Vec<LegendItem> {
    r.cells
        .iter()
        .map(|c| LegendItem {
            label: c.name.clone(),
            cell: Some(c.name.clone()),
            mark: Mark::Line,
        })
        .collect()
}

fn neutral(label: &str, mark: Mark) -> LegendItem {
    LegendItem {
        label: label.into(),
        cell: None,
        mark,
    }
}

fn reference_legend(label: &str) -> LegendItem {
    LegendItem {
        label: label.into(),
        cell: Some(REFERENCE.into()),
        mark: Mark::DashedLine,
    }
}

fn reference_line(points: Vec<(f64, f64)>) -> Line {
    Line {
        cell: REFERENCE.into(),
        run: Run::B,
        faint: false,
        points,
    }
}

const MARKER_NOTE: &str = "A diamond marks each cell's highest sustained rate, a cross its knee (the first failing step).";

fn achieved_chart(r: &CapacityResults) -> ChartSpec {
    let mut lines = cell_lines(
        r,
        |s| s.achieved_push_rate,
        Some(Step::answered_per_group),
        true,
    );
    if let Some((lo, hi)) = offered_range(r) {
        lines.insert(0, reference_line(vec![(lo, lo), (hi, hi)]));
    }
    let mut legend = cell_legend(r);
    legend.push(neutral("solid: pushed", Mark::Line));
    legend.push(neutral("dashed: answered per group", Mark::DashedLine));
    legend.push(reference_legend("offered (y = x)"));
    ChartSpec {
        id: "capacity-achieved".into(),
        title: "Achieved against offered rate".into(),
        how_to_read: format!(
            "Both axes logarithmic. Solid: messages pushed per second; dashed: (message, group) obligations answered per second per consumer group; grey: y = x. A step keeps up while its lines lie on the grey line (at least {}% of it); they fall away past the knee. {MARKER_NOTE}",
            amount(r.criteria.min_achieved_ratio * 100.0)
        ),
        x: Axis {
            label: "offered rate (msg/s)".into(),
            scale: Scale::Log,
        },
        y: Axis {
            label: "achieved (msg/s)".into(),
            scale: Scale::Log,
        },
        value_format: Format::Number,
        body: ChartBody::Lines(lines),
        legend,
        wide: false,
        y_max: None,
        faults: Vec::new(),
    }
}

fn latency_chart(r: &CapacityResults) -> ChartSpec {
    let slo = r.criteria.slo_p99_ms;
    let mut lines = cell_lines(
        r,
        |s| s.ack_p99_ms,
        Some(|s: &Step| s.judged_e2e_p99_ms()),
        true,
    );
    if let Some((lo, hi)) = offered_range(r) {
        lines.insert(0, reference_line(vec![(lo, slo), (hi, slo)]));
    }
    let mut legend = cell_legend(r);
    legend.push(neutral("solid: ack p99", Mark::Line));
    legend.push(neutral(
        "dashed: first-delivery end-to-end p99",
        Mark::DashedLine,
    ));
    legend.push(reference_legend(&format!(
        "target p99 <= {} ms",
        amount(slo)
    )));
    ChartSpec {
        id: "capacity-p99".into(),
        title: "p99 latency against offered rate".into(),
        how_to_read: format!(
            "Both axes logarithmic. Solid: ack request p99; dashed: end-to-end (intended push to ack) p99 of messages acked on their first delivery; grey: the target, {} ms. Both must stay under the grey line for a step to be sustained. {MARKER_NOTE}",
            amount(slo)
        ),
        x: Axis {
            label: "offered rate (msg/s)".into(),
            scale: Scale::Log,
        },
        y: Axis {
            label: "p99 latency (ms)".into(),
            scale: Scale::Log,
        },
        value_format: Format::Ms,
        body: ChartBody::Lines(lines),
        legend,
        wide: false,
        y_max: None,
        faults: Vec::new(),
    }
}

fn commits_chart(r: &CapacityResults) -> ChartSpec {
    let lines = cell_lines(r, Step::charted_commits, None, false);
    ChartSpec {
        id: "capacity-commits".into(),
        title: "Commits per second against offered rate".into(),
        how_to_read: format!(
            "Offered rate logarithmic. Writing transactions committed per second over each step's window (pg_snapshot_xmax delta, lag-free). At the same offered rate a lower line means fewer commits for the same work; a line that flattens shows the commit ceiling. {MARKER_NOTE}"
        ),
        x: Axis {
            label: "offered rate (msg/s)".into(),
            scale: Scale::Log,
        },
        y: Axis {
            label: "commits/s (writing transactions)".into(),
            scale: Scale::Linear,
        },
        value_format: Format::Number,
        body: ChartBody::Lines(lines),
        legend: cell_legend(r),
        wide: false,
        y_max: None,
        faults: Vec::new(),
    }
}

/// Draws a chart, turning the reference series grey (unless a real cell shares its colour).
pub fn render_chart(spec: &ChartSpec, cells: &[String]) -> Result<String, String> {
    let svg = render_svg(spec)?;
    let reference = cell_colour_hex(REFERENCE);
    if cells.iter().any(|c| cell_colour_hex(c) == reference) {
        return Ok(svg);
    }
    Ok(svg.replace(
        &format!("\"{reference}\""),
        &format!("\"{REFERENCE_GREY}\""),
    ))
}
