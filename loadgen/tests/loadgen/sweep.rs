//! `ackbench sweep`, `ackbench plan` and `ackbench remodel` through the binary: bad input
//! refused before anything starts, and one tiny real sweep (synchronous_commit on and off, one
//! cell, short steps, one repeat) that writes a knee for every point, whose WAL syncs show the
//! setting took effect, whose second point starts where the first found its knee, that `plan`
//! answers from, and that `remodel` writes again unchanged.

use std::path::Path;
use std::process::Command;

use ackbench_reports::capacity::CapacityResults;
use ackbench_reports::sweep::{PointCell, SweepResults};

use crate::common::{ackbench, one_real_run_at_a_time, temp_dir, Outcome};

const SCENARIO: &str = r#"
name = "sweep-test"
[queue]
name = "sw"
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
cells = ["none"]
seed = 11
[sweep]
"pg.synchronous_commit" = ["on", "off"]
"#;

fn plan(args: &[&str]) -> Outcome {
    let out = Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .arg("plan")
        .args(args)
        .output()
        .unwrap();
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn bad_sweeps_and_questions_are_refused_naming_what_is_wrong() {
    let dir = temp_dir("sweep", "refused");
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let bad_key = SCENARIO.replace("\"pg.synchronous_commit\"", "\"consumers.batchsize\"");
    let Outcome { code, stderr, .. } = ackbench(&dir, "sweep", &bad_key, &["--out", out]);
    assert_eq!(code, 2);
    assert!(stderr.contains("consumers.batchsize"), "{stderr}");
    let Outcome { code, stderr, .. } = ackbench(
        &dir,
        "sweep",
        SCENARIO,
        &["--out", out, "--sweep", "queue.partitions=0"],
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--sweep: sweep key `queue.partitions` = 0"),
        "{stderr}"
    );
    let args = [
        "--out",
        out,
        "--database-url",
        "postgres://nobody@127.0.0.1:1/x",
    ];
    let Outcome { code, stderr, .. } = ackbench(&dir, "sweep", SCENARIO, &args);
    assert_eq!(code, 2);
    assert!(stderr.contains("--allow-pg-settings"), "{stderr}");
    let Outcome { code, stderr, .. } =
        ackbench(&dir, "sweep", SCENARIO, &["--out", out, "--repeats", "0"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--repeats"), "{stderr}");
    let args = ["--out", out, "--window-growth", "5"];
    let Outcome { code, stderr, .. } = ackbench(&dir, "sweep", SCENARIO, &args);
    assert_eq!(code, 2);
    assert!(stderr.contains("--window-growth must be"), "{stderr}");
    assert!(!Path::new(out).join("sweep.json").exists());

    let missing = dir.join("none.json");
    let Outcome { code, stderr, .. } = plan(&[
        missing.to_str().unwrap(),
        "--target-rate",
        "10",
        "--slo-p99-ms",
        "50",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("none.json"), "{stderr}");
    let other = dir.join("capacity.json");
    std::fs::write(&other, r#"{"kind":"ackbench-capacity","schema_version":1}"#).unwrap();
    let Outcome { code, stderr, .. } = plan(&[
        other.to_str().unwrap(),
        "--target-rate",
        "10",
        "--slo-p99-ms",
        "50",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("not a sweep document"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_tiny_real_sweep_writes_a_knee_for_every_point_and_plan_answers_from_it() {
    let _real_run = one_real_run_at_a_time();
    let dir = temp_dir("sweep", "run");
    let out_dir = dir.join("out");
    let args = [
        "--out",
        out_dir.to_str().unwrap(),
        "--start",
        "50",
        "--step",
        "2",
        "--max",
        "100",
        "--min",
        "25",
        "--precision",
        "1",
        "--step-secs",
        "1.5",
        "--warmup",
        "0.5",
        "--slo-p99-ms",
        "2000",
        "--repeats",
        "1",
    ];
    let Outcome {
        code,
        stdout,
        stderr,
    } = ackbench(&dir, "sweep", SCENARIO, &args);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let text = std::fs::read_to_string(out_dir.join("sweep.json"))
        .unwrap_or_else(|e| panic!("no sweep.json ({e}); stderr:\n{stderr}"));
    let r = SweepResults::from_json(&text).unwrap();
    assert!(r.complete);
    assert_eq!(r.keys, ["pg.synchronous_commit"]);
    assert_eq!(r.points.len(), 2);
    assert!(r.machine.fsync_per_sec > 0.0, "{:?}", r.machine);
    // The machine probed before each search, in the order run.
    let probed: Vec<(usize, u32)> = r.probes.iter().map(|p| (p.point, p.repeat)).collect();
    assert_eq!(probed, [(1, 1), (2, 1)], "{:?}", r.probes);
    assert!(
        r.probes
            .iter()
            .all(|p| p.cpu_ms > 0.0 && p.fsync_per_sec > 0.0),
        "{:?}",
        r.probes
    );
    assert_eq!(r.plan.window_growth, 0.5);
    let setting = |i: usize| r.points[i].settings["pg.synchronous_commit"].as_str();
    assert_eq!((setting(0), setting(1)), ("on", "off"));
    assert!(r.points[0].durable && !r.points[1].durable);
    for p in &r.points {
        assert_eq!(p.cells.len(), 1);
        let c = &p.cells[0];
        assert_eq!(c.name, "none");
        let k = c
            .knee
            .sustained
            .unwrap_or_else(|| panic!("no knee: {c:?}\n{stderr}"));
        assert_eq!((c.knee.low, c.knee.high), (Some(k), Some(k)));
        assert!(
            c.costs.pg_cpu_ms > 0.0 && c.costs.commits > 0.0,
            "{:?}",
            c.costs
        );
        assert!(
            c.predicted_knee.is_some_and(|p| p > 0.0) && c.limited_by.is_some(),
            "{c:?}"
        );
    }
    // With synchronous_commit off no commit waits for its flush: far fewer WAL syncs.
    let syncs = |i: usize| r.points[i].cells[0].costs.wal_syncs;
    assert!(
        syncs(1) < syncs(0) / 2.0,
        "on {} off {}",
        syncs(0),
        syncs(1)
    );
    let capacity = |point: usize| {
        let path = out_dir
            .join(format!("point-{point}-repeat-1"))
            .join("capacity.json");
        CapacityResults::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    assert!(
        capacity(1).plan.cell_starts.is_empty(),
        "the first search starts at --start"
    );
    assert_eq!(
        capacity(2).plan.cell_starts.get("none").copied(),
        r.points[0].cells[0].knee.sustained,
        "the second point starts where the first found its knee"
    );
    let html = std::fs::read_to_string(out_dir.join("sweep.html")).unwrap();
    assert!(html.contains("chart-sweep-pareto") && html.contains("may lose acked commits"));

    let sweep_json = out_dir.join("sweep.json");
    let file = sweep_json.to_str().unwrap();
    let Outcome {
        code,
        stdout,
        stderr,
    } = plan(&[
        file,
        "--target-rate",
        "20",
        "--slo-p99-ms",
        "2000",
        "--cores",
        "8",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("every repeat") && stdout.contains("(not durable)"),
        "{stdout}"
    );
    assert!(stdout.contains("8 cores"), "{stdout}");
    let Outcome { code, stderr, .. } = plan(&[file, "--target-rate", "20", "--slo-p99-ms", "10"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("tighter 10 ms"), "{stderr}");

    // Remodelled by the build that wrote it, a sweep's points come back as they were.
    let again = dir.join("again");
    let out = Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .args(["remodel", out_dir.to_str().unwrap(), "--out"])
        .arg(&again)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let text = std::fs::read_to_string(again.join("sweep.json")).unwrap();
    let remodelled = SweepResults::from_json(&text).unwrap();
    // Floats come back through JSON, so within a rounding; NaN (unmeasured) compares equal.
    let same = |a: f64, b: f64| (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-9 * b.abs();
    let cells = |s: &SweepResults| -> Vec<PointCell> {
        s.points.iter().flat_map(|p| p.cells.clone()).collect()
    };
    for (a, b) in cells(&remodelled).iter().zip(cells(&r)) {
        assert_eq!((&a.knee, &a.limited_by), (&b.knee, &b.limited_by));
        assert!(
            same(a.costs.unloaded_p99_ms, b.costs.unloaded_p99_ms),
            "{a:?}\n{b:?}"
        );
        assert!(
            same(a.predicted_knee.unwrap(), b.predicted_knee.unwrap()),
            "{a:?}\n{b:?}"
        );
    }
    assert_eq!(cells(&remodelled).len(), 2);
    assert!(again.join("sweep.html").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A throwaway cluster's settings as a sweep changes them: checked up front (unknown, internal
/// and refused values named), applied with a reload or, for a setting that waits for one, a
/// restart, and reset at the end.
#[test]
fn postgres_settings_are_checked_applied_with_a_restart_where_needed_and_reset() {
    use ackbench::scenario::{DatabaseSide, Replication};
    use ackbench::sweep::pg_settings::PgSettings;
    use ackbench::target::postgres::{connect, Postgres};

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let side = DatabaseSide {
            replication: Replication::None,
            relay: false,
        };
        let pg = Postgres::embedded(side).await.unwrap();
        let show = |name: &'static str| {
            let url = pg.url_of("postgres");
            async move {
                let c = connect(&url).await.unwrap();
                let row = c.query_one(&format!("SHOW {name}"), &[]).await.unwrap();
                row.get::<_, String>(0)
            }
        };
        let ask = |name: &str, values: &[&str]| {
            vec![(
                name.to_string(),
                values.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
            )]
        };
        let refused = |e: Result<PgSettings, String>| e.err().expect("refused");
        let e = refused(PgSettings::check(&pg, &ask("no_such_setting", &["1"]), true).await);
        assert!(
            e.contains("pg.no_such_setting: PostgreSQL has no setting"),
            "{e}"
        );
        let e = refused(PgSettings::check(&pg, &ask("commit_delay", &["0", "lots"]), true).await);
        assert!(
            e.contains("pg.commit_delay = lots: PostgreSQL refused it"),
            "{e}"
        );
        let e = refused(PgSettings::check(&pg, &ask("block_size", &["8192"]), true).await);
        assert!(e.contains("cannot be set"), "{e}");
        let e = refused(PgSettings::check(&pg, &ask("wal_buffers", &["1MB"]), false).await);
        assert!(e.contains("only when the server restarts"), "{e}");
        assert_eq!(
            show("commit_delay").await,
            "0",
            "a refused check changes nothing"
        );

        let mut both = ask("commit_delay", &["0", "200"]);
        both.extend(ask("wal_buffers", &["1MB"]));
        let settings = PgSettings::check(&pg, &both, true).await.unwrap();
        let point = |d: &str, w: &str| {
            vec![
                ("commit_delay".to_string(), d.to_string()),
                ("wal_buffers".to_string(), w.to_string()),
            ]
        };
        assert!(!settings
            .apply(&pg, &point("200", &show("wal_buffers").await))
            .await
            .unwrap());
        assert_eq!(show("commit_delay").await, "200", "a reload suffices");
        assert!(
            settings.apply(&pg, &point("0", "1MB")).await.unwrap(),
            "restarted"
        );
        assert_eq!(
            (show("commit_delay").await, show("wal_buffers").await),
            ("0".into(), "1MB".into())
        );
        assert!(
            settings.reset(&pg).await.unwrap(),
            "wal_buffers back needs a restart too"
        );
        assert_ne!(show("wal_buffers").await, "1MB");
    });
}
