//! Fault steps end to end through the real binaries: a run that kills its broker and freezes
//! its consumers past their leases loses nothing and records both faults; faults the target
//! cannot take are refused before anything starts.

use std::ffi::OsStr;

use crate::common::{a_round_that_lost_nothing, a_run_judged_by_its_audit, ackbench, temp_dir};

/// One cell, a 9 s window: the broker killed at 2 s (down 500 ms), the consumers frozen at 5 s
/// for 1.5 s, longer than their 1 s lease.
const SCENARIO: &str = r#"
name = "e2e-faults"
[queue]
name = "e2e-faults"
partitions = 4
[queue.options]
lease_time = 1
dedup_window_seconds = 0
[producers]
count = 2
batch = 5
mode = "open"
rate = 200
[consumers]
count = 4
pop_batch = 5
lease_seconds = 1
[run]
warmup_secs = 1
duration_secs = 9
drain_timeout_secs = 20
rounds = 1
cells = ["registry+fusion"]
seed = 15
[[faults]]
kind = "kill_broker"
at_secs = 2
restart_after_ms = 500
[[faults]]
kind = "pause_consumers"
at_secs = 5
duration_ms = 1500
"#;

#[test]
fn a_killed_broker_and_frozen_consumers_lose_nothing_and_are_recorded() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("faults", "e2e");
    let round = &a_round_that_lost_nothing(&dir, SCENARIO);
    let a = &round.audit;
    assert!(a.duplicates <= a.pushed, "duplicates bounded: {a:?}");
    let kinds: Vec<&str> = round.faults.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["kill_broker", "pause_consumers"],
        "{:?}",
        round.faults
    );
    for f in &round.faults {
        assert!(f.note.is_empty(), "{f:?}");
        assert!(f.at_secs >= 1.9 && f.ended_secs > f.at_secs, "{f:?}");
    }
    assert!(round.faults[1].ended_secs - round.faults[1].at_secs >= 1.5);
    assert!(
        round.figures.errors > 0.0,
        "requests failed while the broker was down"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn broker_faults_are_refused_against_an_external_broker() {
    let dir = temp_dir("faults", "refused");
    let out_dir = dir.join("out");
    let out = ackbench(
        &dir,
        "run",
        SCENARIO,
        &[
            OsStr::new("--broker-url"),
            OsStr::new("http://127.0.0.1:9"),
            OsStr::new("--out"),
            out_dir.as_os_str(),
        ],
    );
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("kill_broker fault (line ") && out.stderr.contains("drop --broker-url"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Three brokers round robin, the first killed at 3 s and restarted 500 ms later.
const THREE_BROKERS: &str = r#"
name = "e2e-multi-faults"
[queue]
name = "e2e-multi-faults"
partitions = 6
[queue.options]
lease_time = 1
dedup_window_seconds = 0
[producers]
count = 2
batch = 5
mode = "open"
rate = 200
[consumers]
count = 6
pop_batch = 5
long_poll = true
long_poll_timeout_ms = 500
lease_seconds = 1
[run]
warmup_secs = 1
duration_secs = 7
drain_timeout_secs = 20
rounds = 1
cells = ["registry+fusion"]
seed = 35
[broker]
pool_size = 4
instances = 3
routing = "round_robin"
[[faults]]
kind = "kill_broker"
at_secs = 3
restart_after_ms = 500
"#;

#[test]
fn a_broker_killed_among_three_round_robin_loses_nothing_while_the_others_serve() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("faults", "three-brokers");
    let round = &a_round_that_lost_nothing(&dir, THREE_BROKERS);
    assert_eq!(round.faults.len(), 1, "{:?}", round.faults);
    let kill = &round.faults[0];
    assert_eq!(kill.kind, "kill_broker");
    assert!(
        kill.note.starts_with("broker 1 of 3 ") && kill.note.contains("the others kept serving"),
        "{kill:?}"
    );
    assert_eq!(round.brokers.len(), 3);
    for b in &round.brokers[1..] {
        assert!(b.requests > 10.0, "{} kept serving: {}", b.url, b.requests);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
