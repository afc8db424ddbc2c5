//! The history page: per gated figure (every kept figure with `--all-figures`) a chart of its
//! value per cell over the runs in the order they were added, drawn with the report's charts,
//! and each change point marked by a band between the last run before it and the first after,
//! labelled with the cell and the size of the change; the change points' table below.

use std::collections::BTreeMap;

use ackbench_reports::charts::render_svg;
use ackbench_reports::html::esc;
use ackbench_reports::model::{
    Axis, ChartBody, ChartSpec, FaultMark, LegendItem, Line, Mark, Run, Scale,
};

use super::analysis::{self, Finding, Series};
use super::record::RunRecord;
use super::stats::Settings;

/// The whole page.
pub fn page(
    scenario: &str,
    runs: &[&RunRecord],
    settings: &Settings,
    all_figures: bool,
) -> Result<String, String> {
    let findings = analysis::analyze(runs, settings, all_figures);
    let mut charts = String::new();
    for spec in specs(runs, &findings, all_figures) {
        charts.push_str(&format!(
            "<figure id=\"{}\">{}<figcaption>{}</figcaption></figure>\n",
            esc(&spec.id),
            render_svg(&spec)?,
            esc(&spec.how_to_read)
        ));
    }
    let searched = analysis::series(runs)
        .values()
        .filter(|s| s.gated || all_figures)
        .count();
    let scope = analysis::scope(scenario, runs.len(), searched, settings);
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>ackbench history: {name}</title><style>{STYLE}</style></head><body>\
         <h1>ackbench history: {name}</h1><p>{scope}</p>{table}{charts}{commits}</body></html>\n",
        name = esc(scenario),
        scope = esc(&scope),
        table = findings_table(&findings),
        commits = commits_table(runs),
    ))
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222}\
    table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px}\
    td.n{text-align:right}figure{margin:1.5em 0}figcaption{color:#666}svg{max-width:100%;height:auto}";

/// One chart per figure: the cells' lines, and one per ratio gate's figure (its pseudo-cell
/// `numerator/denominator`, whose scale is a ratio's).
fn specs(runs: &[&RunRecord], findings: &[Finding], all_figures: bool) -> Vec<ChartSpec> {
    let mut groups: BTreeMap<(String, bool), Vec<(String, Series)>> = BTreeMap::new();
    for ((cell, figure), s) in analysis::series(runs) {
        if s.gated || all_figures {
            let is_ratio = cell.contains('/');
            groups
                .entry((figure, is_ratio))
                .or_default()
                .push((cell, s));
        }
    }
    groups
        .into_iter()
        .map(|((figure, is_ratio), cells)| spec(&figure, is_ratio, &cells, findings))
        .collect()
}

fn spec(
    figure: &str,
    is_ratio: bool,
    cells: &[(String, Series)],
    findings: &[Finding],
) -> ChartSpec {
    let lines = cells
        .iter()
        .map(|(cell, s)| Line {
            cell: cell.clone(),
            run: Run::A,
            faint: false,
            points: s
                .runs
                .iter()
                .map(|&i| i as f64)
                .zip(s.values.iter().copied())
                .collect(),
        })
        .collect();
    let faults = findings
        .iter()
        .filter(|f| f.figure == figure && cells.iter().any(|(c, _)| *c == f.cell))
        .map(|f| FaultMark {
            from: f.index as f64 - 1.0,
            to: f.index as f64,
            label: format!("{} {:+.0}%", f.cell, f.change * 100.0),
        })
        .collect();
    let unit = ackbench_reports::figures::def(figure).map_or("", |d| d.unit);
    let title = match is_ratio {
        true => format!("{figure}: ratio gate's figure"),
        false => format!("{figure} per cell"),
    };
    ChartSpec {
        id: format!(
            "history-{}{}",
            figure.replace('.', "-"),
            if is_ratio { "-ratio" } else { "" }
        ),
        title,
        how_to_read:
            "Median over each run's rounds, runs in the order they were added; a shaded band \
                      sits between the last run before a change point and the first after it."
                .into(),
        x: Axis {
            label: "run (0 = first added)".into(),
            scale: Scale::Linear,
        },
        y: Axis {
            label: match is_ratio {
                true => "ratio".into(),
                false => unit.to_string(),
            },
            scale: Scale::Linear,
        },
        value_format: ackbench_reports::model::Format::Number,
        body: ChartBody::Lines(lines),
        legend: cells
            .iter()
            .map(|(c, _)| LegendItem {
                label: c.clone(),
                cell: Some(c.clone()),
                mark: Mark::Line,
            })
            .collect(),
        wide: true,
        y_max: None,
        faults,
    }
}

fn findings_table(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return "<p>No change points.</p>".into();
    }
    let mut html = String::from(
        "<table><tr><th>figure</th><th>cell</th><th>first run after</th><th>commit</th>\
         <th>before</th><th>after</th><th>change</th><th>p</th></tr>",
    );
    for f in findings {
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td class=n>{}</td><td><code>{}</code></td><td class=n>{:.4}</td>\
             <td class=n>{:.4}</td><td class=n>{:+.1}%</td><td class=n>{:.4}</td></tr>",
            esc(&f.figure),
            esc(&f.cell),
            f.index,
            esc(f.commit.as_deref().unwrap_or("unknown")),
            f.before,
            f.after,
            f.change * 100.0,
            f.p_value
        ));
    }
    html.push_str("</table>");
    html
}

/// Which commit each run measured, and when it ran.
fn commits_table(runs: &[&RunRecord]) -> String {
    let mut html = String::from(
        "<h2>Runs</h2><table><tr><th>run</th><th>commit</th><th>started</th><th>added</th></tr>",
    );
    for (i, r) in runs.iter().enumerate() {
        html.push_str(&format!(
            "<tr><td class=n>{i}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            esc(r.commit.as_deref().unwrap_or("unknown")),
            esc(&r.started_at),
            esc(&r.added_at)
        ));
    }
    html.push_str("</table>");
    html
}
