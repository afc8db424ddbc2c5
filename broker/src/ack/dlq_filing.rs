//! Filing the DLQ row the hash path handed off (`dlq: true`, lease kept).
//!
//! Only the broker can decompress a segment, so it unpacks frame `off - base_offset` of the
//! covering segment (payload, message id, transactionId) and calls
//! `log_dlq_head_v3(partition, group, lease_id, off, message_id, txn, payload, sealed,
//! error)` with the same leaseId the ack came with. That files the row with a payload
//! snapshot (the frame's JSON text as pushed, byte for byte, into a `json` column that accepts
//! whatever JSON a push accepted, `\u0000` escapes included), steps the cursor past the poison
//! frame and releases the lease. The frame of an encrypted queue stays sealed in the row (a JSON
//! string of the hex of its sealed bytes, `sealed = true`): it is opened only when listed or
//! replayed, so filing needs no key.
//!
//! The failure reason is the `error` of the nack that caused the hand-off: the first item of
//! the group that resolved to the poison offset with the signal's status (else any nack there).
//! Without one it is a generic reason naming the cause (`dlq` signal or exhausted retries).
//!
//! When retention removed the segment (segment retention runs on its own clock and may outpace
//! the sidecar), the hand-off is still filed, never lost: the payload is JSON `null`, the
//! message id the nil UUID, the transactionId the one the client acked, and the error says the
//! payload was retained away.
//!
//! If the filing call itself fails (database unreachable), the hand-off stays pending under the
//! kept lease: the lease expires, the batch redelivers with the poison at its head, and the next
//! nack hands it off again. Nothing is lost and no retry budget is spent on the way.

use deadpool_postgres::Object;
use serde_json::Value;
use uuid::Uuid;

use super::{AckError, AckGroup, AckItem, AckStatus};
use crate::storage::procs::{self, ack::HashOutcome};

/// What the filing did.
#[derive(Debug, Clone, PartialEq)]
pub struct DlqFiling {
    /// The poison offset.
    pub offset: i64,
    /// Whether the row was filed (`log_dlq_head_v3` answered ok).
    pub filed: bool,
    /// The refusal when not filed (`invalid or expired lease`, `already committed`, ...).
    pub error: Option<String>,
    /// Offsets the cursor moved (stepping past the poison).
    pub acked: i64,
    pub lease_released: bool,
    /// The id of the filed DLQ row.
    pub dlq_id: Option<i64>,
}

/// The frame content filed in the DLQ row.
struct Snapshot {
    message_id: Option<Uuid>,
    transaction_id: String,
    /// The payload's JSON text (a JSON string of hex when `sealed`).
    payload: String,
    sealed: bool,
    error: String,
}

/// Files the poison offset of `outcome` (which must carry `dlq: true`).
pub async fn file_head(
    db: &Object,
    group: &AckGroup,
    outcome: &HashOutcome,
) -> Result<DlqFiling, AckError> {
    let offset = outcome.dlq_offset.ok_or_else(|| {
        AckError::Shape("log_ack_by_hash_v1 handed off a DLQ without offset".into())
    })?;
    let nack = the_nack(group, outcome, offset);
    let snap = snapshot(db, group.partition_id, offset, nack, outcome).await?;
    let head = procs::dlq::DlqHead {
        partition_id: group.partition_id,
        group: &group.consumer_group,
        lease_id: &group.lease_id,
        offset,
        message_id: snap.message_id,
        transaction_id: &snap.transaction_id,
        payload: &snap.payload,
        sealed: snap.sealed,
        error: &snap.error,
    };
    let v: Value = procs::dlq::dlq_head(db, &head).await?;
    Ok(DlqFiling {
        offset,
        filed: v["ok"].as_bool().unwrap_or(false),
        error: v["error"].as_str().map(str::to_string),
        acked: v["acked"].as_i64().unwrap_or(0),
        lease_released: v["lease_released"].as_bool().unwrap_or(false),
        dlq_id: v["dlq_id"].as_i64(),
    })
}

/// The nack that caused the hand-off: resolved to `offset`, preferably with the signal's status.
fn the_nack<'a>(group: &'a AckGroup, outcome: &HashOutcome, offset: i64) -> Option<&'a AckItem> {
    let at = |k: &usize| outcome.offsets.get(*k).copied().flatten() == Some(offset);
    let signal = outcome.signal.as_deref().and_then(AckStatus::parse);
    let nacks = || {
        group
            .items
            .iter()
            .enumerate()
            .filter(|(k, i)| at(k) && i.status.is_signal())
    };
    nacks()
        .find(|(_, i)| Some(i.status) == signal)
        .or_else(|| nacks().next())
        .map(|(_, i)| i)
}

/// The frame at `offset` (or what is known of it when its segment is gone) and the reason.
async fn snapshot(
    db: &Object,
    partition_id: Uuid,
    offset: i64,
    nack: Option<&AckItem>,
    outcome: &HashOutcome,
) -> Result<Snapshot, AckError> {
    let reason = nack
        .and_then(|i| i.error.clone())
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| generic_reason(outcome));
    let acked_txn = nack.map(|i| i.transaction_id.clone()).unwrap_or_default();
    Ok(
        match procs::push::frame_at(db, partition_id, offset).await? {
            Some(frame) => Snapshot {
                message_id: Some(frame.message_id),
                payload: match frame.sealed {
                    true => Value::String(hex::encode(&frame.payload)).to_string(),
                    false => payload_text(&frame.payload),
                },
                sealed: frame.sealed,
                transaction_id: frame.transaction_id,
                error: reason,
            },
            None => Snapshot {
                message_id: None,
                transaction_id: acked_txn,
                payload: "null".to_string(),
                sealed: false,
                error: format!(
                    "{reason} (payload unavailable: its segment was removed by retention)"
                ),
            },
        },
    )
}

/// A frame's payload as JSON text: as pushed when it is JSON (always, for frames a push wrote),
/// else the bytes as a JSON string (never fails, so the filing cannot be refused for it).
fn payload_text(payload: &[u8]) -> String {
    match std::str::from_utf8(payload) {
        Ok(text) if serde_json::from_str::<&serde_json::value::RawValue>(text).is_ok() => {
            text.to_string()
        }
        _ => Value::String(String::from_utf8_lossy(payload).into_owned()).to_string(),
    }
}

fn generic_reason(outcome: &HashOutcome) -> String {
    if outcome.branch == "failed_dlq" {
        "retry limit exhausted".to_string()
    } else {
        "dead-lettered by the consumer".to_string()
    }
}
