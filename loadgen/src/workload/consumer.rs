//! A consumer: pops (wildcard or a named partition, optionally long-polling), decides an
//! outcome per message from the scenario's mix, optionally works, stalls past its lease or
//! drops the leaseId, and answers with one `/ack/batch` per pop or one per message.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use ackbench_wire::{AckResult, Message, PopResponse};

use super::{now_us, CellContext, Counters, Phase};
use crate::client::encode;

#[derive(Debug, Clone)]
pub struct ConsumerPlan {
    pub id: u32,
    /// Index of the group in the ledger, and its name (`None` = queue mode).
    pub group_index: usize,
    pub group: Option<String>,
    pub queue: String,
    /// The queue's partition names (`p-0` ..).
    pub partitions: std::sync::Arc<[String]>,
    /// Pop a named partition (rotating) instead of the wildcard route.
    pub named_partition: bool,
    pub pop_batch: u32,
    pub partitions_per_pop: u32,
    pub long_poll: bool,
    pub long_poll_timeout_ms: u64,
    pub lease_seconds: Option<u32>,
    /// The lease actually granted (for stalls): `lease_seconds` or the queue's lease time.
    pub effective_lease: Duration,
    pub processing_ms: u64,
    pub empty_backoff_ms: u64,
    pub per_message_acks: bool,
    pub lease_less: f64,
    pub stall: f64,
    pub stall_extra_ms: u64,
    /// Cumulative shares of completed, failed, retry, dlq.
    pub outcome_shares: [(&'static str, f64); 4],
    pub seed: u64,
}

/// Pop size while draining.
const DRAIN_POP_BATCH: u32 = 1000;

pub async fn run(plan: ConsumerPlan, ctx: Arc<CellContext>) {
    let mut rng = fastrand::Rng::with_seed(plan.seed);
    let mut turn: u32 = plan.id;
    while ctx.phase() != Phase::Stop {
        let path = pop_path(&plan, turn, ctx.phase() == Phase::Drain);
        turn = turn.wrapping_add(1);
        let started = Instant::now();
        let popped = ctx.client.pop(&path).await;
        Counters::bump(&ctx.counters.pop_requests, 1);
        match popped {
            Ok(Some(batch)) => {
                ctx.latency.record("pop", started.elapsed());
                handle_batch(&plan, &ctx, &mut rng, batch).await;
            }
            Ok(None) => {
                if !plan.long_poll {
                    tokio::time::sleep(Duration::from_millis(plan.empty_backoff_ms)).await;
                }
            }
            Err(e) => {
                ctx.error(format!("pop: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The pop request of this turn. During the drain (nothing is measured any more) consumers pop
/// at least `DRAIN_POP_BATCH` messages, so a deep backlog is accounted for in bounded time.
fn pop_path(plan: &ConsumerPlan, turn: u32, draining: bool) -> String {
    let batch = if draining {
        plan.pop_batch.max(DRAIN_POP_BATCH)
    } else {
        plan.pop_batch
    };
    let mut q = format!("batch={batch}");
    if let Some(g) = &plan.group {
        q.push_str(&format!("&consumerGroup={}", encode(g)));
    }
    if plan.long_poll {
        q.push_str(&format!("&wait=true&timeout={}", plan.long_poll_timeout_ms));
    }
    if let Some(s) = plan.lease_seconds {
        q.push_str(&format!("&leaseSeconds={s}"));
    }
    let queue = encode(&plan.queue);
    if plan.named_partition {
        let name = &plan.partitions[turn as usize % plan.partitions.len().max(1)];
        format!("/api/v1/pop/queue/{queue}/partition/{}?{q}", encode(name))
    } else {
        format!(
            "/api/v1/pop/queue/{queue}?{q}&partitions={}",
            plan.partitions_per_pop
        )
    }
}

async fn handle_batch(
    plan: &ConsumerPlan,
    ctx: &CellContext,
    rng: &mut fastrand::Rng,
    batch: PopResponse,
) {
    Counters::bump(&ctx.counters.popped_messages, batch.messages.len() as u64);
    for m in &batch.messages {
        if ctx.ledger.delivered(plan.group_index, &m.transaction_id) {
            Counters::bump(&ctx.counters.redeliveries, 1);
        }
    }
    if plan.processing_ms > 0 {
        tokio::time::sleep(Duration::from_millis(plan.processing_ms)).await;
    }
    if ctx.phase() != Phase::Drain && plan.stall > 0.0 && rng.f64() < plan.stall {
        tokio::time::sleep(plan.effective_lease + Duration::from_millis(plan.stall_extra_ms)).await;
    }
    let lease_less = plan.lease_less > 0.0 && rng.f64() < plan.lease_less;
    // The outcome mix shapes the measured load; the drain only finishes the accounting, so it
    // completes everything (a nack in a drain-sized pop would redeliver the rest of it).
    let draining = ctx.phase() == Phase::Drain;
    let statuses: Vec<&'static str> = batch
        .messages
        .iter()
        .map(|_| {
            if draining {
                "completed"
            } else {
                pick_outcome(&plan.outcome_shares, rng)
            }
        })
        .collect();
    let chunks: Vec<Vec<usize>> = if plan.per_message_acks {
        (0..batch.messages.len()).map(|i| vec![i]).collect()
    } else {
        vec![(0..batch.messages.len()).collect()]
    };
    for chunk in chunks {
        let items: Vec<(&Message, &str)> = chunk
            .iter()
            .map(|&i| (&batch.messages[i], statuses[i]))
            .collect();
        ack(plan, ctx, &items, lease_less).await;
    }
}

fn pick_outcome(shares: &[(&'static str, f64); 4], rng: &mut fastrand::Rng) -> &'static str {
    let total: f64 = shares.iter().map(|s| s.1).sum();
    let mut x = rng.f64() * total;
    for (name, share) in shares {
        if x < *share {
            return name;
        }
        x -= share;
    }
    "completed"
}

async fn ack(plan: &ConsumerPlan, ctx: &CellContext, items: &[(&Message, &str)], lease_less: bool) {
    let acks: Vec<Value> = items
        .iter()
        .map(|(m, status)| {
            let mut a = json!({"transactionId": m.transaction_id, "partitionId": m.partition_id, "status": status});
            if !lease_less {
                a["leaseId"] = json!(m.lease_id);
            }
            if *status != "completed" {
                a["error"] = json!(format!("ackbench: simulated {status}"));
            }
            a
        })
        .collect();
    let mut body = json!({ "acknowledgments": acks });
    if let Some(g) = &plan.group {
        body["consumerGroup"] = json!(g);
    }
    let started = Instant::now();
    let answer = ctx.client.ack_batch(&body).await;
    Counters::bump(&ctx.counters.ack_requests, 1);
    match answer {
        Ok(results) => {
            ctx.latency.record("ack", started.elapsed());
            record_answers(plan, ctx, items, &results);
        }
        Err(e) => ctx.error(format!("ack: {e}")),
    }
}

/// Books each item's answer in the ledger; end-to-end latency runs from the intended push time
/// to the first successful completion.
fn record_answers(
    plan: &ConsumerPlan,
    ctx: &CellContext,
    items: &[(&Message, &str)],
    results: &[AckResult],
) {
    let now = now_us();
    for (i, (m, status)) in items.iter().enumerate() {
        let Some(r) = results.iter().find(|r| r.index == i) else {
            ctx.error(format!("ack answer has no element for index {i}"));
            continue;
        };
        if !r.success {
            Counters::bump(&ctx.counters.refused_acks, 1);
        }
        let acked = r.success && *status == "completed" && !r.noop;
        let dropped = r.error.as_deref().is_some_and(|e| e.contains("dropped"));
        if ctx
            .ledger
            .answered(plan.group_index, &m.transaction_id, acked, r.dlq, dropped)
        {
            Counters::bump(&ctx.counters.acked_messages, 1);
            if let Some(ts) = m.data.get("ts").and_then(Value::as_u64) {
                ctx.latency
                    .record("e2e", Duration::from_micros(now.saturating_sub(ts)));
            }
        }
    }
}
