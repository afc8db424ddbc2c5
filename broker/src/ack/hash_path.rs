//! The hash path: one `log_ack_by_hash_v1` call per (partition, group, leaseId) group.
//!
//! Each transactionId is hashed with `ackbench_wire::txn_hash` (xxh3_128, 16 bytes big-endian)
//! and the hashes go to PostgreSQL in request order with their statuses. The answer's honesty
//! lists come back as hex tokens and are mapped to the request's items:
//!
//! | item | answer |
//! | --- | --- |
//! | refused call (lease) | `success: false`, `"invalid or expired lease"` |
//! | `completed`, hash in `noopHashes` | `success: true, noop: true` (a harmless duplicate) |
//! | nack, hash in `staleHashes` | `success: false`, `"already committed"` |
//! | hash in `unresolvedHashes` | `success: false`, `"unresolvable"` |
//! | resolved in the span | `success: true` |
//!
//! A resolved item succeeds even when it will redeliver: a `completed` position above the head
//! signal of the same call, or a nack above it (only the head signal acts), is accepted and
//! simply delivered again (an at-least-once duplicate, never a lost nack). The items resolved
//! to a dead-lettered offset answer `dlq: true` once the DLQ row is filed; if filing is refused
//! they answer `success: false` with the refusal. `leaseReleased` is the group's: whether this
//! call (or its DLQ filing) released the lease.
//!
//! An unknown partition, or one of another tenant, answers like the procedure would for a
//! partition that does not exist: every item `"invalid or expired lease"` under a leaseId,
//! `"unresolvable"` without one.

use std::collections::HashSet;

use deadpool_postgres::Object;
use uuid::Uuid;

use super::dlq_filing::{self, DlqFiling};
use super::{
    outcome, AckError, AckGroup, AckItem, AckStatus, ERR_ALREADY_COMMITTED, ERR_LEASE,
    ERR_UNRESOLVABLE,
};
use crate::app::App;
use crate::metrics::Metrics;
use crate::storage::procs;
use crate::storage::procs::ack::HashOutcome;
use ackbench_wire::hash::hash_hex;
use ackbench_wire::{txn_hash, AckResult};

/// The result of acking one group.
#[derive(Debug, Clone)]
pub struct GroupAck {
    /// One per item of the group, in the group's order (`index` = the request position).
    pub results: Vec<AckResult>,
    /// The procedure's answer; `None` when the partition is unknown or another tenant's.
    pub outcome: Option<HashOutcome>,
    /// The DLQ hand-off, when there was one.
    pub filing: Option<DlqFiling>,
}

impl GroupAck {
    /// Offsets the cursor moved in total (the call and its DLQ filing).
    pub fn acked(&self) -> i64 {
        self.outcome.as_ref().map_or(0, |o| o.acked) + self.filing.as_ref().map_or(0, |f| f.acked)
    }
}

/// Acks one group on a connection of its own, acquired here and released on return.
pub async fn ack_group_by_hash(
    app: &App,
    tenant: Uuid,
    group: &AckGroup,
) -> Result<GroupAck, AckError> {
    let db = app.db("ack").await?;
    let result = ack_group_by_hash_on(app, &db, tenant, group).await;
    drop(db);
    result
}

/// Acks one group on the caller's connection (each statement commits on its own).
pub async fn ack_group_by_hash_on(
    app: &App,
    db: &Object,
    tenant: Uuid,
    group: &AckGroup,
) -> Result<GroupAck, AckError> {
    let hashes: Vec<[u8; 16]> = group
        .items
        .iter()
        .map(|i| txn_hash(&i.transaction_id))
        .collect();
    let outcome = call_by_hash(db, tenant, group, &hashes).await?;
    let filing = match &outcome {
        Some(o) if o.ok && o.dlq => Some(dlq_filing::file_head(db, group, o).await?),
        _ => None,
    };
    let results = item_results(group, &hashes, outcome.as_ref(), filing.as_ref());
    let done = GroupAck {
        results,
        outcome,
        filing,
    };
    Metrics::add(&app.metrics.acks_hash, group.items.len() as u64);
    Metrics::add(
        &app.metrics.counters.messages_acked,
        done.acked().max(0) as u64,
    );
    Ok(done)
}

/// One `log_ack_by_hash_v1` call, gated on the partition belonging to `tenant` (no row back:
/// unknown or foreign, and the procedure is not called).
async fn call_by_hash(
    db: &Object,
    tenant: Uuid,
    group: &AckGroup,
    hashes: &[[u8; 16]],
) -> Result<Option<HashOutcome>, AckError> {
    let hash_params: Vec<&[u8]> = hashes.iter().map(|h| &h[..]).collect();
    let statuses: Vec<&str> = group.items.iter().map(|i| i.status.as_str()).collect();
    let answer = procs::ack::ack_by_hash(
        db,
        tenant,
        group.partition_id,
        &group.consumer_group,
        &group.lease_id,
        &hash_params,
        &statuses,
    )
    .await?;
    let Some(answer) = answer else {
        return Ok(None);
    };
    outcome("log_ack_by_hash_v1", answer).map(Some)
}

/// The per-item answers of a group, in the group's order.
fn item_results(
    group: &AckGroup,
    hashes: &[[u8; 16]],
    outcome: Option<&HashOutcome>,
    filing: Option<&DlqFiling>,
) -> Vec<AckResult> {
    let Some(o) = outcome else {
        let error = if group.lease_id.is_empty() {
            ERR_UNRESOLVABLE
        } else {
            ERR_LEASE
        };
        return group.items.iter().map(|i| failure(i, error)).collect();
    };
    if !o.ok {
        let error = o.error.as_deref().unwrap_or(ERR_LEASE);
        return group.items.iter().map(|i| failure(i, error)).collect();
    }
    let set = |v: &[String]| -> HashSet<String> { v.iter().cloned().collect() };
    let (noop, stale, unresolved) = (
        set(&o.noop_hashes),
        set(&o.stale_hashes),
        set(&o.unresolved_hashes),
    );
    let lease_released = o.lease_released || filing.is_some_and(|f| f.lease_released);
    group
        .items
        .iter()
        .zip(hashes)
        .enumerate()
        .map(|(k, (item, hash))| {
            let hex = hash_hex(hash);
            let mut r = if item.status == AckStatus::Completed && noop.contains(&hex) {
                AckResult {
                    noop: true,
                    ..success(item)
                }
            } else if item.status.is_signal() && stale.contains(&hex) {
                failure(item, ERR_ALREADY_COMMITTED)
            } else if unresolved.contains(&hex) {
                failure(item, ERR_UNRESOLVABLE)
            } else {
                resolved_item(item, o.offsets.get(k).copied().flatten(), filing)
            };
            r.lease_released = lease_released;
            r
        })
        .collect()
}

/// An item that resolved in the span: accepted; `dlq` when its offset was dead-lettered.
fn resolved_item(item: &AckItem, offset: Option<i64>, filing: Option<&DlqFiling>) -> AckResult {
    match filing {
        Some(f) if offset == Some(f.offset) && f.filed => AckResult {
            dlq: true,
            ..success(item)
        },
        Some(f) if offset == Some(f.offset) => {
            failure(item, f.error.as_deref().unwrap_or(ERR_LEASE))
        }
        _ => success(item),
    }
}

/// The answer of an item that took effect (flags set by the caller).
pub(crate) fn success(item: &AckItem) -> AckResult {
    AckResult {
        index: item.index,
        transaction_id: item.transaction_id.clone(),
        success: true,
        error: None,
        lease_released: false,
        dlq: false,
        noop: false,
    }
}

fn failure(item: &AckItem, error: &str) -> AckResult {
    AckResult {
        success: false,
        error: Some(error.to_string()),
        ..success(item)
    }
}
