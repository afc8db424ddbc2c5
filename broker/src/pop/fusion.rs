//! Pop fusion: concurrent pops claim their leases in one `queen.log_pop_multi_v2`
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

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot};
use xxhash_rust::xxh3::xxh3_64;

use super::claim::{claim_jobs, ClaimRow, PopJob};

/// Jobs one flush carries at most.
pub const MAX_JOBS: usize = 16;

type Answer = Result<Vec<ClaimRow>, String>;
type Waiter = (PopJob, oneshot::Sender<Answer>);

/// Counters of the pop fusion path.
#[derive(Default)]
pub struct PopFusionStats {
    pub flushes: AtomicU64,
    pub jobs: AtomicU64,
    pub flush_errors: AtomicU64,
}

pub struct PopFusion {
    shards: Vec<mpsc::UnboundedSender<Waiter>>,
    pub stats: Arc<PopFusionStats>,
}

impl PopFusion {
    /// Starts `shards` shard tasks flushing through `pool`.
    pub fn start(pool: Pool, shards: usize, hold: Duration) -> PopFusion {
        let stats = Arc::new(PopFusionStats::default());
        let senders = (0..shards.max(1))
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(shard_loop(rx, pool.clone(), stats.clone(), hold));
                tx
            })
            .collect();
        PopFusion {
            shards: senders,
            stats,
        }
    }

    /// Enqueues a job and waits for the rows its flush claimed for it.
    pub async fn submit(&self, job: PopJob) -> Answer {
        let key = job.candidates.first().map_or(0, |p| xxh3_64(p.as_bytes()));
        let shard = (key % self.shards.len() as u64) as usize;
        let (tx, rx) = oneshot::channel();
        if self.shards[shard].send((job, tx)).is_err() {
            return Err("pop fusion is shut down".into());
        }
        rx.await
            .unwrap_or_else(|_| Err("the pop flush was dropped".into()))
    }
}

async fn shard_loop(
    mut inbox: mpsc::UnboundedReceiver<Waiter>,
    pool: Pool,
    stats: Arc<PopFusionStats>,
    hold: Duration,
) {
    let mut batch: Vec<Waiter> = Vec::with_capacity(MAX_JOBS);
    loop {
        if batch.is_empty() {
            match tokio::time::timeout(hold, inbox.recv()).await {
                Ok(Some(w)) => batch.push(w),
                Ok(None) => return,
                Err(_) => continue, // the backstop tick: look again
            }
        }
        while batch.len() < MAX_JOBS {
            match inbox.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        flush(&pool, &stats, std::mem::take(&mut batch)).await;
    }
}

async fn flush(pool: &Pool, stats: &PopFusionStats, batch: Vec<Waiter>) {
    stats.flushes.fetch_add(1, Relaxed);
    stats.jobs.fetch_add(batch.len() as u64, Relaxed);
    let (jobs, waiters): (Vec<PopJob>, Vec<oneshot::Sender<Answer>>) = batch.into_iter().unzip();
    let result = match pool.get().await {
        Ok(db) => {
            let refs: Vec<&PopJob> = jobs.iter().collect();
            claim_jobs(&db, &refs).await.map_err(|e| e.to_string())
        }
        Err(e) => Err(format!("no database connection: {e}")),
    };
    match result {
        Ok(rows) => {
            for (w, rows) in waiters.into_iter().zip(rows) {
                let _ = w.send(Ok(rows));
            }
        }
        Err(e) => {
            stats.flush_errors.fetch_add(1, Relaxed);
            tracing::error!(target: "pop-fusion", jobs = jobs.len(), error = %e, "pop flush failed; its pops retry or answer an error");
            for w in waiters {
                let _ = w.send(Err(e.clone()));
            }
        }
    }
}
