//! Reaching PostgreSQL at start: apply the schema migrations and procedure files over a
//! dedicated connection, waiting out a server that is still starting, and stopping at once when
//! the server answers that it will never let us in (the database does not exist, the login is
//! refused).
//!
//! After start the pool reconnects on its own: a request that finds PostgreSQL down answers 503
//! and the next one tries again; nothing here is involved.

use std::time::Duration;

use tokio_postgres::error::SqlState;

use super::migrations;

/// How many times, 500 ms apart, a refused or starting server is tried before giving up.
const ATTEMPTS: u32 = 30;

/// Why a connection attempt failed, as far as waiting is concerned.
#[derive(Debug, PartialEq, Eq)]
pub enum ConnectFailure {
    /// PostgreSQL is not there yet or is starting or restarting: worth another try.
    Transient(String),
    /// PostgreSQL answered and will keep answering the same (no such database, login refused).
    Fatal(String),
}

/// Classifies a connection error by its SQLSTATE: a server that answered with an authentication
/// or catalog error is fatal; a refused socket or a server still starting is transient.
pub fn classify(database: &tokio_postgres::Config, e: &tokio_postgres::Error) -> ConnectFailure {
    let name = database.get_dbname().unwrap_or("(default)");
    let user = database.get_user().unwrap_or("(default)");
    match e.code() {
        Some(code) if *code == SqlState::INVALID_CATALOG_NAME => {
            ConnectFailure::Fatal(format!("database \"{name}\" does not exist ({e})"))
        }
        Some(code)
            if *code == SqlState::INVALID_PASSWORD
                || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
        {
            ConnectFailure::Fatal(format!(
                "PostgreSQL refused the login of user \"{user}\" to database \"{name}\" ({e})"
            ))
        }
        _ => ConnectFailure::Transient(e.to_string()),
    }
}

/// Applies the migrations, retrying while PostgreSQL is unreachable or starting; an error at
/// once when the database does not exist or the login is refused.
pub async fn migrate(database: &tokio_postgres::Config) -> Result<(), String> {
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        match database.connect(tokio_postgres::NoTls).await {
            Ok((mut client, connection)) => {
                let conn = tokio::spawn(connection);
                let result = migrations::apply(&mut client).await;
                drop(client);
                let _ = conn.await;
                let applied = result?;
                if !applied.is_empty() {
                    tracing::info!(
                        baselined = applied.baselined,
                        schema = ?applied.schema,
                        procedures = ?applied.definitions,
                        "schema migrations and procedure files applied"
                    );
                }
                return Ok(());
            }
            Err(e) => match classify(database, &e) {
                ConnectFailure::Fatal(why) => return Err(format!("cannot start: {why}")),
                ConnectFailure::Transient(why) => {
                    if attempt == 0 {
                        tracing::warn!(error = %why, "PostgreSQL not reachable yet; retrying");
                    }
                    last = why;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            },
        }
    }
    Err(format!("cannot connect to PostgreSQL: {last}"))
}
