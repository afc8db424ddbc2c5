//! A running workload and its phases: set-up (queue options, prefill, workers), warm-up, drain,
//! stop, and the audit that reconciles the client's ledger with the broker's DLQ. A shard
//! drains until the queue's cursors say so (`shard::drain`) and leaves its ledger for the merge
//! (`shard::ledger_file`) beside an audit that proves nothing alone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use ackbench_reports::results::Audit;
use ackbench_wire::txn_hash;

use super::target::{PeerTarget, Target};
use super::workers::{peer_plan, prefill, spawn_workers, stop_workers};
use super::CellRound;
use crate::client::BrokerClient;
use crate::progress::Progress;
use crate::scenario::Scenario;
use crate::shard::drain::queue_drained;
use crate::shard::ledger_file::ShardLedger;
use crate::shard::Shard;
use crate::workload::ledger::TxnSet;
use crate::workload::{peer, CellContext, Phase};

/// One queue with its producers and consumers running.
pub struct Workload {
    pub queue: String,
    /// The consumer groups (`None` for queue mode), in the ledger's order.
    pub groups: Vec<Option<String>>,
    pub ctx: Arc<CellContext>,
    workers: Vec<JoinHandle<()>>,
    /// The slice of the scenario this workload runs.
    shard: Shard,
}

impl Workload {
    /// Configures a fresh queue, pushes the prefill and starts the workers (in warm-up): the
    /// broker's HTTP workers, or a peer cell's SQL workers.
    pub async fn start(
        cr: &CellRound<'_>,
        target: &Target,
        progress: &mut Progress,
    ) -> Result<Workload, String> {
        if let Some(p) = &target.peer {
            return Workload::start_peer(cr, p, progress).await;
        }
        let client = target
            .client
            .as_ref()
            .ok_or("a broker cell without a broker")?;
        let queue = cr.queue();
        configure_queue(cr.scenario, client, &queue).await?;
        let groups = cr.scenario.consumers.group_names();
        let ctx = Arc::new(CellContext::new(target.fleet(), groups.len()));
        if cr.shard.is_sharded() {
            // Other shards push what this shard's consumers pop.
            ctx.ledger.owe_unknown_deliveries();
        }
        prefill(cr, &queue, &ctx, progress).await?;
        let workers = spawn_workers(cr, &queue, &ctx);
        Ok(Workload {
            queue,
            groups,
            ctx,
            workers,
            shard: cr.shard,
        })
    }

    /// A peer cell's workload: the prefill through the peer's driver, then its workers.
    async fn start_peer(
        cr: &CellRound<'_>,
        p: &PeerTarget,
        progress: &mut Progress,
    ) -> Result<Workload, String> {
        let groups = cr.scenario.consumers.group_names();
        let ctx = Arc::new(CellContext::new(None, groups.len()));
        let plan = peer_plan(cr, p);
        let backlog =
            cr.scenario.prefill.messages_per_partition * cr.scenario.queue.partitions as u64;
        if backlog > 0 {
            progress.update(&format!("{} prefill {backlog} messages", cr.label()));
            peer::prefill(&plan, &ctx, backlog, cr.scenario.prefill.batch).await?;
        }
        let workers = peer::spawn(&plan, &ctx);
        Ok(Workload {
            queue: p.driver.queue.clone(),
            groups,
            ctx,
            workers,
            shard: Shard::WHOLE,
        })
    }

    /// A warm-up of `secs` with a progress line each second (nothing is recorded); true when
    /// interrupted.
    pub async fn warm_up(
        &self,
        label: &str,
        secs: f64,
        cancel: &watch::Receiver<bool>,
        progress: &mut Progress,
    ) -> bool {
        let ctx = &self.ctx;
        let started = tokio::time::Instant::now();
        let total = Duration::from_secs_f64(secs);
        let mut last = ctx.counters.values();
        while started.elapsed() < total {
            let step = Duration::from_secs(1).min(total - started.elapsed());
            tokio::time::sleep(step).await;
            if *cancel.borrow() {
                return true;
            }
            let now = ctx.counters.values();
            let dt = step.as_secs_f64().max(1e-3);
            progress.update(&format!(
                "{label} warm-up {:>3.0}/{secs:.0}s  push {:>7.0}/s  ack {:>7.0}/s  backlog {:>7}  errors {}",
                started.elapsed().as_secs_f64(),
                (now.pushed_messages - last.pushed_messages) / dt,
                (now.acked_messages - last.acked_messages) / dt,
                ctx.ledger.backlog(),
                now.errors
            ));
            last = now;
        }
        *cancel.borrow()
    }

    /// Stops the producers and lets the consumers finish the backlog; true when every
    /// obligation was resolved within `limit_secs`.
    pub async fn drain(
        &self,
        label: &str,
        limit_secs: f64,
        cancel: &watch::Receiver<bool>,
        progress: &mut Progress,
    ) -> bool {
        self.ctx.set_phase(Phase::Drain);
        let limit = Duration::from_secs_f64(limit_secs);
        let started = Instant::now();
        loop {
            let backlog = self.ctx.ledger.backlog();
            progress.update(&format!(
                "{label} drain {:.0}s  backlog {backlog}",
                started.elapsed().as_secs_f64()
            ));
            if self.ctx.pushes_settled() && self.nothing_owed(backlog).await {
                return true;
            }
            if *cancel.borrow() || started.elapsed() > limit {
                progress.say(&format!(
                    "{label} drain stopped with {backlog} messages unresolved"
                ));
                return false;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Whether the drain is done, pushes settled: this process's ledger owes nothing, or for a
    /// shard (whose ledger cannot know what other shards resolved) the queue is drained.
    async fn nothing_owed(&self, backlog: u64) -> bool {
        if !self.shard.is_sharded() {
            return backlog == 0;
        }
        match self.ctx.broker().queue_partitions(&self.queue).await {
            Ok(partitions) => queue_drained(&partitions, &self.groups),
            Err(e) => {
                self.ctx.error(format!("drain: queue detail: {e}"));
                false
            }
        }
    }

    /// Stops every worker (a parked long-poll gets a bounded grace, then is aborted).
    pub async fn stop(&mut self) {
        self.ctx.set_phase(Phase::Stop);
        stop_workers(std::mem::take(&mut self.workers)).await;
    }

    /// Reconciles the ledger with the broker's DLQ listing (a peer's dead letters in a peer
    /// cell); `drained` says whether the drain resolved everything.
    pub async fn audit(&self, target: &Target, drained: bool) -> Audit {
        let dlq = match (&target.client, &target.peer) {
            (Some(client), _) => match self.dead_lettered(client).await {
                Ok(dlq) => dlq,
                // A listing this target answers in a shape the audit cannot read judges
                // nothing: say what went unchecked rather than count its dead letters lost.
                Err(_) => return self.ctx.ledger.audit_without_listing(drained),
            },
            (None, Some(p)) => self.peer_dead_letters(p).await,
            (None, None) => vec![TxnSet::default(); self.groups.len()],
        };
        self.ctx.ledger.audit(&dlq, drained)
    }

    /// A shard's audit and the ledger it leaves for the merge: the audit counts what this
    /// shard alone cannot resolve as undrained, never as lost (another shard may have acked
    /// it), and says whether the queue was drained; `ackbench merge` proves or disproves loss.
    pub async fn shard_audit(&self, target: &Target, drained: bool) -> (Audit, ShardLedger) {
        let dlq = match &target.client {
            Some(client) => self.dead_lettered(client).await.ok(),
            None => None,
        };
        let fates = self.ctx.ledger.fates();
        let partial = crate::workload::ledger::reconcile(&fates, dlq.as_deref(), false);
        let audit = Audit { drained, ..partial };
        (audit, ShardLedger { fates, dlq })
    }

    /// A peer's dead letters (PGMQ has one group).
    async fn peer_dead_letters(&self, p: &PeerTarget) -> Vec<TxnSet> {
        let mut dlq: Vec<TxnSet> = vec![TxnSet::default(); self.groups.len()];
        let listed = match peer::connect(&p.url).await {
            Ok(client) => p.driver.dead_lettered(&client).await,
            Err(e) => Err(e),
        };
        match listed {
            Ok(txns) => {
                for t in txns {
                    dlq[0].insert(txn_hash(&t));
                }
            }
            Err(e) => self
                .ctx
                .error(format!("audit: dead-letter listing failed: {e}")),
        }
        dlq
    }

    /// The transactions the broker's DLQ holds, per consumer group; `Err` says why the
    /// listing could not be read. Pages until `total` is reached or, when the listing gives no
    /// total (Queen's own server), a short page.
    async fn dead_lettered(&self, client: &BrokerClient) -> Result<Vec<TxnSet>, String> {
        const PAGE: u32 = 1000;
        let mut dlq: Vec<TxnSet> = vec![TxnSet::default(); self.groups.len()];
        let mut offset = 0u64;
        loop {
            let page = match client.dlq_page(&self.queue, PAGE, offset).await {
                Ok(p) => p,
                Err(e) => {
                    self.ctx.error(format!("audit: DLQ listing failed: {e}"));
                    return Err(format!("DLQ listing failed: {e}"));
                }
            };
            for m in &page.messages {
                // Queen lists a queue-mode dead letter under the group `__QUEUE_MODE__`.
                let listed = m
                    .consumer_group
                    .as_deref()
                    .filter(|g| *g != ackbench_wire::QUEUE_MODE_GROUP);
                let group = self.groups.iter().position(|g| g.as_deref() == listed);
                if let Some(g) = group {
                    dlq[g].insert(txn_hash(&m.transaction_id));
                }
            }
            offset += page.messages.len() as u64;
            if last_page(page.messages.len(), PAGE, offset, page.pagination.total) {
                return Ok(dlq);
            }
        }
    }
}

/// Whether a DLQ page of `got` messages (of `limit` asked), ending at `offset`, is the last:
/// empty, past the listing's `total`, or (without a total) short.
fn last_page(got: usize, limit: u32, offset: u64, total: Option<i64>) -> bool {
    match total {
        _ if got == 0 => true,
        Some(total) => offset >= total.max(0) as u64,
        None => got < limit as usize,
    }
}

/// Configures `queue` with the scenario's queue options.
async fn configure_queue(s: &Scenario, client: &BrokerClient, queue: &str) -> Result<(), String> {
    let mut options = serde_json::to_value(s.queue.options.to_wire()).map_err(|e| e.to_string())?;
    options["leaseTime"] = json!(s.queue.options.lease_time);
    client
        .configure(&json!({"queue": queue, "options": options}))
        .await
        .map(|_| ())
        .map_err(|e| format!("configure {queue}: {e}"))
}

#[cfg(test)]
mod dlq_paging_tests {
    use super::last_page;

    #[test]
    fn pages_by_total_or_until_a_short_page() {
        assert!(last_page(0, 1000, 0, None));
        assert!(
            !last_page(1000, 1000, 1000, None),
            "a full page without total: ask again"
        );
        assert!(last_page(999, 1000, 1999, None), "a short page ends it");
        assert!(last_page(1000, 1000, 1000, Some(1000)), "total reached");
        assert!(!last_page(1000, 1000, 1000, Some(1500)));
    }
}
