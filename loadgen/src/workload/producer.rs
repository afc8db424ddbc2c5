//! A producer: pushes batches to the queue's partitions, open loop (a fixed schedule of intended
//! send times, latency counted from the intended time so a stalled broker cannot hide behind a
//! slowed client) or closed loop (back to back).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{now_us, CellContext, Counters, Phase};

/// What one producer does.
#[derive(Debug, Clone)]
pub struct ProducerPlan {
    pub id: u32,
    pub queue: String,
    /// The queue's partition names (`p-0` ..).
    pub partitions: std::sync::Arc<[String]>,
    pub batch: u32,
    pub payload_bytes: u32,
    /// Messages per second for this producer (open loop); `None` = closed loop.
    pub rate: Option<f64>,
    pub random_partitions: bool,
    /// Makes transactionIds unique across cells and rounds.
    pub tag: String,
    pub seed: u64,
}

pub async fn run(plan: ProducerPlan, ctx: Arc<CellContext>) {
    let mut rng = fastrand::Rng::with_seed(plan.seed);
    let interval = plan
        .rate
        .map(|r| Duration::from_secs_f64(plan.batch as f64 / r));
    let start = Instant::now();
    let mut seq: u64 = 0;
    let count = plan.partitions.len().max(1) as u32;
    let mut next_partition = plan.id % count;
    while matches!(ctx.phase(), Phase::Warmup | Phase::Measure) {
        let intended = match interval {
            Some(iv) => {
                let at = start + iv.mul_f64(seq as f64);
                tokio::time::sleep_until(at.into()).await;
                if !matches!(ctx.phase(), Phase::Warmup | Phase::Measure) {
                    break;
                }
                at
            }
            None => Instant::now(),
        };
        let partition = if plan.random_partitions {
            rng.u32(0..count)
        } else {
            next_partition = (next_partition + 1) % count;
            next_partition
        };
        let intended_us = now_us().saturating_sub(intended.elapsed().as_micros() as u64);
        let items = batch_items(&plan, seq, partition, intended_us);
        let txns = transaction_ids(&items);
        let sent = Instant::now();
        if interval.is_some() {
            // Schedule lag: how late the send starts against its intended time (a producer
            // sends one batch at a time, so it grows when pushes outlast the interval or the
            // load generator is short of CPU).
            ctx.latency
                .record("schedule_lag", sent.saturating_duration_since(intended));
        }
        match ctx.client.push(items).await {
            Ok(results) => {
                let done = Instant::now();
                ctx.latency.record("push", done - intended);
                if interval.is_some() {
                    ctx.latency.record("push_uncorrected", done - sent);
                }
                let queued = results.iter().filter(|r| r.status == "queued").count();
                Counters::bump(&ctx.counters.push_requests, 1);
                Counters::bump(&ctx.counters.pushed_messages, queued as u64);
                ctx.ledger.pushed(txns);
            }
            Err(e) => ctx.error(format!("push: {e}")),
        }
        seq += 1;
    }
}

/// The items of one push request; the payload carries the intended send time for end-to-end
/// latency.
pub fn batch_items(plan: &ProducerPlan, seq: u64, partition: u32, intended_us: u64) -> Vec<Value> {
    let pad = "x".repeat(plan.payload_bytes as usize);
    (0..plan.batch)
        .map(|i| {
            json!({
                "queue": plan.queue,
                "partition": plan.partitions[partition as usize],
                "transactionId": format!("{}-{}-{seq}-{i}", plan.tag, plan.id),
                "payload": {"ts": intended_us, "pad": pad},
            })
        })
        .collect()
}

/// The transactionIds of push items, in order (what the ledger books once the push succeeds).
pub fn transaction_ids(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| i["transactionId"].as_str().unwrap_or_default().to_string())
        .collect()
}
