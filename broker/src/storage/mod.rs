//! PostgreSQL access: the connection pool, the embedded SQL (schema migrations and procedure
//! files), the database error type (with the structured refusals procedures raise), and the
//! typed bindings of the procedures (`procs`).
//!
//! The broker talks to PostgreSQL only through the procedures of `sql/`, called from `procs`; the Rust
//! side never composes table-level SQL on a hot path.

pub mod migrations;
pub mod procs;
pub mod startup;
pub mod timeline;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{
    Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Timeouts,
};
use tokio_postgres::NoTls;

pub use timeline::Timeline;

/// SQLSTATE `data_corrupted`: what a stored segment that cannot be unpacked is reported as.
const DATA_CORRUPTED: &str = "XX001";

/// Builds the pool; connections are opened lazily (no bound on waiting for one).
pub fn pool(database: &tokio_postgres::Config, size: usize) -> Result<Pool, String> {
    pool_watching(database, size, None, Arc::new(Timeline::default()))
}

/// Builds the pool; connections are opened lazily, each telling `timeline` which WAL timeline
/// it reached before it is used. With several hosts and `target_session_attrs=read-write` in
/// the database URL, a connection opened after a failover reaches the promoted server.
/// `timeout` bounds waiting for a free connection, opening one and checking one for reuse (a
/// request past it gets the pool's error: 503).
pub fn pool_watching(
    database: &tokio_postgres::Config,
    size: usize,
    timeout: Option<Duration>,
    timeline: Arc<Timeline>,
) -> Result<Pool, String> {
    let manager = Manager::from_config(
        database.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let watch = Hook::async_fn(move |client, _| {
        let timeline = timeline.clone();
        Box::pin(async move {
            let row = client
                .query_one(timeline::CURRENT_TIMELINE_SQL, &[])
                .await
                .map_err(HookError::Backend)?;
            timeline.observe(row.get::<_, i64>(0) as u32);
            Ok(())
        })
    });
    Pool::builder(manager)
        .max_size(size)
        .timeouts(Timeouts {
            wait: timeout,
            create: timeout,
            recycle: timeout,
        })
        .runtime(Runtime::Tokio1)
        .post_create(watch)
        .build()
        .map_err(|e| format!("cannot build the connection pool: {e}"))
}

/// A database failure with the context it happened in; becomes a logged 503/500 at the edge,
/// unless it carries a refusal (`detail()`) the caller knows how to answer.
#[derive(Debug, Clone)]
pub struct DbError {
    pub context: &'static str,
    /// What went wrong, as PostgreSQL (or the pool) said it; never carries the SQLSTATE.
    pub message: String,
    /// The SQLSTATE, when PostgreSQL answered.
    pub code: Option<String>,
    /// The raw DETAIL of a raised exception (a JSON object for the procedures' refusals).
    pub raw_detail: Option<String>,
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.context, self.message)?;
        if let Some(code) = &self.code {
            write!(f, " (SQLSTATE {code})")?;
        }
        Ok(())
    }
}

impl DbError {
    pub fn from_pg(context: &'static str, e: tokio_postgres::Error) -> DbError {
        let code = e.code().map(|c| c.code().to_string());
        match e.as_db_error() {
            Some(db) => DbError {
                context,
                message: db.message().to_string(),
                code,
                raw_detail: db.detail().map(str::to_string),
            },
            None => DbError {
                context,
                message: e.to_string(),
                code,
                raw_detail: None,
            },
        }
    }

    pub fn from_pool(context: &'static str, e: deadpool_postgres::PoolError) -> DbError {
        DbError::unavailable(context, format!("no database connection: {e}"))
    }

    /// The database could not be reached (no SQLSTATE: answered 503).
    pub fn unavailable(context: &'static str, message: impl Into<String>) -> DbError {
        DbError {
            context,
            message: message.into(),
            code: None,
            raw_detail: None,
        }
    }

    /// Whether the failure is the database being unreachable or going away (no SQLSTATE: the
    /// pool or the socket failed; class 08 connection exceptions; 53 insufficient resources;
    /// 57P01..57P03 shutdown and cannot-connect-now): the client should retry later (503).
    pub fn is_unavailable(&self) -> bool {
        match self.code.as_deref() {
            None => true,
            Some(c) => c.starts_with("08") || c.starts_with("53") || c.starts_with("57P0"),
        }
    }

    /// Stored data the broker cannot read (answered 500).
    pub fn corrupt(context: &'static str, message: impl Into<String>) -> DbError {
        DbError {
            context,
            message: message.into(),
            code: Some(DATA_CORRUPTED.to_string()),
            raw_detail: None,
        }
    }

    /// The structured refusal a procedure raised (`RAISE ... USING DETAIL = <json object>`,
    /// see the head of `sql/procedures/transaction.sql`); `None` for any other failure.
    pub fn detail(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        match serde_json::from_str(self.raw_detail.as_deref()?) {
            Ok(serde_json::Value::Object(map)) if map.contains_key("refusal") => Some(map),
            _ => None,
        }
    }
}
