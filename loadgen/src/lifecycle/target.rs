//! What a cell runs against: the run's environment (`Env`: the PostgreSQL measured, the
//! broker binary, and the profile of the broker driven, prepared once from the target options)
//! and, per cell, a `Target` (a fresh database and the cell's brokers started on it with the
//! cell's toggles, as many as its topology says, or the external broker and its own database),
//! started and released here.

use std::path::PathBuf;
use std::sync::Arc;

use super::CellRound;
use crate::client::{BrokerClient, Fleet};
use crate::options::TargetOptions;
use crate::peer::{Driver, PeerKind, Setup};
use crate::scenario::{Cell, DatabaseSide, Replication, Routing};
use crate::shard::Shard;
use crate::target::broker::BrokerProcess;
use crate::target::broker_binary;
use crate::target::postgres::{connect, database_name, Postgres};
use crate::target::profile::{self, Profile, TargetKind};

/// Everything a run needs besides the scenario, prepared once per run.
pub struct Env {
    pub out_dir: PathBuf,
    /// The PostgreSQL measured (absent only for `--broker-url` without `--database-url`).
    pub postgres: Option<Postgres>,
    /// The broker binary started per cell (absent with `--broker-url`).
    pub broker_bin: Option<PathBuf>,
    pub options: TargetOptions,
    /// What kind of broker the broker cells drive.
    pub profile: Profile,
    /// Against an external broker, a tag unique to this run in its queue names and
    /// transactionIds (the broker keeps earlier runs' queues and deduplicates transactionIds);
    /// empty otherwise. The shards of a sharded run share it (`--run-id`).
    pub run_tag: String,
    /// The slice of the scenario this process runs (`--shard`; the whole by default).
    pub shard: Shard,
}

impl Env {
    /// Starts (or connects to) the PostgreSQL, locates (or builds) the broker binary, and
    /// learns the external broker's profile.
    /// `side` says what the throwaway cluster needs for the scenario's faults (a standby, the
    /// relays).
    pub async fn prepare(
        options: &TargetOptions,
        side: DatabaseSide,
        out_dir: PathBuf,
    ) -> Result<Env, String> {
        let named = named_kind(options)?;
        let external = [
            ("--database-url", &options.database_url),
            ("--broker-url", &options.broker_url),
        ];
        if let Some((flag, _)) = external.iter().find(|(_, url)| url.is_some()) {
            if side.replication != Replication::None {
                return Err(format!(
                    "[postgres] replication = \"{}\" sets up the throwaway cluster's standby: drop {flag}",
                    side.replication.name()
                ));
            }
        }
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
                Some(Postgres::embedded(side).await?)
            }
        };
        let (profile, run_tag) = match &options.broker_url {
            Some(url) => {
                let profile = external_profile(url, options.database_url.as_deref(), named).await?;
                eprintln!(
                    "ackbench: {url} is {} ({})",
                    profile.cell_name(),
                    profile.detected
                );
                (profile, run_tag_now())
            }
            None => (Profile::own_broker(), String::new()),
        };
        Ok(Env {
            out_dir,
            postgres,
            broker_bin,
            options: options.clone(),
            profile,
            run_tag,
            shard: Shard::WHOLE,
        })
    }

    /// This environment for shard `shard` of the run `run_id` (which then tags the queues and
    /// transactionIds instead of the start time, so every shard hits the same queues).
    pub fn for_shard(mut self, shard: Shard, run_id: Option<&str>) -> Env {
        self.shard = shard;
        if let Some(id) = run_id {
            self.run_tag = id.to_string();
        }
        self
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

    /// A client of the broker at `url`, reading metrics where its profile says.
    fn client_of(&self, url: &str) -> BrokerClient {
        BrokerClient::new(url).with_prometheus_path(self.profile.kind.prometheus_path())
    }
}

/// `--target-kind`, parsed; refused where no external broker is named (the broker this run
/// starts is always ackbench's).
fn named_kind(options: &TargetOptions) -> Result<Option<TargetKind>, String> {
    let Some(text) = &options.target_kind else {
        return Ok(None);
    };
    let kind: TargetKind = text.parse().map_err(|e| format!("--target-kind: {e}"))?;
    if options.broker_url.is_none() && kind != TargetKind::Ackbench {
        return Err(format!(
            "--target-kind {kind} needs --broker-url: without it the run starts the workspace's own broker"
        ));
    }
    Ok(Some(kind))
}

/// The profile of the broker at `url`, read with its own database when given.
async fn external_profile(
    url: &str,
    database_url: Option<&str>,
    named: Option<TargetKind>,
) -> Result<Profile, String> {
    let database = match database_url {
        Some(u) => Some(connect(u).await?),
        None => None,
    };
    profile::detect(&BrokerClient::new(url), database.as_ref(), named).await
}

/// A short tag unique to this run: the start time in seconds, base 36.
fn run_tag_now() -> String {
    let mut n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut digits = Vec::new();
    while n > 0 {
        digits.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
        n /= 36;
    }
    digits.reverse();
    format!("t{}", String::from_utf8(digits).expect("ascii"))
}

/// Where one cell's brokers (or peer queue) and database are.
pub struct Target {
    /// The first broker of a broker cell, for the control plane (configure, the DLQ listing);
    /// `None` in a peer cell.
    pub client: Option<BrokerClient>,
    /// Every broker of a broker cell, in order (the first is `client`); their `/metrics` are
    /// read one by one. Empty in a peer cell.
    pub brokers: Vec<BrokerClient>,
    /// How the workers reach `brokers` (`[broker] routing`).
    pub sticky: bool,
    /// The peer queue of a peer cell, installed in the cell's fresh database.
    pub peer: Option<PeerTarget>,
    /// The broker processes this run started, one per `brokers` entry (none for an external
    /// broker or a peer cell).
    pub processes: Vec<BrokerProcess>,
    /// The benchmark database's name and an admin connection to read its counters.
    pub database: Option<(String, tokio_postgres::Client)>,
    /// The database was made for this cell (and is dropped after it); false for an external
    /// broker's own database.
    owns_database: bool,
}

impl Target {
    /// A fresh database `ackbench_{tag}` and a broker with the cell's toggles (log
    /// `broker-{tag}.log`), or the external broker and its own database.
    pub async fn start(env: &Env, cr: &CellRound<'_>, tag: &str) -> Result<Target, String> {
        if let Some(kind) = cr.cell.peer() {
            return Target::start_peer(env, cr, tag, kind).await;
        }
        if let Some(url) = &env.options.broker_url {
            return Target::external(env, url).await;
        }
        let db_name = format!("ackbench_{tag}");
        let pg = env
            .postgres
            .as_ref()
            .ok_or("an embedded broker needs a database")?;
        let database_url = pg.fresh_database(&db_name).await?;
        let broker_url = pg.broker_url_of(&db_name);
        let processes = start_brokers(env, cr, tag, &broker_url).await?;
        let brokers: Vec<BrokerClient> = processes.iter().map(|p| env.client_of(&p.url)).collect();
        Ok(Target {
            client: brokers.first().cloned(),
            brokers,
            sticky: cr.topology.routing == Routing::Sticky,
            peer: None,
            processes,
            database: Some((db_name, connect(&database_url).await?)),
            owns_database: true,
        })
    }

    /// The first broker process, the one broker faults strike.
    pub fn process(&self) -> Option<&BrokerProcess> {
        self.processes.first()
    }

    /// How the cell's workers reach its brokers.
    pub fn fleet(&self) -> Option<Fleet> {
        (!self.brokers.is_empty()).then(|| Fleet::new(&self.brokers, self.sticky))
    }

    /// The external broker and, with `--database-url`, its own database: measured as it is,
    /// never created or dropped (rounds are kept apart by fresh queue names).
    async fn external(env: &Env, url: &str) -> Result<Target, String> {
        let database = match &env.options.database_url {
            Some(db_url) => Some((database_name(db_url)?, connect(db_url).await?)),
            None => None,
        };
        let client = env.client_of(url);
        Ok(Target {
            client: Some(client.clone()),
            brokers: vec![client],
            sticky: false,
            peer: None,
            processes: Vec::new(),
            database,
            owns_database: false,
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
            brokers: Vec::new(),
            sticky: false,
            peer: Some(PeerTarget {
                driver: Arc::new(driver),
                url,
                groups: peer_groups(cr),
            }),
            processes: Vec::new(),
            database: Some((db_name, client)),
            owns_database: true,
        })
    }

    /// Stops the broker and drops the database (unless `--keep-databases`); returns what to
    /// tell the user, if anything.
    pub async fn release(self, env: &Env) -> Option<String> {
        for p in self.processes {
            p.stop().await;
        }
        let (pg, (name, _)) = (env.postgres.as_ref()?, self.database.as_ref()?);
        if !self.owns_database {
            return None;
        }
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

/// The cell's brokers on its database, one after the other (each applies the schema migrations
/// and procedure files at start under their advisory lock), each on its own port with its own
/// log: `broker-{tag}.log`, and `broker-{tag}-b{i}.log` for the second and later ones.
async fn start_brokers(
    env: &Env,
    cr: &CellRound<'_>,
    tag: &str,
    database_url: &str,
) -> Result<Vec<BrokerProcess>, String> {
    let bin = env
        .broker_bin
        .as_ref()
        .ok_or("no broker: neither --broker-url nor a broker binary")?;
    let mut processes = Vec::new();
    for i in 0..cr.topology.instances.max(1) {
        let log = match i {
            0 => env.out_dir.join(format!("broker-{tag}.log")),
            i => env.out_dir.join(format!("broker-{tag}-b{i}.log")),
        };
        processes.push(BrokerProcess::start(bin, database_url, &broker_env(cr), log).await?);
    }
    Ok(processes)
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
