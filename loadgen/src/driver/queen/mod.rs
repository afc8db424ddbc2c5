//! Systems that speak Queen's HTTP wire: our broker started per cell (`own`, 1..N brokers on a
//! fresh database) and an external Queen given by URL (`external`). Both install into a
//! `QueenCell`: the queue configured over `/api/v1/configure`, the prefill and the workers
//! driving it over the wire (`workers`: producers pushing batches, `push`; consumers popping
//! and acking them, `pop`; each over its own connection), the brokers' `/metrics` as the system's figures, and the DLQ listing and the
//! queue's cursors for the audit and a shard's drain.

pub mod external;
pub mod own;
pub mod pop;
pub mod push;
pub mod workers;

use std::sync::Arc;

use serde_json::json;

use ackbench_reports::results::Promises;

use ackbench_wire::txn_hash;

use super::system::{Installed, Pending, Running, Site};
use crate::client::{BrokerClient, Fleet};
use crate::lifecycle::CellRound;
use crate::measure::broker_metrics::{self, Exposition};
use crate::progress::Progress;
use crate::scenario::Scenario;
use crate::shard::drain::queue_drained;
use crate::workload::{spawn, CellContext};
use ackbench_ledger::TxnSet;

/// A cell's brokers, installed.
pub struct QueenCell {
    pub site: Site,
    /// How the workers reach the brokers (`[broker] routing`).
    pub sticky: bool,
    /// What the broker promises (its profile's).
    pub promises: Promises,
}

impl QueenCell {
    /// The first broker, for the control plane (configure, the DLQ listing, queue detail).
    fn control(&self) -> Result<&BrokerClient, String> {
        self.site
            .brokers
            .first()
            .ok_or_else(|| "a broker cell without a broker".to_string())
    }

    async fn start_workload(
        &self,
        cr: &CellRound<'_>,
        progress: &mut Progress,
    ) -> Result<Running, String> {
        let queue = cr.queue();
        configure_queue(cr.scenario, self.control()?, &queue).await?;
        let groups = cr.scenario.consumers.group_names();
        let fleet = Fleet::new(&self.site.brokers, self.sticky);
        let ctx = Arc::new(CellContext::new(Some(fleet), groups.len()));
        if cr.shard.is_sharded() {
            // Other shards push what this shard's consumers pop.
            ctx.ledger.owe_unknown_deliveries();
        }
        let calls = Arc::new(workers::HttpWorkers);
        spawn::prefill(cr, &queue, &ctx, &calls, progress).await?;
        let workers = spawn::spawn_workers(cr, &queue, &ctx, &calls);
        Ok(Running {
            queue,
            groups,
            ctx,
            workers,
        })
    }

    /// Each broker's `/metrics` (an empty exposition where one could not be read).
    async fn scrape(&self) -> Vec<Exposition> {
        let mut brokers = Vec::with_capacity(self.site.brokers.len());
        for client in &self.site.brokers {
            let text = client.metrics_text().await;
            brokers.push(text.map(|t| broker_metrics::parse(&t)).unwrap_or_default());
        }
        brokers
    }

    /// The transactions the broker's DLQ holds, per consumer group; `Err` says why the
    /// listing could not be read. Pages until `total` is reached or, when the listing gives no
    /// total (Queen's own server), a short page.
    async fn dead_lettered(&self, running: &Running) -> Result<Vec<TxnSet>, String> {
        const PAGE: u32 = 1000;
        let client = self.control()?;
        let mut dlq: Vec<TxnSet> = vec![TxnSet::default(); running.groups.len()];
        let mut offset = 0u64;
        loop {
            let page = match client.dlq_page(&running.queue, PAGE, offset).await {
                Ok(p) => p,
                Err(e) => {
                    running.ctx.error(format!("audit: DLQ listing failed: {e}"));
                    return Err(format!("DLQ listing failed: {e}"));
                }
            };
            for m in &page.messages {
                // Queen lists a queue-mode dead letter under the group `__QUEUE_MODE__`.
                let listed = m
                    .consumer_group
                    .as_deref()
                    .filter(|g| *g != ackbench_wire::QUEUE_MODE_GROUP);
                let group = running.groups.iter().position(|g| g.as_deref() == listed);
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

    /// Whether every partition's cursor has reached its last offset, for every group.
    async fn cursors_at_end(&self, running: &Running) -> Result<bool, String> {
        let partitions = self
            .control()?
            .queue_partitions(&running.queue)
            .await
            .map_err(|e| format!("queue detail: {e}"))?;
        Ok(queue_drained(&partitions, &running.groups))
    }
}

impl Installed for QueenCell {
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

    fn figures(&self) -> Pending<'_, Vec<Exposition>> {
        Box::pin(self.scrape())
    }

    fn dead_letters<'a>(
        &'a self,
        running: &'a Running,
    ) -> Pending<'a, Result<Vec<TxnSet>, String>> {
        Box::pin(self.dead_lettered(running))
    }

    fn queue_drained<'a>(&'a self, running: &'a Running) -> Pending<'a, Result<bool, String>> {
        Box::pin(self.cursors_at_end(running))
    }

    fn promises(&self) -> Promises {
        self.promises
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
