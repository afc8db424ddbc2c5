//! Bindings of `sql/procedures/pop.sql`: claiming jobs in one transaction
//! (`log_pop_multi_v3`), the SQL wildcard (`log_pop_wildcard_v3`), the hotlist's seed
//! (`log_pop_candidates_v3`) and resolving a named partition (`log_pop_scope_v2`). Rows come
//! back typed; nothing here knows about HTTP or about the hotlist.

use std::sync::Arc;
use std::time::SystemTime;

use deadpool_postgres::Object;
use tokio_postgres::{Client, Row, Statement};
use uuid::Uuid;

use crate::pop::subscription::Subscription;
use crate::segment_cache::DecodedSegment;
use crate::storage::DbError;

/// One pop's claim: which group, under which leaseId, from which candidate partitions.
pub struct PopJob {
    pub group: String,
    pub lease_id: String,
    pub batch: i32,
    pub max_partitions: i32,
    pub lease_seconds: Option<i32>,
    pub auto_ack: bool,
    pub candidates: Vec<Uuid>,
    /// Segments of the candidates this broker holds decoded (their blobs are not shipped).
    pub cached: Vec<(Uuid, Arc<DecodedSegment>)>,
}

/// One segment row of a claimed span.
pub struct ClaimRow {
    pub partition_id: Uuid,
    pub queue_name: String,
    pub partition_name: String,
    pub span_start: i64,
    pub span_end: i64,
    pub attempt: i32,
    pub lease_expires_at: Option<SystemTime>,
    pub last_offset: i64,
    pub seg_base: i64,
    pub seg_created: SystemTime,
    pub segment: Stored,
}

/// How a claimed row's segment reached the broker.
pub enum Stored {
    /// PostgreSQL shipped the blob: no job of the transaction listed it as held.
    Shipped(Vec<u8>),
    /// Some job of the transaction listed it as held; this is that job's copy. The flush's
    /// jobs share one held list in SQL, so a waiter may get a segment another waiter held.
    Held(Arc<DecodedSegment>),
    /// Neither shipped nor listed: a procedure and caller that disagree (a defect, reported).
    Missing,
}

const COLUMNS: &str = "ordinal, partition_id, queue_name, partition_name, span_start, span_end, \
                       attempt, lease_expires_at, last_offset, seg_base, seg_created, blob";

fn claim_row(row: &Row, held: &[&(Uuid, Arc<DecodedSegment>)]) -> ClaimRow {
    let partition_id: Uuid = row.get(1);
    let seg_base: i64 = row.get(9);
    let segment = match row.get::<_, Option<Vec<u8>>>(11) {
        Some(blob) => Stored::Shipped(blob),
        None => held
            .iter()
            .find(|(pid, seg)| *pid == partition_id && seg.base == seg_base)
            .map_or(Stored::Missing, |(_, seg)| Stored::Held(seg.clone())),
    };
    ClaimRow {
        partition_id,
        queue_name: row.get(2),
        partition_name: row.get(3),
        span_start: row.get(4),
        span_end: row.get(5),
        attempt: row.get(6),
        lease_expires_at: row.get(7),
        last_offset: row.get(8),
        seg_base,
        seg_created: row.get(10),
        segment,
    }
}

/// Claims every job in one `log_pop_multi_v3` transaction; rows per job, in job order.
pub async fn pop_multi_once(db: &Object, jobs: &[&PopJob]) -> Result<Vec<Vec<ClaimRow>>, DbError> {
    let stmt = prepare_pop_multi(db).await?;
    pop_multi(db, &stmt, jobs).await
}

/// The fused claim statement, prepared (once per connection) on `db`.
pub async fn prepare_pop_multi(db: &Object) -> Result<Statement, DbError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM queen.log_pop_multi_v3($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
    );
    db.prepare_cached(&sql)
        .await
        .map_err(|e| DbError::from_pg("log_pop_multi_v3", e))
}

/// Runs the prepared claim for `jobs` (see `pop_multi_once`). Its first poll sends the query, so a
/// joint flush can pipeline it.
pub async fn pop_multi(
    db: &Client,
    stmt: &Statement,
    jobs: &[&PopJob],
) -> Result<Vec<Vec<ClaimRow>>, DbError> {
    let groups: Vec<&str> = jobs.iter().map(|j| j.group.as_str()).collect();
    let lease_ids: Vec<&str> = jobs.iter().map(|j| j.lease_id.as_str()).collect();
    let batches: Vec<i32> = jobs.iter().map(|j| j.batch).collect();
    let max_parts: Vec<i32> = jobs.iter().map(|j| j.max_partitions).collect();
    let leases: Vec<Option<i32>> = jobs.iter().map(|j| j.lease_seconds).collect();
    let auto_acks: Vec<bool> = jobs.iter().map(|j| j.auto_ack).collect();
    let (mut cand_jobs, mut cand_pids) = (Vec::new(), Vec::new());
    let (mut cached_pids, mut cached_bases) = (Vec::new(), Vec::new());
    for (i, job) in jobs.iter().enumerate() {
        for pid in &job.candidates {
            cand_jobs.push(i as i32 + 1);
            cand_pids.push(*pid);
        }
        for (pid, seg) in &job.cached {
            cached_pids.push(*pid);
            cached_bases.push(seg.base);
        }
    }
    let rows = db
        .query(
            stmt,
            &[
                &groups,
                &lease_ids,
                &batches,
                &max_parts,
                &leases,
                &auto_acks,
                &cand_jobs,
                &cand_pids,
                &cached_pids,
                &cached_bases,
            ],
        )
        .await
        .map_err(|e| DbError::from_pg("log_pop_multi_v3", e))?;
    let held: Vec<&(Uuid, Arc<DecodedSegment>)> = jobs.iter().flat_map(|j| &j.cached).collect();
    let mut out: Vec<Vec<ClaimRow>> = jobs.iter().map(|_| Vec::new()).collect();
    for row in &rows {
        let job = row.get::<_, i32>(0) as usize - 1;
        out[job].push(claim_row(row, &held));
    }
    Ok(out)
}

/// Where a wildcard pop without the hotlist looks: one queue, or discovery by namespace/task.
pub enum Scope<'a> {
    Queue(&'a str),
    Discover { namespace: &'a str, task: &'a str },
}

/// Pop arguments shared by every call shape.
pub struct Claim<'a> {
    pub group: &'a str,
    pub lease_id: &'a str,
    pub batch: i32,
    pub max_partitions: i32,
    pub lease_seconds: Option<i32>,
    pub subscription: &'a Subscription,
    pub auto_ack: bool,
}

/// The bounded SQL candidate list: `min(max(partitions x 4, 64), 512)`.
pub fn candidate_limit(max_partitions: i32) -> i32 {
    (max_partitions.saturating_mul(4)).clamp(64, 512)
}

/// One `log_pop_wildcard_v3` call: candidates listed and claimed in SQL.
pub async fn pop_wildcard(
    db: &Object,
    tenant: Uuid,
    scope: &Scope<'_>,
    c: &Claim<'_>,
) -> Result<Vec<ClaimRow>, DbError> {
    let (queue, namespace, task) = match scope {
        Scope::Queue(q) => (Some(*q), "", ""),
        Scope::Discover { namespace, task } => (None, *namespace, *task),
    };
    let sql = format!(
        "SELECT {COLUMNS} FROM queen.log_pop_wildcard_v3($1, $2, $3, $4, $5, $6, $7, $8, $9, \
         $10, $11, $12, $13)"
    );
    let stmt = db
        .prepare_cached(&sql)
        .await
        .map_err(|e| DbError::from_pg("log_pop_wildcard_v3", e))?;
    let rows = db
        .query(
            &stmt,
            &[
                &tenant,
                &queue,
                &namespace,
                &task,
                &c.group,
                &c.lease_id,
                &c.batch,
                &c.max_partitions,
                &c.lease_seconds,
                &c.subscription.is_new(),
                &c.subscription.from(),
                &c.auto_ack,
                &candidate_limit(c.max_partitions),
            ],
        )
        .await
        .map_err(|e| DbError::from_pg("log_pop_wildcard_v3", e))?;
    Ok(rows.iter().map(|r| claim_row(r, &[])).collect())
}

/// What a seed found: the candidates, and when the first held-back partition (a queue's
/// `delayedProcessing` or `windowBuffer`) becomes ready, if one is.
pub struct Seeded {
    pub candidates: Vec<Uuid>,
    pub next_ready: Option<SystemTime>,
}

/// The hotlist's seed for `group` on `queue`: provisions the queue, records a `new` or `from`
/// subscription, and lists at most `limit` candidates. Reads only once the queue exists.
pub async fn pop_candidates(
    db: &Object,
    tenant: Uuid,
    queue: &str,
    group: &str,
    subscription: &Subscription,
    limit: i32,
) -> Result<Seeded, DbError> {
    let stmt = db
        .prepare_cached(
            "SELECT c.candidates, c.next_ready FROM queen.log_pop_candidates_v3(\
             queen.log_pop_scope_v2($1, $2, '', '', $3, $4, $6, true), $3, $5) c",
        )
        .await
        .map_err(|e| DbError::from_pg("log_pop_candidates_v3", e))?;
    let row = db
        .query_one(
            &stmt,
            &[
                &tenant,
                &queue,
                &group,
                &subscription.is_new(),
                &limit,
                &subscription.from(),
            ],
        )
        .await
        .map_err(|e| DbError::from_pg("log_pop_candidates_v3", e))?;
    Ok(Seeded {
        candidates: row.get(0),
        next_ready: row.get(1),
    })
}

/// Resolves a named partition (provisioning its queue and recording a `new` or `from`
/// subscription, as a pop does); `None` when the partition does not exist.
pub async fn pop_scope_partition(
    db: &Object,
    tenant: Uuid,
    queue: &str,
    partition: &str,
    group: &str,
    subscription: &Subscription,
) -> Result<Option<Uuid>, DbError> {
    let stmt = db
        .prepare_cached(
            "SELECT p.id FROM unnest(queen.log_pop_scope_v2($1, $2, '', '', $4, $5, $6, true)) \
             AS s(queue_id) JOIN queen.log_partitions p ON p.queue_id = s.queue_id \
             WHERE p.name = $3",
        )
        .await
        .map_err(|e| DbError::from_pg("log_pop_scope_v2", e))?;
    let row = db
        .query_opt(
            &stmt,
            &[
                &tenant,
                &queue,
                &partition,
                &group,
                &subscription.is_new(),
                &subscription.from(),
            ],
        )
        .await
        .map_err(|e| DbError::from_pg("log_pop_scope_v2", e))?;
    Ok(row.map(|r| r.get(0)))
}
