//! `ackbench history` through the binary: runs kept in a directory and in a PostgreSQL table,
//! change points found where a gated figure steps and nowhere in A/A histories, the history
//! page, and bad input refused with exit 2.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use ackbench_reports::results::{
    summarize, Audit, CellResults, Figures, Results, RoundResults, RunMeta, ScenarioMeta, Summary,
    SCHEMA_VERSION,
};
use serde_json::Value;

use crate::common::temp_dir;

/// A ratio gate on ack commits (registry+fusion / none) and a baseline gate on the registry
/// cell's PostgreSQL time: four gated series (three cells and the ratio's pseudo-cell).
const SCENARIO: &str = r#"
[producers]
count = 1

[[gates]]
name = "fusion cuts ack commits"
kind = "ratio"
figure = "ack_commits_per_ack"
numerator = "registry+fusion"
denominator = "none"
max = 0.9

[[gates]]
name = "registry's PostgreSQL time holds"
kind = "baseline"
figure = "pg_exec_ms_per_ack"
cell = "registry"
tolerance = 0.1
direction = "lower_is_better"
"#;

/// What `ackbench history ...` did: exit code, stdout, stderr.
fn history(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .arg("history")
        .args(args)
        .output()
        .expect("run ackbench");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One run's cell: one round whose figures are `level` times the cell's usual ones, each with
/// its own uniform noise of ±10 %.
fn cell(name: &str, pg_level: f64, rng: &mut fastrand::Rng) -> CellResults {
    let mut noisy = |v: f64| v * (1.0 + 0.10 * (2.0 * rng.f64() - 1.0));
    let commits = if name.contains("fusion") { 0.3 } else { 1.0 };
    let figures = Figures {
        ack_commits_per_ack: noisy(commits),
        pg_exec_ms_per_ack: noisy(0.05 * pg_level),
        ack_throughput: noisy(2000.0),
        acked_messages: 20_000.0,
        ..Default::default()
    };
    let audit = Audit {
        pushed: 10,
        acked: 10,
        drained: true,
        ..Default::default()
    };
    let round = RoundResults {
        round: 1,
        complete: true,
        window_secs: 10.0,
        figures,
        broker_metrics: BTreeMap::new(),
        brokers: Vec::new(),
        audit: audit.clone(),
        series: vec![],
        histograms: BTreeMap::new(),
        faults: Vec::new(),
        wire_variants: BTreeMap::new(),
        minutes: Vec::new(),
    };
    CellResults {
        name: name.into(),
        registry: name.contains("registry"),
        fusion: name.contains("fusion"),
        topology: None,
        external: false,
        summary: Summary {
            rounds: 1,
            figures: summarize(&[&round.figures]),
            audit,
            histograms: BTreeMap::new(),
        },
        rounds: vec![round],
    }
}

/// Run `i` of a history: the registry cell's PostgreSQL time is `pg_level` times its usual.
fn results(i: usize, pg_level: f64, rng: &mut fastrand::Rng) -> Results {
    Results {
        schema_version: SCHEMA_VERSION,
        complete: true,
        meta: RunMeta {
            started_at: format!("2026-12-{:02}T10:00:00Z", i + 1),
            scenario: ScenarioMeta {
                name: "trend".into(),
                path: "trend.toml".into(),
                text: SCENARIO.into(),
                ..Default::default()
            },
            rounds: 1,
            ..Default::default()
        },
        cells: vec![
            cell("registry+fusion", 1.0, rng),
            cell("registry", pg_level, rng),
            cell("none", 1.0, rng),
        ],
        gates: vec![],
    }
}

/// Adds 12 runs (commits c00..c11) to `store`, the registry's PostgreSQL time stepping by
/// `step` from run `step_at` on.
fn add_history(dir: &Path, store: &str, seed: u64, step_at: usize, step: f64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    for i in 0..12 {
        let level = if i >= step_at { step } else { 1.0 };
        let file = dir.join(format!("results-{i}.json"));
        ackbench_reports::results::write(&results(i, level, &mut rng), &file).unwrap();
        let commit = format!("c{i:02}");
        let (code, out, err) = history(&[
            "add",
            file.to_str().unwrap(),
            "--store",
            store,
            "--commit",
            &commit,
        ]);
        assert_eq!(code, 0, "history add {i}: {out}{err}");
    }
}

fn change_points(store: &str) -> Vec<Value> {
    let (code, out, err) = history(&["analyze", "--store", store, "--format", "json"]);
    assert_eq!(code, 0, "history analyze: {out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["change_points"]
        .as_array()
        .expect("change_points")
        .clone()
}

#[test]
fn a_30_percent_step_after_the_7th_run_is_one_change_point_at_the_8th() {
    let dir = temp_dir("trend", "step");
    let store = dir.join("store");
    let store = store.to_str().unwrap();
    add_history(&dir, store, 42, 7, 1.3);
    let found = change_points(store);
    assert_eq!(found.len(), 1, "{found:?}");
    let c = &found[0];
    assert_eq!(c["figure"], "pg_exec_ms_per_ack");
    assert_eq!(c["cell"], "registry");
    assert_eq!(c["index"], 7);
    assert_eq!(c["commit"], "c07");
    let change = c["change"].as_f64().unwrap();
    assert!((change - 0.3).abs() < 0.12, "change {change}");
    assert!(c["after"].as_f64().unwrap() > c["before"].as_f64().unwrap());
    assert!(c["p_value"].as_f64().unwrap() < 0.01, "{c}");
    let keys: Vec<&String> = c.as_object().unwrap().keys().collect();
    assert_eq!(
        keys.len(),
        8,
        "figure, cell, index, commit, before, after, change, p_value: {keys:?}"
    );

    let (code, table, _) = history(&["analyze", "--store", store]);
    assert_eq!(code, 0);
    assert!(
        table.contains("trend: 12 run(s), 4 series searched"),
        "{table}"
    );
    assert!(
        table.contains("registry") && table.contains("c07"),
        "{table}"
    );
    let (code, md, _) = history(&["analyze", "--store", store, "--format", "markdown"]);
    assert_eq!(code, 0);
    assert!(
        md.contains("| pg_exec_ms_per_ack | registry | 7 | `c07` |"),
        "{md}"
    );

    let page = dir.join("history.html");
    let (code, out, err) = history(&["report", "--store", store, "--out", page.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html.matches("<svg").count(),
        3,
        "ack commits per cell, its ratio, pg time"
    );
    let label = format!("registry {:+.0}%", change * 100.0);
    assert!(
        html.contains(&label),
        "the change point is labelled `{label}` on its chart"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn twelve_a_a_runs_have_no_change_point() {
    let dir = temp_dir("trend", "aa");
    let store = dir.join("store");
    let store = store.to_str().unwrap();
    add_history(&dir, store, 42, 12, 1.0);
    assert_eq!(change_points(store), Vec::<Value>::new());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_commit_defaults_to_the_one_the_results_recorded() {
    let dir = temp_dir("trend", "commit");
    let mut r = results(0, 1.0, &mut fastrand::Rng::with_seed(1));
    r.meta.git_revision = Some("abc123".into());
    let file = dir.join("results.json");
    ackbench_reports::results::write(&r, &file).unwrap();
    let store = dir.join("store");
    let (code, out, err) = history(&[
        "add",
        file.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let kept = std::fs::read_to_string(store.join("run-000001.json")).unwrap();
    let kept: Value = serde_json::from_str(&kept).unwrap();
    assert_eq!(kept["commit"], "abc123");
    assert_eq!(kept["scenario"], "trend");
    let gated: Vec<(&str, &str)> = kept["figures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["gated"] == true)
        .map(|p| (p["cell"].as_str().unwrap(), p["figure"].as_str().unwrap()))
        .collect();
    assert_eq!(
        gated,
        vec![
            ("registry+fusion", "ack_commits_per_ack"),
            ("registry", "pg_exec_ms_per_ack"),
            ("none", "ack_commits_per_ack"),
            ("registry+fusion/none", "ack_commits_per_ack"),
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_refused_with_exit_2_and_changes_nothing() {
    let dir = temp_dir("trend", "bad");
    let store = dir.join("store");
    let s = store.to_str().unwrap();
    let missing = dir.join("missing.json");
    let (code, _, err) = history(&["add", missing.to_str().unwrap(), "--store", s]);
    assert_eq!(code, 2);
    assert!(err.contains("missing.json"), "{err}");
    let foreign = dir.join("foreign.json");
    std::fs::write(&foreign, r#"{"hello": 1}"#).unwrap();
    let (code, _, err) = history(&["add", foreign.to_str().unwrap(), "--store", s]);
    assert_eq!(code, 2);
    assert!(
        err.contains("foreign.json") && err.contains("results.json"),
        "{err}"
    );
    let mut interrupted = results(0, 1.0, &mut fastrand::Rng::with_seed(1));
    interrupted.complete = false;
    let file = dir.join("interrupted.json");
    ackbench_reports::results::write(&interrupted, &file).unwrap();
    let (code, _, err) = history(&["add", file.to_str().unwrap(), "--store", s]);
    assert_eq!(code, 2);
    assert!(err.contains("interrupted"), "{err}");
    assert!(!store.exists(), "nothing was kept");
    let (code, _, err) = history(&["analyze", "--store", s]);
    assert_eq!(code, 2);
    assert!(err.contains("no such directory"), "{err}");
    let (code, _, err) = history(&["analyze", "--store", s, "--format", "xml"]);
    assert_eq!(code, 2);
    assert!(err.contains("--format"), "{err}");
    let (code, _, err) = history(&["analyze", "--store", "postgres://postgres@127.0.0.1:1/none"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot connect"), "{err}");
    let (code, _, err) = history(&["analyze", "--store", ""]);
    assert_eq!(code, 2);
    assert!(err.contains("--store is empty"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_postgres_store_keeps_runs_in_a_table_it_creates() {
    let cluster = throwaway_pg::Cluster::start().unwrap();
    let url = cluster.create_database("history").unwrap();
    let dir = temp_dir("trend", "pg");
    add_history(&dir, &url, 42, 7, 1.3);
    let found = change_points(&url);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0]["index"].as_u64(), found[0]["commit"].as_str()),
        (Some(7), Some("c07"))
    );
    let rows = cluster
        .psql(
            "history",
            "SELECT count(*), min(commit), max(commit) FROM ackbench_history",
        )
        .unwrap();
    assert_eq!(rows, "12|c00|c11");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The histories above, analysed in-process over 200 seeds each (the committed tests' seed is
/// not a lucky one): the step is found alone at index 7 in at least 98 %, and at most 5 % of
/// A/A histories raise any change point (four series, each at the test's level of 1 %).
#[test]
fn across_seeds_the_step_is_found_alone_and_a_a_histories_stay_quiet() {
    use ackbench::trend::{analysis, record::RunRecord, stats::Settings};
    let history = |seed: u64, step_at: usize| -> Vec<RunRecord> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..12)
            .map(|i| {
                let level = if i >= step_at { 1.3 } else { 1.0 };
                let r = results(i, level, &mut rng);
                RunRecord::from_results(&r, Some(format!("c{i:02}")), format!("{i}")).unwrap()
            })
            .collect()
    };
    let settings = Settings::default();
    let (mut not_alone, mut false_alarms) = (Vec::new(), Vec::new());
    for seed in 0..200 {
        let runs = history(seed, 7);
        let refs: Vec<&RunRecord> = runs.iter().collect();
        let found: Vec<(String, usize)> = analysis::analyze(&refs, &settings, false)
            .into_iter()
            .map(|f| (f.cell, f.index))
            .collect();
        if found != [("registry".to_string(), 7)] {
            not_alone.push((seed, found));
        }
        let runs = history(seed + 1000, 12);
        let refs: Vec<&RunRecord> = runs.iter().collect();
        let found = analysis::analyze(&refs, &settings, false);
        if !found.is_empty() {
            false_alarms.push(seed);
        }
    }
    // Measured: the step alone at 7 in 199 of 200, a false alarm in 5 of 200 A/A histories
    // of these four gated series (each searched at p < 0.01).
    assert!(
        not_alone.len() <= 4,
        "the step is not found alone at index 7 in {} of 200: {not_alone:?}",
        not_alone.len()
    );
    assert!(
        false_alarms.len() <= 10,
        "{} of 200 A/A histories raise a change point: seeds {false_alarms:?}",
        false_alarms.len()
    );
}
