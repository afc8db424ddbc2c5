//! A client session on a PostgreSQL: connecting (with the connection driven on its own task),
//! a URL with its password hidden for messages, and a database error in words.

use tokio_postgres::{Client, NoTls};

/// Connects and drives the connection on a task.
pub async fn connect(url: &str) -> Result<Client, String> {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", redact(url)))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
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
