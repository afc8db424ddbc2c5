//! Helpers shared by the load generator's integration tests: scratch directories, running the
//! `ackbench` binary built for this test run, a lock that keeps real runs one at a time, and a
//! server answering as the recorded Queen did (`recorded_queen`).

pub mod proxy;
pub mod recorded_queen;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Held by every test that starts PostgreSQL and brokers (all tests share one binary). A test
/// that judges a run's figures (gates, ratios, hit rates, knees, timings) holds it alone: runs
/// measured side by side on a small machine would skew each other's figures. A test that judges
/// a run only by its audit and what it writes (nothing lost, each fault recorded, documents in
/// their shape) shares it with other such tests: those verdicts must hold at any speed.
static REAL_RUN: RwLock<()> = RwLock::new(());

/// Waits until no other real run is going; the run may start while the guard lives.
pub fn one_real_run_at_a_time() -> RwLockWriteGuard<'static, ()> {
    REAL_RUN
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits until no run whose figures are judged is going; other runs judged by their audit may
/// go beside this one while the guard lives.
pub fn a_run_judged_by_its_audit() -> RwLockReadGuard<'static, ()> {
    REAL_RUN
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A fresh, empty scratch directory `ackbench-{suite}-{name}-{pid}` under the system's temp
/// directory. Tests remove it when they pass; a failing test leaves it for inspection.
pub fn temp_dir(suite: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ackbench-{suite}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The results a run wrote to `out_dir` (its `--out`), after checking the report was written
/// beside them; panics with the run's `stderr` when there are none.
pub fn written_results(out_dir: &Path, stderr: &str) -> ackbench_reports::results::Results {
    let text = std::fs::read_to_string(out_dir.join("results.json"))
        .unwrap_or_else(|e| panic!("no results.json ({e}); stderr:\n{stderr}"));
    assert!(
        out_dir.join("report.html").is_file(),
        "report.html is written beside results.json"
    );
    ackbench_reports::results::Results::from_json(&text).unwrap()
}

/// Runs `scenario_text` with `ackbench run` (results in `dir/out`), requires exit 0 and a first
/// round whose audit accounts for every pushed message (acked, dead-lettered or dropped;
/// nothing lost, nothing left undrained), and returns that round.
pub fn a_round_that_lost_nothing(
    dir: &Path,
    scenario_text: &str,
) -> ackbench_reports::results::RoundResults {
    let out_dir = dir.join("out");
    let Outcome {
        code,
        stdout,
        stderr,
    } = ackbench(
        dir,
        "run",
        scenario_text,
        &[OsStr::new("--out"), out_dir.as_os_str()],
    );
    let results = written_results(&out_dir, &stderr);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let round = results.cells[0].rounds[0].clone();
    let a = &round.audit;
    assert_eq!((a.lost, a.undrained), (0, 0), "{a:?}");
    assert!(a.drained && a.pushed > 0, "{a:?}");
    assert_eq!(a.acked + a.dead_lettered + a.dropped, a.pushed, "{a:?}");
    round
}

/// What one `ackbench` invocation did.
pub struct Outcome {
    /// The exit code (-1 when killed by a signal).
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Writes `scenario_text` to `dir/scenario.toml` and runs `ackbench <command> <that file>
/// <args>` to completion.
pub fn ackbench<A: AsRef<OsStr>>(
    dir: &Path,
    command: &str,
    scenario_text: &str,
    args: &[A],
) -> Outcome {
    let file = dir.join("scenario.toml");
    std::fs::write(&file, scenario_text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .arg(command)
        .arg(&file)
        .args(args)
        .output()
        .expect("run ackbench");
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
