//! The pop domain: which partitions a pop tries, how it claims them, and the decoded frames it
//! delivers. Knows nothing of HTTP (`routes::pop` parses requests and writes answers).
//!
//! - A named partition is claimed directly (its id resolved once and cached).
//! - A wildcard pop over a queue asks the `hotlist` for a few candidate partitions and claims
//!   from them; with nothing listed, a long-poll parks without database work (the pending
//!   gate) and anything else runs the bounded SQL wildcard. `QUEEN_HOTLIST=0` always runs the
//!   SQL wildcard.
//! - A discovery pop (namespace/task) runs the SQL wildcard over the matching queues.
//! - Claims go through pop `fusion` (many pops, one transaction) or, with
//!   `QUEEN_POP_FUSION=0`, one `log_pop_multi_v3` call each. Segments come from the
//!   `segment_cache` when held; PostgreSQL ships only the blobs the broker lacks.
//! - A queue's `delayedProcessing` and `windowBuffer` are applied by PostgreSQL alone (every
//!   path ends in `log_pop_multi_v2`, to which `log_pop_multi_v3` hands such queues, and the
//!   candidate lists leave held-back partitions out): the broker does not know them, so a hint
//!   that names a held-back partition only costs a claim that finds nothing. The seed says when
//!   the first held-back partition becomes ready; the hotlist reseeds then, so a parked
//!   long-poll delivers at its next re-check.

pub mod fusion;
pub mod hotlist;
pub mod stats;
pub mod subscription;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use uuid::Uuid;

use deadpool_postgres::{Object, Pool};

use crate::config::Config;
use crate::crypto::Sealer;
use crate::readiness::Readiness;
use crate::segment_cache::SegmentCache;
use crate::segment_cache::{DecodedSegment, FrameView};
use crate::storage::procs::pop::{self as claim, Claim, ClaimRow, PopJob, Scope, Stored};
use crate::storage::timeline::Timeline;
use crate::storage::DbError;
use fusion::PopFusion;
use hotlist::{QueueKey, Take};
use stats::PopStats;
pub use subscription::Subscription;

/// Why a pop could not be answered.
#[derive(Debug)]
pub enum PopError {
    /// The database failed (no connection, a statement failed).
    Db(DbError),
    /// A pop fusion flush failed as a whole (the flush logged why).
    Flush(String),
    /// A stored segment could not be decoded.
    Corrupt(String),
}

impl From<DbError> for PopError {
    fn from(e: DbError) -> PopError {
        PopError::Db(e)
    }
}

impl std::fmt::Display for PopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PopError::Db(e) => e.fmt(f),
            PopError::Flush(e) => write!(f, "pop: {e}"),
            PopError::Corrupt(e) => f.write_str(e),
        }
    }
}

/// Which partitions a pop may lease.
#[derive(Debug, Clone)]
pub enum Target {
    Partition {
        queue: String,
        partition: String,
    },
    Queue {
        queue: String,
        partitions: i32,
    },
    Discover {
        namespace: String,
        task: String,
        partitions: i32,
    },
}

/// A validated pop request.
#[derive(Debug, Clone)]
pub struct PopParams {
    pub target: Target,
    pub batch: i32,
    pub wait: bool,
    pub timeout: Duration,
    pub group: Option<String>,
    pub subscription: Subscription,
    pub auto_ack: bool,
    pub lease_seconds: Option<i32>,
}

impl PopParams {
    /// The consumer group's name in the consumer table (queue mode has its own).
    pub fn group_name(&self) -> &str {
        self.group
            .as_deref()
            .unwrap_or(ackbench_wire::QUEUE_MODE_GROUP)
    }

    fn max_partitions(&self) -> i32 {
        match self.target {
            Target::Partition { .. } => 1,
            Target::Queue { partitions, .. } | Target::Discover { partitions, .. } => partitions,
        }
    }
}

/// The span one partition delivered, with its decoded segments.
pub struct DeliveredSpan {
    pub partition_id: Uuid,
    pub queue: String,
    pub partition: String,
    pub span_start: i64,
    pub span_end: i64,
    pub attempt: i32,
    pub lease_expires_at: Option<SystemTime>,
    segments: Vec<Arc<DecodedSegment>>,
}

impl DeliveredSpan {
    /// The delivered frames in offset order, with their segment's creation time.
    pub fn frames(&self) -> impl Iterator<Item = (i64, FrameView<'_>, &str)> + '_ {
        (self.span_start..=self.span_end).filter_map(move |offset| {
            let seg = self
                .segments
                .iter()
                .find(|s| s.base <= offset && offset <= s.end())?;
            Some((offset, seg.frame_at(offset)?, seg.created_at.as_str()))
        })
    }
}

/// What one pop delivered, under one leaseId.
pub struct Delivery {
    pub lease_id: String,
    pub spans: Vec<DeliveredSpan>,
}

/// Named partitions' ids, once resolved, per (tenant, queue, partition, group): resolving also
/// records a group's subscription, so it is done once per group. A hint: a queue deleted and
/// created again gives its partitions new ids, so a pop that finds nothing under a cached id
/// resolves again (`pop_partition`).
#[derive(Default)]
pub struct PartitionIds {
    map: Mutex<HashMap<PartitionKey, Uuid>>,
}

/// (tenant, queue, partition, group).
type PartitionKey = (Uuid, String, String, String);

impl PartitionIds {
    fn get(&self, key: &PartitionKey) -> Option<Uuid> {
        self.map.lock().expect("ids lock").get(key).copied()
    }

    fn remember(&self, key: PartitionKey, pid: Uuid) {
        self.map.lock().expect("ids lock").insert(key, pid);
    }

    fn forget(&self, key: &PartitionKey) {
        self.map.lock().expect("ids lock").remove(key);
    }

    /// Drops every id of `queue` (the queue was deleted through this broker).
    pub fn forget_queue(&self, tenant: Uuid, queue: &str) {
        self.map
            .lock()
            .expect("ids lock")
            .retain(|(t, q, _, _), _| !(*t == tenant && q == queue));
    }
}

/// What the pop domain works with, borrowed from the broker's state.
pub struct PopContext<'a> {
    pub pool: &'a Pool,
    pub config: &'a Config,
    pub ready: &'a Readiness,
    pub partition_ids: &'a PartitionIds,
    pub pop_fusion: &'a Option<PopFusion>,
    pub pop_stats: &'a PopStats,
    pub segments: &'a SegmentCache,
    pub sealer: &'a Option<Arc<Sealer>>,
    /// The database's timeline: a failover during a pop voids the segments it read from cache.
    pub timeline: &'a Timeline,
}

impl PopContext<'_> {
    /// A pooled connection, held only for the statement(s) at hand.
    async fn db(&self, context: &'static str) -> Result<Object, DbError> {
        self.pool
            .get()
            .await
            .map_err(|e| DbError::from_pool(context, e))
    }
}

/// One attempt: claim and decode, or `None` when there is nothing to deliver. `recheck` is set
/// when a parked long-poll looks again on its own (no wake-up): it may reseed the hotlist.
pub async fn pop_once(
    cx: &PopContext<'_>,
    tenant: Uuid,
    p: &PopParams,
    recheck: bool,
) -> Result<Option<Delivery>, PopError> {
    let lease_id = if p.auto_ack {
        String::new()
    } else {
        Uuid::now_v7().to_string()
    };
    let rows = match &p.target {
        Target::Partition { queue, partition } => {
            pop_partition(cx, tenant, p, queue, partition, &lease_id).await?
        }
        Target::Queue { queue, .. } => match &cx.ready.hotlist {
            Some(_) => pop_hot(cx, tenant, p, queue, &lease_id, recheck).await?,
            None => pop_sql(cx, tenant, p, &Scope::Queue(queue), &lease_id).await?,
        },
        Target::Discover {
            namespace, task, ..
        } => {
            let scope = Scope::Discover { namespace, task };
            pop_sql(cx, tenant, p, &scope, &lease_id).await?
        }
    };
    if rows.is_empty() {
        return Ok(None);
    }
    Ok(Some(Delivery {
        spans: spans_of(rows),
        lease_id,
    }))
}

/// Claimed rows with their decoded segments.
type Decoded = Vec<(ClaimRow, Arc<DecodedSegment>)>;

async fn pop_partition(
    cx: &PopContext<'_>,
    tenant: Uuid,
    p: &PopParams,
    queue: &str,
    partition: &str,
    lease_id: &str,
) -> Result<Decoded, PopError> {
    let key = (
        tenant,
        queue.to_string(),
        partition.to_string(),
        p.group_name().to_string(),
    );
    let queue_key = (tenant, queue.to_string());
    let cached = cx.partition_ids.get(&key);
    let pid = match cached {
        Some(pid) => pid,
        None => match resolve_named(cx, p, &key).await? {
            Some(pid) => pid,
            None => return Ok(Vec::new()),
        },
    };
    let rows = claim_candidates(cx, p, &queue_key, vec![pid], lease_id).await?;
    if !rows.is_empty() || cached.is_none() {
        return Ok(rows);
    }
    // The cached id is a hint: the queue may have been deleted and created again (through
    // another broker, or in SQL), giving the partition a new id. Resolve again before saying
    // there is nothing, and claim once more if the id changed.
    cx.partition_ids.forget(&key);
    match resolve_named(cx, p, &key).await? {
        Some(fresh) if fresh != pid => {
            claim_candidates(cx, p, &queue_key, vec![fresh], lease_id).await
        }
        _ => Ok(rows),
    }
}

/// Resolves a named partition's id in PostgreSQL (see `procs::pop::pop_scope_partition`) and caches it.
async fn resolve_named(
    cx: &PopContext<'_>,
    p: &PopParams,
    key: &PartitionKey,
) -> Result<Option<Uuid>, PopError> {
    let (tenant, queue, partition, group) = key;
    let db = cx.db("pop").await?;
    let found =
        claim::pop_scope_partition(&db, *tenant, queue, partition, group, &p.subscription).await?;
    if let Some(pid) = found {
        cx.partition_ids.remember(key.clone(), pid);
    }
    Ok(found)
}

/// A wildcard pop through the hotlist (see the module doc).
async fn pop_hot(
    cx: &PopContext<'_>,
    tenant: Uuid,
    p: &PopParams,
    queue: &str,
    lease_id: &str,
    recheck: bool,
) -> Result<Decoded, PopError> {
    let hot = cx.ready.hotlist.as_ref().expect("called with a hotlist");
    let group = p.group_name();
    let key: QueueKey = (tenant, queue.to_string());
    // Exactly as many candidates as the pop may claim: a spare one, taken in case a candidate
    // is stale, is held through the whole flush (and a linger) where no other pop can claim it.
    // In tiny-batches at 2 000 msg/s taking one spare put end-to-end p99 at 77-102 ms against
    // 56-69 without it (interleaved); a stale candidate (about 3 % of pops) costs a retry.
    let want = p.max_partitions() as usize;
    let stale_after = if recheck {
        Duration::from_millis(cx.config.long_poll_recheck_ms)
    } else {
        Duration::MAX
    };
    for _ in 0..4 {
        match hot.take(&key, group, want, stale_after) {
            Take::Seed => seed(cx, &key, p).await?,
            Take::Nothing => break,
            Take::Candidates(candidates) => {
                let rows = claim_candidates(cx, p, &key, candidates, lease_id).await?;
                if !rows.is_empty() {
                    return Ok(rows);
                }
                PopStats::add(&cx.pop_stats.stale_candidates, 1);
            }
        }
    }
    if p.wait && cx.config.pop_pending_gate {
        PopStats::add(&cx.pop_stats.gate_parks, 1);
        return Ok(Vec::new()); // the pending gate: park, no SQL
    }
    pop_sql(cx, tenant, p, &Scope::Queue(queue), lease_id).await
}

/// (Re)seeds the hotlist of `p`'s group on `key` from PostgreSQL, and wakes parked pops of
/// the group when it found candidates.
async fn seed(cx: &PopContext<'_>, key: &QueueKey, p: &PopParams) -> Result<(), PopError> {
    let hot = cx.ready.hotlist.as_ref().expect("called with a hotlist");
    let group = p.group_name();
    let limit = claim::candidate_limit(p.max_partitions());
    PopStats::add(&cx.pop_stats.hotlist_seeds, 1);
    let found = match cx.db("pop").await {
        Ok(db) => claim::pop_candidates(&db, key.0, &key.1, group, &p.subscription, limit).await,
        Err(e) => Err(e),
    };
    match found {
        Ok(found) => {
            let pids = found.candidates;
            hot.seeded(key, group, &pids, found.next_ready.map(ready_instant));
            if !pids.is_empty() {
                cx.ready.long_poll.pushed(key.0, &key.1, None, pids.len());
            }
            Ok(())
        }
        Err(e) => {
            hot.seed_failed(key, group);
            Err(e.into())
        }
    }
}

/// PostgreSQL's time a held-back partition becomes ready, on this broker's clock: at least a
/// little ahead, so that clocks that disagree cannot make every pop reseed.
fn ready_instant(at: SystemTime) -> Instant {
    let left = at.duration_since(SystemTime::now()).unwrap_or_default();
    Instant::now() + left.max(Duration::from_millis(100))
}

/// The bounded SQL wildcard (`log_pop_wildcard_v3`), unfused.
async fn pop_sql(
    cx: &PopContext<'_>,
    tenant: Uuid,
    p: &PopParams,
    scope: &Scope<'_>,
    lease_id: &str,
) -> Result<Decoded, PopError> {
    let c = Claim {
        group: p.group_name(),
        lease_id,
        batch: p.batch,
        max_partitions: p.max_partitions(),
        lease_seconds: p.lease_seconds,
        subscription: &p.subscription,
        auto_ack: p.auto_ack,
    };
    PopStats::add(&cx.pop_stats.sql_wildcards, 1);
    let db = cx.db("pop").await?;
    let rows = claim::pop_wildcard(&db, tenant, scope, &c).await?;
    drop(db);
    if let Some(hot) = &cx.ready.hotlist {
        for row in span_heads(&rows) {
            let key = (tenant, row.queue_name.clone());
            note_claimed(cx.ready, hot, &key, (p.group_name(), lease_id), row);
        }
    }
    decode_rows(cx, rows)
}

/// Claims `candidates` for `p` (fused or not), updates the hotlist, decodes the segments.
async fn claim_candidates(
    cx: &PopContext<'_>,
    p: &PopParams,
    key: &QueueKey,
    candidates: Vec<Uuid>,
    lease_id: &str,
) -> Result<Decoded, PopError> {
    let group = p.group_name();
    let generation = cx.timeline.generation();
    let cached = cached_segments(cx, key, group, &candidates, p.batch);
    let job = PopJob {
        group: group.to_string(),
        lease_id: lease_id.to_string(),
        batch: p.batch,
        max_partitions: p.max_partitions(),
        lease_seconds: p.lease_seconds,
        auto_ack: p.auto_ack,
        candidates: candidates.clone(),
        cached,
    };
    let rows = match &cx.pop_fusion {
        Some(f) => f.submit(job).await.map_err(|e| {
            // The flush logged the failure with its context.
            PopError::Flush(e.to_string())
        })?,
        None => {
            let db = cx.db("pop").await?;
            let mut out = claim::pop_multi_once(&db, &[&job]).await?;
            out.pop().unwrap_or_default()
        }
    };
    if cx.timeline.generation() != generation {
        // The held segments it listed may be of the old history: the lease expires unused.
        return Err(DbError::unavailable("pop", "the database failed over during the pop").into());
    }
    if let Some(hot) = &cx.ready.hotlist {
        if rows.is_empty() {
            // A handed-off candidate claimed before its ack committed: the release lists it.
            hot.missed(key, group, &candidates);
        }
        let (mut partitions, mut delivered) = (0usize, 0i64);
        for row in span_heads(&rows) {
            note_claimed(cx.ready, hot, key, (group, lease_id), row);
            partitions += 1;
            delivered += row.span_end - row.span_start + 1;
        }
        if partitions >= p.max_partitions() as usize || delivered >= p.batch as i64 {
            // The job stopped early: candidates it did not claim were never examined.
            let rest: Vec<Uuid> = candidates
                .into_iter()
                .filter(|c| !rows.iter().any(|r| r.partition_id == *c))
                .collect();
            hot.put_back(key, group, &rest);
            cx.ready
                .long_poll
                .relisted(key.0, &key.1, group, rest.len());
        }
    }
    decode_rows(cx, rows)
}

/// Records a claimed span in `hot` and, when it is leased, tells the other brokers.
fn note_claimed(
    ready: &Readiness,
    hot: &hotlist::Hotlist,
    key: &QueueKey,
    (group, lease_id): (&str, &str),
    row: &ClaimRow,
) {
    let left = row
        .lease_expires_at
        .map(|at| at.duration_since(SystemTime::now()).unwrap_or_default());
    if let Some(left) = left {
        ready.publish_leased(key, group, row.partition_id, lease_id, row.span_end, left);
    }
    let lease = left.map(|left| Instant::now() + left);
    hot.claimed(
        key,
        group,
        row.partition_id,
        (row.span_start, row.span_end),
        row.last_offset,
        lease,
    );
}

/// The first row of each claimed span (rows come one per segment, partition by partition).
fn span_heads(rows: &[ClaimRow]) -> impl Iterator<Item = &ClaimRow> {
    rows.iter()
        .enumerate()
        .filter(|(i, r)| *i == 0 || rows[i - 1].partition_id != r.partition_id)
        .map(|(_, r)| r)
}

/// The held segments a claim of `candidates` will likely need: around the span last delivered
/// to the group from each partition, or a partition's earliest held segments.
fn cached_segments(
    cx: &PopContext<'_>,
    key: &QueueKey,
    group: &str,
    candidates: &[Uuid],
    batch: i32,
) -> Vec<(Uuid, Arc<DecodedSegment>)> {
    if !cx.segments.enabled() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for pid in candidates {
        let last = cx
            .ready
            .hotlist
            .as_ref()
            .and_then(|h| h.last_span(key, group, *pid));
        let segs = match last {
            Some((start, end)) => cx.segments.overlapping(*pid, start, end + batch as i64, 8),
            None => cx.segments.overlapping(*pid, i64::MIN, i64::MAX, 4),
        };
        out.extend(segs.into_iter().map(|s| (*pid, s)));
    }
    out
}

/// Pairs every claimed row with its decoded segment: the held copy the claim resolved, or
/// the shipped blob decoded (and kept).
fn decode_rows(cx: &PopContext<'_>, rows: Vec<ClaimRow>) -> Result<Decoded, PopError> {
    let mut out = Vec::with_capacity(rows.len());
    for mut row in rows {
        let seg = match std::mem::replace(&mut row.segment, Stored::Missing) {
            Stored::Shipped(blob) => {
                PopStats::add(&cx.pop_stats.segments_shipped, 1);
                let sealer = cx.sealer.as_deref();
                let seg = DecodedSegment::decode(row.seg_base, row.seg_created, &blob, sealer)
                    .map_err(|e| corrupt(row.partition_id, row.seg_base, e))?;
                let seg = Arc::new(seg);
                cx.segments.insert(row.partition_id, seg.clone());
                seg
            }
            Stored::Held(seg) => {
                PopStats::add(&cx.pop_stats.segments_cached, 1);
                seg
            }
            Stored::Missing => {
                let e = "not shipped and not held".to_string();
                return Err(corrupt(row.partition_id, row.seg_base, e));
            }
        };
        out.push((row, seg));
    }
    Ok(out)
}

fn corrupt(pid: Uuid, base: i64, e: String) -> PopError {
    tracing::error!(partition_id = %pid, base, error = %e, "stored segment cannot be delivered");
    PopError::Corrupt(format!("segment of partition {pid} at {base}: {e}"))
}

/// Groups decoded rows into one span per partition (rows arrive partition by partition).
fn spans_of(rows: Decoded) -> Vec<DeliveredSpan> {
    let mut spans: Vec<DeliveredSpan> = Vec::new();
    for (row, seg) in rows {
        match spans.last_mut() {
            Some(s) if s.partition_id == row.partition_id => s.segments.push(seg),
            _ => spans.push(DeliveredSpan {
                partition_id: row.partition_id,
                queue: row.queue_name,
                partition: row.partition_name,
                span_start: row.span_start,
                span_end: row.span_end,
                attempt: row.attempt,
                lease_expires_at: row.lease_expires_at,
                segments: vec![seg],
            }),
        }
    }
    spans
}
