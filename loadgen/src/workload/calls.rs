//! The system-specific part of the workers: what a driver answers for the one producer loop and
//! the one consumer loop (`producer`, `consumer`). A driver gives its `Workers`, which build a
//! `Produce` per producer and a `Consume` per consumer: the HTTP calls of Queen's wire
//! (`driver::queen::wire`) or the SQL calls of a peer (`driver::peer::worker`).
//!
//! The loops are generic over these traits, so a driver's calls are statically dispatched and
//! inlined; a peer's own calls go through its `&dyn Peer` once per request. The per-message
//! accessors (`Batch`) read the driver's own representation in place, and `Consume::ack`
//! writes each item's answer into a buffer the driver keeps from request to request: no
//! allocation and no lock per message beyond the loops' own.

use std::future::Future;

use ackbench_wire::TxnHash;

use super::plan::{ConsumerPlan, ProducerPlan};
use super::CellContext;

/// How one system's workers are made (per cell; called once per worker).
pub trait Workers: Send + Sync + 'static {
    type Producer: Produce;
    type Consumer: Consume;

    /// A producer for `plan`, with its own connection.
    fn producer(
        &self,
        plan: &ProducerPlan,
        ctx: &CellContext,
    ) -> impl Future<Output = Result<Self::Producer, String>> + Send;

    /// A consumer for `plan`, with its own connection.
    fn consumer(
        &self,
        plan: &ConsumerPlan,
        ctx: &CellContext,
    ) -> impl Future<Output = Result<Self::Consumer, String>> + Send;

    /// Consumer workers per consumer group when the scenario asks for `asked` (a peer that
    /// hands a batch to one reader runs one).
    fn consumers_per_group(&self, asked: u32) -> u32 {
        asked
    }

    /// Leaves out of a consumer's plan what the system's consumers do not do (a peer's: acks
    /// per message, stalls past a lease, lease-less acks, long polls).
    fn shape(&self, _plan: &mut ConsumerPlan) {}
}

/// One producer's requests: write a batch, push it.
pub trait Produce: Send + 'static {
    /// Writes push `seq` of this producer to partition `partition` (by its place among the
    /// queue's partitions): `batch` messages whose transactionIds are `{tag}-{id}-{seq}-{i}`,
    /// their payloads carrying `ts` (the intended send time; none for backlog).
    fn write(&mut self, seq: u64, partition: u32, ts: Option<u64>);

    /// The transactionId hashes of the batch last written, in order.
    fn hashes(&self) -> &[TxnHash];

    /// Pushes the batch last written; `Ok` with how many messages the system queued.
    fn push(&mut self, ctx: &CellContext) -> impl Future<Output = Result<u64, String>> + Send;
}

/// One consumer's requests: pop a batch, read it, answer it.
pub trait Consume: Send + 'static {
    /// What one pop hands back, owned (an HTTP answer's body, a peer's rows).
    type Popped: Send + Sync;
    /// The messages of a popped answer, read in place.
    type Batch<'a>: Batch + Send + Sync;

    /// Whether the system's messages carry leases an ack can present (a peer's carry none:
    /// its acks are lease-less).
    const LEASES: bool;

    /// Pops a batch (`draining`: a drain-sized one); `Ok(None)` when nothing was ready.
    fn pop(
        &mut self,
        draining: bool,
    ) -> impl Future<Output = Result<Option<Self::Popped>, String>> + Send;

    /// The messages of `popped` (noting how the answer departs from the wire, if it does).
    fn read<'a>(
        &self,
        popped: &'a Self::Popped,
        ctx: &CellContext,
    ) -> Result<Self::Batch<'a>, String>;

    /// What an empty batch needs before the next pop (PgQ finishes its open batch).
    fn finish_empty(&mut self, _popped: Self::Popped) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Writes the ack of items `ack.range` of `batch`, each with its status (before its send
    /// time is taken, so the ack's latency is the request's).
    fn write_ack(&mut self, batch: &Self::Batch<'_>, ack: &AckRequest<'_>);

    /// Sends the ack last written and keeps each item's answer (`answers`).
    fn ack(
        &mut self,
        ctx: &CellContext,
        batch: &Self::Batch<'_>,
        ack: &AckRequest<'_>,
    ) -> impl Future<Output = AckSent> + Send;

    /// The answers of the last ack that was answered, one per item of its range, in order.
    fn answers(&self) -> &[ItemAnswer];
}

/// How an ack went: the requests sent for it (an ack without an answer may be sent again),
/// and whether an answer was read (`Err`: why not).
pub struct AckSent {
    pub requests: u32,
    pub answered: Result<(), String>,
}

/// The messages of one popped batch, by index.
pub trait Batch {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn transaction_id(&self, i: usize) -> &str;
    fn partition_id(&self, i: usize) -> &str;
    fn lease_id(&self, i: usize) -> Option<&str>;
    /// The intended send time the producer stamped in the payload (µs since the epoch).
    fn sent_at(&self, i: usize) -> Option<u64>;
}

/// One ack request as the consumer loop asks it.
pub struct AckRequest<'a> {
    pub range: std::ops::Range<usize>,
    /// The statuses of the whole batch (`completed`, `failed`, `retry`, `dlq`), by message.
    pub statuses: &'a [&'static str],
    /// The ack leaves the leaseId out.
    pub lease_less: bool,
}

/// What the system answered for one item of an ack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ItemAnswer {
    /// The answer held no element for the item.
    pub missing: bool,
    pub success: bool,
    /// Success that changed nothing (already applied).
    pub noop: bool,
    /// The item was dead-lettered.
    pub dlq: bool,
    /// The item was dropped (an exhausted retry budget without a DLQ).
    pub dropped: bool,
    /// Refused because the lease is invalid or expired.
    pub lease_refused: bool,
}

impl ItemAnswer {
    /// An item the system took by committing the request (a peer's answer).
    pub const TAKEN: ItemAnswer = ItemAnswer {
        missing: false,
        success: true,
        noop: false,
        dlq: false,
        dropped: false,
        lease_refused: false,
    };

    /// For an ack sent again after an attempt that got no answer: whether the item's answer
    /// says the lost attempt settled it. A no-op, or a refused lease (the lease the lost
    /// attempt used is released once it commits), counts so. If the lost attempt had not
    /// committed after all, the message redelivers when its lease ends and is acked again (a
    /// duplicate, not a loss); the audit cannot tell the two apart without reading the cursor.
    pub fn settled_before(&self) -> bool {
        (self.success && self.noop) || self.lease_refused
    }
}
