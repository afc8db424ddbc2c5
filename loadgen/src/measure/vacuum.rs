//! The vacuum state of a cell's database, for `hold_xmin`: dead and live tuples, table and index
//! sizes and autovacuum runs of its user tables (the broker's or a peer's), and the latency of a
//! bystander query (a bounded scan of the busiest table, which reads through the dead tuples a
//! held-back horizon leaves behind). Sampled once a second over the window on a connection of
//! its own.

use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_postgres::Client;

use ackbench_reports::results::VacuumSample;

use crate::target::session::pg;

/// The user tables added up, and the busiest one (most rows updated and deleted), quoted.
const STATE_SQL: &str = "SELECT coalesce(sum(n_dead_tup), 0)::float8, \
            coalesce(sum(n_live_tup), 0)::float8, \
            coalesce(sum(pg_table_size(relid)), 0)::float8, \
            coalesce(sum(pg_indexes_size(relid)), 0)::float8, \
            coalesce(sum(autovacuum_count), 0)::float8, \
            (SELECT relid::regclass::text FROM pg_stat_user_tables \
              ORDER BY n_tup_upd + n_tup_del + n_dead_tup DESC LIMIT 1) \
     FROM pg_stat_user_tables";

/// Rows the bystander query counts at most.
const BYSTANDER_ROWS: u32 = 10_000;

/// One reading of `client`'s database, `t` seconds into the window.
pub async fn sample(client: &Client, t: f64) -> Result<VacuumSample, String> {
    let row = client.query_one(STATE_SQL, &[]).await.map_err(pg)?;
    let busiest: Option<String> = row.get(5);
    let bystander_ms = match busiest {
        Some(table) => bystander(client, &table).await?,
        None => f64::NAN,
    };
    Ok(VacuumSample {
        t,
        dead_tuples: row.get(0),
        live_tuples: row.get(1),
        table_bytes: row.get(2),
        index_bytes: row.get(3),
        autovacuums: row.get(4),
        bystander_ms,
    })
}

/// How long counting up to `BYSTANDER_ROWS` rows of `table` (already quoted) takes, in ms.
async fn bystander(client: &Client, table: &str) -> Result<f64, String> {
    let sql = format!("SELECT count(*) FROM (SELECT 1 FROM {table} LIMIT {BYSTANDER_ROWS}) s");
    let started = Instant::now();
    client.query_one(&sql, &[]).await.map_err(pg)?;
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// Samples `client`'s database once a second from `start` until `secs` have passed or `cancel`
/// flips, handing each reading to `seen` (the live metrics) as well; a failed reading is
/// logged once and skipped.
pub async fn sample_window(
    client: &Client,
    start: Instant,
    secs: f64,
    cancel: &watch::Receiver<bool>,
    seen: impl Fn(&VacuumSample),
) -> Vec<VacuumSample> {
    let mut samples = Vec::new();
    let mut logged = false;
    let mut second = 0u32;
    while (second as f64) < secs && !*cancel.borrow() {
        tokio::time::sleep_until((start + Duration::from_secs(second.into())).into()).await;
        match sample(client, start.elapsed().as_secs_f64()).await {
            Ok(s) => {
                seen(&s);
                samples.push(s);
            }
            Err(e) if !logged => {
                eprintln!("ackbench: vacuum sampler: {e}");
                logged = true;
            }
            Err(_) => {}
        }
        second += 1;
    }
    samples
}
