//! Pop fusion: concurrent pops claim their leases in one `log_pop_multi_v3`
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

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use tokio::sync::oneshot;
use xxhash_rust::xxh3::xxh3_64;

use crate::counters::counters;
use crate::lanes::Inbox;
use crate::storage::procs::pop::{ClaimRow, PopJob};

/// What a pop's flush answers: its rows, or why the flush failed.
pub type PopAnswer = Result<Vec<ClaimRow>, String>;

/// A pop waiting in the lanes for its flush.
pub type PopWaiter = (PopJob, oneshot::Sender<PopAnswer>);

/// Jobs one flush carries at most. Queen caps a shard's flush at 16; here one flush carries the
/// pops of every slot, paced by a linger at busy open loads, so the cap is set by what one
/// `log_pop_multi_v3` call claims cheaply rather than by a shard's share.
pub const MAX_JOBS: usize = 64;

counters! {
    /// Counters of the pop fusion path.
    PopFusionStats,
    /// Pop fusion's counters at one instant.
    PopFusionCounts {
        flushes: "queen_pop_fusion_flushes_total", "Pop fusion flushes (one commit each).";
        jobs: "queen_pop_fusion_jobs_total", "Pops claimed through fusion flushes.";
        flush_errors: "queen_pop_fusion_flush_errors_total", "Pop flushes that failed as a whole.";
        /// Wall time spent in flushes (connection, call and commit), microseconds.
        flush_us: "queen_pop_fusion_flush_microseconds_total", "Wall time of pop flushes: connection, claim and commit.";
        /// Flushes that committed fused acks in the same transaction (`QUEEN_FUSION_JOINT`).
        joint_flushes: "queen_pop_fusion_joint_flushes_total", "Pop flushes that committed fused acks in the same transaction.";
    }
}

/// Pop fusion: enqueues pops into the lanes (built by `fusion.rs`).
pub struct PopFusion {
    lanes: Inbox<PopWaiter>,
    pub stats: Arc<PopFusionStats>,
}

impl PopFusion {
    /// Pop fusion on lanes it may share with ack fusion; `stats` are the lanes' pop counters.
    pub fn on(lanes: Inbox<PopWaiter>, stats: Arc<PopFusionStats>) -> PopFusion {
        PopFusion { lanes, stats }
    }

    /// Enqueues a job and waits for the rows its flush claimed for it.
    pub async fn submit(&self, job: PopJob) -> PopAnswer {
        let key = job.candidates.first().map_or(0, |p| xxh3_64(p.as_bytes()));
        let (tx, rx) = oneshot::channel();
        if !self.lanes.send(key, (job, tx)) {
            return Err("pop fusion is shut down".into());
        }
        rx.await
            .unwrap_or_else(|_| Err("the pop flush was dropped".into()))
    }
}

/// Hands every pop its own rows, or the flush's failure (logged once, with its context).
pub fn deliver(
    stats: &PopFusionStats,
    jobs: usize,
    waiters: Vec<oneshot::Sender<PopAnswer>>,
    result: Result<Vec<Vec<ClaimRow>>, String>,
) {
    match result {
        Ok(rows) => {
            for (w, rows) in waiters.into_iter().zip(rows) {
                let _ = w.send(Ok(rows));
            }
        }
        Err(e) => {
            stats.flush_errors.fetch_add(1, Relaxed);
            tracing::error!(target: "pop-fusion", jobs, error = %e, "pop flush failed; its pops retry or answer an error");
            for w in waiters {
                let _ = w.send(Err(e.clone()));
            }
        }
    }
}
