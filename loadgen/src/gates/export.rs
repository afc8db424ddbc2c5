//! Exports of a run's key figures for tools that chart history elsewhere:
//! github-action-benchmark's `customSmallerIsBetter` JSON, Bencher's metric format (BMF), and a
//! Markdown summary for pull-request comments.

use std::collections::BTreeMap;

use ackbench_reports::figures::{self, FigureDef, View};
use ackbench_reports::model::format_value;
use ackbench_reports::results::{GateOutcome, Results};
use ackbench_reports::stats::Spread;
use serde_json::{json, Value};

use super::Evaluation;

/// Each exported figure (the catalogue's `View::Export` ones) of each cell, spread over rounds.
fn spreads(results: &Results) -> Vec<(String, &'static FigureDef, Spread)> {
    let exported = figures::shown_in(View::Export);
    let mut out = Vec::new();
    for c in &results.cells {
        for &def in &exported {
            let values: Vec<f64> = c
                .rounds
                .iter()
                .filter_map(|r| r.figures.get(def.key))
                .filter(|v| v.is_finite())
                .collect();
            if !values.is_empty() {
                out.push((c.name.clone(), def, Spread::of(&values)));
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
            .map(|(cell, def, s)| {
                json!({
                    "name": format!("{scenario} / {cell} / {}", def.key),
                    "unit": def.unit,
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
    for (cell, def, s) in spreads(results) {
        let bench = format!("{}/{cell}", results.meta.scenario.name);
        let measure = def.key.replace('.', "_");
        map.entry(bench).or_default().insert(
            measure,
            json!({"value": s.median, "lower_value": s.min, "upper_value": s.max}),
        );
    }
    serde_json::to_value(map).expect("JSON")
}

/// A Markdown summary: the catalogue's `View::Markdown` figures per cell, the audit and the
/// gate verdicts with their intervals.
pub fn markdown(results: &Results, eval: &Evaluation) -> String {
    let mut md = format!("### ackbench: {}\n\n", results.meta.scenario.name);
    md.push_str(&markdown_figures(results));
    md.push_str(
        "\n| gate | measured (median [min, max]) | estimate [95% interval] | bound | verdict |\n|---|---|---|---|---|\n",
    );
    for v in &eval.verdicts {
        let m = &v.measured;
        md.push_str(&format!(
            "| {} | {:.4} [{:.4}, {:.4}] | {} | {} | {} |\n",
            v.gate,
            m.median,
            m.min,
            m.max,
            v.interval.map_or_else(|| "—".to_string(), |i| i.words()),
            format_value(v.threshold, ackbench_reports::figures::Format::Number),
            match v.outcome() {
                GateOutcome::Failed => "**FAILED**".to_string(),
                GateOutcome::Inconclusive => "*inconclusive*".to_string(),
                GateOutcome::NotJudged => format!("not judged: {}", v.detail),
                GateOutcome::Held => "held".to_string(),
            }
        ));
    }
    if let Some(line) = eval.inconclusive_line(false) {
        md.push_str(&format!("\n{line}\n"));
    }
    md
}

/// The verdicts as JSON, for tools: `{"exit_code", "gates": [{"gate", "kind", "outcome",
/// "measured": {median, min, max}, "interval": {estimate, low, high, level, rounds} | null,
/// "threshold", "detail"}]}` (NaN as `null`).
pub fn json(eval: &Evaluation, strict: bool) -> Value {
    let number = |x: f64| match x.is_finite() {
        true => json!(x),
        false => Value::Null,
    };
    let gates: Vec<Value> = eval
        .verdicts
        .iter()
        .map(|v| {
            json!({
                "gate": v.gate,
                "kind": v.kind,
                "outcome": v.outcome().word().to_lowercase(),
                "measured": {
                    "median": number(v.measured.median),
                    "min": number(v.measured.min),
                    "max": number(v.measured.max),
                },
                "interval": v.interval.map(|i| json!({
                    "estimate": number(i.estimate),
                    "low": number(i.low),
                    "high": number(i.high),
                    "level": i.level,
                    "rounds": i.rounds,
                })),
                "threshold": number(v.threshold),
                "detail": v.detail,
            })
        })
        .collect();
    json!({"exit_code": eval.exit_code_strict(strict), "gates": gates})
}

/// The table of figures: one row per cell, medians over rounds.
fn markdown_figures(results: &Results) -> String {
    let columns = figures::shown_in(View::Markdown);
    let mut md = String::from("| cell |");
    for d in &columns {
        md.push_str(&format!(" {} ({}) |", d.label, d.unit));
    }
    md.push_str(" audit |\n|---|");
    md.push_str(&"---:|".repeat(columns.len()));
    md.push_str("---|\n");
    for c in &results.cells {
        md.push_str(&format!("| {} |", c.name));
        for d in &columns {
            let median = c.summary.figures.get(d.key).map_or(f64::NAN, |s| s.median);
            md.push_str(&format!(" {} |", format_value(median, d.format)));
        }
        let a = &c.summary.audit;
        let audit = if !a.passed() {
            format!("**{} lost**", a.lost)
        } else if a.undrained > 0 {
            format!("**{} undrained**", a.undrained)
        } else if a.still_queued > 0 {
            format!("ok, {} still queued", a.still_queued)
        } else {
            "ok".to_string()
        };
        md.push_str(&format!(" {audit} |\n"));
    }
    md
}
