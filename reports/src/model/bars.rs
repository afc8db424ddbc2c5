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

pub(super) fn commits_by_procedure(r: &Results, cells: &[String]) -> ChartSpec {
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

pub(super) fn pg_ms_by_procedure(r: &Results, cells: &[String]) -> ChartSpec {
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

pub(super) fn accelerator_chart(r: &Results, cells: &[String], key: &'static str) -> ChartSpec {
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

pub(super) fn compare_bar_chart(
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
