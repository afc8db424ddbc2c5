//! A history's change points: the runs of one scenario in the order they were added, split
//! into one series per cell and figure, each series searched by `stats::change_points`, and
//! the findings written as a table, JSON or Markdown.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::record::RunRecord;
use super::stats::{change_points, Settings};

/// One series: the positions (in the scenario's runs) that have the figure, and its values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub gated: bool,
    pub runs: Vec<usize>,
    pub values: Vec<f64>,
}

/// A change point found in a history.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub figure: String,
    pub cell: String,
    /// 0-based position, among the scenario's runs, of the first run after the change.
    pub index: usize,
    pub commit: Option<String>,
    pub before: f64,
    pub after: f64,
    /// `after / before - 1`.
    pub change: f64,
    pub p_value: f64,
}

/// The one scenario to analyse: `wanted`, else the only one the history holds.
pub fn runs_of<'a>(
    runs: &'a [RunRecord],
    wanted: Option<&str>,
) -> Result<(String, Vec<&'a RunRecord>), String> {
    let mut names: Vec<&str> = runs.iter().map(|r| r.scenario.as_str()).collect();
    names.sort();
    names.dedup();
    let name = match (wanted, names.as_slice()) {
        (Some(w), _) if names.contains(&w) => w.to_string(),
        (Some(w), []) => return Err(format!("--scenario {w}: the store holds no runs")),
        (Some(w), _) => {
            return Err(format!(
                "--scenario {w}: the store holds no run of it (it holds: {})",
                names.join(", ")
            ))
        }
        (None, []) => String::new(),
        (None, [only]) => only.to_string(),
        (None, _) => {
            return Err(format!(
                "the store holds runs of several scenarios ({}): pass --scenario NAME",
                names.join(", ")
            ))
        }
    };
    let kept = runs.iter().filter(|r| r.scenario == name).collect();
    Ok((name, kept))
}

/// The series of every (cell, figure) of `runs`, keyed so; `gated` when any run gated it.
pub fn series(runs: &[&RunRecord]) -> BTreeMap<(String, String), Series> {
    let mut all: BTreeMap<(String, String), Series> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        for p in &run.figures {
            let s = all.entry((p.cell.clone(), p.figure.clone())).or_default();
            s.gated |= p.gated;
            s.runs.push(i);
            s.values.push(p.value);
        }
    }
    all
}

/// The change points of the gated series of `runs` (every series with `all_figures`).
pub fn analyze(runs: &[&RunRecord], settings: &Settings, all_figures: bool) -> Vec<Finding> {
    let mut findings = Vec::new();
    for ((cell, figure), s) in series(runs) {
        if !(s.gated || all_figures) {
            continue;
        }
        for c in change_points(&s.values, settings) {
            let index = s.runs[c.index];
            findings.push(Finding {
                figure: figure.clone(),
                cell: cell.clone(),
                index,
                commit: runs[index].commit.clone(),
                before: c.before,
                after: c.after,
                change: c.change,
                p_value: c.p_value,
            });
        }
    }
    findings
}

/// `{"change_points": [{"figure", "cell", "index", "commit", "before", "after", "change",
/// "p_value"}]}`.
pub fn json(findings: &[Finding]) -> Value {
    let points: Vec<Value> = findings
        .iter()
        .map(|f| {
            json!({
                "figure": f.figure,
                "cell": f.cell,
                "index": f.index,
                "commit": f.commit,
                "before": f.before,
                "after": f.after,
                "change": f.change,
                "p_value": f.p_value,
            })
        })
        .collect();
    json!({ "change_points": points })
}

fn commit_words(commit: &Option<String>) -> String {
    commit
        .as_deref()
        .map_or("unknown".into(), |c| c.chars().take(12).collect())
}

/// What was searched, in one line.
pub fn scope(scenario: &str, runs: usize, series: usize, settings: &Settings) -> String {
    format!(
        "{scenario}: {runs} run(s), {series} series searched (p < {}, at least {} runs each side, change of at least {:.0}%)",
        settings.max_p_value,
        settings.min_segment,
        settings.min_change * 100.0
    )
}

/// The findings as a terminal table, after the `scope` line.
pub fn table(findings: &[Finding], scope: &str) -> String {
    let mut out = format!("{scope}\n");
    if findings.is_empty() {
        out.push_str("no change points\n");
        return out;
    }
    out.push_str(&format!(
        "{:<28} {:<22} {:>5} {:<12} {:>10} {:>10} {:>8} {:>7}\n",
        "figure", "cell", "index", "commit", "before", "after", "change", "p"
    ));
    for f in findings {
        out.push_str(&format!(
            "{:<28} {:<22} {:>5} {:<12} {:>10.4} {:>10.4} {:>+7.1}% {:>7.4}\n",
            f.figure,
            f.cell,
            f.index,
            commit_words(&f.commit),
            f.before,
            f.after,
            f.change * 100.0,
            f.p_value
        ));
    }
    out
}

/// The findings as Markdown (for a CI job summary), after the `scope` line.
pub fn markdown(findings: &[Finding], scope: &str) -> String {
    let mut md = format!("### ackbench history\n\n{scope}\n\n");
    if findings.is_empty() {
        md.push_str("No change points.\n");
        return md;
    }
    md.push_str("| figure | cell | first run after | commit | before | after | change | p |\n");
    md.push_str("|---|---|---:|---|---:|---:|---:|---:|\n");
    for f in findings {
        md.push_str(&format!(
            "| {} | {} | {} | `{}` | {:.4} | {:.4} | **{:+.1}%** | {:.4} |\n",
            f.figure,
            f.cell,
            f.index,
            commit_words(&f.commit),
            f.before,
            f.after,
            f.change * 100.0,
            f.p_value
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trend::record::{FigurePoint, RunRecord, RECORD_FORMAT};

    fn run(scenario: &str, commit: &str, points: &[(&str, f64)]) -> RunRecord {
        RunRecord {
            format: RECORD_FORMAT,
            commit: Some(commit.into()),
            added_at: String::new(),
            started_at: String::new(),
            scenario: scenario.into(),
            complete: true,
            figures: points
                .iter()
                .map(|(cell, value)| FigurePoint {
                    cell: cell.to_string(),
                    figure: "pg_exec_ms_per_ack".into(),
                    value: *value,
                    gated: *cell != "headline",
                })
                .collect(),
        }
    }

    #[test]
    fn a_change_point_names_the_run_even_where_earlier_runs_lack_the_cell() {
        // Run 2 left the `registry` cell out: the series has 11 values, its 7th is run 8.
        let levels = [
            1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.02, 1.3, 1.31, 1.29, 1.3, 1.32,
        ];
        let runs: Vec<RunRecord> = levels
            .iter()
            .enumerate()
            .map(|(i, &v)| match i {
                2 => run("s", &format!("c{i}"), &[("headline", v)]),
                _ => run("s", &format!("c{i}"), &[("registry", v), ("headline", v)]),
            })
            .collect();
        let refs: Vec<&RunRecord> = runs.iter().collect();
        let found = analyze(&refs, &Settings::default(), false);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].cell.as_str(), found[0].index), ("registry", 7));
        assert_eq!(found[0].commit.as_deref(), Some("c7"));
        // The headline series changes too, but is searched only when asked.
        assert_eq!(analyze(&refs, &Settings::default(), true).len(), 2);
    }

    #[test]
    fn several_scenarios_need_one_named() {
        let runs = vec![run("a", "x", &[]), run("b", "y", &[]), run("a", "z", &[])];
        let err = runs_of(&runs, None).unwrap_err();
        assert!(err.contains("several scenarios (a, b)"), "{err}");
        let (name, kept) = runs_of(&runs, Some("a")).unwrap();
        assert_eq!((name.as_str(), kept.len()), ("a", 2));
        assert!(runs_of(&runs, Some("c"))
            .unwrap_err()
            .contains("holds no run of it"));
        assert!(runs_of(&[], None).unwrap().1.is_empty());
    }
}
