//! A client session on a PostgreSQL: connecting (with the connection driven on its own task),
//! a URL with its password hidden for messages, and a database error in words.

use tokio_postgres::{Client, NoTls};

/// Connects and drives the connection on a task; a failure names its cause and what to do.
pub async fn connect(url: &str) -> Result<Client, String> {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| format!("cannot connect to {}: {}", redact(url), connect_cause(&e)))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// Why a connection failed, in words a user can act on: refused (nothing listens there), an
/// unknown host, a password the server asks for and the URL lacks, a refused login, a missing
/// database; anything else as the client library says it, with its causes.
pub fn connect_cause(e: &tokio_postgres::Error) -> String {
    use tokio_postgres::error::SqlState;
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        return if *code == SqlState::INVALID_CATALOG_NAME {
            format!(
                "{}: create it first (createdb), or name an existing database in the URL's path",
                db.message()
            )
        } else if *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            format!(
                "the server refused the login ({}): check the URL's user and password",
                db.message()
            )
        } else {
            db.message().to_string()
        };
    }
    let chain = error_chain(e);
    let io_kind = io_error_kind(e);
    if io_kind == Some(std::io::ErrorKind::ConnectionRefused) {
        "connection refused: no PostgreSQL listens at that host and port".into()
    } else if chain.contains("password missing") {
        "the server asks for a password and the URL has none: write it as postgres://USER:PASSWORD@HOST/DB".into()
    } else if chain.contains("lookup address") || chain.contains("not known") {
        format!("unknown host ({chain}): check the URL's host name")
    } else if io_kind == Some(std::io::ErrorKind::TimedOut) {
        format!("the connection timed out ({chain}): is the host reachable and the port open?")
    } else {
        chain
    }
}

/// The error and each of its causes, joined by `: `.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut words = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        words.push(s.to_string());
        source = s.source();
    }
    words.join(": ")
}

/// The kind of the I/O error behind `e`, if one is.
fn io_error_kind(e: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        source = s.source();
    }
    None
}

/// `url` with its password replaced by `***`.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if url[s + 3..at].contains(':') => {
            let user_end = s + 3 + url[s + 3..at].find(':').unwrap_or(0);
            format!("{}:***{}", &url[..user_end], &url[at..])
        }
        _ => url.to_string(),
    }
}

/// A database error in words: the server's message when it sent one.
pub fn pg(e: tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    }
}
