//! What each producer and consumer of a cell round is told to do, as plain data: built by the
//! spawner from the scenario, read by the shared worker loops and by each driver's calls.

use std::time::Duration;

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
    /// How many producers the scenario runs in all (across shards): the round robin and the
    /// open-loop phases are shared among them.
    pub producers: u32,
    pub random_partitions: bool,
    /// Makes transactionIds unique across cells and rounds.
    pub tag: String,
    pub seed: u64,
}

/// What one consumer does.
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
pub const DRAIN_POP_BATCH: u32 = 1000;
