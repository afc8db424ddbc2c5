//! The numbered migrations of `sql/`, embedded in the binary and applied at start.
//!
//! Applying is idempotent and safe under concurrency: one transaction takes a transaction-level
//! advisory lock, creates the bookkeeping table when missing, and applies in order every file
//! not yet recorded in `queen.schema_migrations`. A broker started twice, or two brokers started
//! at once on one database, end with one schema. A recorded migration whose text has changed
//! is refused rather than silently skipped.

use tokio_postgres::Client;
use xxhash_rust::xxh3::xxh3_64;

/// One migration file.
pub struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub sql: &'static str,
}

macro_rules! migration {
    ($version:expr, $file:literal) => {
        Migration {
            version: $version,
            name: $file,
            sql: include_str!(concat!("../../../sql/", $file)),
        }
    };
}

/// Every migration, in order.
pub const MIGRATIONS: &[Migration] = &[
    migration!(1, "001_schema.sql"),
    migration!(2, "002_provision.sql"),
    migration!(3, "003_push.sql"),
    migration!(4, "004_pop.sql"),
    migration!(5, "005_retention.sql"),
    migration!(6, "006_ack.sql"),
    migration!(7, "007_lease_dlq.sql"),
    migration!(8, "008_ack_fusion.sql"),
    migration!(9, "009_transaction.sql"),
    migration!(10, "010_dedup_index.sql"),
    migration!(11, "011_push_multi.sql"),
    migration!(12, "012_pop_engine.sql"),
    migration!(13, "013_structured_refusals.sql"),
    migration!(14, "014_reliability.sql"),
    migration!(15, "015_queue_options.sql"),
    migration!(16, "016_pop_options.sql"),
    migration!(17, "017_queue_resources.sql"),
    migration!(18, "018_cursor_advance_cached.sql"),
    migration!(19, "019_generic_plans.sql"),
    migration!(20, "020_ack_multi_set.sql"),
    migration!(21, "021_pop_claim_direct.sql"),
];

const LOCK_KEY: i64 = 0x5155_4545_4e5f_4d49; // "QUEEN_MI"

/// Applies every pending migration; returns how many were applied by this call.
pub async fn apply(client: &mut Client) -> Result<usize, String> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| format!("begin: {e}"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .await
        .map_err(|e| format!("migration lock: {e}"))?;
    tx.batch_execute(
        "CREATE SCHEMA IF NOT EXISTS queen;
         CREATE TABLE IF NOT EXISTS queen.schema_migrations (
             version integer PRIMARY KEY,
             name text NOT NULL,
             checksum bigint NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .map_err(|e| format!("migration bookkeeping: {e}"))?;
    let mut applied = 0;
    for m in MIGRATIONS {
        let checksum = xxh3_64(m.sql.as_bytes()) as i64;
        let row = tx
            .query_opt(
                "SELECT checksum FROM queen.schema_migrations WHERE version = $1",
                &[&m.version],
            )
            .await
            .map_err(|e| format!("reading migration state: {e}"))?;
        match row {
            Some(row) if row.get::<_, i64>(0) == checksum => continue,
            Some(_) => {
                return Err(format!(
                "migration {} was applied with a different text; this database belongs to another \
                     version of the broker",
                m.name
            ))
            }
            None => {}
        }
        tx.batch_execute(m.sql)
            .await
            .map_err(|e| format!("applying {}: {}", m.name, pg_message(&e)))?;
        tx.execute(
            "INSERT INTO queen.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            &[&m.version, &m.name, &checksum],
        )
        .await
        .map_err(|e| format!("recording {}: {e}", m.name))?;
        applied += 1;
    }
    tx.commit()
        .await
        .map_err(|e| format!("commit migrations: {e}"))?;
    Ok(applied)
}

fn pg_message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = db.message().to_string();
            if let Some(w) = db.where_() {
                s.push_str(&format!(" (where: {w})"));
            }
            if let Some(p) = db.position() {
                s.push_str(&format!(" (position: {p:?})"));
            }
            s
        }
        None => e.to_string(),
    }
}
