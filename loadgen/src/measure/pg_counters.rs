//! PostgreSQL's own counters for one benchmark database: snapshots and deltas.
//!
//! - `pg_stat_database.xact_commit` of the database (all commits, read-only ones too). It lags:
//!   a backend flushes its counters about once a second while busy and ~10 s after going idle.
//!   Both window edges are taken under the same steady load, so the lag cancels to within
//!   about a second's worth of commits; `write_commits` is the exact figure beside it.
//! - `pg_snapshot_xmax(pg_current_snapshot())`: writing transactions, lag-free.
//! - `pg_stat_wal`: records, bytes, writes, syncs (cluster-wide; cells never overlap in time).
//! - `pg_stat_statements` top-level rows of this database, folded by the procedure each
//!   statement calls: the broker's `queen.*` (named without the schema, `log_push_v1`) or a
//!   peer's `pgmq.*` / `pgq.*` (named with it, `pgmq.delete`). With `track = all` a top-level row already includes what the
//!   statements inside it cost, so nested rows are never added.

use std::collections::BTreeMap;

use tokio_postgres::Client;

use crate::target::postgres::pg;

/// The procedures whose top-level calls are the ack path's commits (each its own transaction):
/// every target profile's (`target::profile`: the log engine's of our broker and Queen's, then
/// Queen's rows engine's `ack_messages_v2`), then the peers' answers to a consumed message
/// (PGMQ: delete, archive, set_vt; PgQ: finish_batch, event_retry). One database holds one
/// kind, so one list serves all.
pub const ACK_PROCEDURES: &[&str] = &[
    "log_ack_by_hash_v1",
    "log_ack_at_v1",
    "log_ack_multi_v1",
    "log_ack_v1",
    "log_dlq_head_v1",
    "log_dlq_head_v3",
    "ack_messages_v2",
    "pgmq.delete",
    "pgmq.archive",
    "pgmq.set_vt",
    "pgq.finish_batch",
    "pgq.event_retry",
    "procrastinate_finish_job_v1",
    "procrastinate_retry_job_v2",
    "pgboss.complete",
    "pgboss.fail",
];

/// Schemas whose procedures are folded by name: the broker's (named without the schema) and the
/// peers' (named with it; procrastinate's live in `public`, named by their prefix; pg-boss's
/// statements are named by the comment that opens them, `/* pgboss.fetch() */`).
const PROCEDURE_SCHEMAS: [(&str, bool); 5] = [
    ("queen.", false),
    ("pgmq.", true),
    ("pgq.", true),
    ("procrastinate_", true),
    ("pgboss.", true),
];

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StatementCounters {
    pub calls: f64,
    pub total_exec_ms: f64,
    pub rows: f64,
    pub wal_bytes: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PgSnapshot {
    pub xact_commit: f64,
    pub xmax: f64,
    pub wal_records: f64,
    pub wal_bytes: f64,
    pub wal_writes: f64,
    pub wal_syncs: f64,
    /// By procedure name without the schema (`log_push_v1`); other statements under `other`.
    pub statements: BTreeMap<String, StatementCounters>,
}

impl PgSnapshot {
    /// Every counter unknown (no database access): figures derived from it come out NaN.
    pub fn nan() -> PgSnapshot {
        let n = f64::NAN;
        PgSnapshot {
            xact_commit: n,
            xmax: n,
            wal_records: n,
            wal_bytes: n,
            wal_writes: n,
            wal_syncs: n,
            ..Default::default()
        }
    }

    /// Reads every counter of `database` through `client` (connected to any database).
    pub async fn take(client: &Client, database: &str) -> Result<PgSnapshot, String> {
        let db = client
            .query_one(
                "SELECT xact_commit::float8, pg_snapshot_xmax(pg_current_snapshot())::text::float8 \
                 FROM pg_stat_database WHERE datname = $1",
                &[&database],
            )
            .await
            .map_err(pg)?;
        let wal = client
            .query_one(
                "SELECT wal_records::float8, wal_bytes::float8, wal_write::float8, wal_sync::float8 FROM pg_stat_wal",
                &[],
            )
            .await
            .map_err(pg)?;
        let rows = client
            .query(
                "SELECT s.query, s.calls::float8, s.total_exec_time, s.rows::float8, s.wal_bytes::float8 \
                 FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
                 WHERE d.datname = $1 AND s.toplevel",
                &[&database],
            )
            .await
            .map_err(pg)?;
        let mut statements: BTreeMap<String, StatementCounters> = BTreeMap::new();
        for r in rows {
            let name = procedure_of(r.get::<_, &str>(0));
            let s = statements.entry(name).or_default();
            s.calls += r.get::<_, f64>(1);
            s.total_exec_ms += r.get::<_, f64>(2);
            s.rows += r.get::<_, f64>(3);
            s.wal_bytes += r.get::<_, f64>(4);
        }
        Ok(PgSnapshot {
            xact_commit: db.get(0),
            xmax: db.get(1),
            wal_records: wal.get(0),
            wal_bytes: wal.get(1),
            wal_writes: wal.get(2),
            wal_syncs: wal.get(3),
            statements,
        })
    }

    /// `self - earlier`, counter by counter; every counter unknown (NaN) when PostgreSQL's
    /// counters were reset in between (a crash restart loses them), since a delta across a
    /// reset is meaningless, not zero or negative.
    pub fn since(&self, earlier: &PgSnapshot) -> PgSnapshot {
        if self.counters_reset_since(earlier) {
            return PgSnapshot::nan();
        }
        let mut statements = BTreeMap::new();
        for (name, now) in &self.statements {
            let before = earlier.statements.get(name).copied().unwrap_or_default();
            let d = StatementCounters {
                calls: now.calls - before.calls,
                total_exec_ms: now.total_exec_ms - before.total_exec_ms,
                rows: now.rows - before.rows,
                wal_bytes: now.wal_bytes - before.wal_bytes,
            };
            if d.calls > 0.0 {
                statements.insert(name.clone(), d);
            }
        }
        PgSnapshot {
            xact_commit: self.xact_commit - earlier.xact_commit,
            xmax: self.xmax - earlier.xmax,
            wal_records: self.wal_records - earlier.wal_records,
            wal_bytes: self.wal_bytes - earlier.wal_bytes,
            wal_writes: self.wal_writes - earlier.wal_writes,
            wal_syncs: self.wal_syncs - earlier.wal_syncs,
            statements,
        }
    }

    /// Whether a counter went backwards between `earlier` and `self`.
    fn counters_reset_since(&self, earlier: &PgSnapshot) -> bool {
        self.xact_commit < earlier.xact_commit
            || self.wal_records < earlier.wal_records
            || self.statements.iter().any(|(name, now)| {
                let before = earlier.statements.get(name);
                before.is_some_and(|b| now.calls < b.calls)
            })
    }

    /// Top-level calls of the ack procedures (NaN when the counters are unknown).
    pub fn ack_calls(&self) -> f64 {
        self.ack_total(|s| s.calls)
    }

    /// Execution ms of the ack procedures (NaN when the counters are unknown).
    pub fn ack_exec_ms(&self) -> f64 {
        self.ack_total(|s| s.total_exec_ms)
    }

    /// `counter` summed over the ack procedures; NaN for a snapshot whose counters are unknown
    /// (`PgSnapshot::nan`, which has no statements to sum).
    fn ack_total(&self, counter: fn(&StatementCounters) -> f64) -> f64 {
        if self.xact_commit.is_nan() {
            return f64::NAN;
        }
        ACK_PROCEDURES
            .iter()
            .filter_map(|p| self.statements.get(*p))
            .map(counter)
            .sum()
    }
}

/// The procedure a statement calls (`log_push_v1` for `queen.log_push_v1`, `pgmq.read`), or
/// `other`.
pub fn procedure_of(query: &str) -> String {
    let found = PROCEDURE_SCHEMAS
        .iter()
        .filter_map(|(schema, keep)| query.find(schema).map(|at| (at, *schema, *keep)))
        .min_by_key(|(at, _, _)| *at);
    let Some((at, schema, keep_schema)) = found else {
        return "other".into();
    };
    let name: String = query[at + schema.len()..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    match (name.is_empty(), keep_schema) {
        (true, _) => "other".into(),
        (false, true) => format!("{schema}{name}"),
        (false, false) => name,
    }
}

/// The lag-free counters sampled every second, as running totals.
#[derive(Clone, Copy, Debug)]
pub struct LiveCounters {
    /// Writing transactions so far (`pg_snapshot_xmax` of the current snapshot).
    pub write_commits: f64,
    /// Top-level calls of the ack procedures so far (`pg_stat_statements`).
    pub ack_calls: f64,
    /// Execution time of the ack procedures so far, in ms (`pg_stat_statements`).
    pub ack_exec_ms: f64,
}

impl LiveCounters {
    /// The reading when there is no database to ask.
    pub const UNKNOWN: LiveCounters = LiveCounters {
        write_commits: f64::NAN,
        ack_calls: f64::NAN,
        ack_exec_ms: f64::NAN,
    };
}

/// Reads the lag-free counters of `database`.
pub async fn live_sample(client: &Client, database: &str) -> Result<LiveCounters, String> {
    let row = client
        .query_one(
            "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::float8, \
                    COALESCE(a.calls, 0), COALESCE(a.exec_ms, 0) \
             FROM (SELECT sum(s.calls)::float8 AS calls, sum(s.total_exec_time)::float8 AS exec_ms \
                   FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
                   WHERE d.datname = $1 AND s.toplevel AND s.query ~ $2) a",
            &[&database, &ack_procedures_pattern()],
        )
        .await
        .map_err(pg)?;
    Ok(LiveCounters {
        write_commits: row.get(0),
        ack_calls: row.get(1),
        ack_exec_ms: row.get(2),
    })
}

/// A regular expression matching a call of any ack procedure (`queen.log_ack_v1(`,
/// `pgmq.delete(`).
fn ack_procedures_pattern() -> String {
    let calls: Vec<String> = ACK_PROCEDURES
        .iter()
        .map(|p| match p.split_once('.') {
            Some((schema, name)) => format!("{schema}\\.{name}"),
            None if p.starts_with("procrastinate_") => p.to_string(),
            None => format!("queen\\.{p}"),
        })
        .collect();
    format!("({})\\(", calls.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_fold_by_procedure() {
        assert_eq!(
            procedure_of("SELECT ordinal FROM queen.log_push_v1($1, $2)"),
            "log_push_v1"
        );
        assert_eq!(
            procedure_of("SELECT * FROM queen.log_ack_multi_v1($1,$2,$3,$4,$5)"),
            "log_ack_multi_v1"
        );
        assert_eq!(procedure_of("BEGIN"), "other");
        assert_eq!(
            procedure_of("SELECT count(*) FROM pgmq.delete($1::text, $2::bigint[])"),
            "pgmq.delete"
        );
        assert_eq!(
            procedure_of("SELECT pgq.finish_batch($1)"),
            "pgq.finish_batch"
        );
        assert_eq!(
            procedure_of("/* pgboss.complete() */ WITH results AS (UPDATE pgboss.job SET"),
            "pgboss.complete"
        );
        assert_eq!(
            procedure_of("SELECT procrastinate_finish_job_v1($1, 'succeeded', false)"),
            "procrastinate_finish_job_v1"
        );
        assert_eq!(
            ack_procedures_pattern(),
            "(queen\\.log_ack_by_hash_v1|queen\\.log_ack_at_v1|queen\\.log_ack_multi_v1|\
             queen\\.log_ack_v1|queen\\.log_dlq_head_v1|queen\\.log_dlq_head_v3|\
             queen\\.ack_messages_v2|pgmq\\.delete|pgmq\\.archive|pgmq\\.set_vt|pgq\\.finish_batch|\
             pgq\\.event_retry|procrastinate_finish_job_v1|procrastinate_retry_job_v2|\
             pgboss\\.complete|pgboss\\.fail)\\("
        );
    }

    #[test]
    fn every_profiles_ack_procedures_count_as_ack_commits() {
        use crate::target::profile::TargetKind;
        for kind in TargetKind::ALL {
            for p in kind.procedures().ack {
                assert!(ACK_PROCEDURES.contains(p), "{kind}: {p}");
            }
        }
        assert_eq!(
            procedure_of("SELECT queen.ack_messages_v2($1::jsonb)"),
            "ack_messages_v2"
        );
    }

    #[test]
    fn deltas_subtract_and_drop_idle_statements() {
        let mut a = PgSnapshot {
            xact_commit: 10.0,
            wal_syncs: 3.0,
            ..Default::default()
        };
        a.statements.insert(
            "log_ack_at_v1".into(),
            StatementCounters {
                calls: 5.0,
                total_exec_ms: 1.0,
                rows: 5.0,
                wal_bytes: 100.0,
            },
        );
        a.statements.insert(
            "log_push_v1".into(),
            StatementCounters {
                calls: 2.0,
                ..Default::default()
            },
        );
        let mut b = a.clone();
        b.xact_commit = 25.0;
        b.wal_syncs = 4.0;
        b.statements.get_mut("log_ack_at_v1").unwrap().calls = 9.0;
        b.statements.get_mut("log_ack_at_v1").unwrap().total_exec_ms = 3.0;
        b.statements.insert(
            "log_ack_multi_v1".into(),
            StatementCounters {
                calls: 2.0,
                total_exec_ms: 0.5,
                ..Default::default()
            },
        );
        let d = b.since(&a);
        assert_eq!(d.xact_commit, 15.0);
        assert_eq!(d.wal_syncs, 1.0);
        assert_eq!(d.statements["log_ack_at_v1"].calls, 4.0);
        assert!(
            !d.statements.contains_key("log_push_v1"),
            "no calls in the window"
        );
        assert_eq!(d.ack_calls(), 6.0);
        assert_eq!(d.ack_exec_ms(), 2.5);

        // A crash restart in the window: the counters start again from zero.
        let mut after_restart = b.clone();
        after_restart.xact_commit = 4.0;
        after_restart
            .statements
            .get_mut("log_ack_at_v1")
            .unwrap()
            .calls = 1.0;
        let lost = after_restart.since(&a);
        assert!(lost.xact_commit.is_nan() && lost.wal_syncs.is_nan());
        assert!(lost.ack_calls().is_nan() && lost.ack_exec_ms().is_nan());
        assert!(lost.statements.is_empty());
        let mut statements_only = b.clone();
        statements_only
            .statements
            .get_mut("log_ack_at_v1")
            .unwrap()
            .calls = 1.0;
        assert!(
            statements_only.since(&a).ack_calls().is_nan(),
            "pg_stat_statements reset"
        );
    }
}
