//! Ack fusion: registry hits (full-batch completed acks, each one positional cursor advance)
//! from many requests commit together in one `log_ack_multi_v1` transaction, so the ack
//! commit rate, and its fsyncs, collapse under load.
//!
//! - Keyed by a hash of the partition id: every ack of a partition lands in one slot of the
//!   lanes, so folding and per-partition commit order hold within a slot.
//! - Fire-on-idle (`lanes`): an arrival at an idle engine flushes at once or after a short
//!   linger that grows with the arrival rate, never longer than `QUEEN_ACK_FUSION_HOLD_MS`;
//!   arrivals during a flush go in the next one. Batch size is emergent. How many flushes run
//!   at once is measured, not configured (`QUEEN_ACK_FUSION_SHARDS` fixes it).
//! - Folding: requests with the same (partition, group, lease_id) fold into one row at the highest
//!   `batch_end`, and every folded request gets that row's verdict (sound: a cursor advance is
//!   monotone and idempotent). Different leases on one (partition, group) stay separate rows.
//! - The waiter's answer resolves only after the flush commits. Waiters never hold a pooled
//!   connection: only a flush takes one, for the duration of the call.
//! - With pop fusion on and `QUEEN_FUSION_JOINT`, the acks and pops waiting in the lanes commit
//!   together (see `lanes/mod.rs`).

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use deadpool_postgres::Object;
use tokio::sync::oneshot;
use tokio_postgres::{Client, Statement};

use crate::counters::counters;
use crate::lanes::{Inbox, LaneGauges};
use crate::storage::procs;
use uuid::Uuid;
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// One registry hit waiting for its flush.
pub struct FusedAck {
    pub partition: Uuid,
    pub group: String,
    pub lease_id: String,
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

counters! {
    /// Counters of the ack fusion path.
    FusionStats,
    /// Ack fusion's counters at one instant.
    FusionCounts {
        flushes: "queen_ack_fusion_flushes_total", "Fusion flushes (one commit each).";
        rows: "queen_ack_fusion_rows_total", "Folded rows committed by flushes.";
        requests: "queen_ack_fusion_requests_total", "Registry hits enqueued for fusion.";
        committed: "queen_ack_fusion_committed_total", "Fused acks answered Committed.";
        rejected: "queen_ack_fusion_rejected_total", "Fused acks answered Rejected (hash path).";
        flush_errors: "queen_ack_fusion_flush_errors_total", "Flushes that failed as a whole.";
        /// Wall time spent in flushes (connection, call and commit), microseconds.
        flush_us: "queen_ack_fusion_flush_microseconds_total", "Wall time of flushes: connection, call and commit.";
    }
}

/// Ack fusion: enqueues registry hits into the lanes (built by `fusion.rs`).
pub struct AckFusion {
    lanes: Inbox<AckWaiter>,
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
    /// Ack fusion on lanes it may share with pop fusion; `stats` are the lanes' ack counters.
    pub fn on(lanes: Inbox<AckWaiter>, stats: Arc<FusionStats>) -> AckFusion {
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

    /// The gauges of the lanes this fusion enqueues into.
    pub fn gauges(&self) -> &LaneGauges {
        self.lanes.gauges()
    }

    /// How many flushes the lanes may run at once now.
    pub fn concurrency(&self) -> usize {
        self.lanes.concurrency()
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
        Enqueued(self.lanes.send(key, (ack, tx)).then_some(rx))
    }
}

/// A hit waiting in the lanes for its flush.
pub type AckWaiter = (FusedAck, oneshot::Sender<Verdict>);

/// A hash of the key `fold` folds requests by: (partition, group, lease_id), hashed in place
/// (the lanes take it for every ack they are handed).
pub fn fold_key(a: &FusedAck) -> u64 {
    let mut h = Xxh3::new();
    h.update(a.partition.as_bytes());
    h.update(a.group.as_bytes());
    h.update(&[0]);
    h.update(a.lease_id.as_bytes());
    h.digest()
}

/// One row of a flush: the folded requests it answers.
pub struct Row {
    partition: Uuid,
    group: String,
    lease_id: String,
    batch_end: i64,
    count: i32,
    waiters: Vec<oneshot::Sender<Verdict>>,
}

/// Folds same (partition, group, lease_id) requests into one row at the highest batch_end.
pub fn fold(batch: Vec<AckWaiter>) -> Vec<Row> {
    let mut index: HashMap<(Uuid, String, String), usize> = HashMap::new();
    let mut rows: Vec<Row> = Vec::new();
    for (a, tx) in batch {
        let key = (a.partition, a.group.clone(), a.lease_id.clone());
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
                    lease_id: a.lease_id,
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
    procs::ack::prepare_ack_multi(db)
        .await
        .map_err(|e| e.to_string())
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
    let lease_ids: Vec<&str> = rows.iter().map(|r| r.lease_id.as_str()).collect();
    let counts: Vec<i32> = rows.iter().map(|r| r.count).collect();
    let columns = procs::ack::AckMulti {
        partitions: &pids,
        groups: &groups,
        batch_ends: &ends,
        lease_ids: &lease_ids,
        counts: &counts,
    };
    let out = procs::ack::ack_multi(db, stmt, &columns)
        .await
        .map_err(|e| e.to_string())?;
    let mut verdicts = vec![Verdict::FlushErr("no verdict for this row".into()); rows.len()];
    for r in out {
        let i = r.ordinal as usize - 1;
        verdicts[i] = if r.ok {
            Verdict::Committed {
                acked: r.acked.unwrap_or_default(),
                lease_released: r.lease_released.unwrap_or_default(),
            }
        } else {
            Verdict::Rejected(r.error.unwrap_or_default())
        };
    }
    Ok(verdicts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(p: Uuid, g: &str, w: &str, end: i64) -> (AckWaiter, oneshot::Receiver<Verdict>) {
        let (tx, rx) = oneshot::channel();
        (
            (
                FusedAck {
                    partition: p,
                    group: g.into(),
                    lease_id: w.into(),
                    batch_end: end,
                    count: 1,
                },
                tx,
            ),
            rx,
        )
    }

    #[test]
    fn same_lease_folds_to_the_highest_end_other_leases_stay_apart() {
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
        assert_eq!((rows[1].lease_id.as_str(), rows[1].batch_end), ("w2", 7));
        assert_eq!((rows[2].group.as_str(), rows[2].batch_end), ("h", 3));
    }
}
