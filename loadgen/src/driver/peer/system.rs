//! A peer as a system under test: installed into a fresh database of the measured PostgreSQL
//! with its queue created and one consumer per consumer group subscribed (no broker), its
//! workload run by the one set of workers through the peer's SQL calls (`worker`) over their
//! own connections, and its dead letters listed for the audit.

use std::sync::Arc;

use ackbench_reports::results::Promises;
use ackbench_wire::txn_hash;

use super::worker::{self, PeerWorkers};
use super::{Peer, PeerQueue, Setup};
use crate::driver::system::{Installed, Pending, Running, Site, System};
use crate::lifecycle::env::Env;
use crate::lifecycle::CellRound;
use crate::progress::Progress;
use crate::target::postgres::connect;
use crate::workload::{spawn, CellContext};
use ackbench_ledger::TxnSet;

/// A peer, as a cell runs it.
pub struct PeerSystem {
    pub peer: &'static dyn Peer,
}

impl PeerSystem {
    async fn install_peer(
        &self,
        env: &Env,
        cr: &CellRound<'_>,
        tag: &str,
    ) -> Result<PeerCell, String> {
        let pg = env.postgres.as_ref().ok_or_else(|| {
            format!(
                "the {} cell runs on the measured PostgreSQL: give --database-url",
                self.peer.name()
            )
        })?;
        let db_name = format!("ackbench_{tag}");
        let url = pg.fresh_database(&db_name).await?;
        let client = connect(&url).await?;
        let queue = self.queue(cr);
        let groups = consumer_names(cr);
        let setup = Setup {
            queue: &queue.queue,
            consumers: &groups,
            batch: cr.scenario.consumers.pop_batch,
            retry_limit: cr.scenario.queue.options.retry_limit,
            lease_secs: cr.scenario.lease_seconds(),
        };
        self.peer.install(&url, &client, &setup).await?;
        Ok(PeerCell {
            site: Site {
                database: Some((db_name, client)),
                brokers: Vec::new(),
                processes: Vec::new(),
                owns_database: true,
            },
            queue: Arc::new(queue),
            url,
            groups,
        })
    }

    /// The cell's queue: a name PGMQ accepts (letters, digits, `_`), the scenario's lease as
    /// PGMQ's visibility timeout, and the queue's retry limit as a budget of deliveries (the
    /// first plus `retry_limit` more; PGMQ counts every read, PgQ keeps none).
    fn queue(&self, cr: &CellRound<'_>) -> PeerQueue {
        PeerQueue {
            peer: self.peer,
            queue: format!("q_{}", cr.tag()),
            consumer: consumer_names(cr)[0].clone(),
            visibility_secs: cr.scenario.lease_seconds() as i32,
            retry_budget: cr.scenario.queue.options.retry_limit as i32 + 1,
            worker_id: None,
        }
    }
}

impl System for PeerSystem {
    fn install<'a>(
        &'a self,
        env: &'a Env,
        cr: &'a CellRound<'a>,
        tag: &'a str,
    ) -> Pending<'a, Result<Box<dyn Installed>, String>> {
        Box::pin(async move {
            let cell = self.install_peer(env, cr, tag).await?;
            Ok(Box::new(cell) as Box<dyn Installed>)
        })
    }
}

/// One consumer name per consumer group of the scenario (`queue` for the queue mode).
fn consumer_names(cr: &CellRound<'_>) -> Vec<String> {
    cr.scenario
        .consumers
        .group_names()
        .into_iter()
        .map(|g| g.unwrap_or_else(|| "queue".into()))
        .collect()
}

/// A peer installed for one cell: its queue, the database it lives in, and its consumer names
/// by ledger group.
pub struct PeerCell {
    site: Site,
    queue: Arc<PeerQueue>,
    url: String,
    groups: Vec<String>,
}

impl PeerCell {
    /// The prefill through the peer, then its workers (and its ticker, if it needs one).
    async fn start_workload(
        &self,
        cr: &CellRound<'_>,
        progress: &mut Progress,
    ) -> Result<Running, String> {
        let groups = cr.scenario.consumers.group_names();
        let ctx = Arc::new(CellContext::new(None, groups.len()));
        let calls = Arc::new(PeerWorkers {
            queue: self.queue.clone(),
            url: self.url.clone(),
            groups: self.groups.clone(),
        });
        let queue = &self.queue.queue;
        spawn::prefill(cr, queue, &ctx, &calls, progress).await?;
        self.settle().await?;
        let mut workers = spawn::spawn_workers(cr, queue, &ctx, &calls);
        if self.queue.peer.needs_ticker() {
            let ticker = worker::tick(self.queue.clone(), self.url.clone(), ctx.clone());
            workers.push(crate::workload::runtime().spawn(ticker));
        }
        Ok(Running {
            queue: queue.clone(),
            groups,
            ctx,
            workers,
        })
    }

    /// The peer's dead letters (a peer with dead letters has one group); a listing that fails
    /// is logged and counts as none.
    async fn dead_lettered(&self, running: &Running) -> Vec<TxnSet> {
        let mut dlq: Vec<TxnSet> = vec![TxnSet::default(); running.groups.len()];
        let listed = match worker::connect(&self.url).await {
            Ok(client) => self.queue.dead_lettered(&client).await,
            Err(e) => Err(e),
        };
        match listed {
            Ok(txns) => {
                for t in txns {
                    dlq[0].insert(txn_hash(&t));
                }
            }
            Err(e) => running
                .ctx
                .error(format!("audit: dead-letter listing failed: {e}")),
        }
        dlq
    }

    /// The peer's settling of the prefilled backlog (its tables analyzed, where it needs it).
    async fn settle(&self) -> Result<(), String> {
        let client = worker::connect(&self.url).await?;
        self.queue.peer.settle(&client, &self.queue).await
    }

    /// The transactionIds the peer's tables still hold unfinished (one group), where it can
    /// list them.
    async fn unfinished(&self) -> Result<Option<Vec<TxnSet>>, String> {
        let client = worker::connect(&self.url).await?;
        let listed = self.queue.still_queued(&client).await?;
        Ok(listed.map(|txns| vec![txns.iter().map(|t| txn_hash(t)).collect()]))
    }

    /// Whether the peer holds nothing more for its consumers.
    async fn empty(&self) -> Result<bool, String> {
        let client = worker::connect(&self.url).await?;
        Ok(self.queue.backlog(&client).await? == 0)
    }
}

impl Installed for PeerCell {
    fn site(&self) -> &Site {
        &self.site
    }

    fn into_site(self: Box<Self>) -> Site {
        self.site
    }

    fn start<'a>(
        &'a self,
        cr: &'a CellRound<'a>,
        progress: &'a mut Progress,
    ) -> Pending<'a, Result<Running, String>> {
        Box::pin(self.start_workload(cr, progress))
    }

    /// A peer has no counters of its own beyond PostgreSQL's.
    fn figures(&self) -> Pending<'_, Vec<crate::measure::broker_metrics::Exposition>> {
        Box::pin(async { Vec::new() })
    }

    fn dead_letters<'a>(
        &'a self,
        running: &'a Running,
    ) -> Pending<'a, Result<Vec<TxnSet>, String>> {
        Box::pin(async move { Ok(self.dead_lettered(running).await) })
    }

    fn queue_drained<'a>(&'a self, _running: &'a Running) -> Pending<'a, Result<bool, String>> {
        Box::pin(self.empty())
    }

    fn still_queued<'a>(
        &'a self,
        _running: &'a Running,
    ) -> Pending<'a, Result<Option<Vec<TxnSet>>, String>> {
        Box::pin(self.unfinished())
    }

    fn promises(&self) -> Promises {
        self.queue.peer.promises()
    }
}
