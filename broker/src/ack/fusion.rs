//! Ack fusion: registry hits (full-batch completed acks, each one positional cursor advance)
//! from many requests commit together in one `queen.log_ack_multi_v1` transaction, so the ack
//! commit rate, and its fsyncs, collapse under load.
//!
//! - Sharded by a hash of the partition id (`QUEEN_ACK_FUSION_SHARDS`): every ack of a partition
//!   lands in one shard, so folding and per-partition commit order are intra-shard.
//! - Fire-on-idle: each shard runs one flush at a time. An arrival at an idle shard flushes at
//!   once (a flush of one row at low load); arrivals during a flush wait in the shard's inbox and
//!   the next flush takes all of them. Batch size is emergent. The inbox is a channel, so a
//!   wake-up cannot be lost; `QUEEN_ACK_FUSION_HOLD_MS` only bounds how long an idle shard sleeps
//!   between looks at its inbox (a liveness backstop, not a latency floor).
//! - Folding: requests with the same (partition, group, worker) fold into one row at the highest
//!   `batch_end`, and every folded request gets that row's verdict (sound: a cursor advance is
//!   monotone and idempotent). Different workers on one (partition, group) stay separate rows.
//! - The waiter's answer resolves only after the flush commits. Waiters never hold a pooled
//!   connection: only the shard's flush takes one, for the duration of the call.
//! - The shards are `lanes`: with pop fusion on and `QUEEN_FUSION_JOINT`, the acks and pops
//!   waiting in a lane commit together (see `lanes.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Object, Pool};
use tokio::sync::oneshot;
use tokio_postgres::{Client, Statement};

use crate::lanes::{LaneSettings, Lanes, Work};
use uuid::Uuid;
use xxhash_rust::xxh3::xxh3_64;

/// One registry hit waiting for its flush.
pub struct FusedAck {
    pub partition: Uuid,
    pub group: String,
    pub worker: String,
    pub batch_end: i64,
    pub count: i32,
}

/// What a flush decided for one waiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The cursor advanced durably; the lease is released.
    Committed { acked: i64, lease_released: bool },
    /// PostgreSQL refused the row (stale or expired lease, batch clamp); the flush committed
    /// the others. The client goes down the hash path.
    Rejected(String),
    /// The whole flush failed (pool, database, timeout); the lease will expire and the batch
    /// redeliver.
    FlushErr(String),
}

/// Counters of the fusion path.
#[derive(Default)]
pub struct FusionStats {
    pub flushes: AtomicU64,
    pub rows: AtomicU64,
    pub requests: AtomicU64,
    pub committed: AtomicU64,
    pub rejected: AtomicU64,
    pub flush_errors: AtomicU64,
    /// Wall time spent in flushes (connection, call and commit), microseconds.
    pub flush_us: AtomicU64,
}

pub struct AckFusion {
    lanes: Arc<Lanes>,
    pub stats: Arc<FusionStats>,
    /// The lanes carry pop fusion's jobs too (`QUEEN_FUSION_JOINT`): a pop enqueued after an
    /// ack of the same partition commits in the same flush or a later one, after the ack.
    joint: bool,
}

/// A hit enqueued in its lane, its verdict to come.
pub struct Enqueued(Option<oneshot::Receiver<Verdict>>);

impl Enqueued {
    /// Waits for the flush's verdict.
    pub async fn verdict(self) -> Verdict {
        match self.0 {
            Some(rx) => rx
                .await
                .unwrap_or_else(|_| Verdict::FlushErr("the flush was dropped".into())),
            None => Verdict::FlushErr("ack fusion is shut down".into()),
        }
    }
}

impl AckFusion {
    /// Starts `shards` lanes of its own flushing through `pool`. `max_rows` caps the rows of
    /// one flush (unbounded normally; 1 turns fusion into one commit per ack, for gate tests).
    pub fn start(pool: Pool, shards: usize, hold: Duration, max_rows: usize) -> AckFusion {
        let stats = Arc::new(FusionStats::default());
        let settings = LaneSettings {
            shards,
            hold,
            linger: Duration::ZERO,
            linger_min_rate: 0,
            max_ack_rows: max_rows.max(1),
            ack_stats: stats.clone(),
            pop_stats: Arc::default(),
        };
        AckFusion::on(Lanes::start(pool, settings), stats)
    }

    /// Ack fusion on lanes it may share with pop fusion; `stats` are the lanes' ack counters.
    pub fn on(lanes: Arc<Lanes>, stats: Arc<FusionStats>) -> AckFusion {
        AckFusion {
            lanes,
            stats,
            joint: false,
        }
    }

    /// Marks the lanes as shared with pop fusion (see `joint`).
    pub fn sharing_lanes_with_pops(mut self) -> AckFusion {
        self.joint = true;
        self
    }

    /// Whether pops of a partition commit in the lane of its acks, after them.
    pub fn joint(&self) -> bool {
        self.joint
    }

    /// How many lanes flush.
    pub fn shards(&self) -> usize {
        self.lanes.shards()
    }

    /// Enqueues a hit and waits for its flush's verdict. Every ack of a partition goes to one
    /// lane, so folding and per-partition commit order stay within a lane.
    pub async fn submit(&self, ack: FusedAck) -> Verdict {
        self.enqueue(ack).verdict().await
    }

    /// Enqueues a hit now (in its partition's lane, where pop fusion keys a pop whose first
    /// candidate is that partition); its verdict comes with `Enqueued::verdict`.
    pub fn enqueue(&self, ack: FusedAck) -> Enqueued {
        let key = xxh3_64(ack.partition.as_bytes());
        let (tx, rx) = oneshot::channel();
        self.stats.requests.fetch_add(1, Relaxed);
        Enqueued(self.lanes.send(key, Work::Ack(ack, tx)).then_some(rx))
    }
}

type Waiter = (FusedAck, oneshot::Sender<Verdict>);

/// Takes waiters covering at most `max_rows` folded rows, in arrival order.
pub fn take_batch(backlog: &mut Vec<Waiter>, max_rows: usize) -> Vec<Waiter> {
    let mut keys: Vec<(Uuid, &str, &str)> = Vec::new();
    let mut cut = backlog.len();
    for (i, (a, _)) in backlog.iter().enumerate() {
        let key = (a.partition, a.group.as_str(), a.worker.as_str());
        if !keys.contains(&key) {
            if keys.len() == max_rows {
                cut = i;
                break;
            }
            keys.push(key);
        }
    }
    let rest = backlog.split_off(cut);
    std::mem::replace(backlog, rest)
}

/// One row of a flush: the folded requests it answers.
pub struct Row {
    partition: Uuid,
    group: String,
    worker: String,
    batch_end: i64,
    count: i32,
    waiters: Vec<oneshot::Sender<Verdict>>,
}

/// Folds same (partition, group, worker) requests into one row at the highest batch_end.
pub fn fold(batch: Vec<Waiter>) -> Vec<Row> {
    let mut index: HashMap<(Uuid, String, String), usize> = HashMap::new();
    let mut rows: Vec<Row> = Vec::new();
    for (a, tx) in batch {
        let key = (a.partition, a.group.clone(), a.worker.clone());
        match index.get(&key) {
            Some(&i) => {
                let r = &mut rows[i];
                r.batch_end = r.batch_end.max(a.batch_end);
                r.count = r.count.max(a.count);
                r.waiters.push(tx);
            }
            None => {
                index.insert(key, rows.len());
                rows.push(Row {
                    partition: a.partition,
                    group: a.group,
                    worker: a.worker,
                    batch_end: a.batch_end,
                    count: a.count,
                    waiters: vec![tx],
                });
            }
        }
    }
    rows
}

/// Hands every folded request its row's verdict, or the flush's failure (logged once).
pub fn deliver(stats: &FusionStats, rows: Vec<Row>, result: Result<Vec<Verdict>, String>) {
    match result {
        Ok(verdicts) => {
            for (row, verdict) in rows.into_iter().zip(verdicts) {
                match &verdict {
                    Verdict::Committed { .. } => {
                        stats.committed.fetch_add(row.waiters.len() as u64, Relaxed)
                    }
                    _ => stats.rejected.fetch_add(row.waiters.len() as u64, Relaxed),
                };
                // Every folded request receives the row's verdict (sound by monotonicity).
                for w in row.waiters {
                    let _ = w.send(verdict.clone());
                }
            }
        }
        Err(e) => {
            stats.flush_errors.fetch_add(1, Relaxed);
            tracing::error!(target: "ack-fusion", rows = rows.len(), error = %e, "fusion flush failed; the batches will redeliver");
            for row in rows {
                for w in row.waiters {
                    let _ = w.send(Verdict::FlushErr(e.clone()));
                }
            }
        }
    }
}

/// The fused ack statement, prepared (once per connection) on `db`.
pub async fn prepare_multi(db: &Object) -> Result<Statement, String> {
    db.prepare_cached(
        "SELECT ordinal, ok, error, acked, lease_released \
         FROM queen.log_ack_multi_v1($1, $2, $3, $4, $5)",
    )
    .await
    .map_err(|e| format!("log_ack_multi_v1: {e}"))
}

/// One `log_ack_multi_v1` call on its own (one commit).
pub async fn call_multi(db: &Object, rows: &[Row]) -> Result<Vec<Verdict>, String> {
    let stmt = prepare_multi(db).await?;
    query_multi(db, &stmt, rows).await
}

/// Runs the prepared fused ack statement for `rows`; verdicts realigned to the rows by input
/// ordinal. Its first poll sends the query, so a joint flush can pipeline it.
pub async fn query_multi(
    db: &Client,
    stmt: &Statement,
    rows: &[Row],
) -> Result<Vec<Verdict>, String> {
    let pids: Vec<Uuid> = rows.iter().map(|r| r.partition).collect();
    let groups: Vec<&str> = rows.iter().map(|r| r.group.as_str()).collect();
    let ends: Vec<i64> = rows.iter().map(|r| r.batch_end).collect();
    let workers: Vec<&str> = rows.iter().map(|r| r.worker.as_str()).collect();
    let counts: Vec<i32> = rows.iter().map(|r| r.count).collect();
    let out = db
        .query(stmt, &[&pids, &groups, &ends, &workers, &counts])
        .await
        .map_err(|e| format!("log_ack_multi_v1: {e}"))?;
    let mut verdicts = vec![Verdict::FlushErr("no verdict for this row".into()); rows.len()];
    for r in out {
        let i = r.get::<_, i32>("ordinal") as usize - 1;
        verdicts[i] = if r.get::<_, bool>("ok") {
            Verdict::Committed {
                acked: r.get("acked"),
                lease_released: r.get("lease_released"),
            }
        } else {
            Verdict::Rejected(r.get::<_, Option<String>>("error").unwrap_or_default())
        };
    }
    Ok(verdicts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(p: Uuid, g: &str, w: &str, end: i64) -> (Waiter, oneshot::Receiver<Verdict>) {
        let (tx, rx) = oneshot::channel();
        (
            (
                FusedAck {
                    partition: p,
                    group: g.into(),
                    worker: w.into(),
                    batch_end: end,
                    count: 1,
                },
                tx,
            ),
            rx,
        )
    }

    #[test]
    fn same_worker_folds_to_the_highest_end_other_workers_stay_apart() {
        let p = Uuid::now_v7();
        let batch = vec![
            waiter(p, "g", "w1", 5).0,
            waiter(p, "g", "w1", 9).0,
            waiter(p, "g", "w2", 7).0,
            waiter(p, "h", "w1", 3).0,
        ];
        let rows = fold(batch);
        assert_eq!(rows.len(), 3);
        assert_eq!((rows[0].batch_end, rows[0].waiters.len()), (9, 2));
        assert_eq!((rows[1].worker.as_str(), rows[1].batch_end), ("w2", 7));
        assert_eq!((rows[2].group.as_str(), rows[2].batch_end), ("h", 3));
    }

    #[test]
    fn max_rows_cuts_batches_by_folded_rows() {
        let p = Uuid::now_v7();
        let mut backlog = vec![
            waiter(p, "g", "w1", 1).0,
            waiter(p, "g", "w1", 2).0,
            waiter(p, "g", "w2", 3).0,
        ];
        let first = take_batch(&mut backlog, 1);
        assert_eq!(first.len(), 2, "both requests of the first row");
        assert_eq!(backlog.len(), 1);
        let all = take_batch(&mut backlog, usize::MAX);
        assert_eq!(all.len(), 1);
        assert!(backlog.is_empty());
    }
}
