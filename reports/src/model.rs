//! What the report shows, as plain data: header facts, the verdict, tables of formatted figures
//! with their spread over rounds and their ratio to the baseline cell, and the charts as specs
//! (series of points per cell, titles, axis labels and scales). Nothing here draws; `charts`
//! turns a `ChartSpec` into SVG and `html` lays the page out.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use hdrhistogram::Histogram;

use crate::figures::{self, View};
use crate::results::{Audit, CellResults, Figures, Results, RoundResults};
use crate::stats::{decode_histogram, Spread};

/// The cell every other cell is compared with.
pub const BASELINE: &str = "none";

/// The operations whose latency is measured, in the order the report shows them.
pub const OPERATIONS: [&str; 4] = ["push", "pop", "ack", "e2e"];

pub use crate::figures::{Better, FigureDef, Format, Needs};

/// The columns of the summary table, in order (the catalogue's `View::Summary` figures). The
/// table is drawn in two parts (so it fits a screen): the figures before `SUMMARY_SPLIT`, then
/// the accelerators' and the latency with the audit.
pub static SUMMARY_FIGURES: LazyLock<Vec<&'static FigureDef>> =
    LazyLock::new(|| figures::shown_in(View::Summary));

/// Where the summary table's second part begins: its first accelerator figure.
pub static SUMMARY_SPLIT: LazyLock<usize> = LazyLock::new(|| {
    SUMMARY_FIGURES
        .iter()
        .position(|d| d.needs != Needs::Nothing)
        .unwrap_or(SUMMARY_FIGURES.len())
});

/// The figures a comparison draws one chart each for.
pub static KEY_FIGURES: LazyLock<Vec<&'static FigureDef>> =
    LazyLock::new(|| figures::shown_in(View::KeyChart));

/// The definition of a figure by key.
pub fn figure_def(key: &str) -> Option<&'static FigureDef> {
    figures::def(key)
}

// ---------------------------------------------------------------------------------------------
// Formatting

/// Three significant digits below 1000, whole numbers with grouped thousands above.
pub fn format_number(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let mag = v.abs().log10().floor() as i32;
    let decimals = (2 - mag).max(0) as usize;
    let text = format!("{v:.decimals$}");
    let rounded: f64 = text.parse().unwrap_or(v);
    if rounded.abs() >= 1000.0 {
        group_thousands(v.round())
    } else {
        text
    }
}

fn group_thousands(v: f64) -> String {
    let digits = format!("{}", v.abs() as u64);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A figure as the tables write it (no unit: the column header carries it).
pub fn format_value(v: f64, format: Format) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    match format {
        Format::Number | Format::Ms => format_number(v),
        Format::Percent => format!("{}%", format_number(v * 100.0)),
    }
}

/// A ratio to the baseline: `×0.123`.
pub fn format_ratio(r: f64) -> String {
    if r.is_finite() {
        format!("×{}", format_number(r))
    } else {
        "—".into()
    }
}

fn format_range(s: &Spread, format: Format) -> String {
    format!(
        "{}–{}",
        format_value(s.min, format),
        format_value(s.max, format)
    )
}

// ---------------------------------------------------------------------------------------------
// Reading figures

/// A summary figure by the key `Figures::get` understands.
pub fn summary_figure(f: &Figures<Spread>, key: &str) -> Option<Spread> {
    f.get(key)
}

fn applies(cell: &CellResults, needs: Needs) -> bool {
    match needs {
        Needs::Nothing => true,
        Needs::Registry => cell.registry,
        Needs::Fusion => cell.fusion,
    }
}

/// The ratio of `key` between `cell` and `base`, taken round by round (rounds paired by number,
/// so the machine's drift falls on both) and spread over rounds. Falls back to the ratio of the
/// medians when no round pairs up.
pub fn ratio_to(cell: &CellResults, base: &CellResults, key: &str) -> Option<Spread> {
    let mut ratios = Vec::new();
    for r in &cell.rounds {
        let Some(b) = base.rounds.iter().find(|b| b.round == r.round) else {
            continue;
        };
        if let (Some(x), Some(y)) = (r.figures.get(key), b.figures.get(key)) {
            if x.is_finite() && y.is_finite() && y != 0.0 {
                ratios.push(x / y);
            }
        }
    }
    if !ratios.is_empty() {
        return Some(Spread::of(&ratios));
    }
    let x = summary_figure(&cell.summary.figures, key)?.median;
    let y = summary_figure(&base.summary.figures, key)?.median;
    (x.is_finite() && y.is_finite() && y != 0.0).then(|| {
        let r = x / y;
        Spread {
            median: r,
            min: r,
            max: r,
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Tables

/// How a ratio reads against the figure's better direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Better,
    Worse,
    Same,
}

fn tone_of(ratio: &Spread, better: Better, several: bool) -> Tone {
    // With several rounds a change counts only when every round agrees on its direction; a
    // single round needs a 2% move.
    // Changes under 1% are not worth a colour either way.
    let (lo, hi) = if several {
        (
            ratio.max < 1.0 && ratio.median < 0.99,
            ratio.min > 1.0 && ratio.median > 1.01,
        )
    } else {
        (ratio.median < 0.98, ratio.median > 1.02)
    };
    match (better, lo, hi) {
        (Better::Lower, true, _) | (Better::Higher, _, true) => Tone::Better,
        (Better::Lower, _, true) | (Better::Higher, true, _) => Tone::Worse,
        _ => Tone::Same,
    }
}

/// One figure of one cell, formatted.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureCell {
    pub key: &'static str,
    /// None when the figure is missing or does not apply (accelerator off).
    pub value: Option<Spread>,
    /// The median, formatted; `off` or `—` when there is no value.
    pub text: String,
    /// `min–max` over rounds, when there are several.
    pub spread_text: Option<String>,
    /// The ratio to the baseline cell, round by round.
    pub ratio: Option<Spread>,
    pub ratio_text: Option<String>,
    pub ratio_spread_text: Option<String>,
    pub tone: Tone,
}

fn figure_cell(
    def: &'static FigureDef,
    cell: &CellResults,
    base: Option<&CellResults>,
) -> FigureCell {
    let rounds = cell.summary.rounds.max(cell.rounds.len() as u32);
    let on = applies(cell, def.needs);
    let value = on
        .then(|| summary_figure(&cell.summary.figures, def.key))
        .flatten()
        .filter(|s| s.median.is_finite());
    let text = match value {
        Some(s) => format_value(s.median, def.format),
        None if !on => "off".into(),
        None => "—".into(),
    };
    // A range is shown when rounds differ at the precision shown.
    let spread_text = value
        .filter(|s| {
            rounds > 1 && format_value(s.min, def.format) != format_value(s.max, def.format)
        })
        .map(|s| format_range(&s, def.format));
    let ratio = match base {
        Some(b) if b.name != cell.name && value.is_some() && applies(b, def.needs) => {
            ratio_to(cell, b, def.key)
        }
        _ => None,
    };
    let several = rounds > 1;
    FigureCell {
        key: def.key,
        value,
        text,
        spread_text,
        ratio_text: ratio.map(|r| format_ratio(r.median)),
        ratio_spread_text: ratio
            .filter(|r| several && format_number(r.min) != format_number(r.max))
            .map(|r| format!("{}–{}", format_number(r.min), format_number(r.max))),
        tone: ratio
            .map(|r| tone_of(&r, def.better, several))
            .unwrap_or(Tone::Same),
        ratio,
    }
}

/// A row of the summary table.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    pub cell: String,
    pub registry: bool,
    pub fusion: bool,
    pub rounds: u32,
    pub figures: Vec<FigureCell>,
    pub audit: Audit,
    pub audit_text: String,
    pub audit_passed: bool,
}

fn audit_text(a: &Audit) -> String {
    let mut t = if a.passed() {
        "ok, 0 lost".to_string()
    } else {
        format!("FAILED: {} lost", group_thousands(a.lost as f64))
    };
    if a.duplicates > 0 {
        t.push_str(&format!(
            ", {} duplicates",
            group_thousands(a.duplicates as f64)
        ));
    }
    if !a.drained {
        t.push_str(", not drained");
    }
    t
}

/// A row of the "at a glance" table: what an accelerated cell does against the baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct GlanceRow {
    pub cell: String,
    pub commits_per_ack: FigureCell,
    /// e.g. "saves 912 commits per 1,000 acked messages (91% fewer)".
    pub commits_saved_text: String,
    pub ack_p50: FigureCell,
    pub ack_p99: FigureCell,
    pub ack_throughput: FigureCell,
    pub lost: u64,
    pub duplicates: u64,
    pub lost_text: String,
}

/// An audit row: the summed audit of a cell, or one round's.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    pub cell: String,
    /// None for the cell's total over rounds.
    pub round: Option<u32>,
    pub audit: Audit,
    pub verdict: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GateRow {
    pub gate: String,
    pub kind: String,
    pub measured: String,
    pub threshold: String,
    pub passed: bool,
    pub detail: String,
}

// ---------------------------------------------------------------------------------------------
// Header and verdict

/// A run's facts: what ran, when, where.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Header {
    pub scenario_name: String,
    pub scenario_text: String,
    /// (label, value) lines, in the order shown.
    pub facts: Vec<(String, String)>,
    /// PostgreSQL settings as recorded (the loadgen records the ones that matter).
    pub pg_settings: Vec<(String, String)>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Passed,
    Failed,
    /// Interrupted, or a round did not finish: figures are partial.
    Incomplete,
    /// Worth a look, not a failure (a drain that did not finish, request errors).
    Warning,
    /// Neither good nor bad news.
    Info,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub status: Status,
    /// One line: `PASSED: ...`, `FAILED: ...` or `INCOMPLETE: ...`.
    pub headline: String,
    pub items: Vec<(Status, String)>,
}

/// Everything shown about one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunModel {
    /// `A` / `B` in a comparison, empty for a single report.
    pub tag: String,
    /// Short description used in legends and table headers of a comparison.
    pub label: String,
    pub header: Header,
    pub verdict: Verdict,
    pub complete: bool,
    pub glance: Vec<GlanceRow>,
    pub summary: Vec<SummaryRow>,
    pub audit: Vec<AuditRow>,
    pub gates: Vec<GateRow>,
}

// ---------------------------------------------------------------------------------------------
// Comparison

#[derive(Debug, Clone, PartialEq)]
pub struct CompareCell {
    pub a: Option<FigureCell>,
    pub b: Option<FigureCell>,
    /// B's median over A's.
    pub ratio: Option<f64>,
    pub ratio_text: String,
    pub tone: Tone,
    /// The two runs' ranges over rounds do not overlap.
    pub distinct: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CompareRow {
    pub def: &'static FigureDef,
    pub cells: Vec<CompareCell>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub cells: Vec<String>,
    pub rows: Vec<CompareRow>,
    /// Lost messages per cell, A and B.
    pub lost: Vec<(Option<u64>, Option<u64>)>,
}

// ---------------------------------------------------------------------------------------------
// Charts

/// Which run a series belongs to: a single report only has `A`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    A,
    B,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
    /// x is a quantile p in [0, 1), drawn at log10(1 / (1 - p)) and labelled as a percentile.
    Percentile,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// With its unit.
    pub label: String,
    pub scale: Scale,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub cell: String,
    pub run: Run,
    /// Thin and translucent (a single round behind the median line).
    pub faint: bool,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub cell: String,
    pub run: Run,
    /// Median with the min–max whisker.
    pub value: Option<Spread>,
    /// Written where the bar would be when there is no value (`off`, `no data`).
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<Bar>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ChartBody {
    Lines(Vec<Line>),
    /// Grouped bars; the x axis is categorical.
    Bars(Vec<BarGroup>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Line,
    DashedLine,
    FaintLine,
    Box,
    LightBox,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LegendItem {
    pub label: String,
    /// The cell whose colour it shows; None for a neutral (grey) key.
    pub cell: Option<String>,
    pub mark: Mark,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChartSpec {
    /// Stable, used as the HTML id.
    pub id: String,
    pub title: String,
    /// One sentence under the chart.
    pub how_to_read: String,
    pub x: Axis,
    pub y: Axis,
    /// How values are written on bars.
    pub value_format: Format,
    pub body: ChartBody,
    pub legend: Vec<LegendItem>,
    /// Spans the page's width.
    pub wide: bool,
    /// The value axis never goes above this (100 for percentages).
    pub y_max: Option<f64>,
}

impl ChartSpec {
    pub fn has_data(&self) -> bool {
        match &self.body {
            ChartBody::Lines(lines) => lines.iter().any(|l| !l.points.is_empty()),
            ChartBody::Bars(groups) => groups
                .iter()
                .any(|g| g.bars.iter().any(|b| b.value.is_some())),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChartSection {
    pub id: String,
    pub title: String,
    pub charts: Vec<ChartSpec>,
}

// ---------------------------------------------------------------------------------------------
// The model

#[derive(Debug, Clone, PartialEq)]
pub struct ReportModel {
    pub title: String,
    /// One run, or two in a comparison (A the baseline, B the run compared with it).
    pub runs: Vec<RunModel>,
    pub comparison: Option<Comparison>,
    pub chart_sections: Vec<ChartSection>,
    /// Things that could not be shown (unreadable histograms, differing scenarios).
    pub warnings: Vec<String>,
}

impl ReportModel {
    pub fn charts(&self) -> impl Iterator<Item = &ChartSpec> {
        self.chart_sections.iter().flat_map(|s| s.charts.iter())
    }
}

/// The model of a single run's report.
pub fn build(results: &Results) -> ReportModel {
    let mut warnings = Vec::new();
    let run = run_model(results, "", "");
    let cells = cell_names(&[results]);
    let runs = [(Run::A, results)];
    let mut sections = vec![
        ChartSection {
            id: "commits".into(),
            title: "Commits".into(),
            charts: vec![
                series_chart(&runs, &cells, SeriesKind::Commits, true),
                commits_by_procedure(results, &cells),
                pg_ms_by_procedure(results, &cells),
            ],
        },
        ChartSection {
            id: "throughput".into(),
            title: "Throughput".into(),
            charts: vec![series_chart(&runs, &cells, SeriesKind::Acks, true)],
        },
    ];
    let mut latency = Vec::new();
    for op in OPERATIONS {
        latency.push(spectrum_chart(&runs, &cells, op, &mut warnings));
    }
    for op in OPERATIONS {
        latency.push(histogram_chart(results, &cells, op, &mut warnings));
    }
    sections.push(ChartSection {
        id: "latency".into(),
        title: "Latency".into(),
        charts: latency,
    });
    sections.push(ChartSection {
        id: "accelerators".into(),
        title: "Accelerators".into(),
        charts: vec![
            accelerator_chart(results, &cells, "registry_hit_rate"),
            accelerator_chart(results, &cells, "fusion_rows_per_commit"),
        ],
    });
    ReportModel {
        title: format!("ackbench: {}", results.meta.scenario.name),
        runs: vec![run],
        comparison: None,
        chart_sections: sections,
        warnings,
    }
}

/// The model of a comparison: `a` is the baseline, `b` the run compared with it; ratios are B/A.
pub fn build_comparison(a: &Results, b: &Results) -> ReportModel {
    let mut warnings = Vec::new();
    let run_a = run_model(a, "A", &run_label(a));
    let run_b = run_model(b, "B", &run_label(b));
    if a.meta.scenario.hash != b.meta.scenario.hash {
        warnings.push(format!(
            "The runs ran different scenario files ({} {} vs {} {}): figures may not be comparable.",
            a.meta.scenario.name, a.meta.scenario.hash, b.meta.scenario.name, b.meta.scenario.hash
        ));
    }
    if a.meta.machine.cores != b.meta.machine.cores
        || a.meta.postgres.version != b.meta.postgres.version
        || a.meta.postgres.settings != b.meta.postgres.settings
    {
        warnings.push(
            "The runs ran on different machines or PostgreSQL setups (see the headers).".into(),
        );
    }
    let cells = cell_names(&[a, b]);
    let comparison = comparison(a, b, &cells);
    let runs = [(Run::A, a), (Run::B, b)];
    let legend_runs = vec![
        LegendItem {
            label: format!("A: {}", run_a.label),
            cell: None,
            mark: Mark::Line,
        },
        LegendItem {
            label: format!("B: {}", run_b.label),
            cell: None,
            mark: Mark::DashedLine,
        },
    ];
    let mut key_charts: Vec<ChartSpec> = KEY_FIGURES
        .iter()
        .map(|&def| compare_bar_chart(a, b, &cells, def, &run_a.label, &run_b.label))
        .collect();
    key_charts.insert(0, {
        let mut c = series_chart(&runs, &cells, SeriesKind::Commits, false);
        c.legend.extend(legend_runs.clone());
        c
    });
    key_charts.insert(1, {
        let mut c = series_chart(&runs, &cells, SeriesKind::Acks, false);
        c.legend.extend(legend_runs.clone());
        c
    });
    let mut latency = Vec::new();
    for op in OPERATIONS {
        let mut c = spectrum_chart(&runs, &cells, op, &mut warnings);
        c.legend.extend(legend_runs.clone());
        latency.push(c);
    }
    ReportModel {
        title: format!(
            "ackbench comparison: {} (A) vs {} (B)",
            a.meta.scenario.name, b.meta.scenario.name
        ),
        runs: vec![run_a, run_b],
        comparison: Some(comparison),
        chart_sections: vec![
            ChartSection {
                id: "key-figures".into(),
                title: "Key figures, A against B".into(),
                charts: key_charts,
            },
            ChartSection {
                id: "latency".into(),
                title: "Latency spectra, A against B".into(),
                charts: latency,
            },
        ],
        warnings,
    }
}

fn short_rev(rev: &Option<String>) -> String {
    match rev {
        Some(r) => r.chars().take(10).collect(),
        None => "no git revision".into(),
    }
}

fn run_label(r: &Results) -> String {
    format!(
        "{} {} @ {}",
        r.meta.scenario.name,
        r.meta.started_at.get(..16).unwrap_or(&r.meta.started_at),
        short_rev(&r.meta.git_revision)
    )
}

/// Cell names of the runs, in the order they appear (the first run's order first).
fn cell_names(runs: &[&Results]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in runs {
        for c in &r.cells {
            if !names.contains(&c.name) {
                names.push(c.name.clone());
            }
        }
    }
    names
}

/// Seconds as written in a scenario: `30`, `2.5`.
fn secs(v: f64) -> String {
    format!("{}", (v * 1000.0).round() / 1000.0)
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn header(r: &Results) -> Header {
    let m = &r.meta;
    let mut facts = Vec::new();
    let mut push = |k: &str, v: String| facts.push((k.to_string(), v));
    let scenario = if m.scenario.path.is_empty() {
        m.scenario.name.clone()
    } else {
        format!("{} ({})", m.scenario.name, m.scenario.path)
    };
    push("Scenario", scenario);
    let mut hash = m.scenario.hash.clone();
    if !m.scenario.overrides.is_empty() {
        hash.push_str(&format!("; overrides: {}", m.scenario.overrides.join(", ")));
    }
    push("Scenario hash", hash);
    push("Started", m.started_at.clone());
    push("Finished", m.finished_at.clone());
    push(
        "Rounds",
        format!(
            "{} round{} × {} cell{}, {} s measured per cell and round (+{} s warm-up, excluded)",
            m.rounds,
            if m.rounds == 1 { "" } else { "s" },
            r.cells.len(),
            if r.cells.len() == 1 { "" } else { "s" },
            secs(m.duration_secs),
            secs(m.warmup_secs)
        ),
    );
    let order = if m.cell_order.is_empty() {
        r.cells.iter().map(|c| c.name.clone()).collect::<Vec<_>>()
    } else {
        m.cell_order.clone()
    };
    push("Cell order in a round", order.join(", "));
    push(
        "Machine",
        format!(
            "{}: {} cores, {}, {}",
            m.machine.hostname,
            m.machine.cores,
            gib(m.machine.memory_bytes),
            m.machine.os
        ),
    );
    push(
        "PostgreSQL",
        format!(
            "{} ({})",
            m.postgres.version,
            if m.postgres.embedded {
                "throwaway cluster started by ackbench"
            } else {
                "existing server"
            }
        ),
    );
    let broker = if m.broker.external {
        format!(
            "external at {}{}",
            m.broker.url.as_deref().unwrap_or("?"),
            if m.broker.version.is_empty() {
                String::new()
            } else {
                format!(", version {}", m.broker.version)
            }
        )
    } else {
        format!("ackbench-broker {} (started per cell)", m.broker.version)
    };
    push("Broker", broker);
    push(
        "Git revision",
        m.git_revision
            .clone()
            .unwrap_or_else(|| "unknown".to_string()),
    );
    push(
        "Tool",
        format!(
            "ackbench {}, results schema {}, seed {}",
            m.tool_version, r.schema_version, m.seed
        ),
    );
    Header {
        scenario_name: m.scenario.name.clone(),
        scenario_text: m.scenario.text.clone(),
        facts,
        pg_settings: m
            .postgres
            .settings
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        notes: m.notes.clone(),
    }
}

fn verdict(r: &Results) -> Verdict {
    let mut items = Vec::new();
    if !r.complete {
        items.push((
            Status::Incomplete,
            "The run did not complete (interrupted, or a cell could not finish): figures cover only what was measured.".to_string(),
        ));
    }
    for c in &r.cells {
        for round in c.rounds.iter().filter(|x| !x.complete) {
            items.push((
                Status::Incomplete,
                format!("{} round {} did not complete.", c.name, round.round),
            ));
        }
    }
    let lost: u64 = r.cells.iter().map(|c| c.summary.audit.lost).sum();
    let losing: Vec<String> = r
        .cells
        .iter()
        .filter(|c| c.summary.audit.lost > 0)
        .map(|c| {
            format!(
                "{} lost {}",
                c.name,
                group_thousands(c.summary.audit.lost as f64)
            )
        })
        .collect();
    let pushed: u64 = r.cells.iter().map(|c| c.summary.audit.pushed).sum();
    let dups: u64 = r.cells.iter().map(|c| c.summary.audit.duplicates).sum();
    if lost > 0 {
        items.push((
            Status::Failed,
            format!(
                "Audit FAILED: {} message{} lost ({}).",
                group_thousands(lost as f64),
                if lost == 1 { "" } else { "s" },
                losing.join(", ")
            ),
        ));
    } else if r.cells.is_empty() {
        items.push((Status::Incomplete, "No cell was measured.".to_string()));
    } else {
        items.push((
            Status::Passed,
            format!(
                "Audit passed: every one of {} pushed messages was acked, dead-lettered or dropped by policy; {} duplicate deliveries.",
                group_thousands(pushed as f64),
                group_thousands(dups as f64)
            ),
        ));
    }
    for c in &r.cells {
        if !c.summary.audit.drained {
            items.push((
                Status::Warning,
                format!(
                    "{}: the drain did not finish, so the audit may be incomplete.",
                    c.name
                ),
            ));
        }
        let errors = c.summary.figures.errors.median;
        if errors > 0.0 {
            items.push((
                Status::Warning,
                format!(
                    "{}: {} request errors per round (median).",
                    c.name,
                    format_number(errors)
                ),
            ));
        }
    }
    let failed_gates: Vec<&str> = r
        .gates
        .iter()
        .filter(|g| !g.passed)
        .map(|g| g.gate.as_str())
        .collect();
    if r.gates.is_empty() {
        items.push((
            Status::Info,
            "No gates were evaluated (the scenario has none).".to_string(),
        ));
    } else if failed_gates.is_empty() {
        items.push((
            Status::Passed,
            if r.gates.len() == 1 {
                "Gates: the one gate holds.".to_string()
            } else {
                format!("Gates: all {} hold.", r.gates.len())
            },
        ));
    } else {
        items.push((
            Status::Failed,
            format!(
                "Gates FAILED: {} of {} do not hold ({}).",
                failed_gates.len(),
                r.gates.len(),
                failed_gates.join("; ")
            ),
        ));
    }
    let status = if lost > 0 || !failed_gates.is_empty() {
        Status::Failed
    } else if !r.complete || items.iter().any(|(s, _)| *s == Status::Incomplete) {
        Status::Incomplete
    } else {
        Status::Passed
    };
    let gates_short = if r.gates.is_empty() {
        "no gates".to_string()
    } else if failed_gates.is_empty() {
        format!("{}/{} gates hold", r.gates.len(), r.gates.len())
    } else {
        format!("{}/{} gates FAILED", failed_gates.len(), r.gates.len())
    };
    let audit_short = if lost > 0 {
        format!("audit FAILED, {} lost", group_thousands(lost as f64))
    } else {
        "audit passed, 0 lost".to_string()
    };
    let headline = match status {
        Status::Failed if !r.complete => {
            format!("FAILED: {audit_short}; {gates_short}; the run was interrupted")
        }
        Status::Failed => format!("FAILED: {audit_short}; {gates_short}"),
        Status::Incomplete => {
            format!("INCOMPLETE: the run was interrupted; {audit_short}; {gates_short}")
        }
        _ => format!("PASSED: {audit_short}; {gates_short}"),
    };
    Verdict {
        status,
        headline,
        items,
    }
}

fn run_model(r: &Results, tag: &str, label: &str) -> RunModel {
    let base = r.cell(BASELINE);
    let summary: Vec<SummaryRow> = r
        .cells
        .iter()
        .map(|c| SummaryRow {
            cell: c.name.clone(),
            registry: c.registry,
            fusion: c.fusion,
            rounds: c.summary.rounds.max(c.rounds.len() as u32),
            figures: SUMMARY_FIGURES
                .iter()
                .map(|&d| figure_cell(d, c, base))
                .collect(),
            audit: c.summary.audit,
            audit_text: audit_text(&c.summary.audit),
            audit_passed: c.summary.audit.passed(),
        })
        .collect();
    let glance = r
        .cells
        .iter()
        .map(|c| {
            let get = |k: &str| figure_cell(figure_def(k).expect("known figure"), c, base);
            let cpa = get("commits_per_ack");
            let commits_saved_text = match (base, &cpa.value, &cpa.ratio) {
                (Some(b), Some(v), Some(ratio))
                    if b.name != c.name && b.summary.figures.commits_per_ack.median.is_finite() =>
                {
                    let bv = b.summary.figures.commits_per_ack.median;
                    let saved = (bv - v.median) * 1000.0;
                    let pct = (1.0 - ratio.median) * 100.0;
                    if pct.abs() < 1.0 {
                        format!("about as many commits as {} (within 1%)", BASELINE)
                    } else if saved >= 0.0 {
                        format!(
                            "saves {} commits per 1,000 acked messages ({}% fewer than {})",
                            format_number(saved),
                            format_number(pct),
                            BASELINE
                        )
                    } else {
                        format!(
                            "costs {} more commits per 1,000 acked messages ({}% more than {})",
                            format_number(-saved),
                            format_number(-pct),
                            BASELINE
                        )
                    }
                }
                (Some(b), _, _) if b.name == c.name => "the baseline".to_string(),
                _ => "no baseline cell to compare with".to_string(),
            };
            let a = c.summary.audit;
            GlanceRow {
                cell: c.name.clone(),
                commits_per_ack: cpa,
                commits_saved_text,
                ack_p50: get("latency_ms.ack.p50"),
                ack_p99: get("latency_ms.ack.p99"),
                ack_throughput: get("ack_throughput"),
                lost: a.lost,
                duplicates: a.duplicates,
                lost_text: if a.lost == 0 {
                    "0 lost".into()
                } else {
                    format!("{} LOST", group_thousands(a.lost as f64))
                },
            }
        })
        .collect();
    let mut audit = Vec::new();
    for c in &r.cells {
        audit.push(AuditRow {
            cell: c.name.clone(),
            round: None,
            audit: c.summary.audit,
            verdict: audit_text(&c.summary.audit),
        });
    }
    for c in &r.cells {
        for round in &c.rounds {
            audit.push(AuditRow {
                cell: c.name.clone(),
                round: Some(round.round),
                audit: round.audit,
                verdict: audit_text(&round.audit),
            });
        }
    }
    let gates = r
        .gates
        .iter()
        .map(|g| GateRow {
            gate: g.gate.clone(),
            kind: g.kind.clone(),
            measured: if format_number(g.measured.min) == format_number(g.measured.max) {
                format_number(g.measured.median)
            } else {
                format!(
                    "{} ({}–{})",
                    format_number(g.measured.median),
                    format_number(g.measured.min),
                    format_number(g.measured.max)
                )
            },
            threshold: format_number(g.threshold),
            passed: g.passed,
            detail: g.detail.clone(),
        })
        .collect();
    RunModel {
        tag: tag.into(),
        label: label.into(),
        header: header(r),
        verdict: verdict(r),
        complete: r.complete,
        glance,
        summary,
        audit,
        gates,
    }
}

fn comparison(a: &Results, b: &Results, cells: &[String]) -> Comparison {
    let rows = SUMMARY_FIGURES
        .iter()
        .map(|&def| CompareRow {
            def,
            cells: cells
                .iter()
                .map(|name| {
                    let fa = a.cell(name).map(|c| figure_cell(def, c, a.cell(BASELINE)));
                    let fb = b.cell(name).map(|c| figure_cell(def, c, b.cell(BASELINE)));
                    let va = fa.as_ref().and_then(|f| f.value);
                    let vb = fb.as_ref().and_then(|f| f.value);
                    let ratio = match (va, vb) {
                        (Some(x), Some(y)) if x.median != 0.0 => Some(y.median / x.median),
                        _ => None,
                    };
                    let distinct = match (va, vb) {
                        (Some(x), Some(y)) => x.max < y.min || y.max < x.min,
                        _ => false,
                    };
                    let tone = match ratio {
                        Some(r) if distinct => {
                            let s = Spread {
                                median: r,
                                min: r,
                                max: r,
                            };
                            tone_of(&s, def.better, false)
                        }
                        _ => Tone::Same,
                    };
                    CompareCell {
                        a: fa,
                        b: fb,
                        ratio,
                        ratio_text: ratio.map(format_ratio).unwrap_or_else(|| "—".into()),
                        tone,
                        distinct,
                    }
                })
                .collect(),
        })
        .collect();
    let lost = cells
        .iter()
        .map(|n| {
            (
                a.cell(n).map(|c| c.summary.audit.lost),
                b.cell(n).map(|c| c.summary.audit.lost),
            )
        })
        .collect();
    Comparison {
        cells: cells.to_vec(),
        rows,
        lost,
    }
}

// ---------------------------------------------------------------------------------------------
// Chart specs

fn cell_legend(cells: &[String], mark: Mark) -> Vec<LegendItem> {
    cells
        .iter()
        .map(|c| LegendItem {
            label: c.clone(),
            cell: Some(c.clone()),
            mark,
        })
        .collect()
}

#[derive(Clone, Copy)]
enum SeriesKind {
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

fn series_chart(
    runs: &[(Run, &Results)],
    cells: &[String],
    kind: SeriesKind,
    with_rounds: bool,
) -> ChartSpec {
    let mut lines = Vec::new();
    let several_rounds = runs
        .iter()
        .any(|(_, r)| r.cells.iter().any(|c| c.rounds.len() > 1));
    for (run, r) in runs {
        for name in cells {
            let Some(c) = r.cell(name) else { continue };
            let rounds: Vec<Vec<(f64, f64)>> =
                c.rounds.iter().map(|x| round_series(x, kind)).collect();
            if with_rounds && c.rounds.len() > 1 {
                for pts in &rounds {
                    lines.push(Line {
                        cell: name.clone(),
                        run: *run,
                        faint: true,
                        points: downsample_to(pts.clone(), MAX_ROUND_POINTS),
                    });
                }
            }
            lines.push(Line {
                cell: name.clone(),
                run: *run,
                faint: false,
                points: downsample(median_series(&rounds)),
            });
        }
    }
    let mut legend = cell_legend(cells, Mark::Line);
    if with_rounds && several_rounds {
        legend.push(LegendItem {
            label: "thin: single rounds".into(),
            cell: None,
            mark: Mark::FaintLine,
        });
    }
    let rounds_note = match (runs.len() > 1, with_rounds && several_rounds) {
        (true, _) => " Each line is the median over a run's rounds at each second; solid: run A, dashed: run B.",
        (false, true) => " Thick lines: median over rounds at each second; thin lines: each round.",
        (false, false) if several_rounds => " Lines: median over rounds at each second.",
        _ => "",
    };
    let (id, title, y, how) = match kind {
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
    };
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
    }
}

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

fn op_name(op: &str) -> &str {
    match op {
        "e2e" => "end-to-end (push to ack)",
        other => other,
    }
}

fn spectrum_chart(
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
        how_to_read: format!(
            "{} latency at each percentile, from the histograms of all rounds merged (never averaged). Each step right is ten times rarer (90% → 99% → 99.9%); lower is better, and a curve that climbs at the right has a heavy tail.",
            capitalise(op_name(op))
        ),
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

fn histogram_chart(
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
    let mut lines = Vec::new();
    if !hists.is_empty() {
        let lo = hists.iter().map(|(_, h)| h.min().max(1)).min().unwrap_or(1) as f64;
        let hi = hists.iter().map(|(_, h)| h.max().max(1)).max().unwrap_or(1) as f64;
        let b = HISTOGRAM_BUCKETS_PER_DECADE;
        let first = (lo.log10() * b).floor() as i64;
        let last = (hi.log10() * b).floor() as i64;
        for (name, h) in &hists {
            let mut counts = vec![0u64; (last - first + 1) as usize];
            for v in h.iter_recorded() {
                let us = v.value_iterated_to().max(1) as f64;
                let i = ((us.log10() * b).floor() as i64).clamp(first, last) - first;
                counts[i as usize] += v.count_at_value();
            }
            let total = h.len() as f64;
            let mut points = Vec::new();
            for (i, n) in counts.iter().enumerate() {
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
            lines.push(Line {
                cell: name.clone(),
                run: Run::A,
                faint: false,
                points,
            });
        }
    }
    let unit = if op == "e2e" { "messages" } else { "requests" };
    ChartSpec {
        id: format!("histogram-{op}"),
        title: format!("Latency histogram: {}", op_name(op)),
        how_to_read: format!(
            "Share of {unit} in each latency bucket (10 buckets per decade of a log axis), all rounds merged. The peak is the typical latency; mass to its right is the tail."
        ),
        x: Axis {
            label: "latency (ms, log scale)".into(),
            scale: Scale::Log,
        },
        y: Axis {
            label: format!("share of {unit} (%)"),
            scale: Scale::Linear,
        },
        value_format: Format::Number,
        body: ChartBody::Lines(lines),
        legend: cell_legend(cells, Mark::Line),
        wide: false,
        y_max: None,
    }
}

/// Procedures in the order the report shows them: the ack procedures first.
fn procedures(r: &Results, pick: impl Fn(&CellResults) -> Vec<(String, f64)>) -> Vec<String> {
    const ACK_ORDER: [&str; 4] = [
        "log_ack_by_hash_v1",
        "log_ack_at_v1",
        "log_ack_multi_v1",
        "log_ack_v1",
    ];
    let mut names: Vec<String> = Vec::new();
    for c in &r.cells {
        for (name, v) in pick(c) {
            if v > 0.0 && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names.sort_by_key(|n| {
        let known = ACK_ORDER.iter().position(|a| a == n);
        let is_ack = n.contains("ack");
        (known.unwrap_or(ACK_ORDER.len()), !is_ack, n.to_string())
    });
    names
}

fn per_round_spread(c: &CellResults, f: impl Fn(&RoundResults) -> Option<f64>) -> Option<Spread> {
    let vs: Vec<f64> = c
        .rounds
        .iter()
        .filter_map(&f)
        .filter(|v| v.is_finite())
        .collect();
    (!vs.is_empty()).then(|| Spread::of(&vs))
}

fn commits_by_procedure(r: &Results, cells: &[String]) -> ChartSpec {
    let procs = procedures(r, |c| {
        c.summary
            .figures
            .statements
            .iter()
            .map(|(k, s)| (k.clone(), s.calls.max))
            .collect()
    });
    let mut groups = Vec::new();
    for p in &procs {
        groups.push(BarGroup {
            label: p.clone(),
            bars: cells
                .iter()
                .map(|name| {
                    let value = r.cell(name).and_then(|c| {
                        per_round_spread(c, |round| {
                            let calls = round.figures.statements.get(p).map(|s| s.calls)?;
                            let acked = round.figures.acked_messages;
                            (acked > 0.0).then(|| calls / acked)
                        })
                    });
                    Bar {
                        cell: name.clone(),
                        run: Run::A,
                        value,
                        note: None,
                    }
                })
                .collect(),
        });
    }
    for (label, key) in [
        ("ack procedures", "ack_commits_per_ack"),
        ("all commits", "commits_per_ack"),
    ] {
        groups.push(BarGroup {
            label: label.into(),
            bars: cells
                .iter()
                .map(|name| Bar {
                    cell: name.clone(),
                    run: Run::A,
                    value: r
                        .cell(name)
                        .and_then(|c| summary_figure(&c.summary.figures, key)),
                    note: None,
                })
                .collect(),
        });
    }
    ChartSpec {
        id: "commits-by-procedure".into(),
        title: "Commits per acked message, by procedure".into(),
        how_to_read: "Top-level calls of each procedure (each one its own transaction) per acked message; bars are medians over rounds, whiskers min–max. \"ack procedures\" adds the ack procedures up; \"all commits\" is every commit of the database (xact_commit) per acked message. What an accelerator saves is its drop against the none bar.".into(),
        x: Axis {
            label: "procedure (pg_stat_statements, top level)".into(),
            scale: Scale::Linear,
        },
        y: Axis {
            label: "commits per acked message".into(),
            scale: Scale::Linear,
        },
        value_format: Format::Number,
        body: ChartBody::Bars(groups),
        legend: cell_legend(cells, Mark::Box),
        wide: true,
        y_max: None,
    }
}

fn pg_ms_by_procedure(r: &Results, cells: &[String]) -> ChartSpec {
    let procs = procedures(r, |c| {
        c.summary
            .figures
            .pg_exec_ms_per_ack_by_procedure
            .iter()
            .map(|(k, s)| (k.clone(), s.max))
            .collect()
    });
    let mut groups: Vec<BarGroup> = procs
        .iter()
        .map(|p| BarGroup {
            label: p.clone(),
            bars: cells
                .iter()
                .map(|name| Bar {
                    cell: name.clone(),
                    run: Run::A,
                    value: r.cell(name).and_then(|c| {
                        c.summary
                            .figures
                            .pg_exec_ms_per_ack_by_procedure
                            .get(p)
                            .copied()
                    }),
                    note: None,
                })
                .collect(),
        })
        .collect();
    groups.push(BarGroup {
        label: "total".into(),
        bars: cells
            .iter()
            .map(|name| Bar {
                cell: name.clone(),
                run: Run::A,
                value: r.cell(name).map(|c| c.summary.figures.pg_exec_ms_per_ack),
                note: None,
            })
            .collect(),
    });
    ChartSpec {
        id: "pg-ms-by-procedure".into(),
        title: "PostgreSQL execution time per acked message, by procedure".into(),
        how_to_read: "pg_stat_statements total execution time of each procedure per acked message (medians over rounds, whiskers min–max); it excludes the commit and its fsync, which the commit chart above covers.".into(),
        x: Axis {
            label: "procedure (pg_stat_statements, top level)".into(),
            scale: Scale::Linear,
        },
        y: Axis {
            label: "PostgreSQL ms per acked message".into(),
            scale: Scale::Linear,
        },
        value_format: Format::Ms,
        body: ChartBody::Bars(groups),
        legend: cell_legend(cells, Mark::Box),
        wide: true,
        y_max: None,
    }
}

fn accelerator_chart(r: &Results, cells: &[String], key: &'static str) -> ChartSpec {
    let def = figure_def(key).expect("known figure");
    let percent = def.format == Format::Percent;
    let groups = cells
        .iter()
        .map(|name| {
            let c = r.cell(name);
            let on = c.map(|c| applies(c, def.needs)).unwrap_or(false);
            let value = c
                .filter(|_| on)
                .and_then(|c| summary_figure(&c.summary.figures, key))
                .filter(|s| s.median.is_finite())
                .map(|s| {
                    if percent {
                        Spread {
                            median: s.median * 100.0,
                            min: s.min * 100.0,
                            max: s.max * 100.0,
                        }
                    } else {
                        s
                    }
                });
            let note = match (c, on, value) {
                (None, _, _) => Some("not run".to_string()),
                (_, false, _) => Some("off".to_string()),
                (_, true, None) => Some("no data".to_string()),
                _ => None,
            };
            BarGroup {
                label: name.clone(),
                bars: vec![Bar {
                    cell: name.clone(),
                    run: Run::A,
                    value,
                    note,
                }],
            }
        })
        .collect();
    let (id, title, how, y) = if key == "registry_hit_rate" {
        (
            "registry-hit-rate",
            "Ack registry hit rate",
            "Share of acks the registry resolved to a positional advance (hits / (hits + misses), from the broker's /metrics) instead of the hash path; median over rounds, whiskers min–max. \"off\": the cell runs without the registry.",
            "hit rate (%)",
        )
    } else {
        (
            "fusion-rows-per-commit",
            "Ack fusion rows per commit",
            "Cursor advances committed per fusion flush transaction (from the broker's /metrics); higher means more acks share one commit. \"off\": the cell runs without fusion.",
            "rows per flush commit",
        )
    };
    ChartSpec {
        id: id.into(),
        title: title.into(),
        how_to_read: how.into(),
        x: Axis {
            label: "cell".into(),
            scale: Scale::Linear,
        },
        y: Axis {
            label: y.into(),
            scale: Scale::Linear,
        },
        value_format: Format::Number,
        body: ChartBody::Bars(groups),
        legend: cell_legend(cells, Mark::Box),
        wide: false,
        y_max: percent.then_some(100.0),
    }
}

fn compare_bar_chart(
    a: &Results,
    b: &Results,
    cells: &[String],
    def: &'static FigureDef,
    label_a: &str,
    label_b: &str,
) -> ChartSpec {
    let percent = def.format == Format::Percent;
    let bar = |r: &Results, run: Run, name: &str| {
        let c = r.cell(name);
        let on = c.map(|c| applies(c, def.needs)).unwrap_or(false);
        let value = c
            .filter(|_| on)
            .and_then(|c| summary_figure(&c.summary.figures, def.key))
            .filter(|s| s.median.is_finite())
            .map(|s| {
                let k = if percent { 100.0 } else { 1.0 };
                Spread {
                    median: s.median * k,
                    min: s.min * k,
                    max: s.max * k,
                }
            });
        let note = match (c, on) {
            (None, _) => Some("not run".to_string()),
            (_, false) => Some("off".to_string()),
            _ => value.is_none().then(|| "no data".to_string()),
        };
        Bar {
            cell: name.to_string(),
            run,
            value,
            note,
        }
    };
    let groups = cells
        .iter()
        .map(|n| BarGroup {
            label: n.clone(),
            bars: vec![bar(a, Run::A, n), bar(b, Run::B, n)],
        })
        .collect();
    let unit = if def.column.is_empty() {
        String::new()
    } else {
        format!(" ({})", def.column)
    };
    let better = match def.better {
        Better::Lower => " Lower is better.",
        Better::Higher => " Higher is better.",
        Better::Neither => "",
    };
    ChartSpec {
        id: format!("compare-{}", def.key.replace('.', "-")),
        title: format!("{}{unit}: A against B", def.label),
        how_to_read: format!(
            "Per cell, run A (solid bar) beside run B (light bar); medians over rounds, whiskers min–max.{better}"
        ),
        x: Axis {
            label: "cell".into(),
            scale: Scale::Linear,
        },
        y: Axis {
            label: format!(
                "{}{}",
                def.label.to_lowercase(),
                if percent { " (%)".to_string() } else { unit }
            ),
            scale: Scale::Linear,
        },
        value_format: if percent { Format::Number } else { def.format },
        body: ChartBody::Bars(groups),
        legend: vec![
            LegendItem {
                label: format!("A: {label_a}"),
                cell: None,
                mark: Mark::Box,
            },
            LegendItem {
                label: format!("B: {label_b}"),
                cell: None,
                mark: Mark::LightBox,
            },
        ],
        wide: false,
        y_max: percent.then_some(100.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_three_significant_digits() {
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(0.012345), "0.0123");
        assert_eq!(format_number(1.2345), "1.23");
        assert_eq!(format_number(12.345), "12.3");
        assert_eq!(format_number(123.45), "123");
        assert_eq!(format_number(999.7), "1,000");
        assert_eq!(format_number(12345.6), "12,346");
        assert_eq!(format_number(1234567.0), "1,234,567");
        assert_eq!(format_number(-0.5), "-0.500");
        assert_eq!(format_number(f64::NAN), "—");
        assert_eq!(format_value(0.9731, Format::Percent), "97.3%");
        assert_eq!(format_ratio(0.1234), "×0.123");
    }

    #[test]
    fn summary_split_is_at_the_accelerator_figures() {
        assert_eq!(SUMMARY_FIGURES[*SUMMARY_SPLIT].key, "registry_hit_rate");
    }

    #[test]
    fn tone_needs_every_round_to_agree() {
        let s = |median, min, max| Spread { median, min, max };
        assert_eq!(
            tone_of(&s(0.5, 0.4, 0.6), Better::Lower, true),
            Tone::Better
        );
        assert_eq!(tone_of(&s(0.9, 0.8, 1.1), Better::Lower, true), Tone::Same);
        assert_eq!(tone_of(&s(1.5, 1.2, 1.9), Better::Lower, true), Tone::Worse);
        assert_eq!(
            tone_of(&s(1.5, 1.2, 1.9), Better::Higher, true),
            Tone::Better
        );
        assert_eq!(
            tone_of(&s(1.5, 1.2, 1.9), Better::Neither, true),
            Tone::Same
        );
    }

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

    #[test]
    fn long_series_are_downsampled() {
        let pts: Vec<(f64, f64)> = (0..1000).map(|i| (i as f64, 1.0)).collect();
        let d = downsample(pts);
        assert!(d.len() <= MAX_SERIES_POINTS);
        assert!(d.iter().all(|p| p.1 == 1.0));
    }
}
