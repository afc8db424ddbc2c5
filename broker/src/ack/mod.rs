//! The ack path: from validated ack items to cursor commits (shared spec `ack-internals.md`).
//!
//! - `hash_path`: the authoritative path. Items are grouped by (partition, consumer group,
//!   leaseId) in order of first appearance; each group is one `log_ack_by_hash_v1` call
//!   with the transactionIds hashed here (SQL never hashes), and the procedure's honesty lists
//!   are mapped back to the request's transactionIds.
//! - `dlq_filing`: when the procedure hands off a poison offset (`dlq: true`, lease kept), the
//!   broker unpacks that frame and files it through `log_dlq_head_v3`.
//! - `ack_at` (here): the positional advance `log_ack_at_v1`, for the registry fast path.
//! - `fast_path`, `fusion`, `registry`: the accelerators; `stats`: their counters' snapshot.
//! - `on_leased` (here): a leasing pop's spans become registry entries.
//!
//! Knows nothing of HTTP: every function answers `AckError`, which `routes` turns into an
//! answer.
//!
//! Connection discipline: a pooled connection is acquired per group, lazily, and released at the
//! end of that group (`ack_group_by_hash`), so no caller ever holds one across groups or while
//! parked on something else. Every group is its own transaction (one procedure call, plus the
//! DLQ filing when handed off); the only lock taken is that group's consumer row.
//!
//! Tenancy: a partition of another tenant answers exactly as an unknown one. The check is part
//! of the one statement that calls the procedure (a join through the queue's tenant), so
//! it costs no round trip and no cache.

pub mod dlq_filing;
pub mod fast_path;
pub mod fusion;
pub mod hash_path;
pub mod registry;
pub mod stats;

use deadpool_postgres::Object;
use uuid::Uuid;

use crate::app::App;
use crate::metrics::Metrics;
use crate::peers::message::Event;
use crate::pop::hotlist::Release;
use crate::storage::procs;
use crate::storage::DbError;
use ackbench_wire::AckResult;

pub use crate::storage::procs::ack::{HashOutcome, PositionalOutcome};
pub use dlq_filing::DlqFiling;
pub use hash_path::{ack_group_by_hash, ack_group_by_hash_on, GroupAck};

/// Why an ack request could not be answered (a refusal of an item is an answer, not an error).
#[derive(Debug, Clone)]
pub enum AckError {
    /// The database failed (no connection, a statement failed).
    Db(DbError),
    /// A procedure answered a shape this broker does not know (a version mismatch).
    Shape(String),
    /// A commit failed as a whole (an ack fusion flush, the database gone): nothing of the
    /// group took effect and the client should retry (answered 503, not a per-item refusal).
    Unavailable(String),
}

impl From<DbError> for AckError {
    fn from(e: DbError) -> AckError {
        AckError::Db(e)
    }
}

impl std::fmt::Display for AckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AckError::Db(e) => e.fmt(f),
            AckError::Shape(e) | AckError::Unavailable(e) => f.write_str(e),
        }
    }
}

/// Reads a procedure's jsonb answer into `T`; `procedure` names it in the error.
pub(crate) fn outcome<T: serde::de::DeserializeOwned>(
    procedure: &str,
    value: serde_json::Value,
) -> Result<T, AckError> {
    serde_json::from_value(value)
        .map_err(|e| AckError::Shape(format!("{procedure} answered an unknown shape: {e}")))
}

/// The wire's error strings for an item that cannot take effect.
pub const ERR_ALREADY_COMMITTED: &str = "already committed";
pub const ERR_UNRESOLVABLE: &str = "unresolvable";
pub const ERR_LEASE: &str = "invalid or expired lease";

/// An ack status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckStatus {
    Completed,
    Failed,
    Retry,
    Dlq,
}

impl AckStatus {
    pub fn parse(s: &str) -> Option<AckStatus> {
        match s {
            "completed" => Some(AckStatus::Completed),
            "failed" => Some(AckStatus::Failed),
            "retry" => Some(AckStatus::Retry),
            "dlq" => Some(AckStatus::Dlq),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AckStatus::Completed => "completed",
            AckStatus::Failed => "failed",
            AckStatus::Retry => "retry",
            AckStatus::Dlq => "dlq",
        }
    }

    /// `failed`, `retry` or `dlq`: an explicit signal.
    pub fn is_signal(self) -> bool {
        self != AckStatus::Completed
    }
}

/// One validated ack item, with its position in the request.
#[derive(Debug, Clone)]
pub struct AckItem {
    pub index: usize,
    pub transaction_id: String,
    pub partition_id: Uuid,
    /// The consumer group (`__QUEUE_MODE__` for queue mode).
    pub consumer_group: String,
    /// The leaseId; empty for a lease-less ack.
    pub lease_id: String,
    pub status: AckStatus,
    /// The failure reason a nack gives (recorded in the DLQ row).
    pub error: Option<String>,
}

/// The items of one request sharing (partition, group, leaseId), in request order: one
/// authoritative call.
#[derive(Debug, Clone)]
pub struct AckGroup {
    pub partition_id: Uuid,
    pub consumer_group: String,
    pub lease_id: String,
    pub items: Vec<AckItem>,
}

/// Groups items by (partition, group, leaseId); groups in order of first appearance, items in
/// request order within each group.
pub fn group_items(items: Vec<AckItem>) -> Vec<AckGroup> {
    let (of_item, firsts) = group_positions(&items);
    let mut groups: Vec<AckGroup> = firsts
        .iter()
        .map(|&(first, len)| AckGroup {
            partition_id: items[first].partition_id,
            consumer_group: items[first].consumer_group.clone(),
            lease_id: items[first].lease_id.clone(),
            items: Vec::with_capacity(len),
        })
        .collect();
    for (item, g) in items.into_iter().zip(of_item) {
        groups[g].items.push(item);
    }
    groups
}

/// Each item's group (numbered in order of first appearance), and per group its first item and
/// size. Keys borrow the items: nothing is copied per item. The usual request (one pop's answer
/// acked whole) is one group, found without a map.
fn group_positions(items: &[AckItem]) -> (Vec<usize>, Vec<(usize, usize)>) {
    fn key(item: &AckItem) -> (Uuid, &str, &str) {
        (item.partition_id, &item.consumer_group, &item.lease_id)
    }
    if let Some(first) = items.first() {
        if items.iter().all(|item| key(item) == key(first)) {
            return (vec![0; items.len()], vec![(0, items.len())]);
        }
    }
    let mut index: crate::fasthash::FastMap<(Uuid, &str, &str), usize> = Default::default();
    let mut firsts: Vec<(usize, usize)> = Vec::new();
    let of_item = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let g = *index.entry(key(item)).or_insert_with(|| {
                firsts.push((i, 0));
                firsts.len() - 1
            });
            firsts[g].1 += 1;
            g
        })
        .collect();
    (of_item, firsts)
}

/// Acks every item through the hash path, group by group (one pooled connection per group,
/// released after it); one result per item, in request order.
pub async fn ack_items(
    app: &App,
    tenant: Uuid,
    items: Vec<AckItem>,
) -> Result<Vec<AckResult>, AckError> {
    let extra_cost = app.config.test_ack_extra_cost_us;
    if extra_cost > 0 {
        // Test only (`QUEEN_TEST_ACK_EXTRA_COST_US`): a fixed extra cost on the ack path.
        tokio::time::sleep(std::time::Duration::from_micros(extra_cost)).await;
    }
    let n = items.len();
    let mut slots: Vec<Option<AckResult>> = vec![None; n];
    for group in group_items(items) {
        if let Some(results) = fast_path::try_full_batch(app, tenant, &group).await? {
            // (the fast path woke parked pops itself, knowing the acked span)
            for r in results {
                let i = r.index;
                slots[i] = Some(r);
            }
            continue;
        }
        let done = ack_group_by_hash(app, tenant, &group).await?;
        if let Some(registry) = &app.registry {
            registry.forget(group.partition_id, &group.consumer_group, &group.lease_id);
        }
        let committed = done.outcome.as_ref().and_then(|o| o.committed);
        wake_on_release(app, &group, &done.results, (None, committed));
        for r in done.results {
            let i = r.index;
            slots[i] = Some(r);
        }
    }
    Ok(slots
        .into_iter()
        .map(|r| r.expect("every item is answered by its group"))
        .collect())
}

/// Wakes a parked pop of the group when its ack released a lease and the rest of the
/// partition is poppable again without any push (`Readiness::released`; `acked_end`, the
/// released span's end, tells that lease from a newer one; `committed`, the cursor after the
/// release, what is left), and tells the other brokers of
/// every release, poppable or not: they keep a lease they were told of off their lists until
/// its release (and the broker that granted it, when the ack came here, holds it as its own).
pub(crate) fn wake_on_release(
    app: &App,
    group: &AckGroup,
    results: &[AckResult],
    (acked_end, committed): (Option<i64>, Option<i64>),
) {
    if !results.iter().any(|r| r.lease_released) {
        return;
    }
    let completed = group
        .items
        .iter()
        .all(|i| matches!(i.status, AckStatus::Completed));
    let (pid, name) = (group.partition_id, &group.consumer_group);
    let lease = Some(group.lease_id.as_str()).filter(|l| !l.is_empty());
    let release = Release {
        completed,
        end: acked_end,
        committed,
        lease,
    };
    let woke_here = app.ready.released(pid, name, release);
    app.ready
        .publish_after_wake(release.event(pid, name), woke_here);
}

/// The positional advance (registry fast path): commits through `upto` under the lease of
/// `lease_id` (empty = lease-less), `ok = false` releases the lease without advancing. `count` is
/// advisory to the procedure. The caller chooses the connection, is responsible for the tenant
/// check, and counts the ack items under the path it took.
#[allow(clippy::too_many_arguments)]
pub async fn ack_at(
    app: &App,
    db: &Object,
    partition_id: Uuid,
    group: &str,
    lease_id: &str,
    upto: i64,
    ok: bool,
    count: i32,
) -> Result<PositionalOutcome, AckError> {
    let at = procs::ack::AckAt {
        partition_id,
        group,
        lease_id,
        upto,
        ok,
        count,
    };
    let answer = procs::ack::ack_at(db, &at).await?;
    let outcome: PositionalOutcome = outcome("log_ack_at_v1", answer)?;
    Metrics::add(
        &app.metrics.counters.messages_acked,
        outcome.acked.max(0) as u64,
    );
    Ok(outcome)
}

/// The span one partition delivered under a lease, with what the ack registry needs.
pub struct LeasedSpan {
    pub partition_id: Uuid,
    pub queue: String,
    pub partition: String,
    pub span_end: i64,
    pub lease_expires_at: Option<std::time::SystemTime>,
    /// (hash, offset) of every delivered frame.
    pub frames: Vec<(ackbench_wire::TxnHash, i64)>,
}

/// The most frames a lease's delivery to the other brokers carries (`Event::Delivered`): a
/// larger batch's ack takes the hash path on a broker that did not lease it.
pub const REPLICATED_FRAMES_MAX: usize = 32;

/// A leasing pop delivered these spans under `lease_id`: each becomes a registry entry (when the
/// registry is on), so the full-batch ack that follows can take the fast path; a small span is
/// also sent, sealed, to the other brokers, whose registries take it too (the ack may go to
/// any of them).
pub fn on_leased(app: &App, tenant: Uuid, group: &str, lease_id: &str, spans: &[LeasedSpan]) {
    let Some(registry) = &app.registry else {
        return;
    };
    for span in spans.iter().filter(|s| !s.frames.is_empty()) {
        let lease = span
            .lease_expires_at
            .and_then(|t| t.duration_since(std::time::SystemTime::now()).ok())
            .unwrap_or_default();
        registry.born(&registry::Delivered {
            tenant,
            partition_id: span.partition_id,
            group,
            lease_id,
            queue: &span.queue,
            partition: &span.partition,
            batch_end: span.span_end,
            frames: &span.frames,
            lease,
        });
        if span.frames.len() <= REPLICATED_FRAMES_MAX {
            deliver_to_peers(app, tenant, (group, lease_id), span, lease);
        }
    }
}

/// Sends `span`'s delivery to the other brokers (when they listen and the key is read).
fn deliver_to_peers(
    app: &App,
    tenant: Uuid,
    (group, lease_id): (&str, &str),
    span: &LeasedSpan,
    lease: std::time::Duration,
) {
    let Some(outbox) = &app.ready.peers else {
        return;
    };
    if !outbox.delivering() {
        return;
    }
    outbox.publish_delivered(Event::Delivered {
        tenant,
        queue: span.queue.clone(),
        partition: span.partition.clone(),
        pid: span.partition_id,
        group: group.to_string(),
        lease: lease_id.to_string(),
        end: span.span_end,
        lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
        frames: span
            .frames
            .iter()
            .map(|(h, offset)| (ackbench_wire::hash_hex(h), *offset))
            .collect(),
        seal: String::new(),
    });
}

/// Takes another broker's delivery into the registry, when its seal verifies under the
/// deployment's key and its hashes read; answers whether it was taken.
pub fn adopt_peer_delivery(app: &App, event: &Event) -> bool {
    let (Some(registry), Some(outbox)) = (&app.registry, &app.ready.peers) else {
        return false;
    };
    let Event::Delivered {
        tenant,
        queue,
        partition,
        pid,
        group,
        lease,
        end,
        lease_ms,
        frames,
        seal,
    } = event
    else {
        return false;
    };
    let sealed = outbox.key().is_some_and(|key| {
        event
            .sealed_body()
            .is_some_and(|body| key.verifies(&body, seal))
    });
    let frames: Option<Vec<(ackbench_wire::TxnHash, i64)>> = frames
        .iter()
        .map(|(hex, offset)| Some((ackbench_wire::parse_hash_hex(hex)?, *offset)))
        .collect();
    let Some(frames) = frames.filter(|f| sealed && !f.is_empty()) else {
        return false;
    };
    registry.born_from_peer(&registry::Delivered {
        tenant: *tenant,
        partition_id: *pid,
        group,
        lease_id: lease,
        queue,
        partition,
        batch_end: *end,
        frames: &frames,
        lease: std::time::Duration::from_millis(*lease_ms),
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(index: usize, partition: u128, lease: &str) -> AckItem {
        AckItem {
            index,
            transaction_id: format!("t-{index}"),
            partition_id: Uuid::from_u128(partition),
            consumer_group: ackbench_wire::QUEUE_MODE_GROUP.to_string(),
            lease_id: lease.to_string(),
            status: AckStatus::Completed,
            error: None,
        }
    }

    fn shape(groups: &[AckGroup]) -> Vec<(u128, String, Vec<usize>)> {
        groups
            .iter()
            .map(|g| {
                let indexes = g.items.iter().map(|i| i.index).collect();
                (g.partition_id.as_u128(), g.lease_id.clone(), indexes)
            })
            .collect()
    }

    #[test]
    fn items_group_by_partition_group_and_lease_in_order_of_first_appearance() {
        let one = group_items((0..3).map(|i| item(i, 7, "l")).collect());
        assert_eq!(shape(&one), [(7, "l".to_string(), vec![0, 1, 2])]);
        let mixed = group_items(vec![
            item(0, 7, "l"),
            item(1, 8, "l"),
            item(2, 7, "l"),
            item(3, 7, ""),
        ]);
        assert_eq!(
            shape(&mixed),
            [
                (7, "l".to_string(), vec![0, 2]),
                (8, "l".to_string(), vec![1]),
                (7, String::new(), vec![3]),
            ]
        );
        assert!(group_items(Vec::new()).is_empty());
    }
}
