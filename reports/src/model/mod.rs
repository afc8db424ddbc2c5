//! What the report shows, as plain data: header facts, the verdict, tables of formatted figures
//! with their spread over rounds and their ratio to the baseline cell, and the charts as specs
//! (series of points per cell, titles, axis labels and scales). Nothing here draws: `charts`
//! turns a `ChartSpec` into SVG and `page` lays the page out. Which figures appear comes from
//! the catalogue (`crate::figures`).

mod bars;
mod chart;
mod comparison;
mod faults;
mod format;
mod glance;
mod guarantees;
mod latency;
mod minutes;
mod peers;
mod series;
mod tables;
mod topology;
mod verdict;

pub use crate::figures::{Better, FigureDef, Format, Needs};
pub use chart::*;
pub use comparison::{CompareCell, CompareRow, Comparison};
pub use faults::{FaultRow, VacuumRow};
pub use format::{format_count, format_number, format_ratio, format_value};
pub use glance::{GlanceRow, Pace};
pub use guarantees::GuaranteeRow;
pub use latency::spectrum_points;
pub use minutes::{MinuteRow, MINUTE_OPERATIONS};
pub use peers::{peer_tables, PeerRow, PeerTable, PEERS, PEER_FIGURES, PEER_NOTE};
pub use tables::{
    figure_def, ratio_to, summary_figure, AuditRow, FigureCell, GateRow, SummaryRow, Tone,
    KEY_FIGURES, MIN_ROUNDS_TO_COLOUR, SUMMARY_FIGURES, SUMMARY_SPLIT,
};
pub use topology::{
    broker_shares, topology_table, BrokerShare, TopologyRow, TopologyTable, TOPOLOGY_FIGURES,
    TOPOLOGY_NOTE,
};
pub use verdict::{Header, Status, Verdict, HOST_STEAL_WARN};

use bars::{accelerator_chart, commits_by_procedure, compare_bar_chart, pg_ms_by_procedure};
use latency::{histogram_chart, spectrum_chart};
use series::{series_chart, SeriesKind};

use crate::results::Results;

/// The cell every other cell is compared with.
pub const BASELINE: &str = "none";

/// The operations whose latency is measured, in the order the report shows them.
pub const OPERATIONS: [&str; 4] = ["push", "pop", "ack", "e2e"];

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
    /// Why no ratio is coloured, when the cells have too few rounds to tell change from noise.
    pub colour_note: Option<String>,
    pub summary: Vec<SummaryRow>,
    pub audit: Vec<AuditRow>,
    /// "Guarantees": per cell, each guarantee judged over the history (none when unchecked).
    pub guarantees: Vec<GuaranteeRow>,
    pub gates: Vec<GateRow>,
    /// "Against the peers": one table per peer queue that ran (none without peers).
    pub peers: Vec<PeerTable>,
    /// Fault steps injected, with their recovery times (none without `[[faults]]`).
    pub faults: Vec<FaultRow>,
    /// The vacuum state over time around each `hold_xmin` fault (none without one).
    pub vacuum: Vec<VacuumRow>,
    /// "Per minute": the figures of each minute of the long windows (none for short ones).
    pub minutes: Vec<MinuteRow>,
    /// "By broker topology": the cells that ran several brokers or several topologies.
    pub topology: Option<TopologyTable>,
}

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

/// What the reader should know before comparing two runs at all (the command line prints it
/// too).
pub fn comparability_warnings(a: &Results, b: &Results) -> Vec<String> {
    let (ma, mb) = (&a.meta, &b.meta);
    let mut warnings = Vec::new();
    if ma.scenario.hash != mb.scenario.hash {
        warnings.push(format!(
            "The runs ran different scenario files ({} {} vs {} {}): figures may not be comparable.",
            ma.scenario.name, ma.scenario.hash, mb.scenario.name, mb.scenario.hash
        ));
    }
    if ma.machine.cores != mb.machine.cores
        || ma.postgres.version != mb.postgres.version
        || ma.postgres.settings != mb.postgres.settings
    {
        warnings.push(
            "The runs ran on different machines or PostgreSQL setups (see the headers).".into(),
        );
    }
    warnings
}

/// The legend keys telling run A's lines (solid) from run B's (dashed).
fn run_legend(run_a: &RunModel, run_b: &RunModel) -> Vec<LegendItem> {
    let item = |label: String, mark| LegendItem {
        label,
        cell: None,
        mark,
    };
    vec![
        item(format!("A: {}", run_a.label), Mark::Line),
        item(format!("B: {}", run_b.label), Mark::DashedLine),
    ]
}

fn with_legend(mut chart: ChartSpec, extra: &[LegendItem]) -> ChartSpec {
    chart.legend.extend(extra.iter().cloned());
    chart
}

/// The model of a comparison: `a` is the baseline, `b` the run compared with it; ratios are B/A.
pub fn build_comparison(a: &Results, b: &Results) -> ReportModel {
    let mut warnings = comparability_warnings(a, b);
    let run_a = run_model(a, "A", &run_label(a));
    let run_b = run_model(b, "B", &run_label(b));
    let cells = cell_names(&[a, b]);
    let runs = [(Run::A, a), (Run::B, b)];
    let legend = run_legend(&run_a, &run_b);
    let series = |kind| with_legend(series_chart(&runs, &cells, kind, false), &legend);
    let mut key_charts = vec![series(SeriesKind::Commits), series(SeriesKind::Acks)];
    key_charts.extend(
        KEY_FIGURES
            .iter()
            .map(|&def| compare_bar_chart(a, b, &cells, def, &run_a.label, &run_b.label)),
    );
    let latency = OPERATIONS
        .iter()
        .map(|op| with_legend(spectrum_chart(&runs, &cells, op, &mut warnings), &legend))
        .collect();
    ReportModel {
        title: format!(
            "ackbench comparison: {} (A) vs {} (B)",
            a.meta.scenario.name, b.meta.scenario.name
        ),
        comparison: Some(comparison::comparison(a, b, &cells)),
        runs: vec![run_a, run_b],
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

/// Everything shown about one run: `tag` is `A` / `B` in a comparison, empty otherwise.
fn run_model(r: &Results, tag: &str, label: &str) -> RunModel {
    RunModel {
        tag: tag.into(),
        label: label.into(),
        header: verdict::header(r),
        verdict: verdict::verdict(r),
        complete: r.complete,
        glance: glance::glance_rows(r),
        colour_note: tables::colour_note(
            r.cells
                .iter()
                .map(|c| c.summary.rounds.max(c.rounds.len() as u32))
                .min()
                .unwrap_or(0),
        ),
        summary: tables::summary_rows(r),
        audit: tables::audit_rows(r),
        guarantees: guarantees::guarantee_rows(r),
        gates: tables::gate_rows(r),
        peers: peers::peer_tables(r),
        faults: faults::fault_rows(r),
        vacuum: faults::vacuum_rows(r),
        minutes: minutes::minute_rows(r),
        topology: topology::topology_table(r),
    }
}
