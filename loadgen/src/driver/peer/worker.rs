//! A peer's SQL as the workers' calls: each producer and consumer holds its own PostgreSQL
//! connection and calls the peer (`PeerQueue`, one dynamic call per request) for a batch
//! produced, a batch consumed or a batch answered; the one producer and consumer loops book
//! them as they book a broker's, so a peer cell's figures and audit mean what a broker cell's do.
//! PgQ's ticker (`tick`) runs beside them.
//!
//! What differs, and is said in the run's output: PgQ hands a batch to one reader, so each
//! consumer group has exactly one PgQ consumer whatever `consumers.count` says; PGMQ and PgQ
//! have no partitions (their queue is their one partition; procrastinate's `lock` is the
//! scenario's partition), no leases an ack presents, no per-message acks
//! (a batch is answered whole), and its consumers neither stall nor long-poll.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio_postgres::{Client, NoTls};

use ackbench_wire::{txn_hash, TxnHash};

use super::{Answer, Consumed, PeerQueue, Produced};
use crate::workload::calls::{AckRequest, AckSent, Batch, Consume, ItemAnswer, Produce, Workers};
use crate::workload::plan::ConsumerPlan;
use crate::workload::plan::ProducerPlan;
use crate::workload::{CellContext, Phase};

/// How often the load generator ticks a PgQ queue (as `pgqd` would), and every how many ticks
/// it runs the retry maintenance.
const TICK_EVERY: Duration = Duration::from_millis(100);
const MAINTAIN_EVERY: u32 = 10;

/// What the history calls the one partition of a peer that keeps none.
const PARTITION: &str = "queue";

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

/// The SQL workers of a peer cell.
pub struct PeerWorkers {
    pub queue: Arc<PeerQueue>,
    /// The database the peer is installed in.
    pub url: String,
    /// The peer's consumer names, by ledger group index.
    pub groups: Vec<String>,
}

impl Workers for PeerWorkers {
    type Producer = SqlProducer;
    type Consumer = SqlConsumer;

    async fn producer(
        &self,
        plan: &ProducerPlan,
        _ctx: &CellContext,
    ) -> Result<SqlProducer, String> {
        Ok(SqlProducer {
            client: connect(&self.url).await?,
            queue: self.queue.clone(),
            writer: BatchWriter::new(plan),
        })
    }

    async fn consumer(
        &self,
        plan: &ConsumerPlan,
        _ctx: &CellContext,
    ) -> Result<SqlConsumer, String> {
        let mut queue = (*self.queue).clone();
        queue.consumer = self.groups[plan.group_index].clone();
        let client = connect(&self.url).await?;
        queue.peer.open_consumer(&client, &mut queue).await?;
        Ok(SqlConsumer {
            client,
            queue,
            pop_batch: plan.pop_batch,
            answers: Vec::new(),
            item_answers: Vec::new(),
        })
    }

    fn consumers_per_group(&self, asked: u32) -> u32 {
        self.queue.peer.readers_per_group(asked)
    }

    fn shape(&self, plan: &mut ConsumerPlan) {
        plan.per_message_acks = false;
        plan.stall = 0.0;
        plan.lease_less = 0.0;
        plan.long_poll = false;
        plan.empty_backoff_ms = plan.empty_backoff_ms.max(1);
    }
}

/// Writes one producer's batches: transactionIds `{tag}-{producer}-{seq}-{i}` and payloads
/// `{"ts": intended send time, "pad": ...}`.
struct BatchWriter {
    prefix: String,
    batch: u32,
    /// The scenario's partition names, and the one the current batch goes to.
    partitions: Arc<[String]>,
    partition: usize,
    pad: String,
    ids: Vec<String>,
    payloads: Vec<String>,
    hashes: Vec<TxnHash>,
}

impl BatchWriter {
    fn new(plan: &ProducerPlan) -> BatchWriter {
        let batch = plan.batch as usize;
        BatchWriter {
            prefix: format!("{}-{}", plan.tag, plan.id),
            batch: plan.batch,
            partitions: plan.partitions.clone(),
            partition: 0,
            pad: "x".repeat(plan.payload_bytes as usize),
            ids: Vec::with_capacity(batch),
            payloads: Vec::with_capacity(batch),
            hashes: Vec::with_capacity(batch),
        }
    }

    fn write(&mut self, seq: u64, partition: u32, ts: Option<u64>) {
        self.partition = partition as usize;
        self.ids.clear();
        self.payloads.clear();
        self.hashes.clear();
        for i in 0..self.batch {
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
        let partition = self
            .partitions
            .get(self.partition)
            .map_or(PARTITION, String::as_str);
        self.ids
            .iter()
            .zip(&self.payloads)
            .map(|(t, p)| Produced {
                transaction_id: t,
                payload_json: p,
                partition,
            })
            .collect()
    }
}

/// One producer's connection and writer (every batch goes to the peer's queue, naming the
/// scenario's partition for a peer that keeps one).
pub struct SqlProducer {
    client: Client,
    queue: Arc<PeerQueue>,
    writer: BatchWriter,
}

impl Produce for SqlProducer {
    fn write(&mut self, seq: u64, partition: u32, ts: Option<u64>) {
        self.writer.write(seq, partition, ts);
    }

    fn hashes(&self) -> &[TxnHash] {
        &self.writer.hashes
    }

    async fn push(&mut self, _ctx: &CellContext) -> Result<u64, String> {
        self.queue
            .produce(&self.client, &self.writer.produced())
            .await?;
        Ok(self.writer.hashes.len() as u64)
    }
}

/// One consumer's connection, its queue (read as its group's consumer name) and buffers.
pub struct SqlConsumer {
    client: Client,
    queue: PeerQueue,
    pop_batch: u32,
    answers: Vec<Answer>,
    item_answers: Vec<ItemAnswer>,
}

impl Consume for SqlConsumer {
    type Popped = Consumed;
    type Batch<'a> = &'a Consumed;
    const LEASES: bool = false;

    /// A consumed batch, even an empty one (PgQ's open batch must still be finished).
    async fn pop(&mut self, draining: bool) -> Result<Option<Consumed>, String> {
        let batch = match draining {
            true => self.pop_batch.max(self.queue.peer.drain_batch()),
            false => self.pop_batch,
        };
        self.queue.consume(&self.client, batch).await.map(Some)
    }

    fn read<'a>(&self, popped: &'a Consumed, _ctx: &CellContext) -> Result<&'a Consumed, String> {
        Ok(popped)
    }

    async fn finish_empty(&mut self, popped: Consumed) {
        if popped.open_batch.is_some() {
            // An empty open batch (PgQ's) still has to be finished to move past it.
            let _ = self.queue.answer(&self.client, &popped, &[]).await;
        }
    }

    fn write_ack(&mut self, _batch: &Self::Batch<'_>, ack: &AckRequest<'_>) {
        self.answers.clear();
        self.answers.extend(
            ack.statuses[ack.range.clone()]
                .iter()
                .map(|s| Answer::of(s)),
        );
    }

    /// Answers the whole batch (a peer answers no part of one); once the peer's statements
    /// committed, it took every item.
    async fn ack(
        &mut self,
        _ctx: &CellContext,
        batch: &Self::Batch<'_>,
        ack: &AckRequest<'_>,
    ) -> AckSent {
        let consumed: &Consumed = batch;
        if ack.range != (0..consumed.deliveries.len()) {
            let answered = Err("a peer answers a consumed batch whole".to_string());
            return AckSent {
                requests: 0,
                answered,
            };
        }
        let done = self
            .queue
            .answer(&self.client, consumed, &self.answers)
            .await;
        let answered = done.map(|done| {
            self.item_answers.clear();
            self.item_answers
                .extend(consumed.deliveries.iter().map(|d| ItemAnswer {
                    dlq: done.dead_lettered.contains(&d.transaction_id),
                    ..ItemAnswer::TAKEN
                }));
        });
        AckSent {
            requests: 1,
            answered,
        }
    }

    fn answers(&self) -> &[ItemAnswer] {
        &self.item_answers
    }
}

impl Batch for &Consumed {
    fn len(&self) -> usize {
        self.deliveries.len()
    }

    fn transaction_id(&self, i: usize) -> &str {
        &self.deliveries[i].transaction_id
    }

    fn partition_id(&self, i: usize) -> &str {
        self.deliveries[i].partition.as_deref().unwrap_or(PARTITION)
    }

    fn lease_id(&self, _i: usize) -> Option<&str> {
        None
    }

    fn sent_at(&self, i: usize) -> Option<u64> {
        sent_at(&self.deliveries[i].payload_json)
    }
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
pub async fn tick(queue: Arc<PeerQueue>, url: String, ctx: Arc<CellContext>) {
    let client = match connect(&url).await {
        Ok(c) => c,
        Err(e) => return ctx.error(e),
    };
    let mut ticks = 0u32;
    while ctx.phase() != Phase::Stop {
        let maintain = ticks.is_multiple_of(MAINTAIN_EVERY);
        if let Err(e) = queue.tick(&client, maintain).await {
            ctx.error(format!("tick: {e}"));
        }
        ticks = ticks.wrapping_add(1);
        tokio::time::sleep(TICK_EVERY).await;
    }
}
