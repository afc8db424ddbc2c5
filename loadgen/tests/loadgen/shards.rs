//! Sharded load generation through the real binaries: one broker started by the test on a
//! database of the shared throwaway cluster, a scenario run once whole and once as three shards
//! (`run --shard I/3 --run-id`, in parallel, against that broker), the shards merged
//! (`ackbench merge`): the merged counts and audit must be those of the whole run, with messages
//! pushed by one shard acked by another. Bad `--shard` values and mismatched shards are refused.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ackbench::target::broker::BrokerProcess;
use ackbench::target::broker_binary;
use ackbench_reports::results::Results;

use crate::common::{a_run_judged_by_its_audit, ackbench, temp_dir, written_results};

/// A prefilled backlog on 6 partitions drained by two consumer groups of 6 wildcard consumers
/// (so shards pop what other shards prefilled) answering with a share of `dlq`; tiny windows.
/// No warm-up and a backlog of several seconds' work, so the measured window holds acks even
/// when one shard's process starts late (a shard that finds the backlog gone acks nothing in its
/// window and has no `ack` histogram at all).
const SCENARIO: &str = r#"
name = "shards"
[queue]
name = "shards"
partitions = 6
[queue.options]
lease_time = 5
dead_letter_queue = true
[prefill]
messages_per_partition = 300
batch = 50
[producers]
count = 0
[consumers]
count = 6
group = "g"
groups = 2
pop_batch = 5
long_poll = true
long_poll_timeout_ms = 200
[consumers.outcomes]
completed = 90
dlq = 10
[run]
warmup_secs = 0
duration_secs = 1
drain_timeout_secs = 30
rounds = 1
seed = 5
"#;

fn run_ackbench(args: &[&OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .args(args)
        .output()
        .expect("run ackbench")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `ackbench run SCENARIO --out OUT --broker-url URL --database-url DB EXTRA` in a child.
fn spawn_run(
    scenario: &Path,
    out: &Path,
    target: &[String],
    extra: &[&str],
) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .arg("run")
        .arg(scenario)
        .arg("--out")
        .arg(out)
        .args(target)
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn ackbench")
}

fn finished(child: std::process::Child, out: &Path) -> Results {
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    written_results(out, &stderr(&o))
}

#[test]
fn three_shards_merged_count_and_audit_as_one_process() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("shards", "merge");
    let db = throwaway_pg::shared()
        .create_database("shards_merge")
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let bin = broker_binary::locate(None).unwrap();
    let broker = rt
        .block_on(BrokerProcess::start(&bin, &db, &[], dir.join("broker.log")))
        .unwrap();
    let scenario = dir.join("scenario.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let target = vec![
        "--broker-url".to_string(),
        broker.url.clone(),
        "--database-url".to_string(),
        db.clone(),
    ];
    let whole_out = dir.join("whole");
    let whole = finished(
        spawn_run(&scenario, &whole_out, &target, &["--run-id", "whole"]),
        &whole_out,
    );
    let outs: Vec<PathBuf> = (0..3).map(|i| dir.join(format!("shard{i}"))).collect();
    let children: Vec<_> = outs
        .iter()
        .enumerate()
        .map(|(i, out)| {
            let shard = format!("{i}/3");
            spawn_run(
                &scenario,
                out,
                &target,
                &["--shard", &shard, "--run-id", "split"],
            )
        })
        .collect();
    let shards: Vec<Results> = children
        .into_iter()
        .zip(&outs)
        .map(|(c, out)| finished(c, out))
        .collect();
    let merged_out = dir.join("merged");
    let mut args: Vec<&OsStr> = vec![OsStr::new("merge")];
    args.extend(outs.iter().map(|p| p.as_os_str()));
    args.extend([OsStr::new("--out"), merged_out.as_os_str()]);
    let o = run_ackbench(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let merged = written_results(&merged_out, &stderr(&o));

    let (w, m) = (
        &whole.cells[0].summary.audit,
        &merged.cells[0].summary.audit,
    );
    assert_eq!(w.pushed, 3600, "1800 messages owed to 2 groups: {w:?}");
    assert_eq!(m.pushed, w.pushed, "merged: {m:?}");
    assert_eq!((w.lost, m.lost, w.undrained, m.undrained), (0, 0, 0, 0));
    assert!(w.drained && m.drained);
    assert_eq!(m.acked + m.dead_lettered + m.dropped, m.pushed, "{m:?}");
    assert!(m.dead_lettered > 0, "the DLQ was reconciled: {m:?}");
    let alone: u64 = shards
        .iter()
        .map(|s| s.cells[0].summary.audit.undrained)
        .sum();
    assert!(
        alone > 0,
        "some messages a shard prefilled were resolved only by another shard"
    );
    let sum = |f: fn(&Results) -> f64| shards.iter().map(f).sum::<f64>();
    let acked = |r: &Results| r.cells[0].rounds[0].figures.acked_messages;
    assert_eq!(acked(&merged), sum(acked), "window counts add up");
    let ack_count = |r: &Results| {
        let latency = &r.cells[0].rounds[0].figures.latency_ms;
        latency.get("ack").map_or(0.0, |p| p.count)
    };
    assert!(ack_count(&merged) > 0.0, "the window held acks");
    assert_eq!(ack_count(&merged), sum(ack_count), "histograms merged");
    let run = merged.meta.shards.as_ref().unwrap();
    assert_eq!(
        (run.count, run.index, run.run_id.as_str()),
        (3, None, "split")
    );
    let report = std::fs::read_to_string(merged_out.join("report.html")).unwrap();
    assert!(report.contains("merged from 3 shards of run split"));

    let again = run_ackbench(&[
        OsStr::new("merge"),
        outs[0].as_os_str(),
        outs[0].as_os_str(),
        outs[2].as_os_str(),
    ]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("is given twice"),
        "{}",
        stderr(&again)
    );
    let foreign = run_ackbench(&[
        OsStr::new("merge"),
        outs[0].as_os_str(),
        whole_out.as_os_str(),
    ]);
    assert_eq!(foreign.status.code(), Some(2));
    assert!(
        stderr(&foreign).contains("not a shard's results"),
        "{}",
        stderr(&foreign)
    );
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_shards_are_refused_before_anything_runs() {
    let dir = temp_dir("shards", "refused");
    for (flags, words) in [
        (vec!["--shard", "0/3"], "--shard 0/3 needs --broker-url"),
        (
            vec!["--shard", "4/3"],
            "shard index 4 is out of range for 3 shards",
        ),
        (vec!["--shard", "x"], "is not I/N"),
        (
            vec!["--shard", "1/3", "--broker-url", "http://127.0.0.1:9"],
            "--shard 1/3 needs --run-id",
        ),
        (vec!["--run-id", "Bad_Id"], "--run-id `Bad_Id`"),
    ] {
        let out = ackbench(&dir, "run", SCENARIO, &flags);
        assert_eq!(out.code, 2, "{flags:?}: {}", out.stderr);
        assert!(out.stderr.contains(words), "{flags:?}: {}", out.stderr);
    }
    assert!(
        std::fs::read_dir(&dir).unwrap().count() == 1,
        "nothing but the scenario file was written"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The scenario the Kubernetes ConfigMap ships (`deploy/kubernetes/`) is one `ackbench` runs.
#[test]
fn the_kubernetes_configmaps_scenario_parses() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/kubernetes/scenario-configmap.yaml"
    );
    let yaml = std::fs::read_to_string(path).unwrap();
    let (_, block) = yaml.split_once("scenario.toml: |\n").unwrap();
    let toml: String = block
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let s = ackbench::scenario::Scenario::parse(&toml, "scenario-configmap.yaml")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.name, "sharded");
}
