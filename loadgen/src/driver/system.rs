//! The one interface of every system the load generator drives (our broker started per cell,
//! an external Queen, the SQL peers): a `System` is a driver with one cell's settings; it
//! `install`s itself for the cell (a fresh database, brokers started, a peer created) and
//! hands back an `Installed` system, which starts the cell's workload (its producers' pushes,
//! its consumers' pops and answers), reads its own figures, tells the audit what it
//! dead-lettered and a shard's drain whether its queue is drained. `Site` is where an installed
//! system runs: the database measured, the brokers read, the processes faults strike.
//!
//! Calls through these interfaces are per cell, per phase or per snapshot; the workers, written
//! once for every system, reach the system through its driver's worker calls
//! (`workload::calls`), dispatched statically.

use std::sync::Arc;

use tokio::task::JoinHandle;

use ackbench_reports::results::Promises;

pub use super::pending::Pending;
use crate::client::BrokerClient;
use crate::lifecycle::env::Env;
use crate::lifecycle::CellRound;
use crate::measure::broker_metrics::Exposition;
use crate::progress::Progress;
use crate::target::broker::BrokerProcess;
use crate::workload::CellContext;
use ackbench_ledger::TxnSet;

/// A system under test with one cell's settings.
pub trait System: Send + Sync {
    /// Starts or prepares the system for the cell `cr` (`tag` names its database and logs).
    fn install<'a>(
        &'a self,
        env: &'a Env,
        cr: &'a CellRound<'a>,
        tag: &'a str,
    ) -> Pending<'a, Result<Box<dyn Installed>, String>>;
}

/// A system installed for one cell.
pub trait Installed: Send + Sync {
    /// Where it runs.
    fn site(&self) -> &Site;

    /// Gives up the system, keeping where it ran (to release it).
    fn into_site(self: Box<Self>) -> Site;

    /// The workload of `cr` on a fresh queue (or the peer's queue): set-up, the prefill, and
    /// the producers and consumers running in warm-up.
    fn start<'a>(
        &'a self,
        cr: &'a CellRound<'a>,
        progress: &'a mut Progress,
    ) -> Pending<'a, Result<Running, String>>;

    /// The system's own counters now, one exposition per broker (none for a peer).
    fn figures(&self) -> Pending<'_, Vec<Exposition>>;

    /// What the audit needs: the transactions the system dead-lettered, per consumer group of
    /// `running`; `Err` when it could not list them.
    fn dead_letters<'a>(&'a self, running: &'a Running)
        -> Pending<'a, Result<Vec<TxnSet>, String>>;

    /// What the system still holds unfinished, per consumer group of `running`, read from its
    /// own storage after a drain that did not finish; `None` where it cannot list it (the
    /// audit then counts every unresolved message as undrained).
    fn still_queued<'a>(
        &'a self,
        _running: &'a Running,
    ) -> Pending<'a, Result<Option<Vec<TxnSet>>, String>> {
        Box::pin(async { Ok(None) })
    }

    /// Whether the system itself counts the queue drained for every group of `running` (a
    /// shard's drain ends on it: its own ledger cannot know what other shards resolved).
    fn queue_drained<'a>(&'a self, running: &'a Running) -> Pending<'a, Result<bool, String>>;

    /// What the system promises beyond at-least-once delivery: the guarantee checks whose
    /// counts fail the run when above zero.
    fn promises(&self) -> Promises;
}

/// A cell's workload as an installed system started it.
pub struct Running {
    pub queue: String,
    /// The consumer groups (`None` for queue mode), in the ledger's order.
    pub groups: Vec<Option<String>>,
    pub ctx: Arc<CellContext>,
    pub workers: Vec<JoinHandle<()>>,
}

/// Where one cell's system runs.
pub struct Site {
    /// The benchmark database's name and an admin connection to read its counters.
    pub database: Option<(String, tokio_postgres::Client)>,
    /// The brokers serving the cell, in order (their `/metrics` are read one by one); empty
    /// for a peer.
    pub brokers: Vec<BrokerClient>,
    /// The broker processes this run started, one per `brokers` entry (none for an external
    /// broker or a peer).
    pub processes: Vec<BrokerProcess>,
    /// The database was made for this cell (and is dropped after it); false for an external
    /// broker's own database.
    pub owns_database: bool,
}

impl Site {
    /// The first broker process, the one broker faults strike.
    pub fn process(&self) -> Option<&BrokerProcess> {
        self.processes.first()
    }

    /// Stops the brokers and drops the database (unless `--keep-databases`); returns what to
    /// tell the user, if anything.
    pub async fn release(self, env: &Env) -> Option<String> {
        for p in self.processes {
            p.stop().await;
        }
        let (pg, (name, _)) = (env.postgres.as_ref()?, self.database.as_ref()?);
        if !self.owns_database {
            return None;
        }
        if env.settings.keep_databases {
            return Some(format!("kept database {name}"));
        }
        pg.drop_database(name).await;
        None
    }
}
