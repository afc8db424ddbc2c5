//! What a cell runs against: the run's environment (`Env`: the PostgreSQL measured and the
//! broker binary, prepared once from the target options) and, per cell, a `Target` (a fresh
//! database and a broker started with the cell's toggles, or the external ones), started and
//! released here.

use std::path::PathBuf;
use std::sync::Arc;

use super::CellRound;
use crate::client::BrokerClient;
use crate::options::TargetOptions;
use crate::peer::{Driver, PeerKind, Setup};
use crate::scenario::Cell;
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

    /// Whether every peer among `cells` can be installed on the measured PostgreSQL; the error
    /// says what to install (or that a peer needs the measured PostgreSQL at all).
    pub async fn check_peers(&self, cells: &[Cell]) -> Result<(), String> {
        let peers: Vec<PeerKind> = cells.iter().filter_map(|c| c.peer()).collect();
        let Some(first) = peers.first() else {
            return Ok(());
        };
        let pg = self.postgres.as_ref().ok_or_else(|| {
            format!(
                "the {} cell runs on the measured PostgreSQL: give --database-url",
                first.name()
            )
        })?;
        let admin = connect(&pg.url_of("postgres")).await?;
        for kind in peers {
            kind.check_parts(&admin).await?;
        }
        Ok(())
    }

    /// The broker under test is one this run did not start.
    pub fn external_broker(&self) -> bool {
        self.options.broker_url.is_some()
    }

    fn external_database(&self) -> bool {
        self.options.database_url.is_some()
    }
}

/// Where one cell's broker (or peer queue) and database are.
pub struct Target {
    /// The broker of a broker cell; `None` in a peer cell.
    pub client: Option<BrokerClient>,
    /// The peer queue of a peer cell, installed in the cell's fresh database.
    pub peer: Option<PeerTarget>,
    pub process: Option<BrokerProcess>,
    /// The benchmark database's name and an admin connection to read its counters.
    pub database: Option<(String, tokio_postgres::Client)>,
}

impl Target {
    /// A fresh database `ackbench_{tag}` and a broker with the cell's toggles (log
    /// `broker-{tag}.log`), or the external ones.
    pub async fn start(env: &Env, cr: &CellRound<'_>, tag: &str) -> Result<Target, String> {
        if let Some(kind) = cr.cell.peer() {
            return Target::start_peer(env, cr, tag, kind).await;
        }
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
            client: Some(client),
            peer: None,
            process,
            database,
        })
    }

    /// A peer cell: a fresh database of the measured PostgreSQL with the peer installed in it
    /// and its queue created; no broker.
    async fn start_peer(
        env: &Env,
        cr: &CellRound<'_>,
        tag: &str,
        kind: PeerKind,
    ) -> Result<Target, String> {
        let pg = env.postgres.as_ref().ok_or_else(|| {
            format!(
                "the {} cell runs on the measured PostgreSQL: give --database-url",
                kind.name()
            )
        })?;
        let db_name = format!("ackbench_{tag}");
        let url = pg.fresh_database(&db_name).await?;
        let client = connect(&url).await?;
        let driver = peer_driver(cr, kind);
        let setup = Setup {
            queue: &driver.queue,
            consumer: &driver.consumer,
            batch: cr.scenario.consumers.pop_batch,
        };
        kind.install(&url, &client, &setup).await?;
        for group in peer_groups(cr).iter().skip(1) {
            crate::peer::pgq::register(&client, &driver.queue, group).await?;
        }
        Ok(Target {
            client: None,
            peer: Some(PeerTarget {
                driver: Arc::new(driver),
                url,
                groups: peer_groups(cr),
            }),
            process: None,
            database: Some((db_name, client)),
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

/// A peer cell's queue: its driver, the database it lives in, and its consumer names by
/// ledger group.
pub struct PeerTarget {
    pub driver: Arc<Driver>,
    pub url: String,
    pub groups: Vec<String>,
}

/// The driver of a peer cell: a queue name PGMQ accepts (letters, digits, `_`), the scenario's
/// lease as PGMQ's visibility timeout, and the queue's retry limit as a budget of deliveries
/// (the first plus `retry_limit` more; PGMQ counts every read, PgQ keeps none).
fn peer_driver(cr: &CellRound<'_>, kind: PeerKind) -> Driver {
    Driver {
        kind,
        queue: format!("q_{}", cr.tag()),
        consumer: peer_groups(cr)[0].clone(),
        visibility_secs: cr.scenario.lease_seconds() as i32,
        retry_budget: cr.scenario.queue.options.retry_limit as i32 + 1,
    }
}

/// One consumer name per consumer group of the scenario (`queue` for the queue mode).
fn peer_groups(cr: &CellRound<'_>) -> Vec<String> {
    cr.scenario
        .consumers
        .group_names()
        .into_iter()
        .map(|g| g.unwrap_or_else(|| "queue".into()))
        .collect()
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
