//! End to end through the real binaries: `ackbench run` starts a throwaway PostgreSQL and the
//! workspace's broker per cell, and its gates must hold on a working build and fail on a broken
//! accelerator (fusion forced to one row per flush), so a gate that cannot fail is caught.

use std::path::Path;
use std::process::Command;

use ackbench_reports::results::Results;

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

fn run(dir: &Path, text: &str) -> (i32, String, Results) {
    let file = dir.join("scenario.toml");
    std::fs::write(&file, text).unwrap();
    let out_dir = dir.join("out");
    let out = Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run ackbench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let text = std::fs::read_to_string(out_dir.join("results.json"))
        .unwrap_or_else(|e| panic!("no results.json ({e}); stderr:\n{stderr}"));
    assert!(
        out_dir.join("report.html").is_file(),
        "report.html is written beside results.json"
    );
    (
        out.status.code().unwrap_or(-1),
        stdout,
        Results::from_json(&text).unwrap(),
    )
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ackbench-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_working_build_holds_its_gates_and_loses_nothing() {
    let dir = temp_dir("ok");
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
    assert!(fused.summary.figures.registry_hit_rate.median > 0.9);
    assert!(fused.summary.figures.fusion_rows_per_commit.median > 1.0);
    assert!(results.gates.iter().all(|g| g.passed), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_fusion_fails_the_gate() {
    let dir = temp_dir("broken");
    let (code, stdout, results) = run(&dir, &scenario("QUEEN_TEST_ACK_FUSION_MAX_ROWS = 1"));
    assert_eq!(
        code, 1,
        "the gate must fail when fusion commits one row per flush:\n{stdout}"
    );
    let gate = results
        .gates
        .iter()
        .find(|g| g.gate == "fusion cuts ack commits")
        .unwrap();
    assert!(!gate.passed);
    assert!(gate.measured.max > 0.7);
    let fused = results.cell("registry+fusion").unwrap();
    assert_eq!(fused.summary.figures.fusion_rows_per_commit.median, 1.0);
    let _ = std::fs::remove_dir_all(&dir);
}
