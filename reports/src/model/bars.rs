//! The bar charts: commits and PostgreSQL time per acked message by procedure, the
//! accelerators' own figures, and a key figure of two runs side by side.

use super::chart::{
    cell_legend, Axis, Bar, BarGroup, ChartBody, ChartSpec, LegendItem, Mark, Run, Scale,
};
use super::tables::{applies, figure_def, summary_figure};
use crate::figures::{Better, FigureDef, Format};
use crate::results::{CellResults, Results, RoundResults};
use crate::stats::Spread;

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

/// One bar per cell in a group, valued by `value`.
fn group(label: &str, cells: &[String], value: impl Fn(&str) -> Option<Spread>) -> BarGroup {
    BarGroup {
        label: label.to_string(),
        bars: cells
            .iter()
            .map(|name| Bar {
                cell: name.clone(),
                run: Run::A,
                value: value(name),
                note: None,
            })
            .collect(),
    }
}

/// A page-wide chart of bar groups by procedure.
fn by_procedure_chart(
    id: &str,
    title: &str,
    how_to_read: &str,
    y: &str,
    value_format: Format,
    groups: Vec<BarGroup>,
    cells: &[String],
) -> ChartSpec {
    ChartSpec {
        id: id.into(),
        title: title.into(),
        how_to_read: how_to_read.into(),
        x: Axis {
            label: "procedure (pg_stat_statements, top level)".into(),
            scale: Scale::Linear,
        },
        y: Axis {
            label: y.into(),
            scale: Scale::Linear,
        },
        value_format,
        body: ChartBody::Bars(groups),
        legend: cell_legend(cells, Mark::Box),
        wide: true,
        y_max: None,
        faults: Vec::new(),
    }
}

/// A procedure's top-level calls per acked message, spread over the cell's rounds.
fn calls_per_ack(r: &Results, cell: &str, procedure: &str) -> Option<Spread> {
    per_round_spread(r.cell(cell)?, |round| {
        let calls = round.figures.statements.get(procedure).map(|s| s.calls)?;
        let acked = round.figures.acked_messages;
        (acked > 0.0).then(|| calls / acked)
    })
}

pub(super) fn commits_by_procedure(r: &Results, cells: &[String]) -> ChartSpec {
    let procs = procedures(r, |c| {
        let statements = &c.summary.figures.statements;
        statements
            .iter()
            .map(|(k, s)| (k.clone(), s.calls.max))
            .collect()
    });
    let mut groups: Vec<BarGroup> = procs
        .iter()
        .map(|p| group(p, cells, |name| calls_per_ack(r, name, p)))
        .collect();
    for (label, key) in [
        ("ack procedure calls", "ack_commits_per_ack"),
        ("all commits", "commits_per_ack"),
    ] {
        groups.push(group(label, cells, |name| {
            r.cell(name)
                .and_then(|c| summary_figure(&c.summary.figures, key))
        }));
    }
    by_procedure_chart(
        "commits-by-procedure",
        "Calls per acked message, by procedure",
        "Top-level calls of each procedure per acked message (pg_stat_statements); bars are medians over rounds, whiskers min–max. A call is not always its own transaction: a joint flush pipelines several procedures' statements into one, so calls can add up to more than the commits. \"ack procedure calls\" adds the ack procedures up (the gate's ack_commits_per_ack); \"all commits\" is every transaction the database committed (xact_commit) per acked message, the one bar that counts commits. What an accelerator saves is its drop against the none bar.",
        "calls per acked message (\"all commits\": commits)",
        Format::Number,
        groups,
        cells,
    )
}

pub(super) fn pg_ms_by_procedure(r: &Results, cells: &[String]) -> ChartSpec {
    let by_procedure = |c: &CellResults| c.summary.figures.pg_exec_ms_per_ack_by_procedure.clone();
    let procs = procedures(r, |c| {
        by_procedure(c)
            .into_iter()
            .map(|(k, s)| (k, s.max))
            .collect()
    });
    let mut groups: Vec<BarGroup> = procs
        .iter()
        .map(|p| {
            group(p, cells, |name| {
                r.cell(name).and_then(|c| by_procedure(c).get(p).copied())
            })
        })
        .collect();
    groups.push(group("total", cells, |name| {
        r.cell(name).map(|c| c.summary.figures.pg_exec_ms_per_ack)
    }));
    by_procedure_chart(
        "pg-ms-by-procedure",
        "PostgreSQL execution time per acked message, by procedure",
        "pg_stat_statements total execution time of each procedure per acked message (medians over rounds, whiskers min–max); it excludes the commit and its fsync, which the commit chart above covers.",
        "PostgreSQL ms per acked message",
        Format::Ms,
        groups,
        cells,
    )
}

/// A cell's bar of a catalogue figure: its summary spread (percentages scaled to 0–100), or a
/// note saying why there is none.
fn figure_bar(r: &Results, run: Run, name: &str, def: &FigureDef) -> Bar {
    let c = r.cell(name);
    let on = c.is_some_and(|c| applies(c, def.needs));
    let k = if def.format == Format::Percent {
        100.0
    } else {
        1.0
    };
    let value = c
        .filter(|_| on)
        .and_then(|c| summary_figure(&c.summary.figures, def.key))
        .filter(|s| s.median.is_finite())
        .map(|s| Spread {
            median: s.median * k,
            min: s.min * k,
            max: s.max * k,
        });
    let note = match (c, on, value) {
        (None, _, _) => Some("not run".to_string()),
        (_, false, _) => Some("off".to_string()),
        (Some(c), true, None) => Some(no_value_reason(c, def.key).0.to_string()),
        _ => None,
    };
    Bar {
        cell: name.to_string(),
        run,
        value,
        note,
    }
}

/// Why a cell has no value of the figure `key` though it applies, from what its rounds show:
/// (the short note drawn where the bar would stand, the reason in words).
pub fn no_value_reason(c: &CellResults, key: &str) -> (&'static str, &'static str) {
    let metric = |name: &str| -> Option<f64> {
        let values: Vec<f64> = c
            .rounds
            .iter()
            .filter_map(|r| r.broker_metrics.get(name).copied())
            .collect();
        (!values.is_empty()).then(|| values.iter().sum())
    };
    if c.rounds.is_empty() {
        return ("not measured", "no round of it finished");
    }
    match key {
        "fusion_rows_per_commit" => match metric("queen_ack_fusion_flushes_total") {
            None => (
                "not reported",
                "the broker's /metrics had no fusion figures",
            ),
            Some(_) if !c.registry => (
                "no flushes",
                "fusion folds the registry's cursor advances; without the registry it has \
                 nothing to fold, so its acks commit as none's do",
            ),
            Some(_) => (
                "no flushes",
                "no ack went through a fusion flush in the window",
            ),
        },
        "registry_hit_rate" => match metric("queen_ack_registry_hits_total") {
            None => (
                "not reported",
                "the broker's /metrics had no registry figures",
            ),
            Some(_) => ("no lookups", "no ack reached the registry in the window"),
        },
        _ => (
            "not measured",
            "the figure has no value in its rounds (see the run's notes)",
        ),
    }
}

/// The reasons behind the bars without a value in `groups`, as a sentence for the caption
/// (`Why no bar: fusion: ...; none: ...`), empty when every bar applies or is off.
fn no_bar_reasons(r: &Results, groups: &[BarGroup], key: &str) -> String {
    let reasons: Vec<String> = groups
        .iter()
        .flat_map(|g| &g.bars)
        .filter(|b| {
            b.value.is_none()
                && b.note
                    .as_deref()
                    .is_some_and(|n| n != "off" && n != "not run")
        })
        .filter_map(|b| {
            let c = r.cell(&b.cell)?;
            Some(format!("{}: {}", b.cell, no_value_reason(c, key).1))
        })
        .collect();
    match reasons.is_empty() {
        true => String::new(),
        false => format!(" Why no bar: {}.", reasons.join("; ")),
    }
}

/// A chart of one bar per cell against the cell axis.
fn cell_bar_chart(id: String, title: String, how_to_read: String, y: String) -> ChartSpec {
    ChartSpec {
        id,
        title,
        how_to_read,
        x: Axis {
            label: "cell".into(),
            scale: Scale::Linear,
        },
        y: Axis {
            label: y,
            scale: Scale::Linear,
        },
        value_format: Format::Number,
        body: ChartBody::Bars(Vec::new()),
        legend: Vec::new(),
        wide: false,
        y_max: None,
        faults: Vec::new(),
    }
}

/// Id, title, how to read and y axis of an accelerator's chart.
fn accelerator_words(key: &str) -> [&'static str; 4] {
    if key == "registry_hit_rate" {
        [
            "registry-hit-rate",
            "Ack registry hit rate",
            "Share of acks the registry resolved to a positional advance (hits / (hits + misses), from the broker's /metrics) instead of the hash path; median over rounds, whiskers min–max. \"off\": the cell runs without the registry.",
            "hit rate (%)",
        ]
    } else {
        [
            "fusion-rows-per-commit",
            "Ack fusion rows per commit",
            "Cursor advances committed per fusion flush transaction (from the broker's /metrics); higher means more acks share one commit. \"off\": the cell runs without fusion.",
            "rows per flush commit",
        ]
    }
}

pub(super) fn accelerator_chart(r: &Results, cells: &[String], key: &'static str) -> ChartSpec {
    let def = figure_def(key).expect("known figure");
    let groups: Vec<BarGroup> = cells
        .iter()
        .map(|name| BarGroup {
            label: name.clone(),
            bars: vec![figure_bar(r, Run::A, name, def)],
        })
        .collect();
    let [id, title, how, y] = accelerator_words(key);
    let how = format!("{how}{}", no_bar_reasons(r, &groups, key));
    ChartSpec {
        body: ChartBody::Bars(groups),
        legend: cell_legend(cells, Mark::Box),
        y_max: (def.format == Format::Percent).then_some(100.0),
        faults: Vec::new(),
        ..cell_bar_chart(id.into(), title.into(), how, y.into())
    }
}

fn better_words(better: Better) -> &'static str {
    match better {
        Better::Lower => " Lower is better.",
        Better::Higher => " Higher is better.",
        Better::Neither => "",
    }
}

fn run_legend(label_a: &str, label_b: &str) -> Vec<LegendItem> {
    let item = |label: String, mark| LegendItem {
        label,
        cell: None,
        mark,
    };
    vec![
        item(format!("A: {label_a}"), Mark::Box),
        item(format!("B: {label_b}"), Mark::LightBox),
    ]
}

pub(super) fn compare_bar_chart(
    a: &Results,
    b: &Results,
    cells: &[String],
    def: &'static FigureDef,
    label_a: &str,
    label_b: &str,
) -> ChartSpec {
    let percent = def.format == Format::Percent;
    let groups = cells
        .iter()
        .map(|n| BarGroup {
            label: n.clone(),
            bars: vec![figure_bar(a, Run::A, n, def), figure_bar(b, Run::B, n, def)],
        })
        .collect();
    let unit = if def.column.is_empty() {
        String::new()
    } else {
        format!(" ({})", def.column)
    };
    let y_unit = if percent {
        " (%)".to_string()
    } else {
        unit.clone()
    };
    let chart = cell_bar_chart(
        format!("compare-{}", def.key.replace('.', "-")),
        format!("{}{unit}: A against B", def.label),
        format!(
            "Per cell, run A (solid bar) beside run B (light bar); medians over rounds, whiskers min–max.{}",
            better_words(def.better)
        ),
        format!("{}{y_unit}", def.label.to_lowercase()),
    );
    ChartSpec {
        value_format: if percent { Format::Number } else { def.format },
        body: ChartBody::Bars(groups),
        legend: run_legend(label_a, label_b),
        y_max: percent.then_some(100.0),
        faults: Vec::new(),
        ..chart
    }
}
