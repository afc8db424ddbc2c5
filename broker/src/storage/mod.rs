//! PostgreSQL access: the connection pool and the embedded migrations.
//!
//! The broker talks to PostgreSQL only through the `queen.*_v1` procedures of `sql/`; the Rust
//! side never composes table-level SQL on a hot path.

pub mod migrations;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

/// Builds the pool; connections are opened lazily.
pub fn pool(database: &tokio_postgres::Config, size: usize) -> Result<Pool, String> {
    let manager = Manager::from_config(
        database.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .build()
        .map_err(|e| format!("cannot build the connection pool: {e}"))
}

/// A database failure with the context it happened in; becomes a logged 503/500.
#[derive(Debug)]
pub struct DbError {
    pub context: &'static str,
    pub message: String,
    /// The SQLSTATE, when PostgreSQL answered.
    pub code: Option<String>,
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.context, self.message)
    }
}

impl DbError {
    pub fn from_pg(context: &'static str, e: tokio_postgres::Error) -> DbError {
        let code = e.code().map(|c| c.code().to_string());
        let message = match e.as_db_error() {
            Some(db) => format!("{} ({})", db.message(), db.code().code()),
            None => e.to_string(),
        };
        DbError {
            context,
            message,
            code,
        }
    }

    pub fn from_pool(context: &'static str, e: deadpool_postgres::PoolError) -> DbError {
        DbError {
            context,
            message: format!("no database connection: {e}"),
            code: None,
        }
    }

    /// The message PostgreSQL raised, when this was a raised exception (`QDUP ...`, `QTXN ...`).
    pub fn raised_message(&self) -> Option<&str> {
        (self.code.as_deref() == Some("P0001") || self.code.as_deref() == Some("23505"))
            .then_some(self.message.as_str())
    }
}
