//! A cell's workload tasks, for every system: the prefill (a backlog pushed before anything is
//! measured), and the producers and consumers built from the scenario, each made by the
//! system's `Workers`. A shard (`--shard`) prefills its slice of the partitions and runs its
//! slice of the producers and of each group's consumers, each with the index, seed and
//! transactionIds it has in the whole run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use ackbench_wire::QUEUE_MODE_GROUP;

use crate::lifecycle::CellRound;
use crate::progress::Progress;
use crate::scenario::{AckMode, Partitioning, PopRoute};
use crate::workload::calls::{Produce, Workers};
use crate::workload::consumer;
use crate::workload::plan::ConsumerPlan;
use crate::workload::plan::ProducerPlan;
use crate::workload::producer;
use crate::workload::CellContext;

/// Pushes the scenario's backlog before anything is measured (a shard: its partitions' part,
/// with the transactionIds the whole run gives them).
pub async fn prefill<W: Workers>(
    cr: &CellRound<'_>,
    queue: &str,
    ctx: &Arc<CellContext>,
    workers: &Arc<W>,
    progress: &mut Progress,
) -> Result<(), String> {
    let p = &cr.scenario.prefill;
    let partitions = cr.scenario.queue.partitions.max(1);
    let names: Arc<[String]> = cr.scenario.partition_names().into();
    if p.messages_per_partition == 0 {
        return Ok(());
    }
    let mine = cr.shard.slice(partitions);
    let (first, width) = (mine.start, mine.len() as u64);
    let total = p.messages_per_partition * width;
    let requests_per_partition = p.messages_per_partition.div_ceil(p.batch as u64);
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..p.concurrency.max(1) {
        let (ctx, next, workers) = (ctx.clone(), next.clone(), workers.clone());
        let plan = ProducerPlan {
            id: w,
            queue: queue.to_string(),
            partitions: names.clone(),
            batch: p.batch,
            payload_bytes: p.payload_bytes,
            rate: None,
            producers: p.concurrency.max(1),
            random_partitions: false,
            tag: format!("{}-pre", cr.tag()),
            seed: cr.seed ^ 0x9e37,
        };
        tasks.push(tokio::spawn(async move {
            let mut pusher = workers.producer(&plan, &ctx).await?;
            let prefix = format!("{}-{}-", plan.tag, plan.id);
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= requests_per_partition * width {
                    return Ok::<(), String>(());
                }
                let partition = first + (n % width) as u32;
                // The request's number in the whole run's prefill, so its transactionIds are
                // the ones the whole run would push to this partition.
                let k = (n / width) * partitions as u64 + partition as u64;
                // Backlog, not offered load: no send time, so end-to-end latency (push to
                // ack of what the producers offer) is not inflated by how long the backlog waits.
                pusher.write(k, partition, None);
                let origin = ackbench_ledger::retired::PushOrigin::new(&prefix, k);
                producer::push(&mut pusher, &ctx, Some(origin))
                    .await
                    .map_err(|e| format!("prefill: {e}"))?;
            }
        }));
    }
    let started = Instant::now();
    while tasks.iter().any(|t| !t.is_finished()) {
        let done = ctx.ledger.pushed_count();
        progress.update(&format!(
            "{} prefill {done}/{total} ({:.0}/s)",
            cr.label(),
            done as f64 / started.elapsed().as_secs_f64().max(0.001)
        ));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    progress.update(&format!(
        "{} prefill {total}/{total} done in {:.1}s",
        cr.label(),
        started.elapsed().as_secs_f64()
    ));
    progress.finish();
    Ok(())
}

/// Starts the cell's producers and consumers on the workload's own runtime, each made by
/// `workers` (a worker that cannot be made is an error of the cell, and does not run).
pub fn spawn_workers<W: Workers>(
    cr: &CellRound<'_>,
    queue: &str,
    ctx: &Arc<CellContext>,
    workers: &Arc<W>,
) -> Vec<JoinHandle<()>> {
    let load = crate::workload::runtime();
    let producers = producer_plans(cr, queue).into_iter().map(|plan| {
        let (ctx, workers) = (ctx.clone(), workers.clone());
        load.spawn(async move {
            match workers.producer(&plan, &ctx).await {
                Ok(p) => producer::run(plan, ctx, p).await,
                Err(e) => ctx.error(e),
            }
        })
    });
    let per_group = workers.consumers_per_group(cr.scenario.consumers.count);
    let consumers = consumer_plans(cr, queue, per_group)
        .into_iter()
        .map(|mut plan| {
            let (ctx, workers) = (ctx.clone(), workers.clone());
            workers.shape(&mut plan);
            load.spawn(async move {
                match workers.consumer(&plan, &ctx).await {
                    Ok(c) => consumer::run(plan, ctx, c).await,
                    Err(e) => ctx.error(e),
                }
            })
        });
    producers.chain(consumers).collect()
}

/// One plan per producer of the scenario (of this shard's slice); an open-loop rate is split
/// evenly among the scenario's producers.
fn producer_plans(cr: &CellRound<'_>, queue: &str) -> Vec<ProducerPlan> {
    let p = &cr.scenario.producers;
    let names: Arc<[String]> = cr.scenario.partition_names().into();
    let rate = p.open_rate().map(|r| r / p.count.max(1) as f64);
    cr.shard
        .slice(p.count)
        .map(|id| ProducerPlan {
            id,
            queue: queue.to_string(),
            partitions: names.clone(),
            batch: p.batch,
            payload_bytes: p.payload_bytes,
            rate,
            producers: p.count.max(1),
            random_partitions: matches!(p.partitioning, Partitioning::Random),
            tag: cr.tag(),
            seed: cr.seed.wrapping_add(id as u64),
        })
        .collect()
}

/// `count` consumer plans per consumer group (or for the queue mode), numbered across groups;
/// a shard keeps its slice of each group's `count`, numbered as in the whole run.
fn consumer_plans(cr: &CellRound<'_>, queue: &str, count: u32) -> Vec<ConsumerPlan> {
    let s = cr.scenario;
    let c = &s.consumers;
    let names: Arc<[String]> = s.partition_names().into();
    let lease = Duration::from_secs(c.lease_seconds.unwrap_or(s.queue.options.lease_time) as u64);
    let groups = c.group_names().into_iter().enumerate();
    let slots = groups
        .flat_map(|(group_index, group)| (0..count).map(move |k| (group_index, group.clone(), k)));
    let mine = cr.shard.slice(count);
    slots
        .enumerate()
        .filter(|(_, (_, _, k))| mine.contains(k))
        .map(|(id, (group_index, group, k))| ConsumerPlan {
            id: id as u32,
            group_index,
            group: group.filter(|g| g != QUEUE_MODE_GROUP),
            queue: queue.to_string(),
            partitions: partition_share(&names, k, count),
            named_partition: c.pop_route == PopRoute::Partition,
            pop_batch: c.pop_batch,
            partitions_per_pop: c.partitions_per_pop,
            long_poll: c.long_poll,
            long_poll_timeout_ms: c.long_poll_timeout_ms,
            lease_seconds: c.lease_seconds,
            effective_lease: lease,
            processing_ms: c.processing_ms,
            empty_backoff_ms: c.empty_backoff_ms,
            per_message_acks: c.ack_mode == AckMode::PerMessage,
            lease_less: c.lease_less,
            stall: c.stall,
            stall_extra_ms: c.stall_extra_ms,
            outcome_shares: c.outcomes.shares(),
            seed: cr.seed.wrapping_mul(31).wrapping_add(1000 + id as u64),
        })
        .collect()
}

/// The partitions consumer `k` of a group of `count` pops by name: every `count`-th partition
/// from the `k`-th, so the group's consumers split the partitions between them and each
/// partition has an owner (with more consumers than partitions, several share one). Rotating
/// every consumer over all partitions made them collide on leased partitions: in queue mode
/// three pops in four came back empty on deep-partitions.
fn partition_share(names: &[String], k: u32, count: u32) -> Arc<[String]> {
    let (n, count, k) = (names.len(), count.max(1) as usize, k as usize);
    if n == 0 {
        return Arc::from(Vec::new());
    }
    if count >= n {
        return Arc::from(vec![names[k % n].clone()]);
    }
    names.iter().skip(k).step_by(count).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::partition_share;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("p{i}")).collect()
    }

    #[test]
    fn consumers_split_the_named_partitions_and_every_partition_has_an_owner() {
        let all = names(10);
        let shares: Vec<Vec<String>> = (0..4)
            .map(|k| partition_share(&all, k, 4).to_vec())
            .collect();
        assert_eq!(shares[0], ["p0", "p4", "p8"]);
        assert_eq!(shares[3], ["p3", "p7"]);
        let mut owned: Vec<String> = shares.concat();
        owned.sort();
        let mut expected = all.clone();
        expected.sort();
        assert_eq!(owned, expected, "each partition exactly once");
    }

    #[test]
    fn more_consumers_than_partitions_share_them() {
        let all = names(4);
        let shares: Vec<Vec<String>> = (0..6)
            .map(|k| partition_share(&all, k, 6).to_vec())
            .collect();
        assert_eq!(shares[1], ["p1"]);
        assert_eq!(shares[5], ["p1"]);
        assert_eq!(
            partition_share(&all, 2, 4).to_vec(),
            ["p2"],
            "one each when equal"
        );
    }
}
