//! The HTML pages: one self-contained file each (inline CSS, inline SVG charts, no scripts,
//! nothing fetched). `chrome` is what every page shares; `run` lays out the sections of one
//! run's report and `compare` the A-against-B table of a comparison, both from a `ReportModel`.
//! The capacity report's page lives with its document (`crate::capacity::page`) and uses the same
//! chrome.

pub mod chrome;
mod compare;
mod minutes;
mod run;

use maud::{html, Markup};

use crate::charts::render_svg;
use crate::model::{self, ChartSection, ReportModel, BASELINE};
use crate::results::Results;
use chrome::{document, figure, Page};

pub use chrome::{esc, write_report};

/// The run report's own rules, after the shared ones.
const CSS: &str = r#"
.verdict{border-left:10px solid var(--muted)}
.verdict.passed{border-left-color:var(--good)}.verdict.failed{border-left-color:var(--bad)}.verdict.incomplete{border-left-color:var(--warn)}
.verdict .headline{margin:0 0 6px}
.verdict.passed .headline{color:var(--good)}.verdict.failed .headline{color:var(--bad)}.verdict.incomplete .headline{color:var(--warn)}
.verdict ul{margin:0;padding-left:20px}
li.failed{color:var(--bad);font-weight:600}li.incomplete,li.warning{color:var(--warn)}li.passed{color:var(--good)}li.info{color:var(--muted)}
.runs{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:14px}
.runs>section{margin:0}
th[scope=row]{text-align:left}
.flags{display:block;font-weight:400;color:var(--muted);font-size:11.5px}
.ra{display:block;font-size:12px;color:var(--muted)}
.better{color:var(--good)}.worse{color:var(--bad)}
.ra.better,.ra.worse{font-weight:600}
td.bad,span.bad{color:var(--bad);font-weight:700}td.ok{color:var(--good)}td.warn{color:var(--warn);font-weight:600}
tr.total td,tr.total th{font-weight:600}
table.summary thead th{min-width:96px}
table.summary thead th:first-child{min-width:0}
.ra small{display:block;font-size:10.5px;font-weight:400}
td.wrap{white-space:normal;min-width:220px;max-width:340px}
table.gates td.detail{white-space:normal;min-width:300px}
table.compare th,table.compare td{padding:4px 6px}
table.compare .sp{font-size:10.5px}
"#;

/// The HTML report of one run.
pub fn render_report(results: &Results) -> Result<String, String> {
    render_model(&model::build(results))
}

/// The HTML report comparing two runs: `baseline` is shown as A, `candidate` as B, and every
/// ratio is B/A. (`ackbench report NEW.json --compare OLD.json` is `render_comparison(OLD, NEW)`.)
pub fn render_comparison(baseline: &Results, candidate: &Results) -> Result<String, String> {
    render_model(&model::build_comparison(baseline, candidate))
}

/// Lays out the page of a model.
pub fn render_model(m: &ReportModel) -> Result<String, String> {
    let charts = m
        .chart_sections
        .iter()
        .map(chart_section)
        .collect::<Result<Vec<Markup>, String>>()?;
    let footer = html! {
        "from the results file alone; medians over rounds, min–max beside them, ratios to "
        b { (BASELINE) } " taken round by round."
    };
    Ok(document(Page {
        title: &m.title,
        subtitle: run::subtitle(m),
        css: CSS,
        body: run::body(m, &charts),
        footer,
    }))
}

fn chart_section(section: &ChartSection) -> Result<Markup, String> {
    let mut figures = Vec::new();
    for spec in &section.charts {
        let svg = render_svg(spec)?;
        figures.push(figure(
            &spec.id,
            &spec.title,
            &spec.how_to_read,
            spec.wide,
            &svg,
        ));
    }
    Ok(html! {
        section id=(format!("charts-{}", section.id)) {
            h2 { (section.title) }
            div class="charts" { @for f in &figures { (f) } }
        }
    })
}
