//! PostgreSQL settings per sweep point: checked once before the sweep (every name known to the
//! server and settable, every value accepted), then applied per point with `ALTER SYSTEM` and a
//! reload, or a restart of the throwaway cluster when a setting takes effect only at server
//! start (`pg_settings.context = 'postmaster'`). Settings the sweep does not vary are left as
//! the server has them.

use std::collections::BTreeMap;

use tokio_postgres::Client;

use crate::target::postgres::{connect, pg, Postgres};

/// The sweep's settings on the server: their contexts, learnt by `check`.
pub struct PgSettings {
    contexts: BTreeMap<String, String>,
}

/// `'text'` as an SQL literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

async fn admin(server: &Postgres) -> Result<Client, String> {
    connect(&server.url_of("postgres")).await
}

impl PgSettings {
    /// Checks every (name, values) pair the sweep will apply: the name must be a setting the
    /// server has and a client may set, each value must be accepted (tried with `ALTER SYSTEM`
    /// and reset at once), and a setting that needs a restart is refused on a server this run
    /// cannot restart (`restartable`).
    pub async fn check(
        server: &Postgres,
        settings: &[(String, Vec<String>)],
        restartable: bool,
    ) -> Result<PgSettings, String> {
        let admin = admin(server).await?;
        let mut contexts = BTreeMap::new();
        for (name, values) in settings {
            let row = admin
                .query_opt("SELECT context FROM pg_settings WHERE name = $1", &[name])
                .await
                .map_err(pg)?;
            let context: String = match row {
                Some(r) => r.get(0),
                None => return Err(format!("pg.{name}: PostgreSQL has no setting `{name}`")),
            };
            if context == "internal" {
                return Err(format!(
                    "pg.{name}: `{name}` is fixed when the cluster is created and cannot be set"
                ));
            }
            if context == "postmaster" && !restartable {
                return Err(format!(
                    "pg.{name}: `{name}` takes effect only when the server restarts, and this run cannot restart --database-url's server"
                ));
            }
            for v in values {
                let set = format!("ALTER SYSTEM SET {name} = {}", literal(v));
                let tried = admin.batch_execute(&set).await;
                admin
                    .batch_execute(&format!("ALTER SYSTEM RESET {name}"))
                    .await
                    .map_err(pg)?;
                tried.map_err(|e| format!("pg.{name} = {v}: PostgreSQL refused it: {}", pg(e)))?;
            }
            contexts.insert(name.clone(), context);
        }
        Ok(PgSettings { contexts })
    }

    /// Applies one point's settings (`name` without `pg.`) and makes them take effect: a reload,
    /// or a restart of the throwaway cluster when one of them waits for it. Returns whether the
    /// server restarted.
    pub async fn apply(
        &self,
        server: &Postgres,
        point: &[(String, String)],
    ) -> Result<bool, String> {
        let admin = admin(server).await?;
        for (name, value) in point {
            admin
                .batch_execute(&format!("ALTER SYSTEM SET {name} = {}", literal(value)))
                .await
                .map_err(|e| format!("pg.{name} = {value}: {}", pg(e)))?;
        }
        self.take_effect(server, &admin).await
    }

    /// Resets every setting the sweep varied (`ALTER SYSTEM RESET`) and makes that take effect.
    pub async fn reset(&self, server: &Postgres) -> Result<bool, String> {
        let admin = admin(server).await?;
        for name in self.contexts.keys() {
            admin
                .batch_execute(&format!("ALTER SYSTEM RESET {name}"))
                .await
                .map_err(pg)?;
        }
        self.take_effect(server, &admin).await
    }

    async fn take_effect(&self, server: &Postgres, admin: &Client) -> Result<bool, String> {
        admin
            .batch_execute("SELECT pg_reload_conf()")
            .await
            .map_err(pg)?;
        // The postmaster rereads its files on the signal, a moment later.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let names: Vec<String> = self.contexts.keys().cloned().collect();
        let pending = admin
            .query(
                "SELECT name FROM pg_settings WHERE pending_restart AND name = ANY($1)",
                &[&names],
            )
            .await
            .map_err(pg)?;
        if pending.is_empty() {
            return Ok(false);
        }
        let waiting: Vec<String> = pending.iter().map(|r| r.get(0)).collect();
        restart(server, &waiting).await?;
        Ok(true)
    }
}

/// Stops and starts the throwaway cluster (same port, same data), for settings that wait for it.
async fn restart(server: &Postgres, waiting: &[String]) -> Result<(), String> {
    let Some(embedded) = server.embedded_cluster() else {
        return Err(format!(
            "{} take effect only when the server restarts, and this run cannot restart --database-url's server",
            waiting.join(", ")
        ));
    };
    eprintln!(
        "ackbench: restarting PostgreSQL so that {} take effect ...",
        waiting.join(", ")
    );
    let cluster = embedded.primary_cluster();
    tokio::task::spawn_blocking(move || cluster.pause().and_then(|()| cluster.resume()))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("restarting PostgreSQL: {e}"))
}
