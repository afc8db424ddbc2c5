//! The dead-letter routes: `GET /api/v1/dlq` (list), `POST
//! /api/v1/messages/:partitionId/:transactionId/retry` (replay) and `DELETE
//! /api/v1/messages/:partitionId/:transactionId` (discard).
//!
//! Rows are filed by the ack path (`log_dlq_head_v3`); this module only reads, replays and
//! deletes them, always within the caller's tenant (a foreign row answers like an unknown one).
//!
//! The listing answers Queen's shape: `{"messages": [{"id" (the message id), "queue",
//! "partition", "partitionId", "consumerGroup", "offset", "transactionId", "data",
//! "errorMessage", "retryCount", "createdAt", "failedAt"}], "pagination": {"total", "limit",
//! "offset"}}`. `createdAt` is the push time carried by the UUIDv7 message id (to the
//! millisecond; null when the payload was retained away before filing). A row filed from an
//! encrypted queue holds its payload sealed (`log_dlq.sealed`): it is opened here with the
//! message id; a payload that cannot be opened (no or another key) is listed with `data: null`
//! and a `dataError`, logged, and a replay of it answers 500 and keeps the row.
//!
//! Decisions where the wire is silent:
//! - Several rows can share (partitionId, transactionId): one per consumer group that
//!   dead-lettered the message, or one per offset when the transactionId was pushed again
//!   outside the dedup window. Retry and delete act on ALL of them unless the optional query
//!   parameter `consumerGroup` (`__QUEUE_MODE__` for queue mode) narrows them to one group.
//! - Replay is a re-push, not a revival: one message per distinct original offset goes to the
//!   tail of the same queue and partition, where every consumer group will see it. Its identity
//!   is fresh: a new UUIDv7 message id, and a transactionId equal to that new id (as for a push
//!   without transactionId). The original transactionId is not reused, because inside the dedup
//!   window the push would refuse it as a duplicate; the answer carries both so a client can
//!   link them. The original offset stays committed.
//! - Atomicity: the re-push commits first, then exactly the replayed rows are deleted (by id).
//!   A failure or crash between the two leaves the DLQ row in place beside the replayed copy:
//!   a later retry can duplicate, nothing is ever lost. Two concurrent retries of one row can
//!   likewise both replay it (at-least-once). No pooled connection is held across the re-push.
//! - The list is ordered by filing (DLQ row id ascending), so paging is stable; empty filter
//!   values count as absent.

use std::time::SystemTime;

use hyper::StatusCode;
use serde::Serialize;
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::app::App;
use crate::http::{self, Answer, ApiError, Request, Route};
use crate::routes::push::{push_items, Item};
use crate::storage::procs::{self, dlq::DlqEntry};
use ackbench_wire::{DlqMessage, DlqPage, DlqPagination, QUEUE_MODE_GROUP};

const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 10_000;

/// `GET /api/v1/dlq?queue=&consumerGroup=&partition=&limit=100&offset=0`.
pub async fn list(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let queue = filter(req, "queue");
    let group = filter(req, "consumerGroup");
    let partition = filter(req, "partition");
    let limit = int_param(req, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)? as i32;
    let offset = int_param(req, "offset", 0, 0, i64::MAX)?;
    let db = app.db("dlq_list").await?;
    let filter = procs::dlq::DlqFilter {
        tenant: req.tenant,
        queue: queue.as_deref(),
        group: group.as_deref(),
        partition: partition.as_deref(),
        limit,
        offset,
    };
    let rows = procs::dlq::dlq_list(&db, &filter).await?;
    drop(db);
    let total = rows.first().map_or(0, |r| r.total);
    let messages = rows
        .into_iter()
        .filter_map(|r| r.entry)
        .map(|e| dlq_message(app, e))
        .collect();
    let pagination = DlqPagination {
        total: Some(total),
        limit: limit.into(),
        offset,
    };
    Ok(http::json(
        StatusCode::OK,
        &DlqPage {
            messages,
            pagination,
            total: Some(total),
        },
    ))
}

/// One listed row as the wire shows it (queue mode's group is null).
fn dlq_message(app: &App, row: DlqEntry) -> DlqMessage {
    let group = row.consumer_group;
    let message_id = row.message_id;
    let (data, data_error) = match payload_text(app, row.payload, row.sealed, message_id) {
        Ok(text) => (raw_payload(text), None),
        Err(e) => (raw_payload(None), Some(e)),
    };
    DlqMessage {
        id: message_id.to_string(),
        queue: row.queue_name,
        partition: row.partition_name,
        partition_id: row.partition_id.to_string(),
        consumer_group: (group != QUEUE_MODE_GROUP).then_some(group),
        offset: Some(row.offset),
        transaction_id: row.transaction_id,
        data,
        data_error,
        error_message: row.error,
        retry_count: row.retry_count,
        created_at: pushed_at(message_id),
        failed_at: Some(humantime::format_rfc3339_micros(row.failed_at).to_string()),
    }
}

/// When a message was pushed, read from its UUIDv7 id (`None` for the nil id of a payload
/// retained away before filing).
fn pushed_at(message_id: Uuid) -> Option<String> {
    let (secs, nanos) = message_id.get_timestamp()?.to_unix();
    let at = SystemTime::UNIX_EPOCH + std::time::Duration::new(secs, nanos);
    Some(humantime::format_rfc3339_micros(at).to_string())
}

/// A stored payload's JSON text, opened when the row holds it sealed (a JSON string of the
/// hex of the sealed bytes); the error says why it cannot be (logged here).
fn payload_text(
    app: &App,
    stored: Option<String>,
    sealed: bool,
    message_id: Uuid,
) -> Result<Option<String>, String> {
    if !sealed {
        return Ok(stored);
    }
    let opened = stored
        .as_deref()
        .and_then(|t| serde_json::from_str::<String>(t).ok())
        .and_then(|h| hex::decode(h).ok())
        .ok_or_else(|| format!("sealed payload of message {message_id} is not hex text"))
        .and_then(|bytes| crate::crypto::open_with(app.sealer.as_deref(), &bytes, message_id))
        .and_then(|plain| {
            String::from_utf8(plain).map_err(|_| format!("payload of {message_id} is not UTF-8"))
        });
    if let Err(e) = &opened {
        tracing::error!(%message_id, error = %e, "a dead-lettered payload cannot be decrypted");
    }
    opened.map(Some)
}

/// A stored payload's JSON text as the answer's raw `data` (stored text is JSON: the column is
/// `json`; a NULL reads as JSON null).
fn raw_payload(text: Option<String>) -> Box<RawValue> {
    text.and_then(|t| RawValue::from_string(t).ok())
        .unwrap_or_else(|| RawValue::from_string("null".into()).expect("null is JSON"))
}

/// A DLQ row being replayed.
struct Stored {
    message_id: Uuid,
    sealed: bool,
    id: i64,
    queue: String,
    partition: String,
    offset: i64,
    /// The payload's JSON text, as pushed.
    payload: String,
}

/// One replayed message in the retry answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Replayed {
    message_id: String,
    transaction_id: String,
    original_offset: i64,
    status: String,
}

/// The retry answer: the first replay's identity at the top, every replay in `messages`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RetryAnswer {
    retried: bool,
    partition_id: String,
    queue: String,
    partition: String,
    message_id: String,
    transaction_id: String,
    original_transaction_id: String,
    messages: Vec<Replayed>,
    deleted: i64,
}

/// `POST /api/v1/messages/:partitionId/:transactionId/retry`: re-push, then delete.
pub async fn retry(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let (pid, txn) = message_key(req)?;
    let group = filter(req, "consumerGroup");
    let stored = fetch(app, req.tenant, pid, txn, group.as_deref()).await?;
    if stored.is_empty() {
        return Err(no_row(pid, txn));
    }
    let items = replay_items(app, &stored)?;
    let pushed = push_items(app, req.tenant, &items).await?;
    let ids: Vec<i64> = stored.iter().map(|s| s.id).collect();
    let db = app.db("dlq_retry").await?;
    let deleted = procs::dlq::dlq_delete_ids(&db, req.tenant, pid, &ids).await?;
    drop(db);
    let offsets = distinct_offsets(&stored);
    let messages: Vec<Replayed> = pushed
        .into_iter()
        .zip(offsets)
        .map(|(p, offset)| Replayed {
            message_id: p.message_id.unwrap_or_default(),
            transaction_id: p.transaction_id,
            original_offset: offset,
            status: p.status,
        })
        .collect();
    let answer = RetryAnswer {
        retried: true,
        partition_id: pid.to_string(),
        queue: items[0].queue.clone(),
        partition: items[0].partition.clone(),
        message_id: messages[0].message_id.clone(),
        transaction_id: messages[0].transaction_id.clone(),
        original_transaction_id: txn.to_string(),
        messages,
        deleted,
    };
    Ok(http::json(StatusCode::OK, &answer))
}

/// `DELETE /api/v1/messages/:partitionId/:transactionId`: discards the row(s).
pub async fn delete(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let (pid, txn) = message_key(req)?;
    let group = filter(req, "consumerGroup");
    let db = app.db("dlq_delete").await?;
    let deleted = procs::dlq::dlq_delete(&db, req.tenant, pid, txn, group.as_deref()).await?;
    if deleted == 0 {
        return Err(no_row(pid, txn));
    }
    Ok(http::json(
        StatusCode::OK,
        &serde_json::json!({ "deleted": deleted }),
    ))
}

/// The DLQ rows of (partition, transactionId) in the tenant, offset order.
async fn fetch(
    app: &App,
    tenant: Uuid,
    pid: Uuid,
    txn: &str,
    group: Option<&str>,
) -> Result<Vec<Stored>, ApiError> {
    let db = app.db("dlq_retry").await?;
    let rows = procs::dlq::dlq_fetch(&db, tenant, pid, txn, group).await?;
    Ok(rows
        .into_iter()
        .map(|r| Stored {
            message_id: r.message_id,
            sealed: r.sealed,
            id: r.id,
            queue: r.queue_name,
            partition: r.partition_name,
            offset: r.offset,
            payload: r.payload,
        })
        .collect())
}

/// One push item per distinct original offset, each under a fresh identity; a sealed payload
/// is opened first (500, row kept, when it cannot be).
fn replay_items(app: &App, stored: &[Stored]) -> Result<Vec<Item>, ApiError> {
    let mut items: Vec<Item> = Vec::new();
    let mut last: Option<i64> = None;
    for s in stored {
        if last == Some(s.offset) {
            continue;
        }
        last = Some(s.offset);
        let payload = payload_text(app, Some(s.payload.clone()), s.sealed, s.message_id)
            .map_err(ApiError::internal)?
            .unwrap_or_else(|| "null".into());
        let message_id = Uuid::now_v7();
        items.push(Item {
            queue: s.queue.clone(),
            partition: s.partition.clone(),
            transaction_id: message_id.to_string(),
            message_id,
            payload: payload.into_bytes(),
        });
    }
    Ok(items)
}

/// The distinct original offsets, in the order `replay_items` replays them.
fn distinct_offsets(stored: &[Stored]) -> Vec<i64> {
    let mut offsets: Vec<i64> = stored.iter().map(|s| s.offset).collect();
    offsets.dedup();
    offsets
}

/// The (partitionId, transactionId) of a message route; a partitionId that is not a UUID, or an
/// empty transactionId, is a 400.
fn message_key(req: &Request) -> Result<(Uuid, &str), ApiError> {
    let (pid, txn) = match &req.route {
        Route::MessageRetry {
            partition_id,
            transaction_id,
        }
        | Route::MessageDelete {
            partition_id,
            transaction_id,
        } => (partition_id, transaction_id),
        _ => return Err(ApiError::internal("dlq handler reached for another route")),
    };
    let pid = Uuid::parse_str(pid)
        .map_err(|_| ApiError::bad_request(format!("partitionId must be a UUID, not `{pid}`")))?;
    if txn.is_empty() {
        return Err(ApiError::bad_request(
            "transactionId must be a non-empty string",
        ));
    }
    Ok((pid, txn.as_str()))
}

fn no_row(pid: Uuid, txn: &str) -> ApiError {
    ApiError::not_found(format!(
        "no dead-lettered message with transactionId `{txn}` in partition {pid}"
    ))
}

/// A query filter; absent and empty both mean "any".
fn filter(req: &Request, name: &str) -> Option<String> {
    req.param(name)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

fn int_param(req: &Request, name: &str, default: i64, min: i64, max: i64) -> Result<i64, ApiError> {
    match req.param(name) {
        None => Ok(default),
        Some(raw) => raw
            .parse::<i64>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "{name} must be a whole number in {min}..={max}, not `{raw}`"
                ))
            }),
    }
}
