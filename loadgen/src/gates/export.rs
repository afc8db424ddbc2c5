//! Exports of a run's key figures for tools that chart history elsewhere:
//! github-action-benchmark's `customSmallerIsBetter` JSON, Bencher's metric format (BMF), and a
//! Markdown summary for pull-request comments.

use std::collections::BTreeMap;

use ackbench_reports::results::Results;
use ackbench_reports::stats::Spread;
use serde_json::{json, Value};

use super::Evaluation;

/// The figures exported, with their units. All are smaller-is-better.
const KEY_FIGURES: &[(&str, &str)] = &[
    ("ack_commits_per_ack", "commits/ack"),
    ("commits_per_ack", "commits/ack"),
    ("wal_syncs_per_ack", "syncs/ack"),
    ("wal_bytes_per_ack", "bytes/ack"),
    ("pg_exec_ms_per_ack", "ms/ack"),
    ("latency_ms.ack.p50", "ms"),
    ("latency_ms.ack.p99", "ms"),
    ("latency_ms.e2e.p99", "ms"),
];

fn spreads(results: &Results) -> Vec<(String, &'static str, &'static str, Spread)> {
    let mut out = Vec::new();
    for c in &results.cells {
        for (figure, unit) in KEY_FIGURES {
            let values: Vec<f64> = c
                .rounds
                .iter()
                .filter_map(|r| r.figures.get(figure))
                .filter(|v| v.is_finite())
                .collect();
            if !values.is_empty() {
                out.push((c.name.clone(), *figure, *unit, Spread::of(&values)));
            }
        }
    }
    out
}

/// github-action-benchmark, tool `customSmallerIsBetter`.
pub fn github_action_benchmark(results: &Results) -> Value {
    let scenario = &results.meta.scenario.name;
    Value::Array(
        spreads(results)
            .into_iter()
            .map(|(cell, figure, unit, s)| {
                json!({
                    "name": format!("{scenario} / {cell} / {figure}"),
                    "unit": unit,
                    "value": s.median,
                    "range": format!("{}..{}", s.min, s.max),
                    "extra": format!("median of {} round(s)", results.meta.rounds),
                })
            })
            .collect(),
    )
}

/// Bencher Metric Format: benchmark -> measure -> value with lower and upper bounds.
pub fn bencher(results: &Results) -> Value {
    let mut map: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for (cell, figure, _, s) in spreads(results) {
        let bench = format!("{}/{cell}", results.meta.scenario.name);
        let measure = figure.replace('.', "_");
        map.entry(bench).or_default().insert(
            measure,
            json!({"value": s.median, "lower_value": s.min, "upper_value": s.max}),
        );
    }
    serde_json::to_value(map).expect("JSON")
}

/// A Markdown summary: key figures per cell and the gate verdicts.
pub fn markdown(results: &Results, eval: &Evaluation) -> String {
    let mut md = format!("### ackbench: {}\n\n", results.meta.scenario.name);
    md.push_str("| cell | ack/s | ack commits/ack | commits/ack | pg ms/ack | ack p99 ms | audit |\n|---|---:|---:|---:|---:|---:|---|\n");
    for c in &results.cells {
        let f = &c.summary.figures;
        let p99 = f
            .latency_ms
            .get("ack")
            .map(|p| p.p99.median)
            .unwrap_or(f64::NAN);
        let audit = if c.summary.audit.passed() {
            "ok".to_string()
        } else {
            format!("**{} lost**", c.summary.audit.lost)
        };
        md.push_str(&format!(
            "| {} | {:.0} | {:.3} | {:.3} | {:.4} | {:.2} | {audit} |\n",
            c.name,
            f.ack_throughput.median,
            f.ack_commits_per_ack.median,
            f.commits_per_ack.median,
            f.pg_exec_ms_per_ack.median,
            p99
        ));
    }
    md.push_str("\n| gate | measured (median [min, max]) | verdict |\n|---|---|---|\n");
    for v in &eval.verdicts {
        let m = &v.measured;
        md.push_str(&format!(
            "| {} | {:.4} [{:.4}, {:.4}] | {} |\n",
            v.gate,
            m.median,
            m.min,
            m.max,
            if v.passed { "held" } else { "**FAILED**" }
        ));
    }
    for b in &eval.broken {
        md.push_str(&format!("| {b} | | **BROKEN** |\n"));
    }
    md
}
