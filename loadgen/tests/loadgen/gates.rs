//! Gates on known results: exit codes, intervals and the three outcomes, audit failures,
//! baselines.

use std::collections::BTreeMap;

use ackbench::gates::{self, baseline::Baseline};
use ackbench::scenario::Scenario;
use ackbench_reports::results::{
    summarize, Audit, CellResults, Figures, GateOutcome, Results, RoundResults, RunMeta,
    SecondSample, SCHEMA_VERSION,
};

fn round(n: u32, ack_commits_per_ack: f64, pg_ms: f64) -> RoundResults {
    RoundResults {
        round: n,
        complete: true,
        window_secs: 10.0,
        figures: Figures {
            ack_commits_per_ack,
            pg_exec_ms_per_ack: pg_ms,
            acked_messages: 1000.0,
            ..Default::default()
        },
        broker_metrics: BTreeMap::new(),
        brokers: Vec::new(),
        audit: Audit {
            pushed: 10,
            acked: 10,
            drained: true,
            ..Default::default()
        },
        series: vec![],
        histograms: BTreeMap::new(),
        faults: Vec::new(),
        wire_variants: BTreeMap::new(),
        minutes: Vec::new(),
    }
}

fn cell(name: &str, rounds: Vec<RoundResults>) -> CellResults {
    let refs: Vec<&Figures<f64>> = rounds.iter().map(|r| &r.figures).collect();
    let summary = ackbench_reports::results::Summary {
        rounds: rounds.len() as u32,
        figures: summarize(&refs),
        audit: Audit {
            pushed: 10,
            acked: 10,
            drained: true,
            ..Default::default()
        },
        histograms: BTreeMap::new(),
    };
    CellResults {
        name: name.into(),
        registry: name.contains("registry"),
        fusion: name.contains("fusion"),
        topology: None,
        external: false,
        rounds,
        summary,
    }
}

fn results(cells: Vec<CellResults>) -> Results {
    Results {
        schema_version: SCHEMA_VERSION,
        complete: true,
        meta: RunMeta::default(),
        cells,
        gates: vec![],
    }
}

const GATES: &str = r#"
[[gates]]
name = "fusion cuts ack commits"
kind = "ratio"
figure = "ack_commits_per_ack"
numerator = "registry+fusion"
denominator = "none"
max = 0.5
"#;

fn scenario(extra: &str) -> Scenario {
    Scenario::parse(
        &format!("[producers]\ncount = 1\n{GATES}{extra}"),
        "gates.toml",
    )
    .expect("valid scenario")
}

#[test]
fn ratio_gate_holds_when_every_round_holds() {
    let r = results(vec![
        cell(
            "registry+fusion",
            vec![round(1, 0.2, 0.1), round(2, 0.3, 0.1), round(3, 0.25, 0.1)],
        ),
        cell(
            "none",
            vec![round(1, 1.0, 1.0), round(2, 1.0, 1.0), round(3, 1.0, 1.0)],
        ),
    ]);
    let eval = gates::evaluate(&r, &scenario("").gates, None);
    assert_eq!(eval.exit_code(), 0, "{}", gates::table(&eval));
    let v = eval.verdicts.iter().find(|v| v.kind == "ratio").unwrap();
    assert_eq!(
        (v.measured.min, v.measured.median, v.measured.max),
        (0.2, 0.25, 0.3)
    );
}

#[test]
fn a_round_beyond_the_bound_makes_the_interval_straddle_it_so_the_gate_is_inconclusive() {
    // The contract changed: the worst round no longer decides alone; the 95 % interval over
    // the rounds does. Rounds 0.2, 0.6, 0.2 against <= 0.5 straddle the bound.
    let r = results(vec![
        cell(
            "registry+fusion",
            vec![round(1, 0.2, 0.1), round(2, 0.6, 0.1), round(3, 0.2, 0.1)],
        ),
        cell(
            "none",
            vec![round(1, 1.0, 1.0), round(2, 1.0, 1.0), round(3, 1.0, 1.0)],
        ),
    ]);
    let eval = gates::evaluate(&r, &scenario("").gates, None);
    let v = eval.verdicts.iter().find(|v| v.kind == "ratio").unwrap();
    assert_eq!(
        v.outcome(),
        GateOutcome::Inconclusive,
        "{}",
        gates::table(&eval)
    );
    let i = v.interval.expect("three rounds give an interval");
    assert!(i.low < 0.5 && i.high > 0.5, "{i:?}");
    assert_eq!(eval.exit_code(), 0, "inconclusive passes unless strict");
    assert_eq!(eval.exit_code_strict(true), 1, "--strict fails it");
    assert!(gates::table(&eval).contains("inconclusive"));
    assert!(eval.inconclusive_line(false).unwrap().contains("--strict"));
}

#[test]
fn every_round_beyond_the_bound_fails_the_gate() {
    let r = results(vec![
        cell(
            "registry+fusion",
            vec![round(1, 0.8, 0.1), round(2, 0.85, 0.1), round(3, 0.82, 0.1)],
        ),
        cell(
            "none",
            vec![round(1, 1.0, 1.0), round(2, 1.0, 1.0), round(3, 1.0, 1.0)],
        ),
    ]);
    let eval = gates::evaluate(&r, &scenario("").gates, None);
    let v = eval.verdicts.iter().find(|v| v.kind == "ratio").unwrap();
    assert_eq!(v.outcome(), GateOutcome::Failed, "{}", gates::table(&eval));
    assert!(v.interval.unwrap().low > 0.5);
    assert_eq!(eval.exit_code(), 1);
}

/// A round whose window has per-second samples of the gated figure: `secs` seconds of
/// `acked` messages with `ack_commits` commits, the latter jittering by `jitter` either way.
fn round_with_seconds(n: u32, per_ack: f64, secs: usize, jitter: f64) -> RoundResults {
    let mut r = round(n, per_ack, 0.1);
    r.series = (0..secs)
        .map(|i| SecondSample {
            t: i as f64 + 1.0,
            acked: 1000.0,
            ack_commits: 1000.0 * per_ack * (1.0 + if i % 2 == 0 { jitter } else { -jitter }),
            ..Default::default()
        })
        .collect();
    r
}

#[test]
fn one_round_takes_its_interval_from_the_per_second_samples() {
    let run = |jitter: f64| {
        results(vec![
            cell(
                "registry+fusion",
                vec![round_with_seconds(1, 0.45, 10, jitter)],
            ),
            cell("none", vec![round_with_seconds(1, 1.0, 10, jitter)]),
        ])
    };
    let quiet = gates::evaluate(&run(0.02), &scenario("").gates, None);
    let v = quiet.verdicts.iter().find(|v| v.kind == "ratio").unwrap();
    assert_eq!(v.outcome(), GateOutcome::Held, "{}", gates::table(&quiet));
    let i = v
        .interval
        .expect("per-second samples give one round an interval");
    assert_eq!(i.rounds, 1);
    assert!(i.low < 0.45 && 0.45 < i.high && i.high < 0.5, "{i:?}");
    let noisy = gates::evaluate(&run(0.3), &scenario("").gates, None);
    let v = noisy.verdicts.iter().find(|v| v.kind == "ratio").unwrap();
    assert_eq!(
        v.outcome(),
        GateOutcome::Inconclusive,
        "{}",
        gates::table(&noisy)
    );

    // One round without per-second samples has no interval: its value decides, as before.
    let bare = results(vec![
        cell("registry+fusion", vec![round(1, 0.45, 0.1)]),
        cell("none", vec![round(1, 1.0, 1.0)]),
    ]);
    let eval = gates::evaluate(&bare, &scenario("").gates, None);
    let v = eval.verdicts.iter().find(|v| v.kind == "ratio").unwrap();
    assert!(v.interval.is_none() && v.outcome() == GateOutcome::Held);
    assert!(v.detail.contains("no interval"), "{}", v.detail);
}

#[test]
fn verdicts_with_intervals_round_trip_and_older_verdicts_still_read() {
    let r = results(vec![
        cell(
            "registry+fusion",
            vec![round(1, 0.2, 0.1), round(2, 0.6, 0.1), round(3, 0.2, 0.1)],
        ),
        cell(
            "none",
            vec![round(1, 1.0, 1.0), round(2, 1.0, 1.0), round(3, 1.0, 1.0)],
        ),
    ]);
    let eval = gates::evaluate(&r, &scenario("").gates, None);
    let v = eval.verdicts.iter().find(|v| v.kind == "ratio").unwrap();
    let text = serde_json::to_string(v).unwrap();
    let back: ackbench_reports::results::GateVerdict = serde_json::from_str(&text).unwrap();
    assert_eq!(back.outcome(), GateOutcome::Inconclusive);
    assert_eq!(back.interval, v.interval);
    let old = r#"{"gate":"g","kind":"ratio","measured":{"median":0.4,"min":0.3,"max":0.5},
        "threshold":0.5,"passed":true,"detail":"d"}"#;
    let old: ackbench_reports::results::GateVerdict = serde_json::from_str(old).unwrap();
    assert!(old.interval.is_none() && old.outcome() == GateOutcome::Held);
    let json = gates::export::json(&eval, true);
    let gate = &json["gates"].as_array().unwrap()[2];
    assert_eq!(gate["outcome"], "inconclusive", "{json}");
    assert!(gate["interval"]["low"].as_f64().unwrap() < 0.5);
    assert_eq!(json["exit_code"], 1, "strict");
    let md = gates::export::markdown(&r, &eval);
    assert!(
        md.contains("*inconclusive*") && md.contains("95% interval"),
        "{md}"
    );
}

#[test]
fn a_lost_message_fails_as_a_gate() {
    let mut r = results(vec![
        cell("registry+fusion", vec![round(1, 0.2, 0.1)]),
        cell("none", vec![round(1, 1.0, 1.0)]),
    ]);
    r.cells[1].summary.audit.lost = 3;
    let eval = gates::evaluate(&r, &scenario("").gates, None);
    assert_eq!(eval.exit_code(), 1);
    let audit = eval
        .verdicts
        .iter()
        .find(|v| v.gate.contains("audit of none"))
        .unwrap();
    assert!(!audit.passed);
    assert!(audit.detail.contains("lost 3"));
}

#[test]
fn a_missing_cell_or_figure_is_broken_not_failed() {
    let r = results(vec![cell("none", vec![round(1, 1.0, 1.0)])]);
    let eval = gates::evaluate(&r, &scenario("").gates, None);
    assert_eq!(eval.exit_code(), 2);
    assert!(
        eval.broken[0].contains("registry+fusion"),
        "{:?}",
        eval.broken
    );
    let r = results(vec![
        cell("registry+fusion", vec![round(1, f64::NAN, 0.1)]),
        cell("none", vec![round(1, 1.0, 1.0)]),
    ]);
    assert_eq!(
        gates::evaluate(&r, &scenario("").gates, None).exit_code(),
        2
    );
}

#[test]
fn baseline_gates_use_the_stored_medians_and_failed_runs_are_refused() {
    let baseline_gate = "\n[[gates]]\nkind = \"baseline\"\nfigure = \"ack_commits_per_ack\"\ncell = \"none\"\ntolerance = 0.1\n";
    let base_run = results(vec![
        cell("registry+fusion", vec![round(1, 0.2, 0.1)]),
        cell("none", vec![round(1, 1.0, 1.0)]),
    ]);
    let b = Baseline::from_results(&base_run).unwrap();
    assert_eq!(b.figure("none", "ack_commits_per_ack"), Some(1.0));
    let s = scenario(baseline_gate);
    let same = gates::evaluate(&base_run, &s.gates, Some(&b));
    assert_eq!(same.exit_code(), 0, "{}", gates::table(&same));
    let worse = results(vec![
        cell("registry+fusion", vec![round(1, 0.2, 0.1)]),
        cell("none", vec![round(1, 1.2, 1.0)]),
    ]);
    assert_eq!(
        gates::evaluate(&worse, &s.gates, Some(&b)).exit_code(),
        1,
        "+20% beyond a 10% tolerance"
    );
    assert_eq!(
        gates::evaluate(&worse, &s.gates, None).exit_code(),
        2,
        "no baseline given"
    );
    let mut lost = base_run.clone();
    lost.cells[0].summary.audit.lost = 1;
    assert!(Baseline::from_results(&lost).unwrap_err().contains("lost"));
    let mut partial = base_run;
    partial.complete = false;
    assert!(Baseline::from_results(&partial).is_err());
}

#[test]
fn against_an_external_broker_ratio_gates_do_not_apply_and_baselines_judge_its_cell() {
    let baseline_gate = "\n[[gates]]\nkind = \"baseline\"\nfigure = \"ack_commits_per_ack\"\ncell = \"registry+fusion\"\ntolerance = 0.1\n";
    let s = scenario(baseline_gate);
    let mut run = results(vec![cell("queen-rows-1.0.0", vec![round(1, 0.08, 0.4)])]);
    run.meta.broker.external = true;
    let b = Baseline::from_results(&run).unwrap();
    let eval = gates::evaluate(&run, &s.gates, Some(&b));
    assert_eq!(eval.exit_code(), 0, "{}", gates::table(&eval));
    let ratio = eval.verdicts.iter().find(|v| v.kind == "ratio").unwrap();
    assert!(ratio.not_applicable && ratio.passed, "{ratio:?}");
    assert!(gates::table(&eval).contains("not applicable"));
    let base = eval.verdicts.iter().find(|v| v.kind == "baseline").unwrap();
    assert!(!base.not_applicable && base.detail.contains("queen-rows-1.0.0"));
    let mut worse = run.clone();
    worse.cells[0].rounds[0].figures.ack_commits_per_ack = 0.12;
    worse.cells[0].summary = cell("queen-rows-1.0.0", worse.cells[0].rounds.clone()).summary;
    assert_eq!(
        gates::evaluate(&worse, &s.gates, Some(&b)).exit_code(),
        1,
        "a deployment worse than its own baseline fails"
    );
}

#[test]
fn a_gate_on_a_cell_the_run_left_out_is_not_judged_and_recorded_so() {
    // `--cells none`: the run planned only `none`, so the ratio gate is not judged, recorded
    // with why, and the run's exit code stays 0.
    let mut r = results(vec![cell("none", vec![round(1, 1.0, 1.0)])]);
    r.meta.cell_order = vec!["none".into()];
    let eval = gates::evaluate(&r, &scenario("").gates, None);
    assert_eq!(eval.exit_code(), 0, "{}", gates::table(&eval));
    let gate = eval
        .verdicts
        .iter()
        .find(|v| v.gate == "fusion cuts ack commits");
    let gate = gate.expect("the gate is recorded");
    assert_eq!(gate.outcome(), GateOutcome::NotJudged);
    assert!(gate.detail.contains("registry+fusion"), "{}", gate.detail);
    assert!(gates::table(&eval).contains("not judged"));

    // Planned but never run (an interrupted run): not judged, and the gate command exits 2.
    r.meta.cell_order = vec!["registry+fusion".into(), "none".into()];
    let eval = gates::evaluate(&r, &scenario("").gates, None);
    assert_eq!(eval.exit_code(), 2);
    let gate = eval
        .verdicts
        .iter()
        .find(|v| v.gate == "fusion cuts ack commits");
    assert_eq!(gate.map(|g| g.outcome()), Some(GateOutcome::NotJudged));

    // A cell planned once per topology is not left out: its gate is broken as before.
    r.meta.cell_order = vec!["registry+fusion@1".into(), "none@1".into()];
    let eval = gates::evaluate(&r, &scenario("").gates, None);
    assert_eq!(eval.exit_code(), 2);
}
