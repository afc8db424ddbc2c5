//! Pop fusion: concurrent pops claim their leases in one `queen.log_pop_multi_v3`
//! transaction, so with pops of one message the commits per delivered message fall below one.
//!
//! - Sharded (`QUEEN_POP_FUSION_SHARDS`) by a hash of the job's candidates' first partition, so
//!   pops of one queue spread over the shards.
//! - Fire-on-idle, like ack fusion: a shard runs one flush at a time; a job arriving at an idle
//!   shard flushes at once, jobs arriving during a flush go in the next one, at most
//!   `MAX_JOBS` per flush. `QUEEN_POP_FUSION_HOLD_MS` only bounds how long an idle shard sleeps
//!   between looks at its inbox.
//! - Jobs carry disjoint candidates (the hotlist hands each partition to one pop); the procedure
//!   visits (partition, group) pairs in ascending order and answers rows by job ordinal, so each
//!   waiter gets exactly its own rows back.
//! - Waiters hold no pooled connection; only the flush takes one, for the call.
//! - The shards are `lanes`: with ack fusion on and `QUEEN_FUSION_JOINT`, the pops and acks
//!   waiting in a lane commit together (see `lanes.rs`).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::oneshot;
use xxhash_rust::xxh3::xxh3_64;

use super::claim::PopJob;
use crate::ack::fusion::FusionStats;
use crate::lanes::{LaneSettings, Lanes, PopAnswer, Work};

/// Jobs one flush carries at most.
pub const MAX_JOBS: usize = 16;

/// Counters of the pop fusion path.
#[derive(Default)]
pub struct PopFusionStats {
    pub flushes: AtomicU64,
    pub jobs: AtomicU64,
    pub flush_errors: AtomicU64,
    /// Wall time spent in flushes (connection, call and commit), microseconds.
    pub flush_us: AtomicU64,
    /// Flushes that committed fused acks in the same transaction (`QUEEN_FUSION_JOINT`).
    pub joint_flushes: AtomicU64,
}

pub struct PopFusion {
    lanes: Arc<Lanes>,
    pub stats: Arc<PopFusionStats>,
}

impl PopFusion {
    /// Starts `shards` lanes of its own flushing through `pool`.
    pub fn start(pool: Pool, shards: usize, hold: Duration) -> PopFusion {
        let stats = Arc::new(PopFusionStats::default());
        let settings = LaneSettings {
            shards,
            hold,
            linger: Duration::ZERO,
            linger_min_rate: 0,
            max_ack_rows: 1,
            ack_stats: Arc::new(FusionStats::default()),
            pop_stats: stats.clone(),
        };
        PopFusion::on(Lanes::start(pool, settings), stats)
    }

    /// Pop fusion on lanes it may share with ack fusion; `stats` are the lanes' pop counters.
    pub fn on(lanes: Arc<Lanes>, stats: Arc<PopFusionStats>) -> PopFusion {
        PopFusion { lanes, stats }
    }

    /// Enqueues a job and waits for the rows its flush claimed for it.
    pub async fn submit(&self, job: PopJob) -> PopAnswer {
        let key = job.candidates.first().map_or(0, |p| xxh3_64(p.as_bytes()));
        let (tx, rx) = oneshot::channel();
        if !self.lanes.send(key, Work::Pop(job, tx)) {
            return Err("pop fusion is shut down".into());
        }
        rx.await
            .unwrap_or_else(|_| Err("the pop flush was dropped".into()))
    }
}
