//! The run's environment (`Env`): the PostgreSQL measured, the broker binary, and the profile
//! of the broker driven, prepared once from the target settings (`TargetSettings`, what the
//! command line says about the target, as plain data). Each cell's system is installed on it
//! by its driver (`crate::driver`).

use std::path::PathBuf;

use crate::client::BrokerClient;
use crate::driver::peer::Peer;
use crate::scenario::{Cell, DatabaseSide, Replication};
use crate::target::broker_binary;
use crate::target::external_cells::{ExternalCell, ExternalSpec};
use crate::target::postgres::{connect, Postgres};
use crate::target::profile::{self, Profile, TargetKind};

/// What a run or a capacity search targets.
#[derive(Clone, Debug, Default)]
pub struct TargetSettings {
    /// Use this PostgreSQL instead of a throwaway cluster; with `broker_url`, that broker's own
    /// database (measured, never created or dropped).
    pub database_url: Option<String>,
    /// Use this running broker instead of starting the workspace's broker per cell.
    pub broker_url: Option<String>,
    /// What kind of broker `broker_url` is, as named on the command line (default: detected).
    pub target_kind: Option<String>,
    /// The broker binary to start per cell (default: beside this executable).
    pub broker_bin: Option<PathBuf>,
    /// Keep each cell's database after the run.
    pub keep_databases: bool,
    /// Running brokers added as cells beside the others (`--external`).
    pub externals: Vec<ExternalSpec>,
}

/// Everything a run needs besides the scenario, prepared once per run.
pub struct Env {
    pub out_dir: PathBuf,
    /// The PostgreSQL measured (absent only for `--broker-url` without `--database-url`).
    pub postgres: Option<Postgres>,
    /// The broker binary started per cell (absent with `--broker-url`).
    pub broker_bin: Option<PathBuf>,
    pub settings: TargetSettings,
    /// What kind of broker the broker cells drive.
    pub profile: Profile,
    /// Against an external broker, a tag unique to this run in its queue names and
    /// transactionIds (the broker keeps earlier runs' queues and deduplicates transactionIds);
    /// empty otherwise. The shards of a sharded run share it (`--run-id`).
    pub run_tag: String,
    /// Where `ackbench run --history` appends each cell round's deliveries as JSON lines.
    pub history: Option<PathBuf>,
    /// The cores (a `taskset` CPU list) every broker started is confined to; `None`: anywhere.
    pub broker_cpus: Option<String>,
    /// The running brokers added as cells (`--external`), each with its profile.
    pub externals: Vec<ExternalCell>,
}

impl Env {
    /// Starts (or connects to) the PostgreSQL, locates (or builds) the broker binary, and
    /// learns the external broker's profile. `side` says what the throwaway cluster needs for
    /// the scenario's faults (a standby, the relays).
    pub async fn prepare(
        settings: &TargetSettings,
        side: DatabaseSide,
        out_dir: PathBuf,
    ) -> Result<Env, String> {
        let named = named_kind(settings)?;
        let external = [
            ("--database-url", &settings.database_url),
            ("--broker-url", &settings.broker_url),
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
        let broker_bin = match &settings.broker_url {
            Some(_) => None,
            None => Some(broker_binary::locate(settings.broker_bin.as_deref())?),
        };
        let postgres = match (&settings.database_url, &settings.broker_url) {
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
        let (profile, run_tag) = match &settings.broker_url {
            Some(url) => {
                let profile =
                    external_profile(url, settings.database_url.as_deref(), named).await?;
                eprintln!(
                    "ackbench: {url} is {} ({})",
                    profile.cell_name(),
                    profile.detected
                );
                (profile, run_tag_now())
            }
            None => (Profile::own_broker(), String::new()),
        };
        let externals = external_cells(&settings.externals).await?;
        // A broker that outlives the run keeps its queues: tag the run's names.
        let run_tag = match (run_tag.is_empty(), externals.is_empty()) {
            (true, false) => run_tag_now(),
            _ => run_tag,
        };
        Ok(Env {
            out_dir,
            postgres,
            broker_bin,
            settings: settings.clone(),
            profile,
            run_tag,
            history: None,
            broker_cpus: None,
            externals,
        })
    }

    /// This environment for the run `run_id` (which then tags the queues and transactionIds
    /// instead of the start time, so every shard of the run hits the same queues).
    pub fn with_run_id(mut self, run_id: Option<&str>) -> Env {
        if let Some(id) = run_id {
            self.run_tag = id.to_string();
        }
        self
    }

    /// Whether every peer among `cells` can be installed on the measured PostgreSQL; the error
    /// says what to install (or that a peer needs the measured PostgreSQL at all).
    pub async fn check_peers(&self, cells: &[Cell]) -> Result<(), String> {
        let peers: Vec<&dyn Peer> = cells.iter().filter_map(|c| c.peer()).collect();
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
        for peer in peers {
            peer.check_parts(&admin).await?;
        }
        Ok(())
    }

    /// The broker under test is one this run did not start.
    pub fn external_broker(&self) -> bool {
        self.settings.broker_url.is_some()
    }

    /// A client of the broker at `url`, reading metrics where its profile says.
    pub fn client_of(&self, url: &str) -> BrokerClient {
        BrokerClient::new(url).with_prometheus_path(self.profile.kind.prometheus_path())
    }
}

/// `--target-kind`, parsed; refused where no external broker is named (the broker this run
/// starts is always ackbench's).
fn named_kind(settings: &TargetSettings) -> Result<Option<TargetKind>, String> {
    let Some(text) = &settings.target_kind else {
        return Ok(None);
    };
    let kind: TargetKind = text.parse().map_err(|e| format!("--target-kind: {e}"))?;
    if settings.broker_url.is_none() && kind != TargetKind::Ackbench {
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

/// Each `--external` broker's profile, detected from its `/health` and its own database.
async fn external_cells(specs: &[ExternalSpec]) -> Result<Vec<ExternalCell>, String> {
    let mut cells = Vec::with_capacity(specs.len());
    for spec in specs {
        let profile = external_profile(&spec.broker_url, Some(&spec.database_url), None)
            .await
            .map_err(|e| format!("--external {}: {e}", spec.name))?;
        eprintln!(
            "ackbench: external cell {} at {} is {} ({})",
            spec.name,
            spec.broker_url,
            profile.cell_name(),
            profile.detected
        );
        cells.push(ExternalCell {
            spec: spec.clone(),
            profile,
        });
    }
    Ok(cells)
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
