//! Scenario files: the shipped scenarios parse, defaults are the documented ones, and every bad
//! key or value is refused naming the key and its line (fixtures mark that line with `# ERROR`).

use ackbench::scenario::{
    AckMode, Cell, Direction, FaultKind, Figure, GateCheck, LatencyOp, LoopMode, Overrides,
    Partitioning, Percentile, PopRoute, Replication, ScalarFigure, Scenario, ScenarioError,
};
use std::path::PathBuf;

const SHIPPED: [&str; 14] = [
    "deep-partitions",
    "tiny-batches",
    "mixed-nacks",
    "lease-expiry",
    "smoke",
    "drain-pop1",
    "drain-pop100",
    "vs-peers",
    "vs-peers-pop1",
    "faults",
    "faults-db",
    "multi-broker",
    "endurance",
    "multi-broker-faults",
];

fn scenario_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(format!("{name}.toml"))
}

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn shipped(name: &str) -> Scenario {
    Scenario::load(scenario_path(name)).unwrap_or_else(|e| panic!("{e}"))
}

/// The 1-based line of the fixture marked `# ERROR`.
fn marked_line(text: &str) -> usize {
    text.lines()
        .position(|l| l.contains("# ERROR"))
        .expect("fixture has an `# ERROR` marker")
        + 1
}

/// Loads a bad fixture and checks the error is at its marked line, reported as `path:line: ...`.
fn fixture_error(name: &str) -> ScenarioError {
    let path = fixture_path(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let err = Scenario::load(&path).expect_err("the fixture must be refused");
    let line = marked_line(&text);
    assert_eq!(err.line(), Some(line), "wrong line in: {err}");
    let prefix = format!("{}:{line}: ", path.display());
    assert!(err.to_string().starts_with(&prefix), "{err}");
    err
}

/// Parses inline text expected to fail; returns the error.
fn parse_err(text: &str) -> ScenarioError {
    Scenario::parse(text, "inline.toml").expect_err("the text must be refused")
}

fn assert_mentions(err: &ScenarioError, words: &[&str]) {
    let text = err.to_string();
    for word in words {
        assert!(text.contains(word), "`{word}` missing from: {text}");
    }
}

#[test]
fn every_shipped_scenario_parses_and_validates() {
    let dir = scenario_path("x").parent().unwrap().to_path_buf();
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".toml").map(str::to_string))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = SHIPPED.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed, "every scenario file is checked here");
    for name in SHIPPED {
        let s = shipped(name);
        assert_eq!(s.name, name);
        assert!(!s.description.is_empty(), "{name} has a description");
        assert!(!s.run.cells.is_empty());
    }
}

#[test]
fn shipped_scenarios_have_their_character() {
    let deep = shipped("deep-partitions");
    assert!(deep.queue.partitions <= 4);
    assert!(deep.prefill.messages_per_partition >= 100_000);
    assert_eq!(deep.prefill.batch, 1000);
    assert_eq!(deep.queue.options.dedup_window_seconds, 0);
    assert!(deep.consumers.lease_less > 0.0);
    assert_eq!(deep.consumers.ack_mode, AckMode::Batch);
    assert!(
        (100..=200).contains(&deep.consumers.pop_batch),
        "the batch sizes Queen's users run"
    );

    let tiny = shipped("tiny-batches");
    assert!(tiny.queue.partitions >= 128);
    assert!(tiny.consumers.pop_batch <= 2);
    assert!(tiny.consumers.count >= 32);
    assert_eq!(tiny.consumers.pop_route, PopRoute::Wildcard);
    assert!(tiny.gates.iter().any(|g| {
        g.figure == Figure::Scalar(ScalarFigure::AckCommitsPerAck)
            && g.check
                == GateCheck::Ratio {
                    numerator: Cell::RegistryFusion,
                    denominator: Cell::None,
                    max: Some(0.3),
                    min: None,
                }
    }));

    let nacks = shipped("mixed-nacks");
    let o = &nacks.consumers.outcomes;
    assert!(o.failed > 0.0 && o.retry > 0.0 && o.dlq > 0.0);
    assert!(nacks.queue.options.dlq_enabled());

    let expiry = shipped("lease-expiry");
    assert!(expiry.lease_seconds() <= 5);
    assert!(expiry.consumers.stall > 0.0);
}

#[test]
fn peer_scenarios_run_every_broker_cell_and_every_peer() {
    for name in ["vs-peers", "vs-peers-pop1"] {
        let s = shipped(name);
        let mut expected = Cell::ALL.to_vec();
        expected.extend(Cell::peers());
        assert_eq!(s.run.cells, expected, "{name}");
    }
    assert_eq!(shipped("vs-peers").consumers.pop_batch, 100);
    assert_eq!(shipped("vs-peers-pop1").consumers.pop_batch, 1);
}

#[test]
fn drain_scenarios_drain_a_backlog_that_outlasts_the_window() {
    for (name, partitions, consumers, pop) in
        [("drain-pop1", 128, 32, 1), ("drain-pop100", 16, 8, 100)]
    {
        let s = shipped(name);
        assert_eq!(
            s.producers.count, 0,
            "{name}: nothing pushed during the run"
        );
        assert_eq!(s.queue.partitions, partitions, "{name}");
        let c = &s.consumers;
        assert_eq!((c.count, c.pop_batch), (consumers, pop), "{name}");
        assert_eq!(c.pop_route, PopRoute::Wildcard, "{name}");
        assert_eq!(c.ack_mode, AckMode::Batch, "{name}");
        assert_eq!(c.outcomes.completed, 1.0, "{name}");
        // The backlog must last warm-up plus window at a rate above PGMQ's (1.5x its figure).
        let pgmq = if pop == 1 { 2_325.0 } else { 26_306.0 };
        let backlog = (s.prefill.messages_per_partition * partitions as u64) as f64;
        let needed = 1.5 * pgmq * (s.run.warmup_secs + s.run.duration_secs);
        assert!(backlog >= needed, "{name}: {backlog} < {needed}");
    }
}

#[test]
fn smoke_uses_every_feature_and_fits_in_a_minute() {
    let s = shipped("smoke");
    assert!(s.prefill.messages_per_partition > 0);
    assert_eq!(s.producers.mode, LoopMode::Open);
    assert!(s.consumers.long_poll);
    assert!(s.consumers.lease_less > 0.0);
    assert!(s.consumers.stall > 0.0);
    assert!(s.consumers.outcomes.failed > 0.0 && s.consumers.outcomes.dlq > 0.0);
    assert!(s.consumers.groups.is_some());
    assert_eq!(s.run.cells.len(), 4);
    let per_cell = s.run.warmup_secs + s.run.duration_secs;
    assert!(per_cell * s.run.cells.len() as f64 * s.run.rounds as f64 <= 40.0);
    let figures: Vec<String> = s.gates.iter().map(|g| g.figure.name()).collect();
    assert!(figures.contains(&"ack_commits_per_ack".to_string()));
    assert!(figures.contains(&"pg_exec_ms_per_ack".to_string()));
    assert!(s.broker.env.is_empty(), "smoke runs the broker's defaults");
}

/// A benchmark figure counts only on the broker's defaults: a shipped scenario sets an engine
/// variable only to show that variable's effect, and then names it in its description.
#[test]
fn shipped_scenarios_run_the_broker_defaults_unless_they_demonstrate_a_knob() {
    const ENGINE: [&str; 6] = [
        "QUEEN_ACK_FUSION_SHARDS",
        "QUEEN_POP_FUSION_SHARDS",
        "QUEEN_ACK_FUSION_HOLD_MS",
        "QUEEN_POP_FUSION_HOLD_MS",
        "QUEEN_FUSION_LINGER_MS",
        "QUEEN_FUSION_LINGER_MIN_RATE",
    ];
    let dir = scenario_path("smoke");
    let dir = dir.parent().unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let s = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
        for var in ENGINE.iter().filter(|v| s.broker.env.contains_key(**v)) {
            assert!(
                s.description.contains(var),
                "{}: sets {var} without saying it demonstrates it",
                path.display()
            );
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} scenarios found");
}

#[test]
fn minimal_file_gets_the_documented_defaults() {
    let s = Scenario::load(fixture_path("minimal.toml")).unwrap();
    assert_eq!(s.name, "minimal");
    assert_eq!(s.description, "");
    assert_eq!(s.queue.name, "ackbench");
    assert_eq!(s.queue.partitions, 1);
    let o = &s.queue.options;
    assert_eq!(
        (o.lease_time, o.retry_limit, o.dedup_window_seconds),
        (300, 3, 3600)
    );
    assert!(o.dead_letter_queue && o.dlq_after_max_retries);
    assert_eq!((o.completed_retention_seconds, o.retention_seconds), (0, 0));
    assert_eq!(s.prefill.messages_per_partition, 0);
    assert_eq!((s.prefill.batch, s.prefill.payload_bytes), (1000, 256));
    assert_eq!(s.producers.count, 1);
    assert_eq!(s.producers.batch, 1);
    assert_eq!(s.producers.mode, LoopMode::Closed);
    assert_eq!(s.producers.rate, None);
    assert_eq!(s.producers.partitioning, Partitioning::RoundRobin);
    let c = &s.consumers;
    assert_eq!((c.count, c.pop_batch, c.partitions_per_pop), (1, 200, 1));
    assert_eq!(c.group_names(), vec![None]);
    assert!(!c.long_poll);
    assert_eq!(c.long_poll_timeout_ms, 5000);
    assert_eq!(c.ack_mode, AckMode::Batch);
    assert_eq!((c.lease_less, c.stall, c.stall_extra_ms), (0.0, 0.0, 1000));
    assert_eq!(c.outcomes.completed, 1.0);
    assert_eq!(s.lease_seconds(), 300);
    assert_eq!(
        (s.run.warmup_secs, s.run.duration_secs, s.run.rounds),
        (5.0, 30.0, 3)
    );
    assert_eq!(s.run.cells, Cell::ALL.to_vec());
    assert_eq!((s.run.seed, s.run.confirm), (None, 0));
    assert!(s.broker.env.is_empty() && s.broker.pool_size.is_none());
    assert!(s.gates.is_empty());
    assert!(s.source_text.contains("smallest scenario"));
}

#[test]
fn name_defaults_to_a_clean_file_stem_and_is_checked() {
    let s = Scenario::parse("", "dir/my run (2).toml").unwrap();
    assert_eq!(s.name, "my-run--2-");
    let err = parse_err("description = \"x\"\nname = \"a b\"\n");
    assert_eq!((err.key(), err.line()), (Some("name"), Some(2)));
}

#[test]
fn unknown_key_at_top_level() {
    let err = fixture_error("unknown_top_level.toml");
    assert_eq!(err.key(), Some("batchsize"));
    assert_mentions(&err, &["unknown key `batchsize` at top level", "consumers"]);
}

#[test]
fn unknown_key_in_a_section() {
    let err = fixture_error("unknown_in_section.toml");
    assert_eq!(err.key(), Some("consumers.batchsize"));
    assert_mentions(
        &err,
        &[
            "unknown key `batchsize` in [consumers]",
            "expected one of:",
            "pop_batch",
        ],
    );
}

#[test]
fn unknown_key_in_a_gate() {
    let err = fixture_error("unknown_in_gate.toml");
    assert_eq!(err.key(), Some("gates[1].threshold"));
    assert_mentions(&err, &["unknown key `threshold` in [[gates]]", "max"]);
}

#[test]
fn unknown_key_written_dotted_or_inline() {
    let err = parse_err("name = \"x\"\nconsumers.outcomes.faild = 0.1\n");
    assert_eq!(err.line(), Some(2));
    assert_eq!(err.key(), Some("consumers.outcomes.faild"));
    let err = parse_err("name = \"x\"\n[queue]\n\noptions = { lease_time = 5, lease = 3 }\n");
    assert_eq!(err.line(), Some(4));
    assert_mentions(&err, &["unknown key `lease` in [queue.options]"]);
}

#[test]
fn negative_rate_is_refused() {
    let err = fixture_error("negative_rate.toml");
    assert_eq!(err.key(), Some("producers.rate"));
    assert_mentions(&err, &["producers.rate must be positive", "-500"]);
}

#[test]
fn pop_batch_zero_is_refused() {
    let err = fixture_error("pop_batch_zero.toml");
    assert_eq!(err.key(), Some("consumers.pop_batch"));
    assert_mentions(
        &err,
        &["consumers.pop_batch must be between 1 and 10000, got 0"],
    );
}

#[test]
fn outcomes_must_sum_to_one_or_a_hundred() {
    let err = fixture_error("outcomes_not_summing.toml");
    assert_eq!(err.key(), Some("consumers.outcomes"));
    assert_mentions(&err, &["consumers.outcomes must sum to 1", "100"]);
}

#[test]
fn outcomes_as_percentages_or_with_completed_left_out() {
    let s = Scenario::parse(
        "[consumers.outcomes]\ncompleted = 85\nfailed = 7\nretry = 5\ndlq = 3\n",
        "p.toml",
    )
    .unwrap();
    let o = &s.consumers.outcomes;
    assert!((o.completed - 0.85).abs() < 1e-9 && (o.dlq - 0.03).abs() < 1e-9);
    let s = Scenario::parse(
        "[consumers.outcomes]\nfailed = 0.1\nretry = 0.05\n",
        "p.toml",
    )
    .unwrap();
    assert!((s.consumers.outcomes.completed - 0.85).abs() < 1e-9);
    let err = parse_err("[consumers.outcomes]\nfailed = 7\nretry = 5\n");
    assert_eq!(err.line(), Some(1));
    assert_mentions(&err, &["consumers.outcomes", "give completed too"]);
    let err = parse_err("[consumers.outcomes]\ncompleted = 1.1\nfailed = -0.1\n");
    assert_eq!(err.key(), Some("consumers.outcomes.failed"));
    assert_eq!(err.line(), Some(3));
}

#[test]
fn unknown_cell_is_refused() {
    let err = fixture_error("unknown_cell.toml");
    assert_eq!(err.key(), Some("run.cells[1]"));
    assert_mentions(
        &err,
        &[
            "run.cells[1] must be one of",
            "`registry+fusion`",
            "`fusoin`",
        ],
    );
}

#[test]
fn unknown_gate_figure_is_refused() {
    let err = fixture_error("unknown_figure.toml");
    assert_eq!(err.key(), Some("gates[0].figure"));
    assert_mentions(
        &err,
        &[
            "gates[0].figure must be a known figure",
            "ack_commits_per_ack",
            "`acks_per_commit`",
        ],
    );
}

#[test]
fn open_loop_needs_a_rate() {
    let err = fixture_error("open_without_rate.toml");
    assert_eq!(err.key(), Some("producers.rate"));
    assert_mentions(&err, &["producers.rate", "required", "\"open\""]);
}

#[test]
fn closed_loop_refuses_a_rate() {
    let err = parse_err("[producers]\nmode = \"closed\"\nrate = 100\n");
    assert_eq!((err.key(), err.line()), (Some("producers.rate"), Some(3)));
}

#[test]
fn bad_types_and_enum_values_name_the_key() {
    let err = parse_err("[queue]\npartitions = \"four\"\n");
    assert_eq!((err.key(), err.line()), (Some("queue.partitions"), Some(2)));
    assert_mentions(&err, &["queue.partitions must be a non-negative integer"]);
    let err = parse_err("[run]\nrounds = -1\n");
    assert_eq!((err.key(), err.line()), (Some("run.rounds"), Some(2)));
    let err = parse_err("\n[producers]\nmode = \"half-open\"\n");
    assert_eq!((err.key(), err.line()), (Some("producers.mode"), Some(3)));
    assert_mentions(&err, &["`open`", "`closed`", "`half-open`"]);
    let err = parse_err("[consumers]\nack_mode = \"each\"\n");
    assert_eq!(err.key(), Some("consumers.ack_mode"));
}

#[test]
fn syntax_errors_give_the_line() {
    let err = parse_err("name = \"x\"\n[queue\npartitions = 2\n");
    assert!(
        matches!(err, ScenarioError::Syntax { line: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().starts_with("inline.toml:2: not valid TOML"));
}

#[test]
fn cross_key_rules() {
    let err = parse_err("[queue]\npartitions = 2\n[consumers]\npartitions_per_pop = 3\n");
    assert_eq!(err.key(), Some("consumers.partitions_per_pop"));
    assert_mentions(&err, &["at most queue.partitions (2), got 3"]);
    let err = parse_err(
        "[queue]\npartitions = 4\n[consumers]\npop_route = \"partition\"\npartitions_per_pop = 2\n",
    );
    assert_eq!(err.line(), Some(5));
    let err = parse_err("[consumers]\nstall = 0.1\n[run]\ndrain_timeout_secs = 60\n");
    assert_eq!((err.key(), err.line()), (Some("consumers.stall"), Some(2)));
    let err = parse_err("[queue.options]\nlease_time = 2\n[consumers]\nprocessing_ms = 2500\n");
    assert_eq!(err.key(), Some("consumers.processing_ms"));
    let err = parse_err("[producers]\ncount = 0\n");
    assert_mentions(&err, &["nothing to consume"]);
    let err = parse_err("[run]\nwarmup_secs = -1\n");
    assert_eq!((err.key(), err.line()), (Some("run.warmup_secs"), Some(2)));
    let err = parse_err("[run]\nduration_secs = 0\n");
    assert_eq!(err.key(), Some("run.duration_secs"));
    let err = parse_err("[run]\ncells = [\"none\", \"registry\", \"none\"]\n");
    assert_eq!(err.key(), Some("run.cells[2]"));
}

#[test]
fn broker_env_takes_scalars_and_refuses_what_the_harness_sets() {
    let s = Scenario::parse(
        "[broker]\npool_size = 8\n[broker.env]\nQUEEN_ACK_FUSION_SHARDS = 4\nQUEEN_TENANCY_HEADER = true\nRUST_LOG = \"info\"\n",
        "env.toml",
    )
    .unwrap();
    assert_eq!(s.broker.env["QUEEN_ACK_FUSION_SHARDS"], "4");
    assert_eq!(s.broker.env["QUEEN_TENANCY_HEADER"], "1");
    assert_eq!(s.broker.pool_size, Some(8));
    let err = parse_err("[broker.env]\nRUST_LOG = \"info\"\nQUEEN_ACK_FUSION = 0\n");
    assert_eq!(
        (err.key(), err.line()),
        (Some("broker.env.QUEEN_ACK_FUSION"), Some(3))
    );
    assert_mentions(&err, &["run.cells"]);
}

#[test]
fn gates_are_typed_and_checked_against_their_kind() {
    let s = Scenario::parse(
        "[[gates]]\nkind = \"baseline\"\nfigure = \"latency_ms.ack.p99\"\ncell = \"none\"\n\
         [[gates]]\nkind = \"baseline\"\nfigure = \"wal_bytes_per_ack\"\ncell = \"registry\"\n\
         tolerance = 0.02\ndirection = \"two_sided\"\n",
        "g.toml",
    )
    .unwrap();
    assert_eq!(
        s.gates[0].figure,
        Figure::Latency(LatencyOp::Ack, Percentile::P99)
    );
    assert_eq!(
        s.gates[0].check,
        GateCheck::Baseline {
            cell: Cell::None,
            tolerance: 0.5,
            direction: Direction::LowerIsBetter
        }
    );
    assert_eq!(s.gates[1].line, 5);
    assert_eq!(
        s.gates[1].check,
        GateCheck::Baseline {
            cell: Cell::Registry,
            tolerance: 0.02,
            direction: Direction::TwoSided
        }
    );

    let ratio = "[[gates]]\nkind = \"ratio\"\nfigure = \"commits\"\nnumerator = \"registry\"\n";
    let err = parse_err(&format!(
        "{ratio}denominator = \"none\"\ncell = \"none\"\nmax = 1\n"
    ));
    assert_eq!((err.key(), err.line()), (Some("gates[0].cell"), Some(6)));
    let err = parse_err(&format!("{ratio}denominator = \"none\"\n"));
    assert_eq!((err.key(), err.line()), (Some("gates[0].max"), Some(1)));
    let err = parse_err(&format!("{ratio}max = 0.5\n"));
    assert_eq!(err.key(), Some("gates[0].denominator"));
    assert_mentions(&err, &["missing required key `denominator`"]);
    let err = parse_err(&format!("{ratio}denominator = \"registry\"\nmax = 0.5\n"));
    assert_eq!(
        (err.key(), err.line()),
        (Some("gates[0].denominator"), Some(5))
    );
    let err = parse_err(&format!("{ratio}denominator = \"none\"\nmax = -1\n"));
    assert_eq!(err.key(), Some("gates[0].max"));
    let err = parse_err(&format!(
        "[run]\ncells = [\"registry\", \"fusion\"]\n{ratio}denominator = \"none\"\nmax = 0.5\n"
    ));
    assert_eq!(
        (err.key(), err.line()),
        (Some("gates[0].denominator"), Some(7))
    );
    assert_mentions(&err, &["run.cells"]);
    let err = parse_err("[[gates]]\nfigure = \"commits\"\n");
    assert_eq!((err.key(), err.line()), (Some("gates[0].kind"), Some(1)));
}

#[test]
fn overrides_apply() {
    let mut s = shipped("smoke");
    let overrides = Overrides {
        cells: Some(vec!["registry+fusion, none".into(), "registry".into()]),
        peers: None,
        rounds: Some(2),
        duration_secs: Some(3.5),
        warmup_secs: Some(0.0),
        seed: Some(7),
        confirm: Some(2),
    };
    s.apply_overrides(&overrides).unwrap();
    assert_eq!(
        s.run.cells,
        vec![Cell::RegistryFusion, Cell::None, Cell::Registry]
    );
    assert_eq!((s.run.rounds, s.run.seed, s.run.confirm), (2, Some(7), 2));
    assert_eq!((s.run.duration_secs, s.run.warmup_secs), (3.5, 0.0));
    s.apply_overrides(&Overrides::default()).unwrap();
    assert_eq!(s.run.rounds, 2);
    // A subset of the cells the gates need is accepted, the gates kept: the run reports those
    // whose cells it left out as not judged.
    let gates = s.gates.clone();
    let subset = Overrides {
        cells: Some(vec!["registry".into()]),
        ..Overrides::default()
    };
    s.apply_overrides(&subset).unwrap();
    assert_eq!(
        (s.run.cells.clone(), s.gates.clone()),
        (vec![Cell::Registry], gates)
    );
}

#[test]
fn bad_overrides_name_the_flag_and_change_nothing() {
    let original = shipped("smoke");
    let cases: [(Overrides, &str, &str); 5] = [
        (
            Overrides {
                cells: Some(vec!["registry,foo".into()]),
                ..Overrides::default()
            },
            "--cells",
            "unknown cell `foo`",
        ),
        (
            Overrides {
                cells: Some(vec!["none".into(), "none".into()]),
                ..Overrides::default()
            },
            "--cells",
            "twice",
        ),
        (
            Overrides {
                rounds: Some(0),
                ..Overrides::default()
            },
            "--rounds",
            "got 0",
        ),
        (
            Overrides {
                duration_secs: Some(-2.0),
                ..Overrides::default()
            },
            "--duration",
            "positive",
        ),
        (
            Overrides {
                warmup_secs: Some(f64::NAN),
                rounds: Some(5),
                ..Overrides::default()
            },
            "--warmup",
            "at least 0",
        ),
    ];
    for (overrides, flag, words) in cases {
        let mut s = original.clone();
        let err = s.apply_overrides(&overrides).expect_err(flag);
        assert_eq!(err.flag(), Some(flag));
        assert!(err.to_string().starts_with(&format!("{flag}: ")), "{err}");
        assert_mentions(&err, &[words]);
        assert_eq!(s, original, "a refused override must change nothing");
    }
}

#[test]
fn figure_names_round_trip() {
    for name in [
        "acked_messages",
        "ack_requests",
        "ack_throughput",
        "push_throughput",
        "commits",
        "commits_per_sec",
        "commits_per_ack",
        "ack_commits_per_ack",
        "commits_per_ack_request",
        "wal_syncs_per_ack",
        "wal_bytes_per_ack",
        "pg_exec_ms_per_ack",
        "registry_hit_rate",
        "fusion_rows_per_commit",
        "latency_ms.push.p50",
        "latency_ms.pop.p90",
        "latency_ms.e2e.p999",
        "latency_ms.ack.max",
    ] {
        let figure: Figure = name.parse().unwrap();
        assert_eq!(figure.name(), name);
    }
    assert!("latency_ms.ack.p95".parse::<Figure>().is_err());
    assert!("latency_ms.ack".parse::<Figure>().is_err());
}

#[test]
fn cells_carry_their_broker_toggles() {
    assert_eq!(
        Cell::Fusion.broker_env(),
        [("QUEEN_ACK_REGISTRY", "0"), ("QUEEN_ACK_FUSION", "1")]
    );
    assert!(Cell::RegistryFusion.registry() && Cell::RegistryFusion.fusion());
    assert!(!Cell::None.registry() && !Cell::None.fusion());
    let s = shipped("smoke");
    assert_eq!(
        s.consumers.group_names(),
        vec![Some("smoke-0".to_string()), Some("smoke-1".to_string())]
    );
    assert_eq!(s.consumers.total(), 32);
    assert_eq!(s.partition_names().len(), 16);
    assert_eq!(s.queue.options.to_wire().lease_time, 5);
}

#[test]
fn read_errors_name_the_path() {
    let err = Scenario::load("/nonexistent/x.toml").unwrap_err();
    assert!(err
        .to_string()
        .starts_with("/nonexistent/x.toml: cannot read"));
}

/// The cell of the peer named `name`.
fn peer_cell(name: &str) -> Cell {
    let cell: Cell = name.parse().expect("a peer's name is a cell");
    assert!(cell.peer().is_some(), "{name} is a peer");
    cell
}

#[test]
fn peers_join_the_cells_and_are_refused_what_they_cannot_do() {
    let base = "[producers]\ncount = 1\n[run]\ncells = [\"none\"]\n";
    let s = Scenario::parse(&format!("{base}peers = [\"pgmq\", \"pgq\"]\n"), "p.toml").unwrap();
    assert_eq!(
        s.run.cells,
        vec![Cell::None, peer_cell("pgmq"), peer_cell("pgq")]
    );
    assert!(s.run.peers.is_empty(), "folded into the cells");

    let err = parse_err(&format!("{base}peers = [\"registry\"]\n"));
    assert_mentions(&err, &["run.peers[0]", "not a peer"]);
    let dlq = "[consumers.outcomes]\ndlq = 0.1\n";
    let err = parse_err(&format!("{base}peers = [\"pgq\"]\n{dlq}"));
    assert_mentions(
        &err,
        &["`pgq` cell cannot run this scenario", "dead-letter"],
    );
    let groups = "[consumers]\ngroups = 2\n";
    let err = parse_err(&format!("{base}peers = [\"pgmq\"]\n{groups}"));
    assert_mentions(&err, &["`pgmq`", "consumer groups"]);

    let mut s = Scenario::parse(&format!("{base}peers = [\"pgmq\"]\n"), "p.toml").unwrap();
    let peers = |p: &str| Overrides {
        peers: Some(vec![p.to_string()]),
        ..Overrides::default()
    };
    s.apply_overrides(&peers("pgq")).unwrap();
    assert_eq!(
        s.run.cells,
        vec![Cell::None, peer_cell("pgq")],
        "--peers replaces the peers"
    );
    s.apply_overrides(&peers("none")).unwrap();
    assert_eq!(s.run.cells, vec![Cell::None]);
    let err = s.apply_overrides(&peers("fusion")).unwrap_err();
    assert_mentions(&err, &["--peers", "not a peer"]);
    let mut with_dlq = Scenario::parse(&format!("{base}{dlq}"), "p.toml").unwrap();
    let err = with_dlq.apply_overrides(&peers("pgq")).unwrap_err();
    assert_mentions(&err, &["--peers", "dead-letter"]);
    assert_eq!(
        with_dlq.run.cells,
        vec![Cell::None],
        "a refused override changes nothing"
    );
}

/// The numbers a scenario's description may state: its keys' values and what follows from
/// them (a backlog's total, shares as percentages, milliseconds as seconds).
fn numbers_the_keys_give(s: &Scenario) -> Vec<f64> {
    let (q, c, p, pre) = (&s.queue, &s.consumers, &s.producers, &s.prefill);
    let groups = c.groups.unwrap_or(1) as f64;
    let o = &c.outcomes;
    let mut v = vec![
        q.partitions as f64,
        q.options.lease_time as f64,
        q.options.retry_limit as f64,
        c.count as f64,
        c.count as f64 * groups,
        groups,
        c.pop_batch as f64,
        c.partitions_per_pop as f64,
        p.count as f64,
        p.batch as f64,
        p.rate.unwrap_or(0.0),
        pre.messages_per_partition as f64,
        pre.messages_per_partition as f64 * q.partitions as f64,
        c.stall_extra_ms as f64 / 1000.0,
    ];
    for share in [o.completed, o.failed, o.retry, o.dlq, c.lease_less, c.stall] {
        v.push((share * 100.0).round());
    }
    v.extend(s.broker.topologies().iter().map(|t| t.instances as f64));
    v
}

/// The numbers written with digits in `text` (`76 800` and `3,000` read as one number).
fn numbers_in(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut digits = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &ch) in chars.iter().enumerate() {
        let grouping = (ch == ' ' || ch == ',')
            && !digits.is_empty()
            && chars
                .get(i + 1..i + 4)
                .is_some_and(|d| d.iter().all(char::is_ascii_digit))
            && chars.get(i + 4).is_none_or(|d| !d.is_ascii_digit());
        match ch {
            '0'..='9' => digits.push(ch),
            _ if grouping => {}
            _ => {
                if let Ok(n) = digits.parse() {
                    out.push(n);
                }
                digits.clear();
            }
        }
    }
    if let Ok(n) = digits.parse() {
        out.push(n);
    }
    out
}

#[test]
fn descriptions_state_only_numbers_the_keys_give() {
    assert_eq!(
        numbers_in("76 800 messages, 3,000 msg/s, 5% of 16"),
        [76800.0, 3000.0, 5.0, 16.0]
    );
    let drifted = Scenario::parse(
        "description = \"9 partitions\"\n[queue]\npartitions = 8\n[producers]\ncount = 1\n",
        "d.toml",
    )
    .unwrap();
    assert!(
        !numbers_the_keys_give(&drifted).contains(&9.0),
        "a drifted number is caught"
    );
    for name in SHIPPED {
        let s = shipped(name);
        let known = numbers_the_keys_give(&s);
        for n in numbers_in(&s.description) {
            assert!(
                known.iter().any(|k| (k - n).abs() < 1e-9),
                "{name}: the description says {n}, which no key gives ({known:?}):\n{}",
                s.description
            );
        }
    }
}

/// A window of 20 s and the given `[[faults]]` entries (from line 4 on).
fn with_faults(faults: &str) -> String {
    format!("name = \"f\"\n[run]\nduration_secs = 20\n{faults}")
}

#[test]
fn faults_are_read_in_time_order_with_their_lengths() {
    let s = Scenario::parse(
        &with_faults(
            "[[faults]]\nkind = \"pause_consumers\"\nat_secs = 12\nduration_ms = 3000\n\
             [[faults]]\nkind = \"kill_broker\"\nat_secs = 2\nrestart_after_ms = 500\n\
             [[faults]]\nkind = \"restart_postgres\"\nat_secs = 6\n",
        ),
        "f.toml",
    )
    .unwrap();
    let kinds: Vec<FaultKind> = s.faults.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            FaultKind::KillBroker,
            FaultKind::RestartPostgres,
            FaultKind::PauseConsumers
        ]
    );
    assert_eq!((s.faults[0].length_ms, s.faults[0].line), (500, 8));
    assert_eq!(s.faults[2].planned_end_secs(), 15.0);
    let faults = shipped("faults");
    assert_eq!(faults.faults.len(), 4, "each kind once");
    assert!(faults.run.duration_secs + faults.run.warmup_secs <= 30.0);
}

#[test]
fn fault_keys_and_values_are_refused_with_key_and_line() {
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"kill_broker\"\nat_secs = 2\nrestart_after = 5\n",
    ));
    assert_eq!(err.line(), Some(7), "{err}");
    assert_mentions(&err, &["restart_after"]);
    let err = parse_err(&with_faults("[[faults]]\nkind = \"reboot\"\nat_secs = 2\n"));
    assert_eq!(err.line(), Some(5), "{err}");
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"pause_broker\"\nat_secs = 2\nrestart_after_ms = 5\n",
    ));
    assert_eq!(
        (err.key(), err.line()),
        (Some("faults[0].restart_after_ms"), Some(7))
    );
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"pause_consumers\"\nat_secs = 2\n",
    ));
    assert_eq!(err.key(), Some("faults[0].duration_ms"), "{err}");
    assert_eq!(err.line(), Some(4));
}

#[test]
fn database_side_faults_are_read_with_their_settings() {
    let s = Scenario::parse(
        &with_faults(
            "[postgres]\nreplication = \"async\"\n\
             [[faults]]\nkind = \"failover_postgres\"\nat_secs = 12\nlag_ms = 1500\n\
             [[faults]]\nkind = \"latency_postgres\"\nat_secs = 2\nduration_ms = 1000\ndelay_ms = 50\n\
             [[faults]]\nkind = \"kill_pg_backends\"\nat_secs = 5\n\
             [[faults]]\nkind = \"partition_postgres\"\nat_secs = 7\nduration_ms = 500\n\
             [[faults]]\nkind = \"pause_postgres\"\nat_secs = 9\nduration_ms = 500\n",
        ),
        "f.toml",
    )
    .unwrap();
    assert_eq!(s.postgres.replication, Replication::Async);
    let kinds: Vec<FaultKind> = s.faults.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            FaultKind::LatencyPostgres,
            FaultKind::KillPgBackends,
            FaultKind::PartitionPostgres,
            FaultKind::PausePostgres,
            FaultKind::FailoverPostgres
        ]
    );
    assert_eq!((s.faults[0].length_ms, s.faults[0].delay_ms), (1000, 50));
    assert_eq!((s.faults[1].length_ms, s.faults[4].length_ms), (0, 1500));
    assert!(s.database_side().relay);
    let no_lag = "[postgres]\nreplication = \"sync\"\n[[faults]]\nkind = \"failover_postgres\"\nat_secs = 3\n";
    let s = Scenario::parse(&with_faults(no_lag), "f.toml").unwrap();
    assert_eq!(s.faults[0].length_ms, 0);
    assert!(!s.database_side().relay, "no link fault, no relay");
    let shipped = shipped("faults-db");
    assert_eq!(shipped.postgres.replication, Replication::Sync);
    let mut kinds: Vec<&str> = shipped.faults.iter().map(|f| f.kind.name()).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "failover_postgres",
            "kill_pg_backends",
            "latency_postgres",
            "partition_postgres",
            "pause_postgres"
        ]
    );
    assert!(shipped.run.duration_secs + shipped.run.warmup_secs <= 40.0);
}

#[test]
fn bad_database_fault_settings_are_refused_naming_the_field() {
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"failover_postgres\"\nat_secs = 2\n",
    ));
    assert_eq!(err.key(), Some("faults[0].kind"), "{err}");
    assert_mentions(&err, &["needs a standby", "[postgres] replication"]);
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"latency_postgres\"\nat_secs = 2\nduration_ms = 100\n",
    ));
    assert_eq!(err.key(), Some("faults[0].delay_ms"), "{err}");
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"partition_postgres\"\nat_secs = 2\nduration_ms = 100\ndelay_ms = 5\n",
    ));
    assert_eq!(err.key(), Some("faults[0].delay_ms"), "{err}");
    assert_mentions(&err, &["does not apply"]);
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"pause_postgres\"\nat_secs = 2\nduration_ms = 100\nlag_ms = 5\n",
    ));
    assert_eq!(err.key(), Some("faults[0].lag_ms"), "{err}");
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"pause_postgres\"\nat_secs = 2\nduration_ms = -100\n",
    ));
    assert_eq!(err.line(), Some(7), "{err}");
    assert_mentions(&err, &["duration_ms"]);
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"kill_pg_backends\"\nat_secs = -1\n",
    ));
    assert_eq!(err.key(), Some("faults[0].at_secs"), "{err}");
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"latency_postgres\"\nat_secs = 2\nduration_ms = 100\ndelay_ms = 0\n",
    ));
    assert_eq!(err.key(), Some("faults[0].delay_ms"), "{err}");
    let err = parse_err(&with_faults("[postgres]\nreplication = \"semi\"\n"));
    assert_eq!(err.line(), Some(5), "{err}");
    assert_mentions(&err, &["replication"]);
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"failover\"\nat_secs = 2\n",
    ));
    assert_mentions(&err, &["failover_postgres"]);
}

#[test]
fn faults_must_fit_the_window_and_not_overlap() {
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"pause_broker\"\nat_secs = 19\nduration_ms = 2000\n",
    ));
    assert_eq!(
        (err.key(), err.line()),
        (Some("faults[0].at_secs"), Some(6))
    );
    assert_mentions(&err, &["inside the measured window"]);
    let err = parse_err(&with_faults(
        "[[faults]]\nkind = \"pause_broker\"\nat_secs = 2\nduration_ms = 2000\n\
         [[faults]]\nkind = \"kill_broker\"\nat_secs = 4.5\nrestart_after_ms = 100\n",
    ));
    assert_eq!(err.line(), Some(8), "{err}");
    assert_mentions(&err, &["less than a second after"]);
    let mut s = Scenario::parse(
        &with_faults("[[faults]]\nkind = \"restart_postgres\"\nat_secs = 15\n"),
        "f.toml",
    )
    .unwrap();
    let shorter = Overrides {
        duration_secs: Some(10.0),
        ..Default::default()
    };
    let err = s.apply_overrides(&shorter).unwrap_err();
    assert_eq!(err.flag(), Some("--duration"), "{err}");
}
