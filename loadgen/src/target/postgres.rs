//! The PostgreSQL a run measures: a throwaway cluster started here (the default), or an
//! existing server given by `--database-url`. Either way every cell round gets a fresh database
//! of its own, so `pg_stat_database` and `pg_stat_statements` (keyed by database) separate the
//! cells cleanly.

use std::collections::BTreeMap;

use tokio_postgres::Client;

use super::session::redact;
pub use super::session::{connect, pg};

use super::embedded::{Embedded, BROKER_APPLICATION};
use crate::scenario::DatabaseSide;

/// Settings worth recording beside the figures (they decide what a commit costs).
pub const SETTINGS_THAT_MATTER: &[&str] = &[
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_sync_method",
    "wal_level",
    "wal_buffers",
    "wal_writer_delay",
    "commit_delay",
    "commit_siblings",
    "max_wal_size",
    "checkpoint_timeout",
    "shared_buffers",
    "max_connections",
    "pg_stat_statements.track",
];

pub enum Server {
    Embedded(Embedded),
    External(tokio_postgres::Config),
}

pub struct Postgres {
    server: Server,
    pub version: String,
    pub settings: BTreeMap<String, String>,
}

impl Postgres {
    /// Starts a throwaway cluster (production-like durability: fsync and synchronous_commit on),
    /// with the standby and the relays `side` asks for.
    pub async fn embedded(side: DatabaseSide) -> Result<Postgres, String> {
        let embedded = Embedded::start(side).await?;
        let url = embedded.url("postgres");
        Postgres::finish(Server::Embedded(embedded), &url).await
    }

    /// Uses an existing server; `pg_stat_statements` must be loaded there.
    pub async fn external(url: &str) -> Result<Postgres, String> {
        let config: tokio_postgres::Config =
            url.parse().map_err(|e| format!("--database-url: {e}"))?;
        Postgres::finish(Server::External(config), url)
            .await
            .map_err(|e| match e.starts_with("cannot connect") {
                true => format!(
                    "--database-url: {e}\n  (leave out --database-url and ackbench starts a throwaway PostgreSQL cluster of its own)"
                ),
                false => e,
            })
    }

    async fn finish(server: Server, admin_url: &str) -> Result<Postgres, String> {
        let admin = connect(admin_url).await?;
        check_pg_stat_statements(&admin).await?;
        let version: String = admin
            .query_one("SHOW server_version", &[])
            .await
            .map_err(pg)?
            .get(0);
        let mut settings = BTreeMap::new();
        for name in SETTINGS_THAT_MATTER {
            if let Ok(row) = admin.query_one(&format!("SHOW {name}"), &[]).await {
                settings.insert(name.to_string(), row.get::<_, String>(0));
            }
        }
        Ok(Postgres {
            server,
            version,
            settings,
        })
    }

    /// The throwaway cluster this run started (the database-side faults act on it); `None` for
    /// `--database-url`.
    pub fn embedded_cluster(&self) -> Option<&Embedded> {
        match &self.server {
            Server::Embedded(e) => Some(e),
            Server::External(_) => None,
        }
    }

    /// Creates a fresh database `name` (dropping a leftover of the same name) and returns its URL.
    /// A throwaway pair whose standby an earlier failover used up gets it back first.
    pub async fn fresh_database(&self, name: &str) -> Result<String, String> {
        if let Some(e) = self.embedded_cluster() {
            e.restore_standby().await?;
        }
        let admin = connect(&self.url_of("postgres")).await?;
        admin
            .execute(
                &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
                &[],
            )
            .await
            .map_err(pg)?;
        admin
            .execute(&format!("CREATE DATABASE \"{name}\""), &[])
            .await
            .map_err(pg)?;
        let url = self.url_of(name);
        let db = connect(&url).await?;
        db.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", &[])
            .await
            .map_err(pg)?;
        Ok(url)
    }

    /// Drops a database made by `fresh_database` (best effort: leftovers are dropped next time).
    pub async fn drop_database(&self, name: &str) {
        if let Ok(admin) = connect(&self.url_of("postgres")).await {
            let _ = admin
                .execute(
                    &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
                    &[],
                )
                .await;
        }
    }

    /// The URL the broker gets for database `name`: its sessions carry `BROKER_APPLICATION`;
    /// to a throwaway cluster, through the relays and to every server of a pair.
    pub fn broker_url_of(&self, name: &str) -> String {
        match &self.server {
            Server::Embedded(e) => e.broker_url(name),
            Server::External(_) => {
                format!(
                    "{}?application_name={BROKER_APPLICATION}",
                    self.url_of(name)
                )
            }
        }
    }

    /// The URL of database `name` on this server.
    pub fn url_of(&self, name: &str) -> String {
        match &self.server {
            Server::Embedded(e) => e.url(name),
            Server::External(config) => {
                let mut c = config.clone();
                c.dbname(name);
                config_to_url(&c)
            }
        }
    }
}

/// The database a URL names (as libpq: the user's name when it names none).
pub fn database_name(url: &str) -> Result<String, String> {
    let config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| format!("--database-url {}: {e}", redact(url)))?;
    let name = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    Ok(name.to_string())
}

async fn check_pg_stat_statements(admin: &Client) -> Result<(), String> {
    let preload: String = admin
        .query_one("SHOW shared_preload_libraries", &[])
        .await
        .map_err(pg)?
        .get(0);
    if !preload.contains("pg_stat_statements") {
        return Err("pg_stat_statements is not loaded on this server: add it to shared_preload_libraries \
                    (ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'; set \
                    pg_stat_statements.track = 'all'), restart PostgreSQL, and install the contrib package \
                    (apt-get install postgresql-contrib) if the library is missing"
            .into());
    }
    admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", &[]).await.map_err(|e| {
        format!("pg_stat_statements is preloaded but the extension cannot be created ({}); connect as a superuser", pg(e))
    })?;
    Ok(())
}

fn config_to_url(c: &tokio_postgres::Config) -> String {
    let host = match c.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = c.get_ports().first().copied().unwrap_or(5432);
    let user = c.get_user().unwrap_or("postgres");
    let auth = match c.get_password() {
        Some(p) => format!(
            "{user}:{}",
            crate::client::encode(&String::from_utf8_lossy(p))
        ),
        None => user.to_string(),
    };
    format!(
        "postgres://{auth}@{host}:{port}/{}",
        c.get_dbname().unwrap_or("postgres")
    )
}
