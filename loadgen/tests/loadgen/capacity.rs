//! `ackbench capacity`: the step verdict on known numbers, knee and sustained-rate selection and
//! the early stop, the ladder, `capacity.json` round trips, the report on a synthetic result,
//! and one short real run through the binary (throwaway PostgreSQL, the workspace's broker).

use std::path::Path;

use ackbench::scenario::Scenario;

use ackbench::capacity::model::{
    CapacityCell, CapacityResults, Condition, Criteria, Plan, Step, CAPACITY_KIND,
    CAPACITY_SCHEMA_VERSION,
};
use ackbench::capacity::verdict::{
    self, judge, ladder, loadgen_warnings, next_rate, select, Bounds, Next,
};
use ackbench_reports::capacity::{
    all_warnings, cell_sentence, chart_specs, headline, render_capacity,
};
use ackbench_reports::html::esc;
use ackbench_reports::model::ChartBody;
use ackbench_reports::results::RunMeta;

use crate::common::{ackbench, one_real_run_at_a_time, temp_dir, Outcome};

/// A step that holds every condition at `rate` with one consumer group.
fn good(rate: f64) -> Step {
    Step {
        index: 1,
        offered_rate: rate,
        window_secs: 10.0,
        consumer_groups: 1,
        offered_messages: rate * 10.0,
        pushed_messages: rate * 10.0,
        achieved_push_rate: rate,
        acked_rate: rate,
        answered_rate: rate,
        backlog_start: 10.0,
        backlog_end: 12.0,
        backlog_growth: 2.0,
        push_p99_ms: 3.0,
        push_uncorrected_p99_ms: 2.0,
        ack_p50_ms: 2.0,
        ack_p99_ms: 8.0,
        e2e_p50_ms: 5.0,
        e2e_p99_ms: 20.0,
        // Not measured (as in documents before the split): e2e_p99_ms is judged.
        e2e_first_p99_ms: f64::NAN,
        commits_per_sec: rate * 2.0,
        write_commits_per_sec: rate * 1.5,
        loadgen_cpu_cores: 0.2,
        broker_cpu_cores: 0.5,
        schedule_lag_p99_ms: 0.5,
        producer_interval_ms: 40.0,
        errors: 0.0,
        ..Default::default()
    }
}

fn conditions(s: &Step, c: &Criteria) -> Vec<Condition> {
    judge(s, c).into_iter().map(|f| f.condition).collect()
}

#[test]
fn a_step_is_judged_on_each_condition() {
    let c = Criteria::with_slo(50.0);
    assert!(judge(&good(1000.0), &c).is_empty());

    // Achieved: 95% of offered less a batch per producer (each may end the window one batch
    // short: 1,000 msg/s × 40 ms interval / 10 s window = 4 msg/s) is the floor, inclusive.
    let mut s = good(1000.0);
    s.achieved_push_rate = 946.0;
    assert!(judge(&s, &c).is_empty());
    s.achieved_push_rate = 945.0;
    let f = judge(&s, &c);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].condition, Condition::Achieved);
    assert_eq!(
        f[0].detail,
        "pushed 945 msg/s < 95% of 1,000 less a batch per producer (4)"
    );

    // Acks keep up: per consumer group, so two groups need twice the answers.
    let mut s = good(1000.0);
    s.consumer_groups = 2;
    s.answered_rate = 1000.0;
    assert_eq!(conditions(&s, &c), [Condition::Answered]);
    s.answered_rate = 1900.0;
    s.backlog_growth = 0.0;
    assert!(judge(&s, &c).is_empty());

    // Backlog: may grow by 5% of the obligations offered in the window (10 000 here) plus a
    // batch per producer in flight (40).
    let mut s = good(1000.0);
    s.backlog_growth = 540.0;
    assert!(judge(&s, &c).is_empty());
    s.backlog_growth = 541.0;
    let f = judge(&s, &c);
    assert_eq!(f[0].condition, Condition::Backlog);
    assert_eq!(
        f[0].detail,
        "backlog grew by 541 (> 5% of 10,000 offered plus a batch per producer, 40)"
    );
    s.backlog_growth = -4000.0;
    assert!(judge(&s, &c).is_empty(), "a shrinking backlog is fine");

    // Latency: at the target holds, above fails, none measured fails.
    let mut s = good(1000.0);
    s.ack_p99_ms = 50.0;
    assert!(judge(&s, &c).is_empty());
    s.ack_p99_ms = 50.5;
    s.e2e_p99_ms = 180.0;
    let f = judge(&s, &c);
    assert_eq!(
        f.iter().map(|x| x.condition).collect::<Vec<_>>(),
        [Condition::AckP99, Condition::E2eP99]
    );
    assert_eq!(f[0].detail, "ack p99 50.5 ms > 50 ms");
    assert_eq!(f[1].detail, "e2e p99 180 ms > 50 ms");
    s.ack_p99_ms = f64::NAN;
    assert_eq!(judge(&s, &c)[0].detail, "no ack latency measured");

    // End-to-end is judged on messages acked on their first delivery when measured: retries
    // the workload asked for wait out their backoff and do not fail the step.
    let mut s = good(1000.0);
    s.e2e_p99_ms = 1800.0;
    s.e2e_first_p99_ms = 40.0;
    assert!(judge(&s, &c).is_empty());
    s.e2e_first_p99_ms = 60.0;
    assert_eq!(
        judge(&s, &c)[0].detail,
        "first-delivery e2e p99 60 ms > 50 ms"
    );

    // Nothing measured at all fails every condition rather than passing by NaN.
    let mut s = good(1000.0);
    for v in [
        &mut s.achieved_push_rate,
        &mut s.answered_rate,
        &mut s.backlog_growth,
        &mut s.ack_p99_ms,
        &mut s.e2e_p99_ms,
    ] {
        *v = f64::NAN;
    }
    assert_eq!(judge(&s, &c).len(), 5);

    // A tighter target fails what a looser one holds.
    assert_eq!(
        conditions(&good(1000.0), &Criteria::with_slo(10.0)),
        [Condition::E2eP99]
    );
}

#[test]
fn apply_sets_the_verdict_and_the_loadgen_warnings() {
    let c = Criteria::default();
    let mut s = good(500.0);
    verdict::apply(&mut s, &c);
    assert!(s.sustained && s.failed.is_empty() && s.loadgen_warnings.is_empty());

    s.loadgen_cpu_cores = 0.9;
    s.ack_p99_ms = 70.0;
    verdict::apply(&mut s, &c);
    assert!(!s.sustained);
    assert_eq!(s.failed.len(), 1);
    assert_eq!(s.loadgen_warnings.len(), 1);
    assert!(s.loadgen_warnings[0].contains("0.90 cores"), "{s:?}");

    // Schedule lag above 10 ms: late because pushes outlast the interval ...
    let mut s = good(500.0);
    s.schedule_lag_p99_ms = 25.0;
    s.push_uncorrected_p99_ms = 60.0;
    let w = loadgen_warnings(&s, &c);
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("one batch at a time"), "{w:?}");
    // ... or late on its own (CPU, timers).
    s.push_uncorrected_p99_ms = 5.0;
    let w = loadgen_warnings(&s, &c);
    assert!(w[0].contains("fell behind its own schedule"), "{w:?}");
    s.schedule_lag_p99_ms = 9.0;
    assert!(loadgen_warnings(&s, &c).is_empty());
}

fn verdicts(rates_and_verdicts: &[(f64, bool)]) -> Vec<Step> {
    rates_and_verdicts
        .iter()
        .enumerate()
        .map(|(i, (rate, ok))| Step {
            index: i as u32 + 1,
            sustained: *ok,
            ..good(*rate)
        })
        .collect()
}

#[test]
fn the_knee_is_the_first_failing_step_and_capacity_the_step_before() {
    let steps = verdicts(&[
        (100.0, true),
        (200.0, true),
        (400.0, false),
        (800.0, true),
        (1600.0, false),
    ]);
    assert_eq!(select(&steps), (Some(200.0), Some(400.0)));
    let cell = CapacityCell {
        name: "registry".into(),
        steps: steps.clone(),
        sustained_rate: Some(200.0),
        knee_rate: Some(400.0),
        ..Default::default()
    };
    assert_eq!(cell.knee().unwrap().offered_rate, 400.0);
    assert_eq!(cell.capacity_step().unwrap().offered_rate, 200.0);
    assert_eq!(
        cell.held_after_knee().unwrap().offered_rate,
        800.0,
        "a later step that held is noted, not counted"
    );

    assert_eq!(
        select(&verdicts(&[(100.0, false), (200.0, true)])),
        (None, Some(100.0))
    );
    assert_eq!(
        select(&verdicts(&[(100.0, true), (200.0, true)])),
        (Some(200.0), None)
    );
    assert_eq!(select(&[]), (None, None));
}

/// Runs the knee search against a cell that sustains every rate below `knee`; returns the
/// rates tried in order and how the search ended.
fn search(knee: f64, b: &Bounds) -> (Vec<f64>, Next) {
    let mut steps: Vec<Step> = Vec::new();
    loop {
        match next_rate(&steps, b) {
            Next::Try(rate) => steps.push(Step {
                index: steps.len() as u32 + 1,
                sustained: rate < knee,
                ..good(rate)
            }),
            end => return (steps.iter().map(|s| s.offered_rate).collect(), end),
        }
    }
}

#[test]
fn the_search_brackets_the_knee_from_either_side_and_bisects_it() {
    let b = Bounds {
        start: 400.0,
        factor: 1.5,
        min: 20.0,
        max: 400_000.0,
        precision: 0.05,
        first_factor: None,
    };
    for knee in [37.0, 390.0, 401.0, 2345.0, 9000.0] {
        let (tried, end) = search(knee, &b);
        assert_eq!(end, Next::Bracketed, "knee {knee}: {tried:?}");
        assert_bracketed(knee, &tried, 0.05);
        assert!(
            tried.len() <= 16,
            "knee {knee}: {} steps: {tried:?}",
            tried.len()
        );
        assert_eq!(tried[0], 400.0, "the search starts at the start");
    }
    // Above the start it steps up, below it steps down, by the factor.
    assert_eq!(search(2345.0, &b).0[..3], [400.0, 600.0, 900.0]);
    assert_eq!(search(37.0, &b).0[..3], [400.0, 267.0, 178.0]);
    // A knee outside min..max is said so.
    assert_eq!(search(1.0, &b).1, Next::FailedAtFloor);
    assert_eq!(
        *search(1.0, &b).0.last().unwrap(),
        20.0,
        "the floor was tried"
    );
    assert_eq!(search(1e9, &b).1, Next::SustainedAtMax);
    // A coarse precision stops as soon as the factor's bracket is within it.
    let coarse = Bounds {
        precision: 0.6,
        ..b
    };
    assert_eq!(search(500.0, &coarse).0, [400.0, 600.0]);
}

#[test]
fn a_search_coming_down_from_an_overloaded_step_goes_straight_to_what_it_answered() {
    let b = Bounds {
        start: 3000.0,
        factor: 1.5,
        min: 20.0,
        max: 400_000.0,
        precision: 0.05,
        first_factor: None,
    };
    // A cell that answers at most 900 msg/s and holds the latency target below 500.
    let mut steps: Vec<Step> = Vec::new();
    let end = loop {
        match next_rate(&steps, &b) {
            Next::Try(rate) => steps.push(Step {
                index: steps.len() as u32 + 1,
                sustained: rate < 500.0,
                answered_rate: rate.min(900.0),
                ..good(rate)
            }),
            end => break end,
        }
    };
    let tried: Vec<f64> = steps.iter().map(|s| s.offered_rate).collect();
    assert_eq!(end, Next::Bracketed, "{tried:?}");
    assert_eq!(tried[..3], [3000.0, 900.0, 600.0], "{tried:?}");
    assert_bracketed(500.0, &tried, 0.05);
    // Without the cap the way down takes 2 000 and 1 330 as well.
    assert_eq!(search(500.0, &b).0[..4], [3000.0, 2000.0, 1330.0, 887.0]);
    assert!(tried.len() + 2 <= search(500.0, &b).0.len(), "{tried:?}");
}

/// The rates `search` tried bracket `knee`: a held rate below it and a failing one at or above
/// it, within the precision of each other.
fn assert_bracketed(knee: f64, tried: &[f64], precision: f64) {
    let held = tried
        .iter()
        .copied()
        .filter(|r| *r < knee)
        .fold(0.0, f64::max);
    let failed = tried
        .iter()
        .copied()
        .filter(|r| *r >= knee)
        .fold(f64::MAX, f64::min);
    assert!(held > 0.0 && failed < f64::MAX, "knee {knee}: {tried:?}");
    assert!(
        failed / held <= 1.0 + precision + 1e-9,
        "knee {knee}: {held}..{failed} from {tried:?}"
    );
}

#[test]
fn a_search_from_a_known_knee_gallops_and_brackets_an_unmoved_knee_in_three_steps() {
    let from_knee = Bounds {
        start: 1000.0,
        factor: 1.5,
        min: 50.0,
        max: 1_000_000.0,
        precision: 0.05,
        first_factor: Some(verdict::gallop_from_knee(0.05)),
    };
    // The knee where it was (within the precision either way): the start, one move, one
    // bisection.
    for knee in [960.0, 1030.0, 1080.0] {
        let (tried, end) = search(knee, &from_knee);
        assert_eq!(end, Next::Bracketed, "knee {knee}: {tried:?}");
        assert!(tried.len() <= 3, "knee {knee}: {tried:?}");
        assert_bracketed(knee, &tried, 0.05);
    }
    // Moves grow: 1.1, 1.21, 1.46, then the step factor.
    assert_eq!(
        search(5000.0, &from_knee).0[..5],
        [1000.0, 1100.0, 1330.0, 1950.0, 2930.0]
    );
    assert_eq!(search(300.0, &from_knee).0[..3], [1000.0, 909.0, 751.0]);
    // A knee far away costs at most two steps more than moving by the factor from the first.
    let by_factor = Bounds {
        first_factor: None,
        ..from_knee
    };
    for knee in [120.0, 400.0, 1900.0, 2500.0, 7000.0, 40_000.0] {
        let (gallop, end) = search(knee, &from_knee);
        assert_eq!(end, Next::Bracketed, "knee {knee}: {gallop:?}");
        assert_bracketed(knee, &gallop, 0.05);
        let plain = search(knee, &by_factor).0;
        assert!(
            gallop.len() <= plain.len() + 2,
            "knee {knee}: {gallop:?} against {plain:?}"
        );
    }
}

#[test]
fn the_ladder_steps_by_the_factor_and_rounds_to_three_digits() {
    assert_eq!(ladder(50.0, 2.0, 200.0).unwrap(), [50.0, 100.0, 200.0]);
    assert_eq!(
        ladder(100.0, 1.5, 600.0).unwrap(),
        [100.0, 150.0, 225.0, 338.0, 506.0]
    );
    assert_eq!(ladder(0.5, 3.0, 5.0).unwrap(), [0.5, 1.5, 4.5]);
    assert_eq!(ladder(100.0, 2.0, 100.0).unwrap(), [100.0]);
    assert!(ladder(100.0, 1.0, 1000.0).unwrap_err().contains("--step"));
    assert!(ladder(0.0, 2.0, 1000.0).unwrap_err().contains("--start"));
    assert!(ladder(100.0, 2.0, 50.0).unwrap_err().contains("--max"));
    assert!(ladder(1.0, 1.01, 1e9).unwrap_err().contains("steps"));
    assert_eq!(verdict::round3(4213.7), 4210.0);
    assert_eq!(verdict::round3(0.012345), 0.0123);
}

fn synthetic() -> CapacityResults {
    let cell = |name: &str, ladder: &[(f64, bool)], sustained, knee, stopped: &str| {
        let mut steps = verdicts(ladder);
        for s in steps.iter_mut().filter(|s| !s.sustained) {
            s.ack_p99_ms = 180.0;
            verdict::apply(s, &Criteria::default());
        }
        CapacityCell {
            name: name.into(),
            registry: name.contains("registry"),
            fusion: name.contains("fusion"),
            steps,
            remeasured: Vec::new(),
            sustained_rate: sustained,
            knee_rate: knee,
            stopped: stopped.into(),
        }
    };
    let mut r = CapacityResults {
        kind: CAPACITY_KIND.into(),
        schema_version: CAPACITY_SCHEMA_VERSION,
        complete: true,
        meta: RunMeta {
            started_at: "2026-01-01T00:00:00Z".into(),
            seed: 7,
            rounds: 1,
            ..Default::default()
        },
        criteria: Criteria::default(),
        plan: Plan {
            start_rate: 1000.0,
            step_factor: 1.5,
            max_rate: 20000.0,
            min_rate: 50.0,
            precision: 0.05,
            rates: vec![1000.0, 1900.0, 2800.0, 4200.0, 6300.0, 9450.0],
            warmup_secs: 5.0,
            step_secs: 30.0,
            window_growth: 0.0,
            producers: 4,
            producer_batch: 10,
            consumers: 16,
            consumer_groups: 1,
            prefill_per_partition: 0,
            cell_starts: Default::default(),
        },
        cells: vec![
            cell(
                "registry+fusion",
                &[
                    (1000.0, true),
                    (1900.0, true),
                    (2800.0, true),
                    (4200.0, true),
                    (6300.0, false),
                    (9450.0, false),
                ],
                Some(4200.0),
                Some(6300.0),
                "2 failing steps in a row: past the knee",
            ),
            cell(
                "none",
                &[
                    (1000.0, true),
                    (1900.0, true),
                    (2800.0, false),
                    (4200.0, false),
                ],
                Some(1900.0),
                Some(2800.0),
                "2 failing steps in a row: past the knee",
            ),
        ],
        warnings: vec!["a whole-run warning".into()],
    };
    // One step with the load generator at its limit, and one figure unknown (NaN).
    let knee = &mut r.cells[0].steps[4];
    knee.loadgen_cpu_cores = 0.95;
    verdict::apply(knee, &Criteria::default());
    r.cells[1].steps[0].e2e_p50_ms = f64::NAN;
    r
}

#[test]
fn capacity_json_round_trips() {
    let r = synthetic();
    let text = r.to_json().unwrap();
    let back = CapacityResults::from_json(&text).unwrap();
    assert!(
        back.cells[1].steps[0].e2e_p50_ms.is_nan(),
        "NaN is null and back"
    );
    assert_eq!(back.to_json().unwrap(), text);
    assert_eq!(back.cells[0].sustained_rate, Some(4200.0));
    assert_eq!(
        back.cells[0].steps[4].failed[0].condition,
        Condition::AckP99
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["kind"], "ackbench-capacity");
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["criteria"]["slo_p99_ms"], 50.0);
    assert_eq!(
        v["cells"][0]["steps"][4]["failed"][0]["condition"],
        "ack_p99"
    );

    let mut other = v.clone();
    other["schema_version"] = 99.into();
    assert!(CapacityResults::from_json(&other.to_string())
        .unwrap_err()
        .contains("schema_version 99"));
    other.as_object_mut().unwrap().remove("kind");
    assert!(CapacityResults::from_json(&other.to_string())
        .unwrap_err()
        .contains("not a capacity document"));
}

#[test]
fn the_report_has_every_chart_the_knees_and_a_sentence_per_cell() {
    let r = synthetic();
    assert_eq!(
        headline(&r),
        "registry+fusion sustains 4,200 msg/s at p99 <= 50 ms; none sustains 1,900"
    );
    let none = cell_sentence(&r.cells[1], &r.criteria);
    assert_eq!(
        none,
        "none sustains 1,900 msg/s at p99 <= 50 ms; at 2,800 msg/s it does not (ack p99 180 ms > 50 ms)."
    );
    let fused = cell_sentence(&r.cells[0], &r.criteria);
    assert!(fused.contains("near its own limit"), "{fused}");

    let specs = chart_specs(&r);
    let ids: Vec<&str> = specs.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        ["capacity-achieved", "capacity-p99", "capacity-commits"]
    );
    for spec in &specs {
        let ChartBody::Lines(lines) = &spec.body else {
            panic!("line charts")
        };
        for cell in ["registry+fusion", "none"] {
            let of_cell: Vec<_> = lines.iter().filter(|l| l.cell == cell).collect();
            // the line(s), a diamond (capacity) and a cross (knee, two strokes)
            assert!(of_cell.len() >= 4, "{}: {cell}", spec.id);
            assert!(of_cell.iter().any(|l| l.points.len() == 5), "a diamond");
        }
    }

    // The knee of each cell, with what limited it.
    assert_eq!(r.cells[1].limited_by(), [Condition::AckP99]);
    let html = render_capacity(&r).unwrap();
    let knees = &html[html.find("class=\"knees\"").expect("the knees table")..];
    let none_row = &knees[knees.find("data-cell=\"none\"").unwrap()..];
    let none_row = &none_row[..none_row.find("</tr>").unwrap()];
    assert!(
        none_row.contains(">1,900<") && none_row.contains(">2,800<"),
        "{none_row}"
    );
    assert!(none_row.contains("ack p99"), "{none_row}");
    for id in ["capacity-achieved", "capacity-p99", "capacity-commits"] {
        assert!(html.contains(&format!("<figure id=\"chart-{id}\"")), "{id}");
    }
    assert_eq!(html.matches("<svg").count(), 3);
    assert!(html.contains(&esc(&headline(&r))));
    assert!(html.contains(&esc(&none)));
    assert!(html.contains(&esc(&fused)));
    assert!(
        html.contains("#0072B2") && html.contains("#555555"),
        "the cells' colours"
    );
    assert!(html.contains("offered (y = x)"));
    assert!(html.contains("target p99 &lt;= 50 ms"));
    assert_eq!(
        html.matches("class=\"knee\"").count(),
        2,
        "each cell's knee row"
    );
    for w in all_warnings(&r) {
        assert!(html.contains(&esc(&w)), "{w}");
    }
    assert!(html.contains("a whole-run warning"));
    assert!(!html.contains("INTERRUPTED"));
    assert!(!html.contains("<script"));
}

// ---------------------------------------------------------------------------------------------
// Through the binary

/// Small and light: two producers of single messages, four consumers. The gate names a cell
/// the run leaves out, which capacity must not mind (it judges no gates).
const SCENARIO: &str = r#"
name = "cap-test"
[queue]
name = "cap"
partitions = 4
[queue.options]
dedup_window_seconds = 0
[producers]
count = 2
batch = 1
mode = "open"
rate = 50
[consumers]
count = 4
pop_batch = 10
[run]
warmup_secs = 1
duration_secs = 2
rounds = 3
cells = ["registry+fusion", "registry", "none"]
seed = 7
[[gates]]
kind = "ratio"
figure = "ack_commits_per_ack"
numerator = "registry"
denominator = "none"
max = 0.9
"#;

fn capacity(dir: &Path, args: &[&str]) -> Outcome {
    ackbench(dir, "capacity", SCENARIO, args)
}

#[test]
fn bad_flags_are_refused_before_anything_starts() {
    let dir = temp_dir("capacity", "flags");
    let Outcome { code, stderr, .. } = capacity(&dir, &["--step", "1", "--out", "/nonexistent/x"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--step must be a factor above 1"),
        "{stderr}"
    );
    let Outcome { code, stderr, .. } = capacity(&dir, &["--slo-p99-ms", "0"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--slo-p99-ms"), "{stderr}");
    let Outcome { code, stderr, .. } = capacity(&dir, &["--cells", "bogus"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--cells"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_short_real_run_writes_capacity_json_and_the_report() {
    let _real_run = one_real_run_at_a_time();
    let dir = temp_dir("capacity", "run");
    let out_dir = dir.join("out");
    let Outcome {
        code,
        stdout,
        stderr,
    } = capacity(
        &dir,
        &[
            "--out",
            out_dir.to_str().unwrap(),
            "--cells",
            "registry+fusion,none",
            "--start",
            "50",
            "--step",
            "2",
            "--max",
            "200",
            "--min",
            "25",
            "--precision",
            "1",
            "--step-secs",
            "2",
            "--warmup",
            "1",
            "--slo-p99-ms",
            "2000",
        ],
    );
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let text = std::fs::read_to_string(out_dir.join("capacity.json"))
        .unwrap_or_else(|e| panic!("no capacity.json ({e}); stderr:\n{stderr}"));
    let r = CapacityResults::from_json(&text).unwrap();
    assert!(r.complete);
    assert_eq!(r.plan.rates, [50.0, 100.0, 200.0]);
    assert_eq!(r.plan.step_secs, 2.0);
    assert_eq!(r.plan.warmup_secs, 1.0);
    assert_eq!(r.criteria.slo_p99_ms, 2000.0);
    assert_eq!(r.meta.scenario.name, "cap-test");
    assert!(r
        .meta
        .notes
        .iter()
        .any(|n| n.contains("not drained") || n.contains("neither drained")));
    let names: Vec<&str> = r.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["registry+fusion", "none"]);
    for c in &r.cells {
        assert!(!c.steps.is_empty(), "{}", c.name);
        assert_eq!(select(&c.steps), (c.sustained_rate, c.knee_rate));
        // Steps are listed by offered rate, each within the search's bounds, the first run at
        // the start; the search ended with a sustained rate, a knee, or words saying neither.
        let rates: Vec<f64> = c.steps.iter().map(|s| s.offered_rate).collect();
        assert!(rates.windows(2).all(|w| w[0] < w[1]), "{rates:?}");
        for s in &c.steps {
            assert!((25.0..=200.0).contains(&s.offered_rate), "{s:?}");
            assert_eq!(s.sustained, s.failed.is_empty());
            assert!(s.window_secs >= 1.9, "{s:?}");
        }
        assert!(
            c.sustained_rate.is_some() || c.stopped.contains("even the floor"),
            "{}: {}",
            c.name,
            c.stopped
        );
        let first = c.steps.iter().find(|s| s.index == 1).unwrap();
        assert_eq!(first.offered_rate, 50.0);
        assert!(
            first.achieved_push_rate > 30.0 && first.achieved_push_rate < 70.0,
            "{}: {first:?}",
            c.name
        );
        assert!(
            first.answered_rate > 0.0 && first.ack_p99_ms > 0.0,
            "{first:?}"
        );
        assert!(first.e2e_p99_ms.is_finite(), "{first:?}");
        assert!(
            first.write_commits_per_sec > 0.0,
            "PostgreSQL counters were read"
        );
        assert!(first.loadgen_cpu_cores > 0.0 && first.loadgen_cpu_cores.is_finite());
        assert!(
            first.schedule_lag_p99_ms.is_finite(),
            "schedule lag is recorded"
        );
    }
    let html = std::fs::read_to_string(out_dir.join("capacity.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 3);
    for c in &r.cells {
        assert!(
            html.contains(&esc(&cell_sentence(c, &r.criteria))),
            "{}",
            c.name
        );
    }
    assert!(stdout.contains(&headline(&r)), "{stdout}");
    assert!(
        stderr.contains("step 1 @ 50 msg/s"),
        "progress lines:\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_low_step_is_not_failed_on_the_rounding_of_whole_batches() {
    // 4 producers of 10-message batches at 14.6 msg/s: one batch each every 2.74 s, so a 6 s
    // window holds two or three per producer and 13.3 msg/s is rounding, not falling behind.
    let c = Criteria::with_slo(1000.0);
    let mut s = good(14.6);
    s.window_secs = 6.0;
    s.offered_messages = 14.6 * 6.0;
    s.producer_interval_ms = 4.0 * 10.0 / 14.6 * 1000.0;
    s.achieved_push_rate = 13.3;
    s.answered_rate = 13.3;
    assert!(judge(&s, &c).is_empty(), "{:?}", judge(&s, &c));
    // Half the offer is falling behind, whatever the rounding.
    s.achieved_push_rate = 7.0;
    assert_eq!(conditions(&s, &c), [Condition::Achieved]);
}

#[test]
fn a_latency_floor_that_does_not_move_with_the_rate_is_named_with_a_target_it_can_meet() {
    use ackbench::capacity::verdict::{apply, latency_floor};
    let c = Criteria::with_slo(50.0);
    let step = |rate: f64, e2e: f64| {
        let mut s = good(rate);
        s.e2e_p99_ms = e2e;
        apply(&mut s, &c);
        s
    };
    // e2e p99 73-83 ms from 12.5 to 250 msg/s: every step fails on latency alone.
    let steps = [step(12.5, 83.0), step(50.0, 73.0), step(250.0, 80.0)];
    let words = latency_floor("registry+fusion", &steps, 50.0).expect("a floor");
    assert!(words.contains("73–83 ms from 12.5 to 250 msg/s"), "{words}");
    assert!(
        words.contains("--slo-p99-ms 92"),
        "83 × 1.1 rounded up: {words}"
    );

    // Latency that climbs with the rate: the lowest rate's latency is still the floor, said
    // without claiming it stays flat.
    let steps = [step(12.5, 60.0), step(50.0, 120.0), step(250.0, 400.0)];
    let words = latency_floor("x", &steps, 50.0).expect("the lowest rate failed on latency");
    assert!(
        words.contains("at 12.5 msg/s, the lowest rate tried, p99 latency was 60 ms"),
        "{words}"
    );
    assert!(
        words.contains("--slo-p99-ms 75") && !words.contains("stays"),
        "{words}"
    );
    // The lowest rate failed on more than latency: not a latency floor.
    let mut behind = step(12.5, 83.0);
    behind.achieved_push_rate = 1.0;
    apply(&mut behind, &c);
    assert_eq!(latency_floor("x", &[behind, step(50.0, 73.0)], 50.0), None);
    // A sustained step: the search found a rate, nothing to explain.
    let steps = [step(12.5, 20.0), step(50.0, 73.0), step(250.0, 80.0)];
    assert_eq!(latency_floor("x", &steps, 50.0), None);
}

#[test]
fn a_scenario_carries_its_capacity_target_and_a_bad_one_is_refused_by_name() {
    let s = Scenario::parse("[capacity]\nslo_p99_ms = 120\n", "c.toml").unwrap();
    assert_eq!(s.capacity.slo_p99_ms, Some(120.0));
    let err = Scenario::parse("[capacity]\nslo_p99_ms = -1\n", "c.toml").unwrap_err();
    assert_eq!(err.key(), Some("capacity.slo_p99_ms"), "{err}");
    let err = Scenario::parse("[capacity]\nslo = 1\n", "c.toml").unwrap_err();
    assert!(err.to_string().contains("slo"), "{err}");
}

#[test]
fn stalls_past_the_lease_are_named_as_the_scenarios_latency_limit_with_the_rate_it_starts_at() {
    use ackbench::capacity::stall_warning;
    // smoke: 16 partitions, pops of 1, 0.1% of batches held past a 2 s lease: 1% of messages
    // wait behind a stall at 0.01 × 16 / (0.001 × 2) = 80 msg/s.
    let s = Scenario::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/smoke.toml"
    )))
    .unwrap();
    let words = stall_warning(&s, 150.0).expect("smoke stalls");
    assert!(words.contains("above about 80 msg/s"), "{words}");
    assert!(words.contains("p99 nears 2,000 ms"), "{words}");
    // A target above the lease, or no stalls: nothing to say.
    assert_eq!(stall_warning(&s, 2500.0), None);
    let calm = Scenario::parse("[consumers]\nstall = 0\n", "c.toml").unwrap();
    assert_eq!(stall_warning(&calm, 150.0), None);
}
