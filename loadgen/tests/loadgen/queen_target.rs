//! The load generator against Queen MQ's wire, in CI without Queen: every recorded answer of a
//! real Queen (`tests/fixtures/queen/`) reads as what it means, and a whole `ackbench run`
//! against a server answering in the recorded shapes (`common::recorded_queen`) ends with a
//! report: one cell named after the target, accelerator gates not applicable, the wire variants
//! seen, and an audit with nothing lost.

use std::ffi::OsStr;

use ackbench::measure::broker_metrics;
use ackbench::measure::pg_counters::{procedure_of, ACK_PROCEDURES};
use ackbench::target::profile::{engine_of, Health, TargetKind};
use ackbench::workload::answers::{note_acks, AckAnswer, PopAnswer, Variants};
use ackbench_reports::results::Results;
use ackbench_wire::PushResultRef;
use serde_json::Value;

use crate::common::recorded_queen::{fixture, RecordedQueen};
use crate::common::{a_run_judged_by_its_audit, ackbench, temp_dir, written_results, Outcome};

/// The recorded answer body of fixture `name`, as the server sent it.
fn body(name: &str) -> String {
    fixture(name)["response"]["body"].to_string()
}

#[test]
fn recorded_pushes_read_as_pushes() {
    for name in [
        "10-push-single",
        "11-push-batch",
        "12-push-duplicate-transaction-id",
        "13-push-batch-duplicate-and-new",
        "14-push-default-partition",
    ] {
        assert_eq!(fixture(name)["response"]["status"], 200, "{name}");
        let text = body(name);
        let results: Vec<PushResultRef<'_>> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            results
                .iter()
                .all(|r| r.status == "queued" || r.status == "duplicate"),
            "{name}"
        );
    }
}

#[test]
fn recorded_pops_read_as_messages_or_as_empty() {
    let variants = Variants::default();
    for name in [
        "20-pop-queue-wildcard-batch1-nowait",
        "23-pop-partition-batch10-nowait",
        "34-pop-queue-wildcard-batch10-nowait",
        "36-pop-queue-wildcard-batch1-wait",
        "38-pop-partition-batch10-wait",
        "40-pop-consumer-group-batch10-nowait",
        "45-pop-queue-mode-same-queue",
    ] {
        let text = body(name);
        let pop: PopAnswer<'_> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        pop.note(&variants);
        assert!(!pop.messages.is_empty(), "{name}");
        assert!(pop.messages.iter().all(|m| m.lease_id.is_some()), "{name}");
    }
    for name in [
        "50-pop-empty-nowait",
        "51-pop-empty-wait",
        "52-pop-empty-partition-nowait",
        "53-pop-unknown-queue-nowait",
    ] {
        let text = body(name);
        let pop: PopAnswer<'_> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        pop.note(&variants);
        assert!(pop.messages.is_empty(), "{name} is an empty pop");
    }
    let seen = variants.snapshot();
    for what in [
        "popped messages carry no queue",
        "popped messages carry no deliveryAttempt",
        "queue mode reported as consumerGroup __QUEUE_MODE__ (not null)",
        "empty pop answered 200 with messages [] (not 204)",
    ] {
        assert!(seen.contains_key(what), "{what} in {seen:?}");
    }
    assert_eq!(
        seen["empty pop answered success false with an error (no_available_partition, partition_not_found)"],
        3
    );
}

#[test]
fn recorded_acks_read_with_their_outcomes() {
    let variants = Variants::default();
    let read = |name: &str| -> Vec<(bool, bool, bool)> {
        let text = body(name);
        let acks: Vec<AckAnswer<'_>> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        note_acks(&acks, &variants);
        acks.iter()
            .map(|a| (a.success, a.dlq, a.lease_refused()))
            .collect()
    };
    assert_eq!(read("21-ack-single-completed"), [(true, false, false)]);
    assert_eq!(
        read("22-ack-single-repeat"),
        [(false, false, true)],
        "a repeated ack is a refused lease"
    );
    assert_eq!(read("29-ack-single-dlq"), [(true, true, false)]);
    assert_eq!(
        read("30-ack-batch-mixed"),
        [(true, false, false), (false, false, false)]
    );
    assert_eq!(read("28-ack-batch-completed").len(), 7);
    let seen = variants.snapshot();
    assert!(seen.contains_key("ack answers carry no noop"), "{seen:?}");
    assert!(
        seen.contains_key("ack of an unknown transactionId answered \"Message not found\""),
        "{seen:?}"
    );
}

#[test]
fn recorded_health_procedures_and_metrics_name_the_rows_engine() {
    let health = Health::read(body("01-health").as_bytes());
    assert!(health.queen);
    assert_eq!(health.version, "1.0.0");
    let procedures: Vec<String> =
        serde_json::from_value(fixture("procedures")["proname"].clone()).unwrap();
    assert_eq!(engine_of(&procedures), Some(TargetKind::QueenRows));
    for p in TargetKind::QueenRows.procedures().ack {
        assert!(procedures.iter().any(|x| x == p), "{p} is Queen's");
    }
    let statements = fixture("hot-path-statements");
    let called: Vec<String> = statements["statements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| procedure_of(s["query"].as_str().unwrap()))
        .collect();
    let rows = TargetKind::QueenRows.procedures();
    for p in rows
        .push
        .iter()
        .chain(rows.pop)
        .chain(rows.ack)
        .chain(rows.dlq)
    {
        assert!(called.iter().any(|c| c == p), "{p} in {called:?}");
    }
    assert!(ACK_PROCEDURES.contains(&"ack_messages_v2"));
    let text = fixture("73-metrics-prometheus-after-traffic")["response"]["body"]
        .as_str()
        .unwrap()
        .to_string();
    let exposition = broker_metrics::parse(&text);
    assert!(exposition.series.contains_key("queen_db_pool_size"));
    assert!(
        !exposition
            .series
            .keys()
            .any(|k| k.starts_with("queen_ack_registry")),
        "Queen has no ack registry series"
    );
}

/// A queue-mode scenario with a few dead letters, small enough for a few seconds.
const SCENARIO: &str = r#"
name = "recorded-queen"
[queue]
name = "rq"
partitions = 4
[prefill]
messages_per_partition = 50
batch = 25
[producers]
count = 2
batch = 5
mode = "open"
rate = 200
[consumers]
count = 4
pop_batch = 10
long_poll = true
long_poll_timeout_ms = 500
[consumers.outcomes]
completed = 0.95
dlq = 0.05
[run]
warmup_secs = 1
duration_secs = 2
drain_timeout_secs = 20
rounds = 1
seed = 3
[[gates]]
name = "fusion cuts ack commits"
kind = "ratio"
figure = "ack_commits_per_ack"
numerator = "registry+fusion"
denominator = "none"
max = 0.9
"#;

/// Runs `ackbench run SCENARIO --broker-url <recorded Queen> ARGS` in a scratch directory (one
/// run at a time with the other tests' real runs, whose figures it would skew).
fn run_against_recorded_queen(name: &str, args: &[&str]) -> (Outcome, std::path::PathBuf) {
    let _one = a_run_judged_by_its_audit();
    let dir = temp_dir("queen", name);
    let out = dir.join("out");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let queen = runtime.block_on(RecordedQueen::start());
    let mut all = vec![
        OsStr::new("--out"),
        out.as_os_str(),
        OsStr::new("--broker-url"),
        OsStr::new(&queen.url),
    ];
    all.extend(args.iter().map(OsStr::new));
    let outcome = ackbench(&dir, "run", SCENARIO, &all);
    drop(runtime);
    (outcome, dir)
}

#[test]
fn a_run_against_recorded_queen_ends_with_a_report_and_nothing_lost() {
    let (outcome, dir) = run_against_recorded_queen("run", &["--target-kind", "queen-rows"]);
    let out = dir.join("out");
    let r = written_results(&out, &outcome.stderr);
    assert_eq!(
        outcome.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        outcome.stdout, outcome.stderr
    );
    assert_eq!(r.cells.len(), 1);
    let cell = &r.cells[0];
    assert_eq!(cell.name, "queen-rows-1.0.0");
    let a = &cell.summary.audit;
    assert!(a.drained && a.lost == 0 && a.pushed > 0, "{a:?}");
    assert!(a.dead_lettered > 0, "the scenario dead-letters some: {a:?}");
    assert!(
        !a.dlq_unchecked && a.dead_lettered_unconfirmed == 0,
        "every dead letter found in Queen's listing (queue mode listed as __QUEUE_MODE__): {a:?}"
    );
    assert!(
        r.meta
            .broker
            .target_kind
            .as_deref()
            .unwrap()
            .starts_with("queen-rows"),
        "{:?}",
        r.meta.broker.target_kind
    );
    let variants = &r.meta.broker.wire_variants;
    for what in [
        "push answered 200 (not 201)",
        "ack answers carry no noop",
        "popped messages carry no queue",
    ] {
        assert!(variants.contains_key(what), "{what} in {variants:?}");
    }
    let gate = r.gates.iter().find(|g| g.kind == "ratio").unwrap();
    assert!(gate.not_applicable && gate.passed, "{gate:?}");
    assert!(
        outcome.stdout.contains("not applicable"),
        "{}",
        outcome.stdout
    );
    let figures = &cell.rounds[0].figures;
    assert!(figures.ack_throughput > 0.0 && figures.push_throughput > 0.0);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_brokers_own_database_is_measured_but_never_created_or_dropped() {
    let cluster = throwaway_pg::shared();
    let url = cluster.create_database("recorded_queen_own").unwrap();
    cluster
        .psql(
            "recorded_queen_own",
            "CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)",
        )
        .unwrap();
    let (outcome, dir) = run_against_recorded_queen(
        "own-db",
        &["--target-kind", "queen-rows", "--database-url", &url],
    );
    assert_eq!(outcome.code, 0, "stderr:\n{}", outcome.stderr);
    assert_eq!(
        cluster
            .psql("recorded_queen_own", "SELECT x FROM kept")
            .unwrap(),
        "7",
        "the database and what it held survive the run"
    );
    let databases = cluster
        .psql(
            "postgres",
            "SELECT string_agg(datname, ',') FROM pg_database",
        )
        .unwrap();
    assert!(!databases.contains("ackbench_"), "{databases}");
    let text = std::fs::read_to_string(dir.join("out/results.json")).unwrap();
    let r = Results::from_json(&text).unwrap();
    assert!(!r.meta.postgres.embedded);
    let figures = &r.cells[0].rounds[0].figures;
    assert!(
        figures.commits.is_finite(),
        "counters were read from that database"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_queen_without_its_database_or_kind_is_refused_naming_both() {
    let (outcome, dir) = run_against_recorded_queen("refused", &[]);
    assert_eq!(outcome.code, 2, "stderr:\n{}", outcome.stderr);
    assert!(
        outcome.stderr.contains("--database-url") && outcome.stderr.contains("--target-kind"),
        "{}",
        outcome.stderr
    );
    let (bad, _) = run_against_recorded_queen("bad-kind", &["--target-kind", "queen"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr
            .contains("--target-kind: `queen` is not a target kind"),
        "{}",
        bad.stderr
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Every fixture file is a recorded exchange with a status, except the two listings.
#[test]
fn every_fixture_is_a_recorded_exchange() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/queen");
    let mut exchanges = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if name.starts_with(|c: char| c.is_ascii_digit()) {
            assert!(v["response"]["status"].is_u64(), "{name}");
            exchanges += 1;
        }
    }
    assert_eq!(exchanges, 47);
}
