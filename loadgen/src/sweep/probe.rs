//! The fsync probe: how many WAL flushes the measured PostgreSQL completes per second, timed as
//! single-row `INSERT`s each committed on its own with `synchronous_commit = on` from one
//! session (each commit waits for its own flush, so the rate is the storage's sync rate plus a
//! round trip). It runs in a database of its own, dropped afterwards.

use std::time::Instant;

use crate::target::postgres::{connect, pg, Postgres};

/// Commits timed by the probe.
pub const PROBE_COMMITS: u32 = 300;

/// Commits per second of `PROBE_COMMITS` single-row transactions.
pub async fn fsync_rate(postgres: &Postgres) -> Result<f64, String> {
    let name = "ackbench_fsync_probe";
    let url = postgres.fresh_database(name).await?;
    let rate = timed_commits(&url).await;
    postgres.drop_database(name).await;
    rate
}

async fn timed_commits(url: &str) -> Result<f64, String> {
    let client = connect(url).await?;
    client
        .batch_execute("SET synchronous_commit = on; CREATE TABLE probe (v int)")
        .await
        .map_err(pg)?;
    let insert = client
        .prepare("INSERT INTO probe VALUES ($1)")
        .await
        .map_err(pg)?;
    let started = Instant::now();
    for i in 0..PROBE_COMMITS as i32 {
        client.execute(&insert, &[&i]).await.map_err(pg)?;
    }
    Ok(PROBE_COMMITS as f64 / started.elapsed().as_secs_f64().max(1e-6))
}
