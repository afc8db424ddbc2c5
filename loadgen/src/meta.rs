//! Run metadata for `results.json`: what ran, where, on what.

use std::collections::BTreeMap;

use ackbench_reports::results::{BrokerMeta, Machine, PostgresMeta, RunMeta, ScenarioMeta};
use xxhash_rust::xxh3::xxh3_64;

use crate::lifecycle::env::Env;
use crate::scenario::Scenario;

pub fn run_meta(scenario: &Scenario, env: &Env) -> RunMeta {
    RunMeta {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        git_revision: git_revision(),
        scenario: ScenarioMeta {
            name: scenario.name.clone(),
            path: scenario.source_name.clone(),
            text: scenario.source_text.clone(),
            hash: format!("{:016x}", xxh3_64(scenario.source_text.as_bytes())),
            overrides: Vec::new(),
        },
        warmup_secs: scenario.run.warmup_secs,
        duration_secs: scenario.run.duration_secs,
        cell_order: scenario.run.cells.iter().map(|c| c.name().to_string()).collect(),
        machine: machine(),
        postgres: match &env.postgres {
            Some(pg) => PostgresMeta { version: pg.version.clone(), embedded: pg.embedded_cluster().is_some(), settings: pg.settings.clone() },
            None => PostgresMeta { version: "unknown (no --database-url)".into(), embedded: false, settings: BTreeMap::new() },
        },
        broker: BrokerMeta {
            version: env.profile.version.clone(),
            external: env.external_broker(),
            url: env.settings.broker_url.clone(),
            binary: env.broker_bin.as_ref().map(|p| p.display().to_string()),
            target_kind: Some(format!("{} ({})", env.profile.kind, env.profile.detected)),
            wire_variants: BTreeMap::new(),
        },
        notes: with_target_notes(env, vec![
            "commits = pg_stat_database.xact_commit delta; it lags ~1 s at each edge of the window under steady load; \
             write_commits (pg_snapshot_xmax delta) is exact"
                .into(),
            format!(
                "ack_commits_per_ack counts top-level calls of {} (the {} profile's ack procedures; pg_stat_statements, \
                 lag-free); pg_exec_ms_per_ack is their execution time",
                env.profile.kind.procedures().ack.join(", "),
                env.profile.kind
            ),
            "with several consumer groups the audit counts (message, group) pairs".into(),
            "loadgen_cpu_us_per_op is the load generator's CPU per HTTP request it sent (push, pop, ack); \
             broker_cpu_us_per_request is the broker's CPU per request it served (its queen_requests_total deltas, \
             else the load generator's requests)"
                .into(),
        ]),
        offered_rate: scenario.producers.open_rate().filter(|_| scenario.producers.count > 0),
        ..Default::default()
    }
}

/// `notes`, then what the reader must know about figures taken against an external broker.
fn with_target_notes(env: &Env, mut notes: Vec<String>) -> Vec<String> {
    if !env.external_broker() {
        return notes;
    }
    notes.push(format!(
        "against an external broker ({}), the run has one cell named after it; ratio gates between \
         accelerator cells are not applicable; rounds are kept apart by fresh queue names (run tag {})",
        env.profile.cell_name(),
        env.run_tag
    ));
    if env.settings.database_url.is_some() {
        notes.push(
            "PostgreSQL figures are deltas of the broker's own database (never created or dropped by the \
             run): any other work in it during the window counts too, e.g. the broker's background services"
                .into(),
        );
    }
    notes
}

/// The workspace's git revision (with `-dirty` when the tree has changes), when known: read
/// once, the first time it is asked for (`main` asks at start-up), so a commit made while a
/// long run goes on does not rename the run's code.
pub fn git_revision() -> Option<String> {
    static REVISION: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    REVISION.get_or_init(read_git_revision).clone()
}

fn read_git_revision() -> Option<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(dir)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let rev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .current_dir(dir)
        .output()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    Some(if dirty { format!("{rev}-dirty") } else { rev })
}

fn machine() -> Machine {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let memory_kb: u64 = read("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    let os = read("/etc/os-release")
        .lines()
        .find_map(|l| {
            l.strip_prefix("PRETTY_NAME=")
                .map(|v| v.trim_matches('"').to_string())
        })
        .unwrap_or_else(|| std::env::consts::OS.to_string());
    Machine {
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
        os,
        memory_bytes: memory_kb * 1024,
    }
}
