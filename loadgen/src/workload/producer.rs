//! A producer, for every system: pushes batches to the queue's partitions, open loop (a fixed
//! schedule of intended send times, latency counted from the intended time so a stalled system
//! cannot hide behind a slowed client) or closed loop (back to back), booking each push in the
//! ledger and the counters. Writing and sending a batch is the driver's (`calls::Produce`).

use std::sync::Arc;
use std::time::Instant;

use super::calls::Produce;
use super::plan::ProducerPlan;
use super::{now_us, CellContext, Counters, Phase, Schedule};
use ackbench_ledger::retired::PushOrigin;

/// Runs one producer until the producers stop, pushing through `producer`.
pub async fn run<P: Produce>(plan: ProducerPlan, ctx: Arc<CellContext>, mut producer: P) {
    let mut rng = fastrand::Rng::with_seed(plan.seed);
    let schedule = Schedule::new(plan.rate, plan.batch, plan.id, plan.producers);
    let mut seq: u64 = 0;
    let count = plan.partitions.len().max(1) as u32;
    let prefix = format!("{}-{}-", plan.tag, plan.id);
    while matches!(ctx.phase(), Phase::Warmup | Phase::Measure) {
        let Some((intended, _in_flight)) = schedule.next_push(&ctx, seq).await else {
            break;
        };
        let partition = if plan.random_partitions {
            rng.u32(0..count)
        } else {
            round_robin_partition(plan.id, plan.producers, seq, count)
        };
        let intended_us = now_us().saturating_sub(intended.elapsed().as_micros() as u64);
        producer.write(seq, partition, Some(intended_us));
        let sent = Instant::now();
        if schedule.open_loop() {
            // Schedule lag: how late the send starts against its intended time (a producer
            // sends one batch at a time, so it grows when pushes outlast the interval or the
            // load generator is short of CPU).
            ctx.latency
                .record("schedule_lag", sent.saturating_duration_since(intended));
        }
        match push(&mut producer, &ctx, Some(PushOrigin::new(&prefix, seq))).await {
            Ok(()) => {
                let done = Instant::now();
                ctx.latency.record("push", done - intended);
                if schedule.open_loop() {
                    ctx.latency.record("push_uncorrected", done - sent);
                }
            }
            Err(e) => ctx.error(format!("push: {e}")),
        }
        seq += 1;
    }
}

/// Sends the batch `producer` wrote last and books it: sending before it goes out, pushed or
/// failed by the answer; `origin` names the push (its obligations may retire once settled).
pub async fn push<P: Produce>(
    producer: &mut P,
    ctx: &CellContext,
    origin: Option<PushOrigin>,
) -> Result<(), String> {
    ctx.ledger.sending(producer.hashes());
    let pushed = producer.push(ctx).await;
    Counters::bump(&ctx.counters.push_requests, 1);
    match pushed {
        Ok(queued) => {
            Counters::bump(&ctx.counters.pushed_messages, queued);
            ctx.ledger.pushed_from(origin, producer.hashes());
            Ok(())
        }
        Err(e) => {
            ctx.ledger.push_failed(producer.hashes());
            Err(e)
        }
    }
}

/// The partition of producer `id`'s push `seq` under `round_robin`: the producers take turns in
/// one shared rotation (push `seq` of every producer, then push `seq + 1`, ...), so pushes that
/// are due together go to different partitions and every partition gets one push per
/// `partitions` pushes. Each producer walking the partitions on its own from its own start made
/// producers due together pile onto the same partition one after another: with 8 producers, 8
/// pushes in a row into one partition and then none for `partitions` intervals.
pub fn round_robin_partition(id: u32, producers: u32, seq: u64, partitions: u32) -> u32 {
    let turn = seq * producers.max(1) as u64 + id as u64;
    (turn % partitions.max(1) as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_producers_due_together_push_to_different_partitions() {
        let (producers, partitions) = (8u32, 256u32);
        let mut pushes_per_partition = vec![0u32; partitions as usize];
        for seq in 0..64u64 {
            let due_together: std::collections::HashSet<u32> = (0..producers)
                .map(|id| round_robin_partition(id, producers, seq, partitions))
                .collect();
            assert_eq!(due_together.len(), producers as usize, "push {seq}");
            for p in due_together {
                pushes_per_partition[p as usize] += 1;
            }
        }
        assert!(
            pushes_per_partition.iter().all(|&n| n == 2),
            "64 turns of 8 producers visit each of 256 partitions twice"
        );
        assert_eq!(round_robin_partition(0, 0, 5, 0), 0, "no division by zero");
    }
}
