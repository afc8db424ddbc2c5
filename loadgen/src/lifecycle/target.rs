//! What a cell runs against: the run's environment (`Env`: the PostgreSQL measured and the
//! broker binary, prepared once from the target options) and, per cell, a `Target` (a fresh
//! database and a broker started with the cell's toggles, or the external ones), started and
//! released here.

use std::path::PathBuf;

use super::CellRound;
use crate::client::BrokerClient;
use crate::options::TargetOptions;
use crate::target::broker::BrokerProcess;
use crate::target::broker_binary;
use crate::target::postgres::{connect, Postgres};

/// Everything a run needs besides the scenario, prepared once per run.
pub struct Env {
    pub out_dir: PathBuf,
    /// The PostgreSQL measured (absent only for `--broker-url` without `--database-url`).
    pub postgres: Option<Postgres>,
    /// The broker binary started per cell (absent with `--broker-url`).
    pub broker_bin: Option<PathBuf>,
    pub options: TargetOptions,
}

impl Env {
    /// Starts (or connects to) the PostgreSQL and locates (or builds) the broker binary.
    pub async fn prepare(options: &TargetOptions, out_dir: PathBuf) -> Result<Env, String> {
        // The broker first: building it is what takes long on a fresh clone, so say so at once.
        let broker_bin = match &options.broker_url {
            Some(_) => None,
            None => Some(broker_binary::locate(options.broker_bin.as_deref())?),
        };
        let postgres = match (&options.database_url, &options.broker_url) {
            (Some(url), _) => Some(Postgres::external(url).await?),
            (None, Some(_)) => {
                eprintln!(
                    "ackbench: --broker-url without --database-url: PostgreSQL figures will be missing"
                );
                None
            }
            (None, None) => {
                eprintln!("ackbench: starting a throwaway PostgreSQL cluster ...");
                Some(Postgres::embedded().await?)
            }
        };
        Ok(Env {
            out_dir,
            postgres,
            broker_bin,
            options: options.clone(),
        })
    }

    /// The broker under test is one this run did not start.
    pub fn external_broker(&self) -> bool {
        self.options.broker_url.is_some()
    }

    fn external_database(&self) -> bool {
        self.options.database_url.is_some()
    }
}

/// Where one cell's broker and database are.
pub struct Target {
    pub client: BrokerClient,
    pub process: Option<BrokerProcess>,
    /// The benchmark database's name and an admin connection to read its counters.
    pub database: Option<(String, tokio_postgres::Client)>,
}

impl Target {
    /// A fresh database `ackbench_{tag}` and a broker with the cell's toggles (log
    /// `broker-{tag}.log`), or the external ones.
    pub async fn start(env: &Env, cr: &CellRound<'_>, tag: &str) -> Result<Target, String> {
        let db_name = format!("ackbench_{tag}");
        let database_url = match &env.postgres {
            Some(pg) if !env.external_broker() || env.external_database() => {
                Some(pg.fresh_database(&db_name).await?)
            }
            _ => None,
        };
        let (client, process) = match (&env.options.broker_url, &env.broker_bin) {
            (Some(url), _) => (BrokerClient::new(url), None),
            (None, Some(bin)) => {
                let url = database_url
                    .as_deref()
                    .ok_or("an embedded broker needs a database")?;
                let log = env.out_dir.join(format!("broker-{tag}.log"));
                let p = BrokerProcess::start(bin, url, &broker_env(cr), log).await?;
                (BrokerClient::new(&p.url), Some(p))
            }
            (None, None) => {
                return Err("no broker: neither --broker-url nor a broker binary".into())
            }
        };
        let database = match database_url {
            Some(url) => Some((db_name, connect(&url).await?)),
            None => None,
        };
        Ok(Target {
            client,
            process,
            database,
        })
    }

    /// Stops the broker and drops the database (unless `--keep-databases`); returns what to
    /// tell the user, if anything.
    pub async fn release(self, env: &Env) -> Option<String> {
        if let Some(p) = self.process {
            p.stop().await;
        }
        let (pg, (name, _)) = (env.postgres.as_ref()?, self.database.as_ref()?);
        if env.options.keep_databases {
            return Some(format!("kept database {name}"));
        }
        pg.drop_database(name).await;
        None
    }
}

/// The broker's environment for this cell: the toggles, then the scenario's `[broker]`.
fn broker_env(cr: &CellRound<'_>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = cr
        .cell
        .broker_env()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Some(n) = cr.scenario.broker.pool_size {
        env.push(("DB_POOL_SIZE".into(), n.to_string()));
    }
    env.extend(
        cr.scenario
            .broker
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    env
}
