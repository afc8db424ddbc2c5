//! Capacity planning: the `capacity.json` document `ackbench capacity` writes, the sentence
//! that sums up each cell, and the HTML report (`capacity.html`) rendered from the document
//! alone.
//!
//! A capacity run steps the offered producer rate up, cell by cell (each step on a fresh queue
//! with its own warm-up), and judges each step: it is sustained when the producers achieved at
//! least 95% of the offered rate, the consumers answered at least 95% of it per consumer group,
//! the backlog did not grow by more than 5% of what was offered, and ack and end-to-end p99 stayed
//! within the latency target. A cell's capacity is the highest sustained rate before its first
//! failing step (the knee). The types live here, beside `results`, because both the load
//! generator (which writes them) and the report (which reads them) need them.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::charts::{cell_colour_hex, render_svg};
use crate::html::esc;
use crate::model::{
    format_number, Axis, ChartBody, ChartSpec, Format, LegendItem, Line, Mark, Run, Scale,
};
use crate::results::RunMeta;
use crate::stats::nullable;

/// The version of `capacity.json` this build writes and reads.
pub const CAPACITY_SCHEMA_VERSION: u32 = 1;
/// The `kind` of a capacity document (a results file has none), so neither is mistaken for the
/// other.
pub const CAPACITY_KIND: &str = "ackbench-capacity";

/// What makes a step sustained, and when the load generator warns about itself.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Criteria {
    /// Ack and end-to-end p99 must be at most this (ms).
    pub slo_p99_ms: f64,
    /// Pushed messages/s must reach this share of the offered rate.
    pub min_achieved_ratio: f64,
    /// Answered (message, group) obligations/s must reach this share of offered × groups.
    pub min_answered_ratio: f64,
    /// The backlog may grow by at most this share of the obligations offered in the window.
    pub max_backlog_growth_ratio: f64,
    /// A cell stops after this many consecutive failing steps.
    pub stop_after_failures: u32,
    /// Warn when the load generator used more CPU than this (cores) over a window.
    pub loadgen_cpu_warn_cores: f64,
    /// Warn when the producers' schedule lag p99 exceeded this (ms).
    pub schedule_lag_warn_ms: f64,
}

impl Default for Criteria {
    fn default() -> Criteria {
        Criteria {
            slo_p99_ms: 50.0,
            min_achieved_ratio: 0.95,
            min_answered_ratio: 0.95,
            max_backlog_growth_ratio: 0.05,
            stop_after_failures: 2,
            loadgen_cpu_warn_cores: 0.85,
            schedule_lag_warn_ms: 10.0,
        }
    }
}

impl Criteria {
    /// The default criteria with latency target `slo_p99_ms`.
    pub fn with_slo(slo_p99_ms: f64) -> Criteria {
        Criteria {
            slo_p99_ms,
            ..Criteria::default()
        }
    }
}

/// The ladder of rates and how each step was run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Plan {
    pub start_rate: f64,
    pub step_factor: f64,
    pub max_rate: f64,
    /// The offered rates planned, msg/s, lowest first (a cell may stop before the end).
    pub rates: Vec<f64>,
    /// Warm-up of each step, excluded from its figures (s).
    pub warmup_secs: f64,
    /// The measured window of each step (s).
    pub step_secs: f64,
    pub producers: u32,
    pub producer_batch: u32,
    /// Consumers per group (in queue mode: in total).
    pub consumers: u32,
    pub consumer_groups: u32,
    /// Messages per partition prefilled into each step's queue before its warm-up.
    pub prefill_per_partition: u64,
}

/// A condition a step can fail.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// Pushed messages/s below the share of the offered rate.
    Achieved,
    /// Consumers did not keep up: answered obligations/s below the share of offered × groups.
    Answered,
    /// The backlog grew by more than its allowance.
    Backlog,
    /// Ack p99 above the target (or none measured).
    AckP99,
    /// End-to-end p99 above the target (or none measured).
    E2eP99,
}

impl Condition {
    pub fn label(self) -> &'static str {
        match self {
            Condition::Achieved => "achieved rate",
            Condition::Answered => "acks keep up",
            Condition::Backlog => "backlog",
            Condition::AckP99 => "ack p99",
            Condition::E2eP99 => "e2e p99",
        }
    }
}

/// A failed condition, with the numbers that failed it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Failure {
    pub condition: Condition,
    /// E.g. `ack p99 180 ms > 50 ms`.
    pub detail: String,
}

/// One step: an offered rate held for a warm-up and a measured window, and its verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Step {
    /// 1-based position in the ladder.
    pub index: u32,
    /// Offered producer rate, msg/s.
    pub offered_rate: f64,
    #[serde(deserialize_with = "nullable")]
    pub window_secs: f64,
    /// Consumer groups (each consumes every message; obligations are per group).
    pub consumer_groups: u32,
    /// Messages offered in the window (offered rate × window).
    #[serde(deserialize_with = "nullable")]
    pub offered_messages: f64,
    #[serde(deserialize_with = "nullable")]
    pub pushed_messages: f64,
    /// Pushed (queued) messages/s.
    #[serde(deserialize_with = "nullable")]
    pub achieved_push_rate: f64,
    /// First successful acks of (message, group) per second.
    #[serde(deserialize_with = "nullable")]
    pub acked_rate: f64,
    /// (message, group) obligations resolved per second: acked, dead-lettered or dropped.
    #[serde(deserialize_with = "nullable")]
    pub answered_rate: f64,
    /// Obligations not yet resolved, at the window's start and end.
    #[serde(deserialize_with = "nullable")]
    pub backlog_start: f64,
    #[serde(deserialize_with = "nullable")]
    pub backlog_end: f64,
    #[serde(deserialize_with = "nullable")]
    pub backlog_growth: f64,
    /// Push p99 from the intended send time (coordinated omission corrected).
    #[serde(deserialize_with = "nullable")]
    pub push_p99_ms: f64,
    /// Push p99 from the actual send (the request's own time).
    #[serde(deserialize_with = "nullable")]
    pub push_uncorrected_p99_ms: f64,
    #[serde(deserialize_with = "nullable")]
    pub ack_p50_ms: f64,
    #[serde(deserialize_with = "nullable")]
    pub ack_p99_ms: f64,
    #[serde(deserialize_with = "nullable")]
    pub e2e_p50_ms: f64,
    #[serde(deserialize_with = "nullable")]
    pub e2e_p99_ms: f64,
    /// `pg_stat_database.xact_commit` delta per second (lags ~1 s at each edge).
    #[serde(deserialize_with = "nullable")]
    pub commits_per_sec: f64,
    /// `pg_snapshot_xmax` delta per second: writing transactions, lag-free.
    #[serde(deserialize_with = "nullable")]
    pub write_commits_per_sec: f64,
    /// CPU the load generator used over the window, in cores.
    #[serde(deserialize_with = "nullable")]
    pub loadgen_cpu_cores: f64,
    /// CPU the broker used over the window, in cores (NaN for an external broker).
    #[serde(deserialize_with = "nullable")]
    pub broker_cpu_cores: f64,
    /// p99 of the delay from a batch's intended send time to its actual send start (ms).
    #[serde(deserialize_with = "nullable")]
    pub schedule_lag_p99_ms: f64,
    /// Each producer's interval between batches at this rate (ms): a producer sends one batch
    /// at a time, so pushes slower than this make it late.
    #[serde(deserialize_with = "nullable")]
    pub producer_interval_ms: f64,
    /// Client errors in the window.
    #[serde(deserialize_with = "nullable")]
    pub errors: f64,
    pub sustained: bool,
    /// The conditions that failed (empty when sustained).
    #[serde(default)]
    pub failed: Vec<Failure>,
    /// The load generator was near its own limit in this step.
    #[serde(default)]
    pub loadgen_warnings: Vec<String>,
}

impl Step {
    /// The commit rate charted: writing transactions (lag-free), else `xact_commit`.
    pub fn charted_commits(&self) -> f64 {
        if self.write_commits_per_sec.is_finite() {
            self.write_commits_per_sec
        } else {
            self.commits_per_sec
        }
    }

    /// Answered obligations/s per consumer group (comparable with the offered rate).
    pub fn answered_per_group(&self) -> f64 {
        self.answered_rate / self.consumer_groups.max(1) as f64
    }
}

/// One cell's ladder and what it found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct CapacityCell {
    pub name: String,
    pub registry: bool,
    pub fusion: bool,
    /// Every step run, lowest rate first.
    pub steps: Vec<Step>,
    /// The highest sustained offered rate before the first failing step.
    pub sustained_rate: Option<f64>,
    /// The offered rate of the first failing step.
    pub knee_rate: Option<f64>,
    /// Why stepping ended (`2 consecutive failing steps`, `reached --max 800 msg/s`, ...).
    pub stopped: String,
}

impl CapacityCell {
    /// The first failing step.
    pub fn knee(&self) -> Option<&Step> {
        self.steps.iter().find(|s| !s.sustained)
    }

    /// The step of the sustained rate (the last sustained one before the knee).
    pub fn capacity_step(&self) -> Option<&Step> {
        self.steps.iter().take_while(|s| s.sustained).last()
    }

    /// A step above the knee that held again (the knee is noisy there).
    pub fn held_after_knee(&self) -> Option<&Step> {
        self.steps
            .iter()
            .skip_while(|s| s.sustained)
            .find(|s| s.sustained)
    }
}

/// `capacity.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CapacityResults {
    /// Always `ackbench-capacity`.
    pub kind: String,
    pub schema_version: u32,
    /// False when the run was interrupted (cells or steps are missing).
    pub complete: bool,
    /// Run metadata as in `results.json` (`rounds` is 1; the notes say how capacity is measured).
    pub meta: RunMeta,
    pub criteria: Criteria,
    pub plan: Plan,
    pub cells: Vec<CapacityCell>,
    /// Whole-run warnings: the load generator near its limit, coarse windows, ...
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl CapacityResults {
    /// Reads a capacity document, refusing other kinds and versions with a reason.
    pub fn from_json(text: &str) -> Result<CapacityResults, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        match v.get("kind").and_then(|k| k.as_str()) {
            Some(CAPACITY_KIND) => {}
            Some(other) => {
                return Err(format!(
                    "not a capacity document (kind `{other}`, expected `{CAPACITY_KIND}`)"
                ))
            }
            None => return Err(
                "not a capacity document (no `kind`; a results.json is read by `ackbench report`)"
                    .to_string(),
            ),
        }
        match v.get("schema_version").and_then(|x| x.as_u64()) {
            Some(n) if n == CAPACITY_SCHEMA_VERSION as u64 => {}
            other => {
                return Err(format!(
                    "capacity schema_version {} is not supported (this build reads {CAPACITY_SCHEMA_VERSION})",
                    other.map(|n| n.to_string()).unwrap_or_else(|| "missing".into())
                ))
            }
        }
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    /// The document as pretty JSON (NaN written as `null`).
    pub fn to_json(&self) -> Result<String, String> {
        serde_json::to_string_pretty(self).map_err(|e| e.to_string())
    }

    pub fn cell(&self, name: &str) -> Option<&CapacityCell> {
        self.cells.iter().find(|c| c.name == name)
    }
}

// ---------------------------------------------------------------------------------------------
// Words

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

// ---------------------------------------------------------------------------------------------
// Charts

/// The series name of reference lines (y = x, the target): drawn, then recoloured grey.
const REFERENCE: &str = "reference";
const REFERENCE_GREY: &str = "#9A9A9A";

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
    }
}

fn latency_chart(r: &CapacityResults) -> ChartSpec {
    let slo = r.criteria.slo_p99_ms;
    let mut lines = cell_lines(r, |s| s.ack_p99_ms, Some(|s: &Step| s.e2e_p99_ms), true);
    if let Some((lo, hi)) = offered_range(r) {
        lines.insert(0, reference_line(vec![(lo, slo), (hi, slo)]));
    }
    let mut legend = cell_legend(r);
    legend.push(neutral("solid: ack p99", Mark::Line));
    legend.push(neutral("dashed: end-to-end p99", Mark::DashedLine));
    legend.push(reference_legend(&format!(
        "target p99 <= {} ms",
        amount(slo)
    )));
    ChartSpec {
        id: "capacity-p99".into(),
        title: "p99 latency against offered rate".into(),
        how_to_read: format!(
            "Both axes logarithmic. Solid: ack request p99; dashed: end-to-end (intended push to ack) p99; grey: the target, {} ms. Both must stay under the grey line for a step to be sustained. {MARKER_NOTE}",
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

// ---------------------------------------------------------------------------------------------
// The page

const CSS: &str = r#"
:root{--fg:#1f2328;--muted:#656d76;--line:#d8dee4;--soft:#f6f8fa;--good:#1a7f37;--bad:#cf222e;--warn:#9a6700}
*{box-sizing:border-box}
body{margin:0;background:#eef1f4;color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1440px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:24px;margin:0 0 2px}h2{font-size:18px;margin:0 0 10px}h3{font-size:15px;margin:14px 0 6px}
.sub{color:var(--muted);margin:0 0 12px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 20px;margin:14px 0}
.banner{border-radius:8px;padding:14px 20px;margin:14px 0;font-size:18px;font-weight:700;color:#fff;background:var(--warn)}
.verdict{border-left:10px solid #0969da}
.verdict .headline{font-size:20px;font-weight:700;margin:0 0 8px}
.verdict ul{margin:0;padding-left:4px;list-style:none}.verdict li{margin:3px 0}
.warnings{border-left:10px solid var(--warn)}.warnings li{color:var(--warn)}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
table.steps{width:100%}
th,td{padding:5px 9px;border-bottom:1px solid #eaeef2;text-align:right;vertical-align:top;white-space:nowrap}
thead th{background:var(--soft);font-weight:600;vertical-align:bottom;white-space:normal;min-width:70px}
th .unit{display:block;font-weight:400;color:var(--muted);font-size:11.5px}
td.l,th.l{text-align:left}
td.wrap{white-space:normal;min-width:240px;max-width:420px}
td.ok{color:var(--good);font-weight:600}td.bad{color:var(--bad);font-weight:600}
tr.knee td,tr.knee th{background:#fff5f5}
.sp{display:block;color:var(--muted);font-size:11.5px}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px}
.scroll{overflow-x:auto}
.help{color:var(--muted);margin:0 0 10px;max-width:1100px}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:18px}
figure{margin:0;min-width:0}
figure svg{display:block;width:100%;height:auto;border:1px solid #eaeef2;border-radius:4px}
figcaption{color:var(--muted);font-size:12.5px;margin-top:5px}
pre{background:var(--soft);padding:10px 12px;border-radius:6px;overflow-x:auto;font-size:12.5px}
details{margin-top:10px}summary{cursor:pointer;color:#0969da}
footer{color:var(--muted);font-size:12px;margin-top:18px}
@media print{body{background:#fff}section{break-inside:avoid}}
"#;

fn swatch(cell: &str) -> String {
    format!(
        "<span class=\"sw\" style=\"background:{}\"></span>",
        cell_colour_hex(cell)
    )
}

/// `capacity.html`: one self-contained page (inline CSS and SVG, no scripts).
pub fn render_capacity(r: &CapacityResults) -> Result<String, String> {
    let m = &r.meta;
    let title = format!("ackbench capacity: {}", m.scenario.name);
    let mut h = String::with_capacity(128 * 1024);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"ackbench-reports {}\">\n<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n",
        env!("CARGO_PKG_VERSION"),
        esc(&title),
        CSS
    );
    let _ = writeln!(
        h,
        "<header>\n<h1>{}</h1>\n<p class=\"sub\">{} · {} cores · {} · git {}</p>\n</header>",
        esc(&title),
        esc(&m.started_at),
        m.machine.cores,
        esc(&m.machine.hostname),
        esc(m.git_revision.as_deref().unwrap_or("unknown"))
    );
    if !r.complete {
        h.push_str("<div class=\"banner\" id=\"incomplete\">INTERRUPTED: this capacity run did not complete; cells or steps are missing.</div>\n");
    }

    let _ = writeln!(
        h,
        "<section class=\"verdict\" id=\"verdict\">\n<p class=\"headline\">{}</p>\n<ul>",
        esc(&headline(r))
    );
    for c in &r.cells {
        let _ = writeln!(
            h,
            "<li class=\"sentence\" data-cell=\"{}\"{}>{}{}</li>",
            esc(&c.name),
            c.sustained_rate
                .map(|v| format!(" data-sustained=\"{v}\""))
                .unwrap_or_default(),
            swatch(&c.name),
            esc(&cell_sentence(c, &r.criteria))
        );
    }
    let cr = &r.criteria;
    let _ = writeln!(
        h,
        "</ul>\n<p class=\"help\">A step is sustained when pushes reach {}% of the offered rate, answers reach {}% of it per consumer group, the backlog grows by at most {}% of what was offered, and ack and end-to-end p99 stay at or under {} ms. A cell's capacity is its highest sustained rate below the first failing step; a cell stops after {} failing steps in a row.</p>\n</section>",
        amount(cr.min_achieved_ratio * 100.0),
        amount(cr.min_answered_ratio * 100.0),
        amount(cr.max_backlog_growth_ratio * 100.0),
        amount(cr.slo_p99_ms),
        cr.stop_after_failures
    );

    let warnings = all_warnings(r);
    if !warnings.is_empty() {
        h.push_str("<section class=\"warnings\" id=\"warnings\"><h2>Warnings</h2><ul>\n");
        for w in &warnings {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul></section>\n");
    }

    let names: Vec<String> = r.cells.iter().map(|c| c.name.clone()).collect();
    h.push_str("<section id=\"charts\">\n<h2>Throughput, latency and commits against offered rate</h2>\n<div class=\"charts\">\n");
    for spec in chart_specs(r) {
        let svg = render_chart(&spec, &names)?;
        let _ = writeln!(
            h,
            "{}",
            crate::html::figure_html(&spec.id, &spec.title, &spec.how_to_read, false, &svg)
        );
    }
    h.push_str("</div>\n</section>\n");

    steps_section(&mut h, r);
    facts_section(&mut h, r);
    let _ = writeln!(
        h,
        "<footer>Rendered by ackbench-reports {} from capacity.json alone. Self-contained: no scripts, nothing fetched.</footer>\n</main>\n</body>\n</html>",
        env!("CARGO_PKG_VERSION")
    );
    Ok(h)
}

fn steps_section(h: &mut String, r: &CapacityResults) {
    h.push_str("<section id=\"steps\">\n<h2>Every step</h2>\n<p class=\"help\">Figures over each step's measured window (its warm-up excluded). Answered: (message, group) obligations acked, dead-lettered or dropped, per second and per consumer group. Backlog Δ: obligations outstanding at the window's end minus at its start. Commits: writing transactions per second.</p>\n");
    for c in &r.cells {
        let _ = writeln!(
            h,
            "<h3 id=\"steps-{id}\">{}{}</h3>\n<div class=\"scroll\"><table class=\"steps\" data-cell=\"{id}\">\n<thead><tr><th>step</th><th>offered<span class=\"unit\">msg/s</span></th><th>pushed<span class=\"unit\">msg/s</span></th><th>answered<span class=\"unit\">msg/s per group</span></th><th>backlog Δ</th><th>ack p50<span class=\"unit\">ms</span></th><th>ack p99<span class=\"unit\">ms</span></th><th>e2e p99<span class=\"unit\">ms</span></th><th>commits<span class=\"unit\">/s</span></th><th>loadgen CPU<span class=\"unit\">cores</span></th><th>schedule lag p99<span class=\"unit\">ms</span></th><th class=\"l\">verdict</th></tr></thead>\n<tbody>",
            swatch(&c.name),
            esc(&c.name),
            id = esc(&c.name)
        );
        let knee = c.knee().map(|k| k.index);
        for s in &c.steps {
            let pct = |v: f64| {
                if v.is_finite() && s.offered_rate > 0.0 {
                    format!(
                        "<span class=\"sp\">{}%</span>",
                        format_number(v / s.offered_rate * 100.0)
                    )
                } else {
                    String::new()
                }
            };
            let verdict = if s.sustained {
                "sustained".to_string()
            } else {
                let d: Vec<String> = s.failed.iter().map(|f| f.detail.clone()).collect();
                format!("failed: {}", d.join("; "))
            };
            let _ = writeln!(
                h,
                "<tr data-offered=\"{}\" data-sustained=\"{}\"{}><td>{}{}</td><td>{}</td><td>{}{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l wrap {}\">{}{}</td></tr>",
                s.offered_rate,
                s.sustained,
                if knee == Some(s.index) { " class=\"knee\"" } else { "" },
                s.index,
                if knee == Some(s.index) { "<span class=\"sp\">knee</span>" } else { "" },
                amount(s.offered_rate),
                format_number(s.achieved_push_rate),
                pct(s.achieved_push_rate),
                format_number(s.answered_per_group()),
                pct(s.answered_per_group()),
                amount(s.backlog_growth.round()),
                format_number(s.ack_p50_ms),
                format_number(s.ack_p99_ms),
                format_number(s.e2e_p99_ms),
                format_number(s.charted_commits()),
                format_number(s.loadgen_cpu_cores),
                format_number(s.schedule_lag_p99_ms),
                if s.sustained { "ok" } else { "bad" },
                esc(&verdict),
                if s.loadgen_warnings.is_empty() {
                    String::new()
                } else {
                    format!(
                        "<span class=\"sp\">load generator: {}</span>",
                        esc(&s.loadgen_warnings.join("; "))
                    )
                }
            );
        }
        let _ = writeln!(
            h,
            "</tbody></table></div>\n<p class=\"help\">Stopped: {}.</p>",
            esc(&c.stopped)
        );
    }
    h.push_str("</section>\n");
}

fn facts_section(h: &mut String, r: &CapacityResults) {
    let m = &r.meta;
    let p = &r.plan;
    let rates: Vec<String> = p.rates.iter().map(|x| amount(*x)).collect();
    let mut facts: Vec<(&str, String)> = vec![
        (
            "Scenario",
            format!("{} ({})", m.scenario.name, m.scenario.path),
        ),
        ("Started", m.started_at.clone()),
        ("Finished", m.finished_at.clone()),
        ("Seed", m.seed.to_string()),
        (
            "Offered rates",
            format!(
                "{} msg/s (start {}, ×{} per step, max {})",
                rates.join(", "),
                amount(p.start_rate),
                amount(p.step_factor),
                amount(p.max_rate)
            ),
        ),
        (
            "Each step",
            format!(
                "fresh queue, warm-up {} s, window {} s, not drained",
                amount(p.warmup_secs),
                amount(p.step_secs)
            ),
        ),
        (
            "Load",
            format!(
                "{} open-loop producer(s), {} message(s) per push; {} consumer(s) × {} group(s){}",
                p.producers,
                p.producer_batch,
                p.consumers,
                p.consumer_groups,
                if p.prefill_per_partition > 0 {
                    format!(
                        "; prefill {} per partition per step",
                        p.prefill_per_partition
                    )
                } else {
                    String::new()
                }
            ),
        ),
        (
            "Machine",
            format!(
                "{} · {} cores · {}",
                m.machine.hostname, m.machine.cores, m.machine.os
            ),
        ),
        (
            "PostgreSQL",
            format!(
                "{}{}",
                m.postgres.version,
                if m.postgres.embedded {
                    " (throwaway cluster)"
                } else {
                    ""
                }
            ),
        ),
        (
            "Broker",
            if m.broker.external {
                format!("external at {}", m.broker.url.clone().unwrap_or_default())
            } else {
                format!("ackbench-broker {}", m.broker.version)
            },
        ),
        ("Tool", format!("ackbench {}", m.tool_version)),
    ];
    if !m.scenario.overrides.is_empty() {
        facts.push(("Flags", m.scenario.overrides.join(" ")));
    }
    h.push_str("<section id=\"run\">\n<h2>The run</h2>\n<dl class=\"facts\">\n");
    for (k, v) in &facts {
        let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    h.push_str("</dl>\n");
    crate::html::notes_and_scenario(h, &m.notes, &m.scenario.name, &m.scenario.text);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(index: u32, rate: f64, sustained: bool) -> Step {
        Step {
            index,
            offered_rate: rate,
            window_secs: 10.0,
            consumer_groups: 1,
            achieved_push_rate: rate,
            answered_rate: if sustained { rate } else { rate * 0.5 },
            ack_p99_ms: if sustained { 5.0 } else { 120.0 },
            e2e_p99_ms: f64::NAN,
            write_commits_per_sec: rate / 4.0,
            commits_per_sec: f64::NAN,
            sustained,
            failed: if sustained {
                vec![]
            } else {
                vec![Failure {
                    condition: Condition::AckP99,
                    detail: "ack p99 120 ms > 50 ms".into(),
                }]
            },
            ..Default::default()
        }
    }

    fn doc() -> CapacityResults {
        CapacityResults {
            kind: CAPACITY_KIND.into(),
            schema_version: CAPACITY_SCHEMA_VERSION,
            complete: true,
            meta: RunMeta::default(),
            criteria: Criteria::default(),
            plan: Plan::default(),
            cells: vec![
                CapacityCell {
                    name: "registry+fusion".into(),
                    steps: vec![
                        step(1, 1000.0, true),
                        step(2, 2000.0, true),
                        step(3, 4200.0, true),
                        step(4, 8000.0, false),
                    ],
                    sustained_rate: Some(4200.0),
                    knee_rate: Some(8000.0),
                    stopped: "reached --max".into(),
                    ..Default::default()
                },
                CapacityCell {
                    name: "none".into(),
                    steps: vec![step(1, 1900.0, true), step(2, 3800.0, false)],
                    sustained_rate: Some(1900.0),
                    knee_rate: Some(3800.0),
                    stopped: "2 consecutive failing steps".into(),
                    ..Default::default()
                },
            ],
            warnings: vec![],
        }
    }

    #[test]
    fn headline_reads_like_the_issue() {
        assert_eq!(
            headline(&doc()),
            "registry+fusion sustains 4,200 msg/s at p99 <= 50 ms; none sustains 1,900"
        );
        let s = cell_sentence(&doc().cells[1], &Criteria::default());
        assert_eq!(
            s,
            "none sustains 1,900 msg/s at p99 <= 50 ms; at 3,800 msg/s it does not (ack p99 120 ms > 50 ms)."
        );
    }

    #[test]
    fn json_round_trips_with_nan_as_null() {
        let d = doc();
        let text = d.to_json().unwrap();
        assert!(text.contains("\"e2e_p99_ms\": null"));
        let back = CapacityResults::from_json(&text).unwrap();
        assert!(back.cells[0].steps[0].e2e_p99_ms.is_nan());
        assert_eq!(back.to_json().unwrap(), text);
        assert!(CapacityResults::from_json("{\"schema_version\":1}")
            .unwrap_err()
            .contains("not a capacity document"));
    }

    #[test]
    fn renders_three_charts_with_reference_lines_in_grey() {
        let html = render_capacity(&doc()).unwrap();
        for id in ["capacity-achieved", "capacity-p99", "capacity-commits"] {
            assert!(html.contains(&format!("id=\"chart-{id}\"")), "{id}");
        }
        assert!(html.contains(REFERENCE_GREY));
        assert!(!html.contains(&cell_colour_hex(REFERENCE)));
        assert!(html.contains("#0072B2"), "registry+fusion's colour");
    }
}
