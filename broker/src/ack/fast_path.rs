//! The accelerated ack: a registry hit becomes one positional cursor advance, committed through
//! a fusion flush (fusion on) or a synchronous `log_ack_at_v1` (fusion off).
//!
//! Only a group whose every item is `completed` under a non-empty leaseId can hit, and only
//! when the acked set equals the delivered set (`AckRegistry::take_if_full_batch`). With several
//! brokers, an ack of a small batch another broker's pop leased waits up to
//! `PEER_DELIVERY_WAIT` for that broker's sealed delivery, which makes it a hit here too. Everything
//! else, and every refusal PostgreSQL makes of a hit, returns `None`: the caller takes the hash
//! path, which is the authority. A fusion flush that fails as a whole answers every waiter with
//! an error (its lease will expire and the batch redeliver).

use std::time::{Duration, Instant};

use crate::fasthash::FastSet;

use ackbench_wire::{txn_hash, AckResult, TxnHash};
use uuid::Uuid;

use super::fusion::{AckFusion, FusedAck, Verdict};
use super::registry::AckRegistry;
use super::{ack_at, AckError, AckGroup, AckStatus};
use crate::app::App;
use crate::metrics::Metrics;

/// How long an ack of a lease another broker granted waits for that broker's delivery
/// (`Event::Delivered`, sent as soon as the sender's previous send is done) before it takes the
/// hash path: the delivery and the ack leave the lessor's client at about the same time.
const PEER_DELIVERY_WAIT: Duration = Duration::from_millis(5);

/// Answers `group` through the registry when it is a full-batch completed ack of a live lease;
/// `None` sends it down the hash path; a commit that failed as a whole is an error.
pub async fn try_full_batch(
    app: &App,
    tenant: Uuid,
    group: &AckGroup,
) -> Result<Option<Vec<AckResult>>, AckError> {
    let Some(registry) = app.registry.as_ref() else {
        return Ok(None);
    };
    let eligible =
        !group.lease_id.is_empty() && group.items.iter().all(|i| i.status == AckStatus::Completed);
    if !eligible {
        registry
            .counters
            .misses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return Ok(None);
    }
    if peer_may_deliver(app, registry, group) {
        let until = Instant::now() + PEER_DELIVERY_WAIT;
        let (pid, name, lease) = (group.partition_id, &group.consumer_group, &group.lease_id);
        registry.await_lease(pid, name, lease, until).await;
    }
    let acked: FastSet<TxnHash> = group
        .items
        .iter()
        .map(|i| txn_hash(&i.transaction_id))
        .collect();
    let Some(batch) = registry.take_if_full_batch(
        tenant,
        group.partition_id,
        &group.consumer_group,
        &group.lease_id,
        &acked,
    ) else {
        return Ok(None);
    };
    let verdict = match &app.fusion {
        Some(fusion) => {
            let ack = FusedAck {
                partition: group.partition_id,
                group: group.consumer_group.clone(),
                lease_id: group.lease_id.clone(),
                batch_end: batch.upto,
                count: batch.count,
            };
            let enqueued = fusion.enqueue(ack);
            hand_off(app, fusion, group, batch.upto);
            enqueued.verdict().await
        }
        None => synchronous(app, group, batch.upto, batch.count).await,
    };
    let n = group.items.len() as u64;
    match verdict {
        Verdict::Committed {
            acked,
            lease_released,
        } => {
            let path = if app.fusion.is_some() {
                &app.metrics.acks_fusion
            } else {
                &app.metrics.acks_registry
            };
            Metrics::add(path, n);
            // A folded row's verdict reaches each of its requests, so this would count its
            // offsets once per request; folding needs two requests for one lease, and a lease's
            // registry entry is taken by one hit only, so over the wire it counts once.
            if app.fusion.is_some() {
                Metrics::add(&app.metrics.counters.messages_acked, acked.max(0) as u64);
            }
            let results = answers(group, true, None, lease_released);
            super::wake_on_release(app, group, &results, (Some(batch.upto), None));
            Ok(Some(results))
        }
        Verdict::Rejected(reason) => {
            tracing::debug!(target: "ack-registry", partition = %group.partition_id, %reason, "hit refused by PostgreSQL; hash path");
            Ok(None)
        }
        Verdict::FlushErr(e) => Err(AckError::Unavailable(format!("ack commit failed: {e}"))),
    }
}

/// Whether `group` acks a lease this registry does not know but another broker's pop may have
/// granted: other brokers are listening, the deployment's key is read, and the batch is small
/// enough for its lessor to have sent its delivery (`ack::REPLICATED_FRAMES_MAX`).
fn peer_may_deliver(app: &App, registry: &AckRegistry, group: &AckGroup) -> bool {
    let Some(outbox) = &app.ready.peers else {
        return false;
    };
    group.items.len() <= super::REPLICATED_FRAMES_MAX
        && outbox.delivering()
        && !registry.knows_lease(group.partition_id, &group.consumer_group, &group.lease_id)
}

/// The hand-off (`QUEEN_ACK_HANDOFF`): with the ack already in its lane, a partition with
/// more after the acked span is listed now and a parked pop of the group woken, so its claim
/// joins the ack's flush (pops run after acks there) instead of waiting for the commit and
/// then for a flush of its own. With pops of one message each message behind another on a
/// partition waited two flushes; now one. A hint: should the claim run before the release (a
/// pop keyed to another lane) or the ack fail, the claim finds the lease and takes nothing,
/// and the release, or the lease's expiry, lists the partition again.
fn hand_off(app: &App, fusion: &AckFusion, group: &AckGroup, acked_end: i64) {
    let Some(hot) = &app.ready.hotlist else {
        return;
    };
    if !(app.config.ack_handoff && fusion.joint()) {
        return;
    }
    if hot.releasing(group.partition_id, &group.consumer_group, acked_end) {
        Metrics::add(&app.metrics.counters.ack_handoffs, 1);
        app.ready
            .long_poll
            .released(group.partition_id, &group.consumer_group);
    }
}

/// The fusion-off commit of a hit: one `log_ack_at_v1` on a connection held only for it.
async fn synchronous(app: &App, group: &AckGroup, upto: i64, count: i32) -> Verdict {
    let db = match app.db("ack registry").await {
        Ok(db) => db,
        Err(e) => return Verdict::FlushErr(e.to_string()),
    };
    let outcome = ack_at(
        app,
        &db,
        group.partition_id,
        &group.consumer_group,
        &group.lease_id,
        upto,
        true,
        count,
    )
    .await;
    match outcome {
        Ok(o) if o.ok => Verdict::Committed {
            acked: o.acked,
            lease_released: o.lease_released,
        },
        Ok(o) => Verdict::Rejected(o.error.unwrap_or_default()),
        Err(e) => Verdict::FlushErr(e.to_string()),
    }
}

fn answers(
    group: &AckGroup,
    success: bool,
    error: Option<String>,
    lease_released: bool,
) -> Vec<AckResult> {
    group
        .items
        .iter()
        .map(|i| AckResult {
            index: i.index,
            transaction_id: i.transaction_id.clone(),
            success,
            error: error.clone(),
            lease_released,
            dlq: false,
            noop: false,
        })
        .collect()
}
