//! Pop fusion: concurrent pops claim their leases in one `queen.log_pop_multi_v3`
//! transaction, so with pops of one message the commits per delivered message fall below one.
//!
//! - Keyed by a hash of the job's first candidate partition, so a pop lands in the lanes' slot
//!   of that partition's acks.
//! - Fire-on-idle, like ack fusion (`lanes`): a job arriving at an idle engine flushes at once or
//!   after a linger bounded by `QUEEN_POP_FUSION_HOLD_MS` (separate lanes) or
//!   `QUEEN_ACK_FUSION_HOLD_MS` (joint ones); jobs arriving during a flush go in the next one,
//!   at most `MAX_JOBS` per flush. How many flushes run at once is measured
//!   (`QUEEN_POP_FUSION_SHARDS` fixes it for separate lanes).
//! - Jobs carry disjoint candidates (the hotlist hands each partition to one pop); the procedure
//!   visits (partition, group) pairs in ascending order and answers rows by job ordinal, so each
//!   waiter gets exactly its own rows back.
//! - Waiters hold no pooled connection; only the flush takes one, for the call.
//! - With ack fusion on and `QUEEN_FUSION_JOINT`, the pops and acks waiting in the lanes commit
//!   together (see `lanes/mod.rs`).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use deadpool_postgres::Pool;
use tokio::sync::oneshot;
use xxhash_rust::xxh3::xxh3_64;

use super::claim::PopJob;
use crate::ack::fusion::FusionStats;
use crate::demand::Demand;
use crate::lanes::control::{ConcurrencyMode, Linger};
use crate::lanes::{LaneSettings, Lanes, PopAnswer, Work};

/// Jobs one flush carries at most. Queen caps a shard's flush at 16; here one flush carries the
/// pops of every slot, paced by a linger at busy open loads, so the cap is set by what one
/// `log_pop_multi_v3` call claims cheaply rather than by a shard's share.
pub const MAX_JOBS: usize = 64;

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
    /// Starts lanes of its own flushing through `pool`.
    pub fn start(
        pool: Pool,
        concurrency: ConcurrencyMode,
        linger: Linger,
        demand: Arc<Demand>,
    ) -> PopFusion {
        let stats = Arc::new(PopFusionStats::default());
        let settings = LaneSettings {
            concurrency,
            linger,
            max_ack_rows: 1,
            demand,
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
