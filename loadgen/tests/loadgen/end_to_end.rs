//! End to end through the real binaries: `ackbench run` starts a throwaway PostgreSQL and the
//! workspace's broker per cell, and its gates must hold on a working build and fail on a broken
//! accelerator (fusion forced to one row per flush), so a gate that cannot fail is caught.

use std::ffi::OsStr;
use std::path::Path;

use ackbench_reports::results::{GateVerdict, Results};

use crate::common::{
    a_run_judged_by_its_audit, ackbench, one_real_run_at_a_time, temp_dir, written_results, Outcome,
};

/// The name of the scenario's ratio gate.
const GATE: &str = "fusion cuts ack commits";

/// A small, closed-loop backlog drain: many consumers acking single messages at once, which is
/// what fusion coalesces.
fn scenario(extra_env: &str) -> String {
    format!(
        r#"
name = "e2e"
[queue]
name = "e2e"
partitions = 8
[queue.options]
dedup_window_seconds = 0
[prefill]
messages_per_partition = 400
batch = 100
[producers]
count = 0
[consumers]
count = 24
pop_batch = 1
[run]
warmup_secs = 1
duration_secs = 3
drain_timeout_secs = 30
rounds = 1
cells = ["registry+fusion", "none"]
seed = 7
[broker.env]
QUEEN_ACK_FUSION_SHARDS = 1
{extra_env}
[[gates]]
name = "fusion cuts ack commits"
kind = "ratio"
figure = "ack_commits_per_ack"
numerator = "registry+fusion"
denominator = "none"
max = 0.7
"#
    )
}

/// Runs the scenario `text` in `dir`; returns the exit code, stdout and the results written.
fn run(dir: &Path, text: &str) -> (i32, String, Results) {
    run_with(dir, text, &[])
}

/// `run` with more `ackbench run` flags after `--out`.
fn run_with(dir: &Path, text: &str, flags: &[&str]) -> (i32, String, Results) {
    let out_dir = dir.join("out");
    let mut args = vec![OsStr::new("--out"), out_dir.as_os_str()];
    args.extend(flags.iter().map(OsStr::new));
    let Outcome {
        code,
        stdout,
        stderr,
    } = ackbench(dir, "run", text, &args);
    (code, stdout, written_results(&out_dir, &stderr))
}

/// The verdict of the scenario's one ratio gate: it must have been judged.
fn fusion_gate(results: &Results) -> &GateVerdict {
    results
        .gates
        .iter()
        .find(|g| g.gate == GATE)
        .unwrap_or_else(|| {
            panic!(
                "gate `{GATE}` was not evaluated; verdicts: {:?}",
                results.gates
            )
        })
}

#[test]
fn a_working_build_holds_its_gates_and_loses_nothing() {
    let _real_run = one_real_run_at_a_time();
    let dir = temp_dir("e2e", "ok");
    let (code, stdout, results) = run(&dir, &scenario(""));
    assert_eq!(code, 0, "{stdout}");
    for c in &results.cells {
        let a = &c.summary.audit;
        assert_eq!(a.lost, 0, "{}: {a:?}", c.name);
        assert!(a.drained);
        assert_eq!(a.pushed, 3200);
        assert_eq!(a.acked + a.dead_lettered + a.dropped, a.pushed);
        assert!(c.summary.figures.acked_messages.median > 0.0);
        assert!(
            c.summary.figures.commits.median > 0.0,
            "PostgreSQL counters were read"
        );
    }
    let fused = results.cell("registry+fusion").unwrap();
    for round in &fused.rounds {
        // Gauges from the broker's /metrics keep their value; a counter's delta would be 0.
        let metric = |series: &str| round.broker_metrics.get(series).copied();
        assert_eq!(
            metric("queen_ack_fusion_shards"),
            Some(1.0),
            "{:?}",
            round.broker_metrics
        );
        assert_eq!(
            metric("queen_engine_setting{name=\"QUEEN_ACK_FUSION_SHARDS\"}"),
            Some(1.0)
        );
        assert!(metric("queen_ack_fusion_rows_per_commit").unwrap() > 1.0);
        assert!(metric("queen_ack_fusion_flushes_total").unwrap() > 0.0);
    }
    assert!(
        results.meta.broker.wire_variants.is_empty(),
        "the workspace's broker answers as wire.md writes: {:?}",
        results.meta.broker.wire_variants
    );
    let kind = results.meta.broker.target_kind.as_deref().unwrap_or("");
    assert!(kind.starts_with("ackbench"), "{kind}");
    assert!(fused.summary.figures.registry_hit_rate.median > 0.9);
    assert!(fused.summary.figures.fusion_rows_per_commit.median > 1.0);
    let gate = fusion_gate(&results);
    assert!(gate.passed, "{gate:?}\n{stdout}");
    assert!(gate.measured.max <= 0.7, "{gate:?}");
    assert!(
        results.gates.iter().all(|g| g.passed),
        "every verdict holds (the ratio gate and the audits): {:?}",
        results.gates
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_fusion_fails_the_gate() {
    let _real_run = one_real_run_at_a_time();
    let dir = temp_dir("e2e", "broken");
    let (code, stdout, results) = run(&dir, &scenario("QUEEN_TEST_ACK_FUSION_MAX_ROWS = 1"));
    assert_eq!(
        code, 1,
        "the gate must fail when fusion commits one row per flush:\n{stdout}"
    );
    let gate = fusion_gate(&results);
    assert!(!gate.passed);
    assert!(gate.measured.max > 0.7);
    let fused = results.cell("registry+fusion").unwrap();
    assert_eq!(fused.summary.figures.fusion_rows_per_commit.median, 1.0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A/A mode runs one cell and its twin, each round on a database of its own, judges their
/// audits and prints the twin/cell ratio of every gated figure (the gates' own noise).
#[test]
fn aa_mode_runs_a_cell_and_its_twin_and_prints_their_noise() {
    let _real_run = one_real_run_at_a_time();
    let dir = temp_dir("e2e", "aa");
    let flags = ["--aa", "none", "--duration", "2"];
    let (code, stdout, results) = run_with(&dir, &scenario(""), &flags);
    assert_eq!(code, 0, "{stdout}");
    let names: Vec<&str> = results.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["none", "none (A/A)"]);
    for c in &results.cells {
        assert_eq!(c.summary.audit.lost, 0, "{}", c.name);
        assert_eq!(c.summary.audit.pushed, 3200, "{}", c.name);
    }
    assert!(stdout.contains("A/A noise: none (A/A) / none"), "{stdout}");
    let gated = stdout
        .lines()
        .find(|l| l.starts_with("ack_commits_per_ack"))
        .unwrap_or_else(|| panic!("the gated figure's noise is printed:\n{stdout}"));
    assert!(gated.ends_with('%'), "a measured twin/cell ratio: {gated}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Peer cells run beside a broker cell on the same PostgreSQL: PGMQ and PgQ installed into a
/// fresh database each, driven over SQL, audited, their statements folded by procedure.
#[test]
fn peers_run_beside_the_broker_and_are_audited() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("e2e", "peers");
    let text = r#"
name = "peers"
[queue]
name = "peers"
partitions = 4
[prefill]
messages_per_partition = 50
batch = 50
[producers]
count = 2
batch = 10
mode = "open"
rate = 200
[consumers]
count = 4
pop_batch = 10
[run]
warmup_secs = 1
duration_secs = 2
drain_timeout_secs = 20
rounds = 1
cells = ["none"]
peers = ["pgmq", "pgq"]
seed = 3
"#;
    let (code, stdout, results) = run(&dir, text);
    assert_eq!(code, 0, "{stdout}");
    let names: Vec<&str> = results.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["none", "pgmq", "pgq"]);
    for (peer, consume, answer) in [
        ("pgmq", "pgmq.read", "pgmq.delete"),
        ("pgq", "pgq.next_batch", "pgq.finish_batch"),
    ] {
        let c = results.cell(peer).unwrap();
        let a = &c.summary.audit;
        assert_eq!((a.lost, a.pushed), (0, a.acked), "{peer}: {a:?}");
        assert!(
            a.pushed >= 200,
            "{peer}: the prefill and the producers: {a:?}"
        );
        // The peer's deliveries are judged as a broker cell's, by what the peer promises.
        assert!(a.history_checked, "{peer}: its history judged: {a:?}");
        assert!(
            !a.promises.order && !a.promises.lease_exclusive && !a.promises.fencing,
            "{peer} promises no order or lease: {:?}",
            a.promises
        );
        assert!(
            a.promises.ack_durable,
            "{peer}: a delete or finish is durable"
        );
        assert_eq!(
            (a.unexpected, a.recovered, a.ack_regressions),
            (0, 0, 0),
            "{peer}: {a:?}"
        );
        assert!(a.broken().is_empty(), "{peer}: {:?}", a.broken());
        assert!(
            a.exactly_once > 0 && a.exactly_once <= a.pushed,
            "{peer}: {a:?}"
        );
        let round = &c.rounds[0];
        let by_procedure = &round.figures.pg_exec_ms_per_ack_by_procedure;
        for procedure in [consume, answer] {
            assert!(
                by_procedure.contains_key(procedure),
                "{peer}: {procedure} measured: {by_procedure:?}"
            );
        }
        assert!(
            round.figures.ack_commits_per_ack > 0.0,
            "{peer}: its answers are its acks"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A small scenario with the procrastinate peer beside a broker cell.
const PROCRASTINATE_SCENARIO: &str = r#"
name = "procrastinate"
[queue]
name = "procrastinate"
partitions = 4
[queue.options]
retry_limit = 2
[prefill]
messages_per_partition = 25
batch = 25
[producers]
count = 2
batch = 10
mode = "open"
rate = 200
[consumers]
count = 4
pop_batch = 10
[run]
warmup_secs = 1
duration_secs = 2
drain_timeout_secs = 20
rounds = 1
cells = ["none"]
peers = ["procrastinate"]
seed = 5
"#;

/// procrastinate installed from its Python package into a fresh database, driven over its own
/// SQL functions with `lock` = partition, audited with nothing lost and judged on per-partition
/// order; its defer, fetch and finish calls are measured by procedure.
#[test]
fn procrastinate_runs_beside_the_broker_with_locks_as_partitions() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("e2e", "procrastinate");
    let (code, stdout, results) = run(&dir, PROCRASTINATE_SCENARIO);
    assert_eq!(code, 0, "{stdout}");
    let names: Vec<&str> = results.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["none", "procrastinate"]);
    let c = results.cell("procrastinate").unwrap();
    let a = &c.summary.audit;
    assert_eq!((a.lost, a.pushed), (0, a.acked), "{a:?}");
    assert!(a.pushed >= 100, "the prefill and the producers: {a:?}");
    assert!(a.history_checked && a.promises.order, "{a:?}");
    assert_eq!((a.order_violations, a.unexpected), (0, 0), "{a:?}");
    assert!(a.broken().is_empty(), "{:?}", a.broken());
    let round = &c.rounds[0];
    let by_procedure = &round.figures.pg_exec_ms_per_ack_by_procedure;
    for procedure in [
        "procrastinate_defer_jobs_v1",
        "procrastinate_fetch_job_v2",
        "procrastinate_finish_job_v1",
    ] {
        assert!(
            by_procedure.contains_key(procedure),
            "{procedure} measured: {by_procedure:?}"
        );
    }
    assert!(
        round.figures.ack_commits_per_ack > 0.0,
        "{:?}",
        round.figures
    );
    assert!(c.summary.figures.acked_messages.median > 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without procrastinate's package the run is refused before anything runs: exit 2, naming
/// what to install.
#[test]
fn procrastinate_missing_is_refused_naming_what_to_install() {
    let dir = temp_dir("e2e", "procrastinate-missing");
    let file = dir.join("scenario.toml");
    std::fs::write(&file, PROCRASTINATE_SCENARIO).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(dir.join("out"))
        .env("ACKBENCH_PYTHON", "/nonexistent/python3")
        .output()
        .expect("run ackbench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("pip install procrastinate"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// pg-boss installed from its npm package into a fresh database, driven with its own insert,
/// fetch and complete statements, audited with nothing lost.
#[test]
fn pgboss_runs_beside_the_broker_and_is_audited() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("e2e", "pgboss");
    let text = PROCRASTINATE_SCENARIO
        .replace("peers = [\"procrastinate\"]", "peers = [\"pgboss\"]")
        .replace("name = \"procrastinate\"", "name = \"pgboss\"");
    let (code, stdout, results) = run(&dir, &text);
    assert_eq!(code, 0, "{stdout}");
    let c = results.cell("pgboss").unwrap();
    let a = &c.summary.audit;
    assert_eq!((a.lost, a.pushed), (0, a.acked), "{a:?}");
    assert!(a.pushed >= 100, "the prefill and the producers: {a:?}");
    assert!(a.history_checked && a.promises.ack_durable, "{a:?}");
    assert!(a.broken().is_empty(), "{:?}", a.broken());
    let round = &c.rounds[0];
    let by_procedure = &round.figures.pg_exec_ms_per_ack_by_procedure;
    for procedure in ["pgboss.insert", "pgboss.fetch", "pgboss.complete"] {
        assert!(
            by_procedure.contains_key(procedure),
            "{procedure} measured: {by_procedure:?}"
        );
    }
    assert!(
        round.figures.ack_commits_per_ack > 0.0,
        "{:?}",
        round.figures
    );
    let _ = std::fs::remove_dir_all(&dir);
}
