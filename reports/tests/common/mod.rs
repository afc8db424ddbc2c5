//! A small but realistic results document: the four cells of a `tiny-batches`-like run, with
//! per-second series, real HDR histograms and the statements of the ack, push and pop
//! procedures. `tests/fixtures/small-results.json` is this, written by
//! `cargo test -p ackbench-reports --test report -- --ignored regenerate_fixture`.

#![allow(dead_code)]

use std::collections::BTreeMap;

use ackbench_reports::results::{
    summarize, Audit, BrokerMeta, CellResults, Figures, GateVerdict, Machine, PostgresMeta,
    Results, RoundResults, RunMeta, ScenarioMeta, SecondSample, Statement, Summary, SCHEMA_VERSION,
};
use ackbench_reports::stats::{encode_histogram, new_histogram, percentiles_ms, Spread};
use hdrhistogram::Histogram;

pub const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/small-results.json"
);

pub const SCENARIO_TEXT: &str = r#"# tiny-batches: many partitions, pop batches of 1-2, many consumers.
[queue]
name = "bench"
partitions = 256

[producers]
count = 4
batch = 10
payload_bytes = 256
mode = "closed"

[consumers]
count = 32
mode = "group"
group = "g1"
pop_batch = 2
ack = "batch"

[run]
warmup = "5s"
duration = "30s"
rounds = 3
cells = ["registry+fusion", "registry", "fusion", "none"]

[[gates]]
ratio = "commits_per_ack(registry+fusion) / commits_per_ack(none) <= 0.7"
"#;

/// A deterministic generator (xorshift64*), so the fixture is the same on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Roughly standard normal (Irwin–Hall of 6).
    pub fn normal(&mut self) -> f64 {
        (0..6).map(|_| self.unit()).sum::<f64>() - 3.0
    }

    /// 1 ± `rel` noise.
    pub fn jitter(&mut self, rel: f64) -> f64 {
        1.0 + rel * (self.unit() * 2.0 - 1.0)
    }
}

/// What distinguishes one cell from another in the fixture.
struct CellShape {
    name: &'static str,
    registry: bool,
    fusion: bool,
    ack_throughput: f64,
    /// Ack procedure calls per ack request, by procedure.
    ack_calls: &'static [(&'static str, f64)],
    hit_rate: f64,
    rows_per_commit: f64,
    wal_syncs_per_commit: f64,
    wal_bytes_per_ack: f64,
    /// Median and log-sigma of each operation's latency, ms.
    push_ms: (f64, f64),
    pop_ms: (f64, f64),
    ack_ms: (f64, f64),
    e2e_ms: (f64, f64),
}

const SHAPES: [CellShape; 4] = [
    CellShape {
        name: "registry+fusion",
        registry: true,
        fusion: true,
        ack_throughput: 7400.0,
        ack_calls: &[
            ("log_ack_multi_v1", 1.0 / 14.0),
            ("log_ack_by_hash_v1", 0.03),
        ],
        hit_rate: 0.97,
        rows_per_commit: 14.0,
        wal_syncs_per_commit: 0.3,
        wal_bytes_per_ack: 310.0,
        push_ms: (2.6, 0.45),
        pop_ms: (1.3, 0.5),
        ack_ms: (3.6, 0.35),
        e2e_ms: (38.0, 0.4),
    },
    CellShape {
        name: "registry",
        registry: true,
        fusion: false,
        ack_throughput: 4700.0,
        ack_calls: &[("log_ack_at_v1", 0.97), ("log_ack_by_hash_v1", 0.03)],
        hit_rate: 0.97,
        rows_per_commit: 0.0,
        wal_syncs_per_commit: 0.21,
        wal_bytes_per_ack: 420.0,
        push_ms: (2.9, 0.5),
        pop_ms: (1.5, 0.55),
        ack_ms: (1.9, 0.6),
        e2e_ms: (47.0, 0.45),
    },
    CellShape {
        name: "fusion",
        registry: false,
        fusion: true,
        ack_throughput: 6100.0,
        ack_calls: &[("log_ack_multi_v1", 1.0 / 9.0)],
        hit_rate: 0.0,
        rows_per_commit: 9.0,
        wal_syncs_per_commit: 0.28,
        wal_bytes_per_ack: 350.0,
        push_ms: (2.7, 0.45),
        pop_ms: (1.4, 0.5),
        ack_ms: (4.1, 0.4),
        e2e_ms: (41.0, 0.4),
    },
    CellShape {
        name: "none",
        registry: false,
        fusion: false,
        ack_throughput: 3900.0,
        ack_calls: &[("log_ack_by_hash_v1", 1.0)],
        hit_rate: 0.0,
        rows_per_commit: 0.0,
        wal_syncs_per_commit: 0.2,
        wal_bytes_per_ack: 460.0,
        push_ms: (3.1, 0.5),
        pop_ms: (1.6, 0.6),
        ack_ms: (2.4, 0.7),
        e2e_ms: (55.0, 0.5),
    },
];

/// Messages per push request and per pop.
const PUSH_BATCH: f64 = 10.0;
const POP_BATCH: f64 = 1.5;
/// PostgreSQL execution ms per call, by procedure.
const EXEC_MS: [(&str, f64); 5] = [
    ("log_push_v1", 0.21),
    ("log_pop_wildcard_v1", 0.075),
    ("log_ack_by_hash_v1", 0.085),
    ("log_ack_at_v1", 0.031),
    ("log_ack_multi_v1", 0.16),
];
const SAMPLES_PER_HISTOGRAM: usize = 2000;

/// A lognormal latency sample with a rare slow tail, in µs, quantised to 100 steps a decade
/// (keeps the serialised histograms small).
fn latency_us(rng: &mut Rng, (median_ms, sigma): (f64, f64)) -> u64 {
    let mut v = median_ms * 1000.0 * (sigma * rng.normal()).exp();
    if rng.unit() < 0.01 {
        v *= 3.0 + 10.0 * rng.unit();
    }
    let q = (v.max(1.0).log10() * 100.0).round() / 100.0;
    10f64.powf(q).round().max(1.0) as u64
}

fn histogram(rng: &mut Rng, shape: (f64, f64), n: usize) -> Histogram<u64> {
    let mut h = new_histogram();
    for _ in 0..n {
        h.record(latency_us(rng, shape)).expect("in range");
    }
    h
}

fn round(
    rng: &mut Rng,
    shape: &CellShape,
    round_no: u32,
    seconds: usize,
    samples: usize,
) -> RoundResults {
    let window = seconds as f64;
    // The machine drifts between rounds; every cell of a round sees the same drift.
    let drift = 1.0 + 0.03 * (round_no as f64 - 2.0);
    let ack_throughput = shape.ack_throughput * drift * rng.jitter(0.02);
    let acked = (ack_throughput * window).round();
    let ack_requests = (acked / POP_BATCH).round();
    let pushed = acked + 200.0;
    let push_requests = (pushed / PUSH_BATCH).ceil();
    let popped = acked + 30.0;
    let pop_requests = (popped / POP_BATCH).round();

    let mut statements = BTreeMap::new();
    let mut calls_of = BTreeMap::new();
    calls_of.insert("log_push_v1", push_requests);
    calls_of.insert("log_pop_wildcard_v1", pop_requests);
    for (name, per_request) in shape.ack_calls {
        calls_of.insert(name, (ack_requests * per_request).round());
    }
    let mut by_procedure = BTreeMap::new();
    let mut exec_total = 0.0;
    for (name, calls) in &calls_of {
        let ms_per_call = EXEC_MS
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, ms)| *ms)
            .unwrap_or(0.1)
            * rng.jitter(0.03);
        let total = calls * ms_per_call;
        exec_total += total;
        let rows = if *name == "log_ack_multi_v1" {
            calls * shape.rows_per_commit
        } else {
            *calls
        };
        statements.insert(
            name.to_string(),
            Statement {
                calls: *calls,
                total_exec_ms: total,
                rows,
                wal_bytes: rows * 180.0,
            },
        );
        by_procedure.insert(name.to_string(), total / acked);
    }
    let ack_commits: f64 = shape.ack_calls.iter().map(|(n, _)| calls_of[n]).sum();
    let write_commits = calls_of.values().sum::<f64>() + 4.0 * window;
    let commits = write_commits + 2.0 * window;
    let wal_syncs = (commits * shape.wal_syncs_per_commit).round();
    let wal_bytes = (acked * shape.wal_bytes_per_ack * rng.jitter(0.01)).round();

    let mut histograms = BTreeMap::new();
    let mut latency = BTreeMap::new();
    for (op, s) in [
        ("push", shape.push_ms),
        ("pop", shape.pop_ms),
        ("ack", shape.ack_ms),
        ("e2e", shape.e2e_ms),
    ] {
        let h = histogram(rng, (s.0 * drift, s.1), samples);
        latency.insert(op.to_string(), percentiles_ms(&h));
        histograms.insert(op.to_string(), encode_histogram(&h));
    }

    let series = (0..seconds)
        .map(|t| {
            // A short dip a third of the way in, as a checkpoint would cause.
            let dip = if t == seconds / 3 { 0.8 } else { 1.0 };
            SecondSample {
                t: t as f64 + 1.0,
                commits: (commits / window * dip * rng.jitter(0.06)).round(),
                ack_commits: (ack_commits / window * dip * rng.jitter(0.06)).round(),
                pushed: (pushed / window * rng.jitter(0.05)).round(),
                acked: (acked / window * dip * rng.jitter(0.05)).round(),
                ack_p99_ms: latency["ack"].p99 * rng.jitter(0.15),
                backlog: (200.0 * rng.jitter(0.5)).round(),
                errors: 0.0,
                ack_exec_ms: f64::NAN,
            }
        })
        .collect();

    let mut broker_metrics = BTreeMap::new();
    if shape.registry {
        let hits = (ack_requests * shape.hit_rate).round();
        broker_metrics.insert("ack_registry_hits_total".into(), hits);
        broker_metrics.insert("ack_registry_misses_total".into(), ack_requests - hits);
    }
    if shape.fusion {
        let flushes = calls_of["log_ack_multi_v1"];
        broker_metrics.insert("ack_fusion_flushes_total".into(), flushes);
        broker_metrics.insert(
            "ack_fusion_rows_total".into(),
            flushes * shape.rows_per_commit,
        );
    }

    let duplicates = (acked * 0.0004).round() as u64;
    let figures = Figures {
        acked_messages: acked,
        ack_requests,
        pushed_messages: pushed,
        push_requests,
        popped_messages: popped,
        pop_requests,
        ack_throughput: acked / window,
        push_throughput: pushed / window,
        commits,
        write_commits,
        commits_per_sec: commits / window,
        commits_per_ack: commits / acked,
        ack_commits_per_ack: ack_commits / acked,
        commits_per_ack_request: commits / ack_requests,
        wal_records: (acked * 3.2).round(),
        wal_bytes,
        wal_syncs,
        wal_syncs_per_ack: wal_syncs / acked,
        wal_syncs_per_commit: wal_syncs / commits,
        wal_bytes_per_ack: wal_bytes / acked,
        pg_exec_ms_per_ack: exec_total / acked,
        pg_exec_ms_per_ack_by_procedure: by_procedure,
        registry_hit_rate: if shape.registry {
            shape.hit_rate * rng.jitter(0.005)
        } else {
            0.0
        },
        fusion_rows_per_commit: if shape.fusion {
            shape.rows_per_commit * rng.jitter(0.03)
        } else {
            0.0
        },
        redeliveries: duplicates as f64,
        errors: 0.0,
        latency_ms: latency,
        latency_uncorrected_ms: BTreeMap::new(),
        statements,
        loadgen_cpu_us_per_op: 21.0 * rng.jitter(0.1),
        broker_cpu_cores: 0.55 * rng.jitter(0.1),
        // Not jittered: drawing one more number would shift every later draw (and the fixture).
        broker_cpu_us_per_request: 180.0,
        host_steal_share: 0.0,
    };
    let drained_total = pushed as u64 + 150;
    let dead_lettered = 0;
    RoundResults {
        round: round_no,
        complete: true,
        window_secs: window,
        figures,
        broker_metrics,
        brokers: Vec::new(),
        audit: Audit {
            pushed: drained_total,
            acked: drained_total - dead_lettered,
            dead_lettered,
            dropped: 0,
            lost: 0,
            undrained: 0,
            duplicates,
            drained: true,
            ..Default::default()
        },
        series,
        histograms,
        faults: Vec::new(),
        wire_variants: BTreeMap::new(),
        minutes: Vec::new(),
    }
}

fn cell(
    rng: &mut Rng,
    shape: &CellShape,
    rounds: u32,
    seconds: usize,
    samples: usize,
) -> CellResults {
    let rounds: Vec<RoundResults> = (1..=rounds)
        .map(|r| round(rng, shape, r, seconds, samples))
        .collect();
    let refs: Vec<&Figures<f64>> = rounds.iter().map(|r| &r.figures).collect();
    let mut audit = Audit {
        drained: true,
        ..Default::default()
    };
    for r in &rounds {
        audit.add(&r.audit);
    }
    let mut histograms = BTreeMap::new();
    for op in ["push", "pop", "ack", "e2e"] {
        let mut merged = new_histogram();
        for r in &rounds {
            let h = ackbench_reports::stats::decode_histogram(&r.histograms[op]).unwrap();
            merged.add(&h).unwrap();
        }
        histograms.insert(op.to_string(), encode_histogram(&merged));
    }
    CellResults {
        name: shape.name.into(),
        registry: shape.registry,
        fusion: shape.fusion,
        topology: None,
        external: false,
        summary: Summary {
            rounds: rounds.len() as u32,
            figures: summarize(&refs),
            audit,
            histograms,
        },
        rounds,
    }
}

/// The fixture: four cells, `rounds` rounds of `seconds` seconds.
pub fn results_with(rounds: u32, seconds: usize) -> Results {
    results_sized(rounds, seconds, SAMPLES_PER_HISTOGRAM)
}

pub fn results_sized(rounds: u32, seconds: usize, samples: usize) -> Results {
    let mut rng = Rng::new(0x00AC_CBE7);
    let cells: Vec<CellResults> = SHAPES
        .iter()
        .map(|s| cell(&mut rng, s, rounds, seconds, samples))
        .collect();
    let ratio: Vec<f64> = cells[0]
        .rounds
        .iter()
        .zip(&cells[3].rounds)
        .map(|(a, b)| a.figures.commits_per_ack / b.figures.commits_per_ack)
        .collect();
    let measured = Spread::of(&ratio);
    let settings: BTreeMap<String, String> = [
        ("fsync", "on"),
        ("synchronous_commit", "on"),
        ("full_page_writes", "on"),
        ("wal_level", "replica"),
        ("wal_sync_method", "fdatasync"),
        ("commit_delay", "0"),
        ("shared_buffers", "128MB"),
        ("wal_buffers", "4MB"),
        ("max_wal_size", "1GB"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Results {
        schema_version: SCHEMA_VERSION,
        complete: true,
        meta: RunMeta {
            tool_version: "0.1.0".into(),
            git_revision: Some("3f2c1e9a7b5d40c8e1f2a3b4c5d6e7f809a1b2c3".into()),
            started_at: "2025-06-01T10:00:00Z".into(),
            finished_at: "2025-06-01T10:09:12Z".into(),
            scenario: ScenarioMeta {
                name: "tiny-batches".into(),
                path: "scenarios/tiny-batches.toml".into(),
                text: SCENARIO_TEXT.into(),
                hash: "9c1d2e3f4a5b6c7d".into(),
                overrides: vec![],
            },
            seed: 42,
            rounds,
            warmup_secs: 5.0,
            duration_secs: seconds as f64,
            cell_order: SHAPES.iter().map(|s| s.name.to_string()).collect(),
            machine: Machine {
                cores: 2,
                hostname: "bench-1".into(),
                os: "Debian GNU/Linux 12 (bookworm), Linux 6.1".into(),
                memory_bytes: 8 << 30,
            },
            postgres: PostgresMeta {
                version: "PostgreSQL 15.8".into(),
                embedded: true,
                settings,
            },
            broker: BrokerMeta {
                version: "0.1.0".into(),
                external: false,
                url: None,
                binary: Some("target/release/ackbench-broker".into()),
                ..Default::default()
            },
            notes: vec![
                "Closing pg_stat_database / pg_stat_wal snapshots taken after the broker's connections closed (counters lag while busy).".into(),
            ],
            shards: None,
            offered_rate: None,
        },
        cells,
        gates: vec![GateVerdict {
            gate: "commits_per_ack(registry+fusion) / commits_per_ack(none) <= 0.7".into(),
            kind: "ratio".into(),
            measured,
            threshold: 0.7,
            passed: measured.max <= 0.7,
            detail: "every round within the threshold".into(),
            not_applicable: false,
            not_judged: false,
            interval: None,
            inconclusive: false,
        }],
    }
}

/// Four cells × three rounds × 30 s.
pub fn small_results() -> Results {
    results_with(3, 30)
}

/// The `<tr data-cell="...">` row of the table that follows `marker` (a section id).
pub fn row_of<'a>(html: &'a str, marker: &str, cell: &str) -> &'a str {
    let start = html.find(marker).unwrap_or_else(|| panic!("no {marker}"));
    let rest = &html[start..];
    let open = format!("<tr data-cell=\"{cell}\"");
    let i = rest
        .find(&open)
        .unwrap_or_else(|| panic!("no row for {cell} after {marker}"));
    let row = &rest[i..];
    &row[..row.find("</tr>").expect("closed row")]
}

/// The `<td data-key="key" ...>...</td>` of a row.
pub fn td_of<'a>(row: &'a str, key: &str) -> &'a str {
    let open = format!("data-key=\"{key}\"");
    let i = row
        .find(&open)
        .unwrap_or_else(|| panic!("no {key} in {row}"));
    let td = &row[i..];
    &td[..td.find("</td>").expect("closed cell")]
}
