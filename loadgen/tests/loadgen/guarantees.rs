//! The audit's guarantee checks proven against a real broker: a test-run proxy between the
//! workers and the broker passes everything through (every check 0), or breaks one guarantee
//! (swapped messages, a shared lease, swallowed acks, an invented message, a stale ack answered
//! success), and only that guarantee's count rises, with nothing lost and the run drained.
//! The history the run exports (`--history`) holds one JSON line per delivery.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use ackbench::target::broker::BrokerProcess;
use ackbench::target::broker_binary;
use ackbench_reports::results::Audit;

use crate::common::proxy::{Mode, Proxy};
use crate::common::{a_run_judged_by_its_audit, temp_dir, written_results};

/// 8 partitions, 3 open-loop producers of 10-message pushes, 4 wildcard consumers popping 10
/// and working 300 ms on each batch, 2 s leases; one batch in 4 is held 1 s past its lease,
/// so late acks are refused (and, through the fencing proxy, accepted). A 3 s window.
const SCENARIO: &str = r#"
name = "guarantees"
[queue]
name = "guarantees"
partitions = 8
[queue.options]
lease_time = 2
dedup_window_seconds = 0
[producers]
count = 3
batch = 10
mode = "open"
rate = 60
[consumers]
count = 4
pop_batch = 10
long_poll = true
long_poll_timeout_ms = 300
processing_ms = 300
lease_seconds = 2
stall = 0.25
stall_extra_ms = 1000
[run]
warmup_secs = 0.5
duration_secs = 3
drain_timeout_secs = 20
rounds = 1
seed = 29
"#;

/// The counts the proxy's modes raise, by name.
fn counts(a: &Audit) -> [(&'static str, u64); 5] {
    [
        ("order_violations", a.order_violations),
        ("lease_overlaps", a.lease_overlaps),
        ("ack_regressions", a.ack_regressions),
        ("unexpected", a.unexpected),
        ("stale_acks_accepted", a.stale_acks_accepted),
    ]
}

/// What one run through the proxy gave.
struct Ran {
    code: i32,
    audit: Audit,
    stderr: String,
    /// Deliveries in the exported history whose ack the broker refused.
    refused: usize,
}

/// Runs the scenario through the proxy.
fn run_through(dir: &Path, proxy: &str, db: &str, name: &str) -> Ran {
    let out = dir.join(name);
    let history = dir.join(format!("{name}.jsonl"));
    let scenario = dir.join("scenario.toml");
    let o = Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .arg("run")
        .arg(&scenario)
        .args([OsStr::new("--out"), out.as_os_str()])
        .args([OsStr::new("--broker-url"), OsStr::new(proxy)])
        .args([OsStr::new("--database-url"), OsStr::new(db)])
        .args([OsStr::new("--history"), history.as_os_str()])
        .args(["--run-id", name])
        .output()
        .expect("run ackbench");
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let results = written_results(&out, &stderr);
    let audit = results.cells[0].rounds[0].audit.clone();
    let refused = refused_in_history(&history, &audit);
    Ran {
        code: o.status.code().unwrap_or(-1),
        audit,
        stderr,
        refused,
    }
}

/// Checks the exported history (one JSON object per delivery, at least one per message
/// acked) and counts the deliveries whose ack was refused.
fn refused_in_history(path: &Path, audit: &Audit) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() as u64 >= audit.acked, "{} lines", lines.len());
    let first = &lines[0];
    for key in [
        "consumer",
        "partition",
        "lease",
        "txn",
        "producer",
        "seq",
        "pop_sent_us",
        "verdict",
    ] {
        assert!(first.get(key).is_some(), "{key} in {first}");
    }
    lines.iter().filter(|l| l["verdict"] == "refused").count()
}

/// Whether `count` may also rise in `mode` because what the proxy forged breaks that guarantee
/// too: a swallowed ack may be a late one (a stalled batch), which the broker would have refused
/// because its lease had passed, so its forged success is also a stale ack accepted; and an ack
/// forged open for a partition nobody took yet leaves the message to come back after it.
fn side_effect(mode: Mode, count: &str) -> bool {
    matches!(
        (mode, count),
        (Mode::Swallow, "stale_acks_accepted") | (Mode::Fence, "ack_regressions")
    )
}

#[test]
fn each_broken_guarantee_is_counted_and_only_then() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("guarantees", "proxy");
    std::fs::write(dir.join("scenario.toml"), SCENARIO).unwrap();
    let db = throwaway_pg::shared()
        .create_database("guarantees_proxy")
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let bin = broker_binary::locate(None).unwrap();
    let broker = rt
        .block_on(BrokerProcess::start(&bin, &db, &[], dir.join("broker.log")))
        .unwrap();
    let proxy = rt.block_on(Proxy::start(&broker.url));
    let cases = [
        (Mode::PassThrough, "passthrough", None),
        (Mode::Swap, "swap", Some("order_violations")),
        (Mode::Share, "share", Some("lease_overlaps")),
        (Mode::Swallow, "swallow", Some("ack_regressions")),
        (Mode::Invent, "invent", Some("unexpected")),
        (Mode::Fence, "fence", Some("stale_acks_accepted")),
    ];
    for (mode, name, broken) in cases {
        proxy.set_mode(mode);
        let Ran {
            code,
            audit: a,
            stderr,
            refused,
        } = run_through(&dir, &proxy.url, &db, name);
        let context = format!("{name}: {a:#?}\n{stderr}");
        eprintln!(
            "{name}: perturbed {}, refused acks {refused}, {:?}",
            proxy.perturbed(),
            counts(&a)
        );
        if mode == Mode::PassThrough {
            assert!(
                refused > 0,
                "late acks were refused, and not counted: {context}"
            );
        }
        assert!(a.history_checked && a.drained, "{context}");
        assert_eq!((a.lost, a.undrained), (0, 0), "{context}");
        assert!(a.pushed > 0 && a.acked > 0, "{context}");
        for (count, n) in counts(&a) {
            if Some(count) == broken {
                assert!(proxy.perturbed() > 0, "{name}: the proxy perturbed nothing");
                assert!(n > 0, "{count} not counted: {context}");
                assert!(!a.examples[count].is_empty(), "{context}");
            } else if !side_effect(mode, count) {
                assert_eq!(n, 0, "{count}: {context}");
            }
        }
        match broken {
            None => assert_eq!(code, 0, "{context}"),
            Some(_) => {
                assert_eq!(code, 1, "a broken promise fails the run: {context}");
                assert!(
                    stderr.contains("guarantees the target promises were broken"),
                    "{stderr}"
                );
            }
        }
    }
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}
