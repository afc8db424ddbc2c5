//! The workload of a peer cell: producers, consumers (and PgQ's ticker) driving a peer queue
//! through its `PeerQueue` over their own PostgreSQL connections, booking the same counters,
//! latencies and ledger as the broker's workers, so a peer cell's figures and audit mean what a
//! broker cell's do.
//!
//! What differs, and is said in the run's output: PgQ hands a batch to one reader, so each
//! consumer group has exactly one PgQ consumer whatever `consumers.count` says; PGMQ has no
//! partitions, so producers send to the one queue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};

use ackbench_wire::{txn_hash, TxnHash};

use super::{now_us, CellContext, Counters, Phase, Schedule};
use crate::driver::peer::{Answer, Consumed, PeerQueue, Produced};
use crate::history;

/// How often the load generator ticks a PgQ queue (as `pgqd` would), and every how many ticks
/// it runs the retry maintenance.
const TICK_EVERY: Duration = Duration::from_millis(100);
const MAINTAIN_EVERY: u32 = 10;
/// Pop size while draining (as the broker's consumers do).
const DRAIN_BATCH: u32 = 1000;

/// What a peer cell runs.
#[derive(Clone)]
pub struct PeerPlan {
    pub queue: Arc<PeerQueue>,
    /// The database the peer is installed in.
    pub url: String,
    pub producers: u32,
    pub batch: u32,
    pub payload_bytes: u32,
    /// Messages per second per producer (open loop); `None` = closed loop.
    pub rate: Option<f64>,
    /// Consumers per group the scenario asks for (a peer may run fewer: PgQ one).
    pub consumers: u32,
    /// PgQ consumer names, by ledger group index (PGMQ: one entry, unused).
    pub groups: Vec<String>,
    pub pop_batch: u32,
    pub processing_ms: u64,
    pub empty_backoff_ms: u64,
    /// Cumulative shares of completed, failed, retry, dlq.
    pub outcome_shares: [(&'static str, f64); 4],
    /// Makes transactionIds unique across cells and rounds.
    pub tag: String,
    pub seed: u64,
}

impl PeerPlan {
    /// Consumer workers per group, as the peer can run them.
    pub fn consumers_per_group(&self) -> u32 {
        self.queue.peer.readers_per_group(self.consumers)
    }
}

/// A connection of its own, its driver task on the current runtime.
pub async fn connect(url: &str) -> Result<Client, String> {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| format!("peer: cannot connect to {url}: {e}"))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            eprintln!("ackbench: peer connection closed: {e}");
        }
    });
    Ok(client)
}

/// Produces `messages` as a backlog before anything is measured (no send time stamped).
pub async fn prefill(
    plan: &PeerPlan,
    ctx: &CellContext,
    messages: u64,
    batch: u32,
) -> Result<(), String> {
    let client = connect(&plan.url).await?;
    let mut writer = BatchWriter::new(plan, format!("{}-pre", plan.tag), batch);
    let mut seq = 0u64;
    while seq * (batch as u64) < messages {
        let left = messages - seq * batch as u64;
        writer.write(seq, None, left.min(batch as u64) as u32);
        ctx.ledger.sending(&writer.hashes);
        plan.queue.produce(&client, &writer.produced()).await?;
        ctx.ledger.pushed(&writer.hashes);
        Counters::bump(&ctx.counters.pushed_messages, writer.hashes.len() as u64);
        seq += 1;
    }
    Ok(())
}

/// Starts the producers, the consumers and (a peer that needs one: PgQ) the ticker on the
/// workload runtime.
pub fn spawn(plan: &PeerPlan, ctx: &Arc<CellContext>) -> Vec<JoinHandle<()>> {
    let load = super::runtime();
    let mut tasks = Vec::new();
    for id in 0..plan.producers {
        tasks.push(load.spawn(produce(plan.clone(), id, ctx.clone())));
    }
    for group in 0..plan.groups.len() {
        for id in 0..plan.consumers_per_group() {
            tasks.push(load.spawn(consume(plan.clone(), group, id, ctx.clone())));
        }
    }
    if plan.queue.peer.needs_ticker() {
        tasks.push(load.spawn(tick(plan.clone(), ctx.clone())));
    }
    tasks
}

/// Writes one producer's batches: transactionIds `{tag}-{producer}-{seq}-{i}` and payloads
/// `{"ts": intended send time, "pad": ...}`.
struct BatchWriter {
    prefix: String,
    pad: String,
    ids: Vec<String>,
    payloads: Vec<String>,
    hashes: Vec<TxnHash>,
}

impl BatchWriter {
    fn new(plan: &PeerPlan, prefix: String, batch: u32) -> BatchWriter {
        BatchWriter {
            prefix,
            pad: "x".repeat(plan.payload_bytes as usize),
            ids: Vec::with_capacity(batch as usize),
            payloads: Vec::with_capacity(batch as usize),
            hashes: Vec::with_capacity(batch as usize),
        }
    }

    fn write(&mut self, seq: u64, ts: Option<u64>, count: u32) {
        self.ids.clear();
        self.payloads.clear();
        self.hashes.clear();
        for i in 0..count {
            let id = format!("{}-{seq}-{i}", self.prefix);
            self.hashes.push(txn_hash(&id));
            self.ids.push(id);
            self.payloads.push(match ts {
                Some(ts) => format!(r#"{{"ts":{ts},"pad":"{}"}}"#, self.pad),
                None => format!(r#"{{"pad":"{}"}}"#, self.pad),
            });
        }
    }

    fn produced(&self) -> Vec<Produced<'_>> {
        self.ids
            .iter()
            .zip(&self.payloads)
            .map(|(t, p)| Produced {
                transaction_id: t,
                payload_json: p,
            })
            .collect()
    }
}

/// A producer: open loop on a schedule of intended send times, or closed loop.
async fn produce(plan: PeerPlan, id: u32, ctx: Arc<CellContext>) {
    let client = match connect(&plan.url).await {
        Ok(c) => c,
        Err(e) => return ctx.error(e),
    };
    let schedule = Schedule::new(plan.rate, plan.batch, id, plan.producers);
    let mut writer = BatchWriter::new(&plan, format!("{}-{id}", plan.tag), plan.batch);
    let mut seq = 0u64;
    while matches!(ctx.phase(), Phase::Warmup | Phase::Measure) {
        let Some((intended, in_flight)) = schedule.next_push(&ctx, seq).await else {
            break;
        };
        let intended_us = now_us().saturating_sub(intended.elapsed().as_micros() as u64);
        writer.write(seq, Some(intended_us), plan.batch);
        if schedule.open_loop() {
            let lag = Instant::now().saturating_duration_since(intended);
            ctx.latency.record("schedule_lag", lag);
        }
        ctx.ledger.sending(&writer.hashes);
        let sent = plan.queue.produce(&client, &writer.produced()).await;
        Counters::bump(&ctx.counters.push_requests, 1);
        match sent {
            Ok(()) => {
                ctx.latency.record("push", intended.elapsed());
                ctx.ledger.pushed(&writer.hashes);
                Counters::bump(&ctx.counters.pushed_messages, writer.hashes.len() as u64);
            }
            Err(e) => {
                ctx.ledger.push_failed(&writer.hashes);
                ctx.error(format!("produce: {e}"))
            }
        }
        drop(in_flight);
        seq += 1;
    }
}

/// A consumer of ledger group `group`: consume, answer by the scenario's outcome mix (all
/// `completed` while draining), book every answer.
async fn consume(plan: PeerPlan, group: usize, id: u32, ctx: Arc<CellContext>) {
    let client = match connect(&plan.url).await {
        Ok(c) => c,
        Err(e) => return ctx.error(e),
    };
    let mut queue = (*plan.queue).clone();
    queue.consumer = plan.groups[group].clone();
    let mut rng = fastrand::Rng::with_seed(plan.seed.wrapping_add(1000 + id as u64));
    while ctx.phase() != Phase::Stop {
        ctx.hold_while_consumers_paused().await;
        let draining = ctx.phase() == Phase::Drain;
        let batch = if draining {
            DRAIN_BATCH
        } else {
            plan.pop_batch
        };
        let started = Instant::now();
        let consumed = queue.consume(&client, batch).await;
        Counters::bump(&ctx.counters.pop_requests, 1);
        match consumed {
            Ok(c) if c.deliveries.is_empty() => {
                if c.open_batch.is_some() {
                    // An empty open batch (PgQ's) still has to be finished to move past it.
                    let _ = queue.answer(&client, &c, &[]).await;
                }
                tokio::time::sleep(Duration::from_millis(plan.empty_backoff_ms.max(1))).await;
            }
            Ok(c) => {
                let answered = Instant::now();
                ctx.latency.record("pop", answered - started);
                let pop = history::Pop {
                    consumer: group as u32 * plan.consumers_per_group() + id,
                    group: group as u16,
                    lease_ms: plan.queue.visibility_secs.max(0) as u32 * 1000,
                    sent: started,
                    answered,
                };
                let first = record_pop(&ctx, &queue, &pop, &c);
                let batch = Batch {
                    consumed: &c,
                    group,
                    first_record: first,
                };
                answer(&plan, &queue, &client, &ctx, &batch, draining, &mut rng).await;
            }
            Err(e) => {
                ctx.error(format!("consume: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Records the deliveries of one consumed batch in the history; returns the first's record
/// number. A peer's queue is its one partition, and its messages come without a lease id.
fn record_pop(ctx: &CellContext, queue: &PeerQueue, pop: &history::Pop, c: &Consumed) -> usize {
    let records = c.deliveries.iter().map(|d| history::Popped {
        txn: txn_hash(&d.transaction_id),
        transaction_id: &d.transaction_id,
        partition_id: &queue.queue,
        lease_id: None,
    });
    ctx.history.popped(pop, records)
}

/// One consumed batch as a consumer of ledger group `group` answers it.
struct Batch<'a> {
    consumed: &'a Consumed,
    group: usize,
    /// The history's record number of its first delivery.
    first_record: usize,
}

async fn answer(
    plan: &PeerPlan,
    queue: &PeerQueue,
    client: &Client,
    ctx: &CellContext,
    batch: &Batch<'_>,
    draining: bool,
    rng: &mut fastrand::Rng,
) {
    let (consumed, group) = (batch.consumed, batch.group);
    let hashes: Vec<TxnHash> = consumed
        .deliveries
        .iter()
        .map(|d| txn_hash(&d.transaction_id))
        .collect();
    Counters::bump(&ctx.counters.popped_messages, hashes.len() as u64);
    let again = ctx.ledger.delivered(group, &hashes);
    Counters::bump(&ctx.counters.redeliveries, again);
    ctx.hold_while_consumers_paused().await;
    if plan.processing_ms > 0 {
        tokio::time::sleep(Duration::from_millis(plan.processing_ms)).await;
    }
    let answers: Vec<Answer> = hashes
        .iter()
        .map(|_| match draining {
            true => Answer::Completed,
            false => pick(&plan.outcome_shares, rng),
        })
        .collect();
    let statuses: Vec<&'static str> = answers.iter().map(|a| a.status()).collect();
    let started = Instant::now();
    ctx.history
        .ack_sent(batch.first_record, &statuses, true, started);
    let done = queue.answer(client, consumed, &answers).await;
    Counters::bump(&ctx.counters.ack_requests, 1);
    let done = match done {
        Ok(d) => d,
        Err(e) => return ctx.error(format!("answer: {e}")),
    };
    let answered = Instant::now();
    ctx.latency.record("ack", answered - started);
    for (i, status) in statuses.iter().enumerate() {
        // The answer's statements committed: the peer took every item of it.
        let outcome = history::AckOutcome {
            status: history::Status::of(status),
            lease_less: true,
            verdict: history::Verdict::Accepted,
            sent: started,
            answered,
        };
        ctx.history.answered(batch.first_record + i, &outcome);
    }
    book(ctx, group, consumed, &answers, &done.dead_lettered);
}

/// Books each delivery's answer in the ledger; end-to-end latency from the stamped send time.
fn book(ctx: &CellContext, group: usize, consumed: &Consumed, answers: &[Answer], dead: &[String]) {
    let now = now_us();
    let measuring = ctx.latency.measuring();
    for (d, a) in consumed.deliveries.iter().zip(answers) {
        let hash = txn_hash(&d.transaction_id);
        let dead_lettered = dead.contains(&d.transaction_id);
        let completed = *a == Answer::Completed;
        if ctx
            .ledger
            .answered(group, &hash, completed, dead_lettered, false)
        {
            Counters::bump(&ctx.counters.acked_messages, 1);
            if let Some(ts) = measuring.then(|| sent_at(&d.payload_json)).flatten() {
                ctx.latency
                    .record("e2e", Duration::from_micros(now.saturating_sub(ts)));
            }
        }
    }
}

fn pick(shares: &[(&'static str, f64); 4], rng: &mut fastrand::Rng) -> Answer {
    let total: f64 = shares.iter().map(|s| s.1).sum();
    let mut x = rng.f64() * total;
    for (name, share) in shares {
        if x < *share {
            return match *name {
                "failed" => Answer::Failed,
                "retry" => Answer::Retry,
                "dlq" => Answer::Dlq,
                _ => Answer::Completed,
            };
        }
        x -= share;
    }
    Answer::Completed
}

/// The send time a producer stamped in the payload (`ts`, µs since the epoch).
fn sent_at(payload: &str) -> Option<u64> {
    #[derive(Deserialize)]
    struct Stamp {
        ts: Option<u64>,
    }
    serde_json::from_str::<Stamp>(payload).ok()?.ts
}

/// The peer's ticker (PgQ's), until the workload stops.
async fn tick(plan: PeerPlan, ctx: Arc<CellContext>) {
    let client = match connect(&plan.url).await {
        Ok(c) => c,
        Err(e) => return ctx.error(e),
    };
    let mut ticks = 0u32;
    while ctx.phase() != Phase::Stop {
        let maintain = ticks.is_multiple_of(MAINTAIN_EVERY);
        if let Err(e) = plan.queue.tick(&client, maintain).await {
            ctx.error(format!("tick: {e}"));
        }
        ticks = ticks.wrapping_add(1);
        tokio::time::sleep(TICK_EVERY).await;
    }
}
