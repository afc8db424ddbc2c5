//! The machine's probes, run in a database of their own (dropped afterwards) on an otherwise
//! idle server: the fsync probe, how many WAL flushes the measured PostgreSQL completes per
//! second, timed as single-row `INSERT`s each committed on its own with `synchronous_commit =
//! on` from one session (each commit waits for its own flush, so the rate is the storage's sync
//! rate plus a round trip); and the CPU probe, how long PostgreSQL takes to hash a fixed series
//! of numbers in memory (the fastest of a few runs, so a stray wake-up does not count).

use std::time::Instant;

use tokio_postgres::{Client, Statement};

use crate::target::postgres::{connect, pg, Postgres};

/// Commits timed by the probe.
pub const PROBE_COMMITS: u32 = 300;
/// Numbers the CPU probe hashes in one run, and its runs.
pub const CPU_PROBE_ROWS: u32 = 200_000;
pub const CPU_PROBE_RUNS: u32 = 5;

/// What one probe of the machine measured.
#[derive(Debug, Clone, Copy)]
pub struct Machine {
    pub fsync_per_sec: f64,
    /// The fastest CPU probe run (ms).
    pub cpu_ms: f64,
}

/// Both probes, in one database of their own.
pub async fn machine(postgres: &Postgres) -> Result<Machine, String> {
    let name = "ackbench_machine_probe";
    let url = postgres.fresh_database(name).await?;
    let probed = async {
        Ok(Machine {
            fsync_per_sec: timed_commits(&url).await?,
            cpu_ms: fastest_hashing(&url).await?,
        })
    }
    .await;
    postgres.drop_database(name).await;
    probed
}

/// A session of its own in the probe's database, set up by `setup` and with `statement`
/// prepared.
async fn session(url: &str, setup: &str, statement: &str) -> Result<(Client, Statement), String> {
    let client = connect(url).await?;
    client.batch_execute(setup).await.map_err(pg)?;
    let prepared = client.prepare(statement).await.map_err(pg)?;
    Ok((client, prepared))
}

/// Commits per second of `PROBE_COMMITS` single-row transactions.
async fn timed_commits(url: &str) -> Result<f64, String> {
    let (client, insert) = session(
        url,
        "SET synchronous_commit = on; CREATE TABLE probe (v int)",
        "INSERT INTO probe VALUES ($1)",
    )
    .await?;
    let started = Instant::now();
    for i in 0..PROBE_COMMITS as i32 {
        client.execute(&insert, &[&i]).await.map_err(pg)?;
    }
    Ok(PROBE_COMMITS as f64 / started.elapsed().as_secs_f64().max(1e-6))
}

/// The fastest of `CPU_PROBE_RUNS` runs hashing `CPU_PROBE_ROWS` numbers (ms), with work_mem
/// large enough that the series stays in memory.
async fn fastest_hashing(url: &str) -> Result<f64, String> {
    let (client, query) = session(
        url,
        "SET work_mem = '64MB'",
        "SELECT sum(hashint8(g)) FROM generate_series(1::int8, $1::int8) g",
    )
    .await?;
    let mut fastest = f64::INFINITY;
    for _ in 0..CPU_PROBE_RUNS {
        let started = Instant::now();
        client
            .query_one(&query, &[&(CPU_PROBE_ROWS as i64)])
            .await
            .map_err(pg)?;
        fastest = fastest.min(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(fastest)
}
