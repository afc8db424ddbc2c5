//! A primary and its streaming standby: synchronous replication holds every acknowledged
//! commit across a crash and a promotion, the crashed primary is seeded again as the new
//! primary's standby, and a frozen server answers nothing until it is continued.

use std::sync::mpsc;
use std::time::Duration;

use throwaway_pg::{Cluster, STANDBY_NAME};

#[test]
fn a_sync_standby_keeps_every_commit_through_a_crash_and_a_promotion() {
    let primary = Cluster::start().unwrap();
    let standby = Cluster::builder().start_standby_of(&primary).unwrap();
    primary.require_sync_standby(true).unwrap();
    let sync = "SELECT sync_state FROM pg_stat_replication WHERE application_name = ";
    assert_eq!(
        primary
            .psql("postgres", &format!("{sync}'{STANDBY_NAME}'"))
            .unwrap(),
        "sync"
    );
    primary
        .psql(
            "postgres",
            "CREATE TABLE t AS SELECT generate_series(1, 500) AS n",
        )
        .unwrap();
    assert_eq!(
        standby
            .psql("postgres", "SELECT pg_is_in_recovery()")
            .unwrap(),
        "t"
    );

    primary.kill_processes().unwrap();
    assert!(primary.postmaster_pid().is_none());
    assert!(primary.psql("postgres", "SELECT 1").is_err());
    standby.promote().unwrap();
    assert_eq!(
        standby
            .psql("postgres", "SELECT pg_is_in_recovery()")
            .unwrap(),
        "f"
    );
    assert_eq!(
        standby.psql("postgres", "SELECT count(*) FROM t").unwrap(),
        "500"
    );
    // The promoted standby does not wait for a standby of its own: it commits at once.
    standby
        .psql("postgres", "INSERT INTO t VALUES (501)")
        .unwrap();

    primary.seed_as_standby_of(&standby).unwrap();
    assert_eq!(
        primary.psql("postgres", "SELECT count(*) FROM t").unwrap(),
        "501"
    );
    assert_eq!(
        primary
            .psql("postgres", "SELECT pg_is_in_recovery()")
            .unwrap(),
        "t"
    );
}

#[test]
fn a_stopped_server_answers_only_after_it_is_continued() {
    let cluster = Cluster::start().unwrap();
    let pids = cluster.stop_processes().unwrap();
    assert!(pids.len() > 1, "postmaster and its helpers: {pids:?}");
    let port = cluster.port();
    let (tx, rx) = mpsc::channel();
    let bindir = cluster.bindir().to_path_buf();
    std::thread::spawn(move || {
        let out = std::process::Command::new(bindir.join("psql"))
            .args(["-X", "-At", "-h", "127.0.0.1", "-p", &port.to_string()])
            .args(["-U", "postgres", "-d", "postgres", "-c", "SELECT 42"])
            .output();
        let _ = tx.send(out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()));
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(1500)).is_err(),
        "a frozen server answered"
    );
    cluster.continue_processes(&pids).unwrap();
    let answer = rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!(answer, "42");
}

#[test]
fn a_frozen_server_is_continued_and_stopped_when_dropped() {
    let cluster = Cluster::start().unwrap();
    let data = cluster.data_dir().to_path_buf();
    let pids = cluster.stop_processes().unwrap();
    let started = std::time::Instant::now();
    drop(cluster);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(!data.exists());
    for pid in pids {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(
            state.is_empty() || state.contains(") Z "),
            "process {pid} outlived its cluster: {state}"
        );
    }
}
