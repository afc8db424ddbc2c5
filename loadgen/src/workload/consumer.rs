//! A consumer, for every system: pops a batch, decides an outcome per message from the
//! scenario's mix, optionally works, stalls past its lease or drops the leaseId, answers with
//! one ack per batch or one per message, and books every delivery and answer in the ledger,
//! the counters, the latencies and the history. Popping, reading and acking are the driver's
//! (`calls::Consume`): the loop is generic over it, so the per-message path is the same code
//! for every system, with no dynamic call and no allocation per message.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ackbench_wire::{txn_hash, TxnHash};

use super::calls::{AckRequest, Batch, Consume, ItemAnswer};
use super::plan::ConsumerPlan;
use super::{now_us, CellContext, Counters, Phase};
use crate::history::{self, AckOutcome, Status, Verdict};
use ackbench_ledger::retired::Origin;
use ackbench_ledger::Answer;

/// What one consumer keeps from request to request.
struct Worker<C> {
    calls: C,
    rng: fastrand::Rng,
    /// The current batch's transactionId hashes and outcomes, by message.
    hashes: Vec<TxnHash>,
    /// Their origins, where the transactionId is one this load generator writes.
    origins: Vec<Option<Origin>>,
    statuses: Vec<&'static str>,
    /// The history's record number of the current batch's first message.
    first_record: usize,
}

/// Runs one consumer until the workload stops, popping and acking through `calls`.
pub async fn run<C: Consume>(plan: ConsumerPlan, ctx: Arc<CellContext>, calls: C) {
    let mut w = Worker {
        calls,
        rng: fastrand::Rng::with_seed(plan.seed),
        hashes: Vec::new(),
        origins: Vec::new(),
        statuses: Vec::new(),
        first_record: 0,
    };
    while ctx.phase() != Phase::Stop {
        ctx.hold_while_consumers_paused().await;
        let started = Instant::now();
        let popped = w.calls.pop(ctx.phase() == Phase::Drain).await;
        let pop = PopTimes {
            sent: started,
            answered: Instant::now(),
        };
        Counters::bump(&ctx.counters.pop_requests, 1);
        let popped = match popped {
            Ok(Some(p)) => p,
            Ok(None) => {
                empty_pop(&plan).await;
                continue;
            }
            Err(e) => {
                ctx.error(format!("pop: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let batch = match w.calls.read(&popped, &ctx) {
            Ok(b) => b,
            Err(e) => {
                ctx.error(format!("pop: {e}"));
                continue;
            }
        };
        if batch.is_empty() {
            drop(batch);
            w.calls.finish_empty(popped).await;
            empty_pop(&plan).await;
            continue;
        }
        ctx.latency.record("pop", started.elapsed());
        handle_batch(&plan, &ctx, &mut w, &batch, pop).await;
    }
}

/// After an empty pop: a pause unless the pop long-polled (it already waited).
async fn empty_pop(plan: &ConsumerPlan) {
    if !plan.long_poll {
        tokio::time::sleep(Duration::from_millis(plan.empty_backoff_ms)).await;
    }
}

/// When a pop was sent and answered.
#[derive(Clone, Copy)]
struct PopTimes {
    sent: Instant,
    answered: Instant,
}

async fn handle_batch<C: Consume>(
    plan: &ConsumerPlan,
    ctx: &CellContext,
    w: &mut Worker<C>,
    batch: &C::Batch<'_>,
    pop: PopTimes,
) {
    let len = batch.len();
    Counters::bump(&ctx.counters.popped_messages, len as u64);
    w.hashes.clear();
    w.hashes
        .extend((0..len).map(|i| txn_hash(batch.transaction_id(i))));
    w.origins.clear();
    w.origins
        .extend((0..len).map(|i| Origin::of(batch.transaction_id(i))));
    w.first_record = record_pop(plan, ctx, &w.hashes, batch, pop);
    let redelivered = ctx
        .ledger
        .delivered_from(plan.group_index, &w.hashes, &w.origins);
    Counters::bump(&ctx.counters.redeliveries, redelivered);
    ctx.hold_while_consumers_paused().await;
    if plan.processing_ms > 0 {
        tokio::time::sleep(Duration::from_millis(plan.processing_ms)).await;
    }
    if ctx.phase() != Phase::Drain && plan.stall > 0.0 && w.rng.f64() < plan.stall {
        tokio::time::sleep(plan.effective_lease + Duration::from_millis(plan.stall_extra_ms)).await;
    }
    let lease_less = plan.lease_less > 0.0 && w.rng.f64() < plan.lease_less;
    // The outcome mix shapes the measured load; the drain only finishes the accounting, so it
    // completes everything (a nack in a drain-sized pop would redeliver the rest of it).
    let draining = ctx.phase() == Phase::Drain;
    w.statuses.clear();
    for _ in 0..len {
        let status = if draining {
            "completed"
        } else {
            pick_outcome(&plan.outcome_shares, &mut w.rng)
        };
        w.statuses.push(status);
    }
    if plan.per_message_acks {
        for i in 0..len {
            ack(plan, ctx, w, batch, i..i + 1, lease_less).await;
        }
    } else {
        ack(plan, ctx, w, batch, 0..len, lease_less).await;
    }
}

/// Records the deliveries of one pop answer in the history; returns the first's record number.
fn record_pop<B: Batch>(
    plan: &ConsumerPlan,
    ctx: &CellContext,
    hashes: &[TxnHash],
    batch: &B,
    pop: PopTimes,
) -> usize {
    let answer = history::Pop {
        consumer: plan.id,
        group: plan.group_index as u16,
        lease_ms: plan.effective_lease.as_millis().min(u32::MAX as u128) as u32,
        sent: pop.sent,
        answered: pop.answered,
    };
    let records = hashes.iter().enumerate().map(|(i, h)| history::Popped {
        txn: *h,
        transaction_id: batch.transaction_id(i),
        partition_id: batch.partition_id(i),
        lease_id: batch.lease_id(i),
    });
    ctx.history.popped(&answer, records)
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

async fn ack<C: Consume>(
    plan: &ConsumerPlan,
    ctx: &CellContext,
    w: &mut Worker<C>,
    batch: &C::Batch<'_>,
    range: Range<usize>,
    lease_less: bool,
) {
    // A system whose messages carry no lease takes lease-less acks only.
    let lease_less = lease_less || !C::LEASES;
    let request = AckRequest {
        range: range.clone(),
        statuses: &w.statuses,
        lease_less,
    };
    w.calls.write_ack(batch, &request);
    let started = Instant::now();
    let first = w.first_record + range.start;
    ctx.history
        .ack_sent(first, &w.statuses[range.clone()], lease_less, started);
    let sent = w.calls.ack(ctx, batch, &request).await;
    Counters::bump(&ctx.counters.ack_requests, sent.requests as u64);
    if let Err(e) = sent.answered {
        return ctx.error(format!("ack: {e}"));
    }
    ctx.latency.record("ack", started.elapsed());
    let acked = Acked {
        batch,
        range,
        sent_again: sent.requests > 1,
        first_record: first,
        lease_less,
        sent: started,
    };
    record_answers(plan, ctx, w, &acked);
}

/// The items of one ack request.
struct Acked<'a, B> {
    batch: &'a B,
    range: Range<usize>,
    /// The ack was sent again after an attempt without an answer (see
    /// `ItemAnswer::settled_before`).
    sent_again: bool,
    /// The history's record number of the first item, whether the ack carried no leaseId, and
    /// when it was first sent.
    first_record: usize,
    lease_less: bool,
    sent: Instant,
}

/// Books each item's answer in the history and the ledger; end-to-end latency runs from the
/// intended push time to the first successful completion.
fn record_answers<C: Consume>(
    plan: &ConsumerPlan,
    ctx: &CellContext,
    w: &Worker<C>,
    items: &Acked<'_, C::Batch<'_>>,
) {
    let now = now_us();
    let answered = Instant::now();
    let measuring = ctx.latency.measuring();
    let answers = w.calls.answers();
    for (i, m) in items.range.clone().enumerate() {
        let Some(r) = answers.get(i).filter(|r| !r.missing) else {
            ctx.error(format!("ack answer has no element for index {i}"));
            continue;
        };
        if !r.success {
            Counters::bump(&ctx.counters.refused_acks, 1);
        }
        let status = w.statuses[m];
        let acked = status == "completed"
            && ((r.success && !r.noop) || (items.sent_again && r.settled_before()));
        let outcome = AckOutcome {
            status: Status::of(status),
            lease_less: items.lease_less,
            verdict: verdict(r, items.sent_again),
            sent: items.sent,
            answered,
        };
        ctx.history.answered(items.first_record + i, &outcome);
        let answer = Answer {
            acked,
            dead_lettered: r.dlq,
            dropped: r.dropped,
        };
        let origin = w.origins[m].as_ref();
        let first = ctx
            .ledger
            .answered_from(plan.group_index, &w.hashes[m], origin, answer);
        if let Some(first) = first {
            Counters::bump(&ctx.counters.acked_messages, 1);
            if let Some(ts) = measuring.then(|| items.batch.sent_at(m)).flatten() {
                let e2e = Duration::from_micros(now.saturating_sub(ts));
                ctx.latency.record("e2e", e2e);
                if first.on_first_delivery() {
                    ctx.latency.record("e2e_first", e2e);
                }
            }
        }
    }
}

/// What the system's answer to one ack item says, for the history.
fn verdict(r: &ItemAnswer, sent_again: bool) -> Verdict {
    match r.success {
        true if !r.noop => Verdict::Accepted,
        _ if sent_again && r.settled_before() => Verdict::AssumedSettled,
        true => Verdict::Noop,
        false => Verdict::Refused,
    }
}
