//! The SQL of `sql/`, embedded in the binary and applied at start (`sql/README.md`,
//! `docs/spec/storage.md` "The SQL and its upgrades").
//!
//! Two kinds of file:
//! - schema migrations (`sql/schema/NNN_*.sql`): tables, indexes, columns, storage settings.
//!   Immutable: each is applied once, in version order, and recorded with the xxh3_64 of its
//!   text in `queen.schema_migrations`; a recorded migration whose text has changed is refused.
//! - repeatable procedure files (`sql/procedures/*.sql`): every procedure defined once with
//!   `CREATE OR REPLACE`, one file per family. A file is applied again whenever its text changes
//!   (its xxh3_64 differs from the one recorded in `queen.schema_definitions`), after the schema
//!   migrations, in the fixed order of [`DEFINITIONS`]. The drop list ([`DROPPED`]) comes first;
//!   when it changes, every procedure file is applied again after it, so a procedure dropped
//!   there to change its return type is always defined again.
//!
//! Everything runs in one transaction under a transaction-level advisory lock: a broker started
//! twice, or two brokers started at once on one database, end with one schema.
//!
//! A database migrated by the numbered layout that preceded this split (`001_schema.sql` ..
//! `021_pop_claim_direct.sql`, commit 4fa2920) is recognised by its 21 recorded rows (names and
//! checksums of [`LEGACY_LAYOUT`]) and baselined: those rows are replaced by the schema
//! migrations up to [`LEGACY_BASELINE`] (recorded as applied without running them: that
//! database already has exactly what they create), then any later schema migration, the drop
//! list and every procedure file are applied as for any database.

use tokio_postgres::{Client, Transaction};
use xxhash_rust::xxh3::xxh3_64;

/// One immutable schema migration.
pub struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub sql: &'static str,
}

/// One repeatable file of procedure definitions.
pub struct Definition {
    pub file: &'static str,
    pub sql: &'static str,
}

macro_rules! migration {
    ($version:expr, $file:literal) => {
        Migration {
            version: $version,
            name: $file,
            sql: include_str!(concat!("../../../sql/schema/", $file)),
        }
    };
}

macro_rules! definition {
    ($file:literal) => {
        Definition {
            file: $file,
            sql: include_str!(concat!("../../../sql/procedures/", $file)),
        }
    };
}

/// Every schema migration, in order.
pub const SCHEMA_MIGRATIONS: &[Migration] = &[
    migration!(1, "001_log_engine.sql"),
    migration!(2, "002_peer_secret.sql"),
];

/// The drop list: procedures that no longer exist, applied before [`DEFINITIONS`].
pub const DROPPED: Definition = definition!("dropped.sql");

/// The procedure files, in the order they are applied. A LANGUAGE sql function's body is
/// checked when it is created, so a file comes after the files whose functions its SQL-language
/// functions call (`lease.sql` first: `lease_live_v1` is used everywhere).
pub const DEFINITIONS: &[Definition] = &[
    definition!("lease.sql"),
    definition!("queues.sql"),
    definition!("push.sql"),
    definition!("pop.sql"),
    definition!("ack.sql"),
    definition!("dlq.sql"),
    definition!("transaction.sql"),
    definition!("retention.sql"),
    definition!("peers.sql"),
];

/// The numbered layout before the split (commit 4fa2920): version, name and xxh3_64 of the
/// text of each file, as its migrator recorded them in `queen.schema_migrations`.
pub const LEGACY_LAYOUT: &[(i32, &str, u64)] = &[
    (1, "001_schema.sql", 0xc00d_6064_b2db_292d),
    (2, "002_provision.sql", 0x239c_f50d_fced_39ef),
    (3, "003_push.sql", 0xff94_8fb0_ca9a_b755),
    (4, "004_pop.sql", 0xc664_95f0_7df2_2bc8),
    (5, "005_retention.sql", 0x79e8_9a12_eca3_f6df),
    (6, "006_ack.sql", 0xcb85_0515_41f3_b452),
    (7, "007_lease_dlq.sql", 0x5b08_57ee_9aac_eef8),
    (8, "008_ack_fusion.sql", 0x670b_f5cb_8947_cf6b),
    (9, "009_transaction.sql", 0x5616_e643_5ba1_1ee6),
    (10, "010_dedup_index.sql", 0x4579_7b83_1310_a6e1),
    (11, "011_push_multi.sql", 0xf353_57d0_9b62_64bc),
    (12, "012_pop_engine.sql", 0xd125_ed4c_42fc_c503),
    (13, "013_structured_refusals.sql", 0xe07b_9a86_c5cc_9e16),
    (14, "014_reliability.sql", 0x6655_2991_7673_0c97),
    (15, "015_queue_options.sql", 0xf727_e164_5cfc_376c),
    (16, "016_pop_options.sql", 0x6730_cb28_f8a9_b941),
    (17, "017_queue_resources.sql", 0x2c48_5f4a_acd0_75fb),
    (18, "018_cursor_advance_cached.sql", 0x0d20_848d_99ba_baac),
    (19, "019_generic_plans.sql", 0x95f8_668d_e10d_8cb6),
    (20, "020_ack_multi_set.sql", 0x3f74_816d_f4f6_f665),
    (21, "021_pop_claim_direct.sql", 0xff83_3386_5d5c_bb15),
];

/// The last schema migration whose tables, indexes and columns a database at [`LEGACY_LAYOUT`]
/// already has: 001_log_engine.sql is the fold of the legacy files' DDL.
pub const LEGACY_BASELINE: i32 = 1;

const LOCK_KEY: i64 = 0x5155_4545_4e5f_4d49; // "QUEEN_MI"

/// What one call of [`apply`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The database was at the legacy numbered layout and has been baselined.
    pub baselined: bool,
    /// The schema migrations run by this call (not those recorded by the baseline).
    pub schema: Vec<&'static str>,
    /// The repeatable files applied by this call, in order (the drop list included).
    pub definitions: Vec<&'static str>,
}

impl Applied {
    pub fn is_empty(&self) -> bool {
        !self.baselined && self.schema.is_empty() && self.definitions.is_empty()
    }
}

/// How many schema migrations the database records: the health probe (it answers once
/// PostgreSQL does and the schema is applied).
pub async fn recorded_count(db: &Client) -> Result<i64, tokio_postgres::Error> {
    let row = db
        .query_one("SELECT count(*) FROM queen.schema_migrations", &[])
        .await?;
    Ok(row.get(0))
}

fn checksum(sql: &str) -> i64 {
    xxh3_64(sql.as_bytes()) as i64
}

/// Brings the database to this broker's schema and procedures; reports what it did.
pub async fn apply(client: &mut Client) -> Result<Applied, String> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| format!("begin: {e}"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .await
        .map_err(|e| format!("migration lock: {e}"))?;
    // `DROP FUNCTION IF EXISTS` of a name that is not there is a NOTICE, not news.
    tx.batch_execute(
        "SET LOCAL client_min_messages = warning;
         CREATE SCHEMA IF NOT EXISTS queen;
         CREATE TABLE IF NOT EXISTS queen.schema_migrations (
             version integer PRIMARY KEY,
             name text NOT NULL,
             checksum bigint NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now());
         CREATE TABLE IF NOT EXISTS queen.schema_definitions (
             file text PRIMARY KEY,
             checksum bigint NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .map_err(|e| format!("migration bookkeeping: {e}"))?;
    let mut applied = Applied {
        baselined: baseline(&tx).await?,
        ..Applied::default()
    };
    for m in SCHEMA_MIGRATIONS {
        let sum = checksum(m.sql);
        let row = tx
            .query_opt(
                "SELECT name, checksum FROM queen.schema_migrations WHERE version = $1",
                &[&m.version],
            )
            .await
            .map_err(|e| format!("reading migration state: {e}"))?;
        if let Some(row) = row {
            let (name, recorded): (String, i64) = (row.get(0), row.get(1));
            if name == m.name && recorded == sum {
                continue;
            }
            return Err(format!(
                "schema migration {} (version {}) was applied as {name} with a different text \
                 (recorded checksum {:016x}, this broker's {:016x}): schema migrations are \
                 immutable (add a new numbered file, see sql/README.md), or this database \
                 belongs to another version of the broker",
                m.name, m.version, recorded as u64, sum as u64
            ));
        }
        tx.batch_execute(m.sql)
            .await
            .map_err(|e| format!("applying {}: {}", m.name, pg_message(&e)))?;
        tx.execute(
            "INSERT INTO queen.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            &[&m.version, &m.name, &sum],
        )
        .await
        .map_err(|e| format!("recording {}: {e}", m.name))?;
        applied.schema.push(m.name);
    }
    let mut all = false;
    for d in std::iter::once(&DROPPED).chain(DEFINITIONS) {
        let sum = checksum(d.sql);
        let recorded: Option<i64> = tx
            .query_opt(
                "SELECT checksum FROM queen.schema_definitions WHERE file = $1",
                &[&d.file],
            )
            .await
            .map_err(|e| format!("reading definition state: {e}"))?
            .map(|r| r.get(0));
        if !all && recorded == Some(sum) {
            continue;
        }
        // A changed drop list may drop a procedure some file defines again: apply them all.
        all = all || d.file == DROPPED.file;
        tx.batch_execute(d.sql)
            .await
            .map_err(|e| format!("applying procedures/{}: {}", d.file, pg_message(&e)))?;
        tx.execute(
            "INSERT INTO queen.schema_definitions (file, checksum) VALUES ($1, $2)
             ON CONFLICT (file) DO UPDATE SET checksum = excluded.checksum, applied_at = now()",
            &[&d.file, &sum],
        )
        .await
        .map_err(|e| format!("recording procedures/{}: {e}", d.file))?;
        applied.definitions.push(d.file);
    }
    tx.commit()
        .await
        .map_err(|e| format!("commit migrations: {e}"))?;
    Ok(applied)
}

/// Recognises a database at [`LEGACY_LAYOUT`] and replaces its rows by the schema migrations up
/// to [`LEGACY_BASELINE`], recorded without running them. A database that carries some legacy
/// rows but not exactly those 21 is refused: it was migrated by an older broker that stopped
/// short, or by one with other files.
async fn baseline(tx: &Transaction<'_>) -> Result<bool, String> {
    let rows = tx
        .query(
            "SELECT version, name, checksum FROM queen.schema_migrations ORDER BY version",
            &[],
        )
        .await
        .map_err(|e| format!("reading migration state: {e}"))?;
    let recorded: Vec<(i32, String, i64)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let is_legacy = |name: &str| LEGACY_LAYOUT.iter().any(|(_, n, _)| *n == name);
    if !recorded.iter().any(|(_, name, _)| is_legacy(name)) {
        return Ok(false);
    }
    let exact = recorded.len() == LEGACY_LAYOUT.len()
        && recorded
            .iter()
            .zip(LEGACY_LAYOUT)
            .all(|((v, n, c), (lv, ln, lc))| v == lv && n == ln && *c as u64 == *lc);
    if !exact {
        let last = recorded
            .last()
            .map(|(v, n, _)| format!("version {v} ({n})"))
            .unwrap_or_default();
        return Err(format!(
            "this database carries the numbered migrations of an older broker, but not exactly \
             001_schema.sql .. 021_pop_claim_direct.sql as commit 4fa2920 left them (its last \
             recorded row is {last}): only that layout can be upgraded in place; start the \
             broker of commit 4fa2920 on it first"
        ));
    }
    tx.execute("DELETE FROM queen.schema_migrations", &[])
        .await
        .map_err(|e| format!("baseline: {e}"))?;
    for m in SCHEMA_MIGRATIONS
        .iter()
        .filter(|m| m.version <= LEGACY_BASELINE)
    {
        tx.execute(
            "INSERT INTO queen.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            &[&m.version, &m.name, &checksum(m.sql)],
        )
        .await
        .map_err(|e| format!("baseline {}: {e}", m.name))?;
    }
    tracing::info!(
        baseline = LEGACY_BASELINE,
        "database at the numbered layout 001..021 recorded as its schema migrations"
    );
    Ok(true)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> impl Iterator<Item = (&'static str, &'static str)> {
        SCHEMA_MIGRATIONS
            .iter()
            .map(|m| (m.name, m.sql))
            .chain(std::iter::once((DROPPED.file, DROPPED.sql)))
            .chain(DEFINITIONS.iter().map(|d| (d.file, d.sql)))
    }

    /// The "one grep" rule: every procedure is created in exactly one place of `sql/`.
    #[test]
    fn every_procedure_is_defined_once() {
        let mut seen = std::collections::BTreeMap::<String, Vec<&str>>::new();
        for (file, sql) in files() {
            for line in sql.lines() {
                let rest = line
                    .strip_prefix("CREATE OR REPLACE FUNCTION ")
                    .or_else(|| line.strip_prefix("CREATE FUNCTION "));
                if let Some(rest) = rest {
                    let name = rest.split('(').next().unwrap().to_string();
                    assert!(name.starts_with("queen."), "{file}: {line}");
                    seen.entry(name).or_default().push(file);
                }
            }
        }
        assert!(seen.len() > 40, "{seen:?}");
        for (name, files) in &seen {
            assert_eq!(files.len(), 1, "{name} is defined in {files:?}");
        }
        for name in seen.keys() {
            assert!(
                !DROPPED.sql.contains(&format!("FUNCTION IF EXISTS {name}(")),
                "dropped.sql drops {name}, which is defined"
            );
        }
    }

    /// Procedure files only define procedures (CREATE OR REPLACE, so that they can be applied
    /// again); every file opens with a comment saying what it owns.
    #[test]
    fn procedure_files_are_repeatable_and_say_what_they_own() {
        for (file, sql) in files() {
            assert!(sql.starts_with(&format!("-- {file}: ")), "{file}");
        }
        for d in DEFINITIONS {
            for line in d.sql.lines() {
                let upper = line.trim_start().to_ascii_uppercase();
                for ddl in [
                    "CREATE TABLE",
                    "ALTER TABLE",
                    "CREATE INDEX",
                    "DROP ",
                    "CREATE FUNCTION",
                ] {
                    assert!(!upper.starts_with(ddl), "{}: {line}", d.file);
                }
            }
        }
    }

    #[test]
    fn schema_versions_are_numbered_in_order() {
        for (i, m) in SCHEMA_MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i32 + 1);
            assert!(
                m.name.starts_with(&format!("{:03}_", m.version)),
                "{}",
                m.name
            );
        }
        assert!(LEGACY_BASELINE as usize <= SCHEMA_MIGRATIONS.len());
    }
}
