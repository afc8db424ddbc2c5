//! `ackbench run --confirm N` (here the scenario's `[run] confirm`) and `--strict` through the
//! binary. Two cells pushed at the same open-loop rate have a push-throughput ratio of 1 within
//! noise, and the noise is made large by construction: one producer sends a batch of 50 every
//! 667 ms, so every second holds one or two of its batches and the per-second samples are 50 or
//! 100, never their mean of 75 (a second producer would be phased to fill the gaps and smooth
//! them). Each cell's window variance of ln(throughput) is then at least about 0.04, the ratio's
//! 95 % interval spans a factor of about 1.5 each side, and a window holds 6 batches give or take
//! one, so the ratio itself stays within 7/5 of 1. A gate bounding the ratio at 1.0 therefore
//! straddles its bound whatever the timing: it is inconclusive, the gated cells run one more
//! round, the run exits 0 saying so, and exits 1 with `--strict`.

use std::ffi::OsStr;

use ackbench_reports::results::GateOutcome;

use crate::common::{ackbench, one_real_run_at_a_time, temp_dir, written_results, Outcome};

const SCENARIO: &str = r#"
name = "confirm"
[queue]
name = "confirm"
partitions = 4
[producers]
count = 1
batch = 50
mode = "open"
rate = 75
[consumers]
count = 4
pop_batch = 10
[run]
warmup_secs = 1
duration_secs = 4
drain_timeout_secs = 20
rounds = 1
cells = ["registry", "none"]
seed = 11
confirm = 1
[[gates]]
name = "pushes keep pace"
kind = "ratio"
figure = "push_throughput"
numerator = "registry"
denominator = "none"
max = 1.0
"#;

/// `ackbench gate ARGS...`: its exit code and stdout.
fn ackbench_gate(args: &[&OsStr]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .arg("gate")
        .args(args)
        .output()
        .expect("run ackbench gate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn an_inconclusive_gate_is_confirmed_with_more_rounds_and_fails_only_when_strict() {
    let _real_run = one_real_run_at_a_time();
    let dir = temp_dir("confirm", "straddle");
    let out = dir.join("out");
    // The scenario's `[run] confirm = 1` asks for the extra round (`--confirm 1` would too).
    let args = [OsStr::new("--out"), out.as_os_str()];
    let Outcome {
        code,
        stdout,
        stderr,
    } = ackbench(&dir, "run", SCENARIO, &args);
    let results = written_results(&out, &stderr);
    let gate = results
        .gates
        .iter()
        .find(|g| g.gate == "pushes keep pace")
        .expect("the gate is judged");
    assert_eq!(gate.outcome(), GateOutcome::Inconclusive, "{stdout}");
    let i = gate.interval.expect("an interval");
    assert!(i.low < 1.0 && 1.0 < i.high && i.rounds == 2, "{i:?}");
    for cell in &results.cells {
        assert_eq!(
            cell.rounds.len(),
            2,
            "{}: confirmed with a second round",
            cell.name
        );
        assert_eq!(cell.summary.rounds, 2);
    }
    assert!(
        results.meta.notes.iter().any(|n| n.contains("--confirm")),
        "{:?}",
        results.meta.notes
    );
    assert_eq!(
        code, 0,
        "inconclusive is not failed without --strict:\n{stdout}"
    );
    assert!(stdout.contains("inconclusive"), "{stdout}");

    let results_file = out.join("results.json");
    let strict = ackbench_gate(&[results_file.as_os_str(), OsStr::new("--strict")]);
    let json = ackbench_gate(&[
        results_file.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("json"),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        strict.0, 1,
        "--strict fails an inconclusive gate:\n{}",
        strict.1
    );
    assert_eq!(json.0, 0);
    let v: serde_json::Value = serde_json::from_str(&json.1).expect("json");
    assert!(
        v["gates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["outcome"] == "inconclusive" && g["interval"]["rounds"] == 2),
        "{v:#}"
    );
}
