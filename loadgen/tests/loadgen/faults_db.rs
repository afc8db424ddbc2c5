//! Faults from the database's side end to end through the real binaries, on a primary with a
//! synchronous standby: the broker's database connections cut and delayed through the relay,
//! its sessions terminated, PostgreSQL frozen, and a failover to the standby, in one window.
//! Nothing is lost, every fault is recorded with its recovery, and the failover says what the
//! standby had. Bad settings for these kinds are refused before anything starts.

use std::ffi::OsStr;

use crate::common::{
    a_round_that_lost_nothing, a_run_judged_by_its_audit, ackbench, temp_dir, written_results,
};

/// One cell, an 18 s window, a fault every 2-4 s, each short enough to recover before the next
/// (the failover 4 s after the pause, so the pause's dip does not set its recovery level).
const SCENARIO: &str = r#"
name = "e2e-faults-db"
[postgres]
replication = "sync"
[queue]
name = "e2e-faults-db"
partitions = 4
[queue.options]
lease_time = 2
dedup_window_seconds = 0
[producers]
count = 2
batch = 5
mode = "open"
rate = 200
[consumers]
count = 4
pop_batch = 5
long_poll = true
long_poll_timeout_ms = 500
lease_seconds = 2
[run]
warmup_secs = 2
duration_secs = 18
drain_timeout_secs = 20
rounds = 1
cells = ["registry+fusion"]
seed = 29
[[faults]]
kind = "partition_postgres"
at_secs = 2
duration_ms = 1000
[[faults]]
kind = "latency_postgres"
at_secs = 4.5
duration_ms = 1000
delay_ms = 100
[[faults]]
kind = "kill_pg_backends"
at_secs = 7
[[faults]]
kind = "pause_postgres"
at_secs = 9
duration_ms = 1000
[[faults]]
kind = "failover_postgres"
at_secs = 13
"#;

#[test]
fn database_side_faults_with_a_sync_standby_lose_nothing_and_each_recovers() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("faults-db", "e2e");
    let round = &a_round_that_lost_nothing(&dir, SCENARIO);
    let kinds: Vec<&str> = round.faults.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "partition_postgres",
            "latency_postgres",
            "kill_pg_backends",
            "pause_postgres",
            "failover_postgres"
        ],
        "{:?}",
        round.faults
    );
    for f in &round.faults {
        assert!(f.recovery_secs.is_some(), "not recovered: {f:?}");
        assert!(!f.note.contains("failed"), "{f:?}");
    }
    let [partition, _, kill, pause, failover] = &round.faults[..] else {
        unreachable!("five faults")
    };
    assert!(
        partition.note.contains("broker connections cut"),
        "{partition:?}"
    );
    assert!(kill.note.contains("broker sessions terminated"), "{kill:?}");
    assert!(pause.ended_secs - pause.at_secs >= 1.0, "{pause:?}");
    assert!(
        failover.note.starts_with("sync replication: ")
            && failover
                .note
                .contains("the round's audit: 0 lost, 0 undrained"),
        "{failover:?}"
    );
    assert!(
        round.figures.errors > 0.0,
        "requests failed while the database was cut off"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failover_without_a_standby_is_refused_naming_the_field() {
    let dir = temp_dir("faults-db", "refused");
    let scenario = SCENARIO.replace("replication = \"sync\"", "replication = \"none\"");
    let out = ackbench::<&OsStr>(&dir, "run", &scenario, &[]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("faults[4].kind") && out.stderr.contains("[postgres] replication"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn database_faults_are_refused_against_an_external_database() {
    let dir = temp_dir("faults-db", "external");
    let out = ackbench(
        &dir,
        "run",
        SCENARIO,
        &[
            OsStr::new("--database-url"),
            OsStr::new("postgres://postgres@127.0.0.1:9/x"),
        ],
    );
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("fault (line ") && out.stderr.contains("drop --database-url"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A failover to an asynchronous standby whose WAL sender was frozen for a second first: the
/// failover's note says plainly what the standby lacked, and the run ends with its audit
/// whatever that found (pushes the standby lacked are never delivered).
const ASYNC_SCENARIO: &str = r#"
name = "e2e-failover-async"
[postgres]
replication = "async"
[queue]
name = "e2e-failover-async"
partitions = 2
[queue.options]
lease_time = 2
dedup_window_seconds = 0
[producers]
count = 1
batch = 5
mode = "open"
rate = 200
[consumers]
count = 1
pop_batch = 2
lease_seconds = 2
[run]
warmup_secs = 1
duration_secs = 5
drain_timeout_secs = 4
rounds = 1
cells = ["registry+fusion"]
seed = 29
[[faults]]
kind = "failover_postgres"
at_secs = 1.5
lag_ms = 1000
"#;

#[test]
fn an_async_failover_says_what_the_standby_lacked() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("faults-db", "async");
    let out_dir = dir.join("out");
    let out = ackbench(
        &dir,
        "run",
        ASYNC_SCENARIO,
        &[OsStr::new("--out"), out_dir.as_os_str()],
    );
    assert!(
        out.code == 0 || out.code == 1,
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    let results = written_results(&out_dir, &out.stderr);
    let round = &results.cells[0].rounds[0];
    let [failover] = &round.faults[..] else {
        panic!("one fault: {:?}", round.faults)
    };
    assert!(
        failover
            .note
            .starts_with("async replication: the promoted standby lacked at least ")
            && failover.note.contains(" pushed messages and ")
            && failover.note.contains("; the round's audit: "),
        "{failover:?}"
    );
    assert!(
        failover.ended_secs - failover.at_secs >= 1.0,
        "{failover:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
