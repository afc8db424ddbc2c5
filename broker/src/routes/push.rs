//! `POST /api/v1/push`: validation (the body read into `ackbench_wire::PushBody`), grouping by
//! partition, and the wire answer.
//!
//! Queue options act here: the payloads of a queue with `encryptionEnabled` are packed sealed
//! (`segment::pack_with`); a request with an item for a queue with a `maxSize` goes through
//! `log_push_v2` even with push fusion on, so that a refusal writes nothing of the request
//! (409, `ApiError::queue_full`). Which queues are encrypted or limited is read through
//! `queue_meta` (a brief hint); the limit's verdict is the procedure's.
//!
//! The request is validated whole before anything is written. Items are grouped by (queue,
//! partition) in order of first appearance. With push fusion on (the default) each group is a
//! job of the fusion engine (`push::fusion`), which commits it together with concurrent
//! pushes; the answer waits for every group's commit. With it off, all groups are written by
//! one `log_push_v2` call (one transaction, one segment and one `log_txns` row per
//! group); when that procedure reports duplicates it has written nothing, the duplicates are
//! set aside and the call is repeated without them (each round only shrinks the input). Either
//! way a duplicate answers with the original message's id, and every committed segment is
//! reported to `push::written::on_pushed`.

use std::collections::HashMap;

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::Value;
use uuid::Uuid;

use crate::app::App;
use crate::crypto::Sealer;
use crate::http::json::{field, nonempty, read_body_scanned, Fields};
use crate::http::limits::{self, MAX_TXN_BYTES};
use crate::http::{self, write, Answer, ApiError, Request};
use crate::metrics::Metrics;
use crate::push::fusion::{FrameFate, PushFrame, PushFusion, PushJob};
use crate::push::written::{on_pushed, WrittenSegment};
use crate::segment::{self, FrameRef};
use crate::storage::{procs, DbError};
use ackbench_wire::{scan, txn_hash, PushBodyRef, PushItemRef, PushResult};

/// One validated item.
pub struct Item {
    pub queue: String,
    pub partition: String,
    pub transaction_id: String,
    pub message_id: Uuid,
    pub payload: Vec<u8>,
}

/// What became of an item.
enum Outcome {
    Pending,
    Queued,
    /// A duplicate of a stored message at (partition id, offset).
    DuplicateOfStored(Uuid, i64),
    /// A duplicate of an earlier item of this request (its index).
    DuplicateOfItem(usize),
}

pub async fn handle(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let items = parse(&req.body)?;
    let settled = match items.is_empty() {
        true => Vec::new(),
        false => push_settled(app, req.tenant, &items).await?,
    };
    Ok(http::with_type(
        StatusCode::CREATED,
        Bytes::from(answer_body(&items, &settled)),
        "application/json",
    ))
}

/// Reads and validates a push body (borrowing its bytes until the items are made).
pub fn parse(body: &[u8]) -> Result<Vec<Item>, ApiError> {
    let body: PushBodyRef = read_body_scanned(body, scan::push_body, |root| {
        explain_items(root.req_array("items")?, "items")
    })?;
    validate_items(&body.items, "items")
}

/// Validates push items (`path` names the array in errors: `items`, `operations[2].items`).
pub fn validate_items(items: &[PushItemRef], path: &str) -> Result<Vec<Item>, ApiError> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| validate_item(item, || format!("{path}[{i}]")))
        .collect()
}

/// One item, read from the object at `path` (made only to name a refused field).
fn validate_item(item: &PushItemRef, path: impl Fn() -> String) -> Result<Item, ApiError> {
    let name = |key: &str| field(&path(), key);
    let queue = nonempty(Some(&item.queue), || name("queue"))?.unwrap_or_default();
    let partition = nonempty(item.partition.as_deref(), || name("partition"))?;
    limits::bounded_lazy(queue, limits::MAX_NAME_BYTES, || name("queue"))?;
    if let Some(p) = partition {
        limits::bounded_lazy(p, limits::MAX_NAME_BYTES, || name("partition"))?;
    }
    let message_id = Uuid::now_v7();
    let transaction_id = match nonempty(item.transaction_id.as_deref(), || name("transactionId"))? {
        Some(t) if t.len() > MAX_TXN_BYTES => {
            return Err(ApiError::bad_request(format!(
                "{} must be at most {MAX_TXN_BYTES} bytes",
                name("transactionId")
            )))
        }
        Some(t) => {
            limits::bounded_lazy(t, MAX_TXN_BYTES, || name("transactionId"))?;
            t.to_string()
        }
        None => message_id.to_string(),
    };
    let Some(payload) = item.payload else {
        return Err(ApiError::bad_request(format!(
            "{} is required",
            name("payload")
        )));
    };
    Ok(Item {
        queue: queue.to_string(),
        partition: partition.unwrap_or("Default").to_string(),
        transaction_id,
        message_id,
        payload: payload.get().as_bytes().to_vec(),
    })
}

/// Names the field of push items that do not fit `PushItem`.
pub fn explain_items(values: &[Value], path: &str) -> Result<(), ApiError> {
    for (i, v) in values.iter().enumerate() {
        let f = Fields::of(v, format!("{path}[{i}]"))?;
        f.req_nonempty("queue")?;
        f.opt_str("partition")?;
        f.opt_str("transactionId")?;
    }
    Ok(())
}

/// What became of an item, once settled.
pub enum Settled {
    Queued,
    /// A duplicate, answered with its original's message id (`None` when the original's
    /// segment is gone).
    Duplicate(Option<Uuid>),
}

/// Writes the items and answers one result per item, in input order.
pub async fn push_items(
    app: &App,
    tenant: Uuid,
    items: &[Item],
) -> Result<Vec<PushResult>, ApiError> {
    let settled = push_settled(app, tenant, items).await?;
    Ok(results(items, &settled))
}

/// Writes the items; what became of each, in input order.
pub async fn push_settled(
    app: &App,
    tenant: Uuid,
    items: &[Item],
) -> Result<Vec<Settled>, ApiError> {
    let groups = group_by_partition(items);
    let names: Vec<&str> = groups.iter().map(|g| items[g[0]].queue.as_str()).collect();
    let sealed = queue_facts(app, tenant, &names).await?;
    let settled = match (&app.push_fusion, sealed.limited) {
        (Some(fusion), false) => push_fused(fusion, tenant, items, &groups, &sealed.groups).await?,
        _ => push_direct(app, tenant, items, &groups, &sealed.groups).await?,
    };
    let queued = settled
        .iter()
        .filter(|o| matches!(o, Settled::Queued))
        .count() as u64;
    Metrics::add(&app.metrics.counters.messages_pushed, queued);
    Metrics::add(
        &app.metrics.counters.messages_duplicate,
        items.len() as u64 - queued,
    );
    Ok(settled)
}

/// Each item's status and message id (its own, or for a duplicate its original's).
fn fate(item: &Item, settled: &Settled) -> (&'static str, Option<Uuid>) {
    match settled {
        Settled::Queued => ("queued", Some(item.message_id)),
        Settled::Duplicate(original) => ("duplicate", *original),
    }
}

/// The answer's elements, in input order.
pub fn results(items: &[Item], settled: &[Settled]) -> Vec<PushResult> {
    items
        .iter()
        .zip(settled)
        .enumerate()
        .map(|(i, (item, settled))| {
            let (status, message_id) = fate(item, settled);
            PushResult {
                index: i,
                message_id: message_id.map(|id| id.to_string()),
                transaction_id: item.transaction_id.clone(),
                queue_name: item.queue.clone(),
                status: status.to_string(),
            }
        })
        .collect()
}

/// The answer's text, as `results` serialised, written straight into one buffer.
pub fn answer_body(items: &[Item], settled: &[Settled]) -> Vec<u8> {
    // Sized for the whole answer: growing a buffer of a hundred results copies it again and again.
    let size: usize = items
        .iter()
        .map(|i| 144 + i.transaction_id.len() + i.queue.len())
        .sum();
    let mut out = Vec::with_capacity(2 + size);
    out.push(b'[');
    for (i, (item, settled)) in items.iter().zip(settled).enumerate() {
        let (status, message_id) = fate(item, settled);
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"index\":");
        write::int(&mut out, i);
        out.extend_from_slice(b",\"message_id\":");
        match message_id {
            Some(id) => {
                out.push(b'"');
                write::uuid(&mut out, id);
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"transaction_id\":");
        write::str(&mut out, &item.transaction_id);
        out.extend_from_slice(b",\"queueName\":");
        write::str(&mut out, &item.queue);
        out.extend_from_slice(b",\"status\":\"");
        out.extend_from_slice(status.as_bytes());
        out.extend_from_slice(b"\"}");
    }
    out.push(b']');
    out
}

/// Per push group, whether its queue is encrypted; and whether any queue of the request has a
/// maxSize.
pub struct QueueFacts {
    pub groups: Vec<bool>,
    pub limited: bool,
}

/// Reads the options of the groups' queues (`queue_meta`, one name per group); an encrypted
/// queue without a key on this broker refuses the request (500: its payloads are never
/// stored in clear).
pub async fn queue_facts(app: &App, tenant: Uuid, names: &[&str]) -> Result<QueueFacts, ApiError> {
    let metas = app.queue_metas.of(&app.pool, tenant, names).await?;
    let meta = |name: &str| metas.get(name).copied().unwrap_or_default();
    if let Some(name) = names
        .iter()
        .find(|n| meta(n).encrypted && app.sealer.is_none())
    {
        tracing::error!(queue = %name, "a push to an encrypted queue, and QUEEN_ENCRYPTION_KEY is not set");
        return Err(ApiError::internal(format!(
            "queue `{name}` is encrypted and this broker has no QUEEN_ENCRYPTION_KEY"
        )));
    }
    Ok(QueueFacts {
        groups: names.iter().map(|n| meta(n).encrypted).collect(),
        limited: names.iter().any(|n| meta(n).max_size > 0),
    })
}

/// Push fusion: one job per (queue, partition) group, all enqueued at once; the answer waits
/// for every group's commit. The request holds no pooled connection meanwhile.
async fn push_fused(
    fusion: &PushFusion,
    tenant: Uuid,
    items: &[Item],
    groups: &[Vec<usize>],
    sealed: &[bool],
) -> Result<Vec<Settled>, ApiError> {
    let tickets: Vec<_> = groups
        .iter()
        .zip(sealed)
        .map(|(g, &sealed)| {
            fusion.submit(PushJob {
                tenant,
                queue: items[g[0]].queue.clone(),
                partition: items[g[0]].partition.clone(),
                sealed,
                frames: g
                    .iter()
                    .map(|&i| PushFrame {
                        message_id: items[i].message_id,
                        transaction_id: items[i].transaction_id.clone(),
                        payload: items[i].payload.clone(),
                        hash: txn_hash(&items[i].transaction_id),
                    })
                    .collect(),
            })
        })
        .collect();
    let mut settled: Vec<Settled> = items.iter().map(|_| Settled::Queued).collect();
    let mut failure = None;
    let mut full = None;
    for (g, ticket) in groups.iter().zip(tickets) {
        match ticket.await {
            Ok(done) => {
                for (&i, fate) in g.iter().zip(done.fates) {
                    settled[i] = match fate {
                        FrameFate::Written { .. } => Settled::Queued,
                        FrameFate::Duplicate { original } => Settled::Duplicate(original),
                        FrameFate::Full(refusal) => {
                            full = full.or(Some(refusal));
                            Settled::Queued
                        }
                    };
                }
            }
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    if let Some(refusal) = full {
        return Err(ApiError::queue_full(refusal));
    }
    match failure {
        None => Ok(settled),
        Some(message) => Err(DbError::unavailable("log_push_multi_v2", message).into()),
    }
}

/// Without push fusion (or for a request to a queue with a maxSize): every round is one
/// `log_push_v2` call (one transaction) for all the request's groups. A maxSize refusal
/// rolled the call back whole: 409.
async fn push_direct(
    app: &App,
    tenant: Uuid,
    items: &[Item],
    groups: &[Vec<usize>],
    sealed: &[bool],
) -> Result<Vec<Settled>, ApiError> {
    let mut outcome: Vec<Outcome> = items.iter().map(|_| Outcome::Pending).collect();
    let db = app.db("push").await?;
    let sealer = app.sealer.as_deref();
    loop {
        let call = PushCall::build(items, groups, sealed, sealer, &outcome);
        if call.members.is_empty() {
            break;
        }
        let columns = procs::push::Push {
            tenant,
            queues: &call.queues,
            partitions: &call.partitions,
            hashes: &call.hashes,
            blobs: &call.blobs,
        };
        let rows = procs::push::push(&db, &columns)
            .await
            .map_err(refused_or_failed)?;
        let written = rows.iter().all(|r| r.written);
        for row in &rows {
            let members = &call.members[row.ordinal as usize - 1];
            if written {
                members.iter().for_each(|&i| outcome[i] = Outcome::Queued);
                report_written(app, tenant, items, members, row);
                continue;
            }
            let pid = row.partition_id;
            let dups = &row.duplicates;
            for ((k, off), first) in dups.index.iter().zip(&dups.offset).zip(&dups.first) {
                let item = members[*k as usize];
                outcome[item] = if *off >= 0 {
                    Outcome::DuplicateOfStored(pid, *off)
                } else {
                    Outcome::DuplicateOfItem(members[*first as usize])
                };
            }
        }
        if written {
            break;
        }
    }
    let originals = original_ids(&db, &outcome).await?;
    drop(db);
    Ok((0..items.len())
        .map(|i| match outcome[i] {
            Outcome::Queued | Outcome::Pending => Settled::Queued,
            _ => Settled::Duplicate(
                original_of(i, items, &outcome, &originals).and_then(|s| s.parse().ok()),
            ),
        })
        .collect())
}

/// A maxSize refusal `log_push_v2` raised (409), else the failure.
pub fn refused_or_failed(e: DbError) -> ApiError {
    let full = e
        .detail()
        .filter(|d| d.get("refusal").and_then(|r| r.as_str()) == Some("queue_full"))
        .and_then(|d| serde_json::from_value(Value::Object(d)).ok());
    match full {
        Some(refusal) => ApiError::queue_full(refusal),
        None => e.into(),
    }
}

/// Hands one committed `log_push_v2` group to `on_pushed`.
fn report_written(
    app: &App,
    tenant: Uuid,
    items: &[Item],
    members: &[usize],
    row: &procs::push::PushRow,
) {
    let frames: Vec<FrameRef<'_>> = members
        .iter()
        .map(|&i| FrameRef {
            message_id: items[i].message_id,
            transaction_id: &items[i].transaction_id,
            payload: &items[i].payload,
        })
        .collect();
    let base_offset = row.base_offset.unwrap_or_default();
    let first = &items[members[0]];
    on_pushed(
        &app.ready,
        &app.segments,
        &WrittenSegment {
            tenant,
            queue: &first.queue,
            partition: &first.partition,
            partition_id: row.partition_id,
            base_offset,
            end_offset: base_offset + frames.len() as i64 - 1,
            created_at: None,
            frames: &frames,
        },
    );
}

/// Item indices grouped by (queue, partition), groups in order of first appearance.
fn group_by_partition(items: &[Item]) -> Vec<Vec<usize>> {
    let mut index: crate::fasthash::FastMap<(&str, &str), usize> = Default::default();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let g = *index
            .entry((&item.queue, &item.partition))
            .or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
        groups[g].push(i);
    }
    groups
}

/// The arrays of one `log_push_v2` call, built from the items still pending.
struct PushCall {
    members: Vec<Vec<usize>>,
    queues: Vec<String>,
    partitions: Vec<String>,
    hashes: Vec<Vec<u8>>,
    blobs: Vec<Vec<u8>>,
}

impl PushCall {
    fn build(
        items: &[Item],
        groups: &[Vec<usize>],
        sealed: &[bool],
        sealer: Option<&Sealer>,
        outcome: &[Outcome],
    ) -> PushCall {
        let mut call = PushCall {
            members: vec![],
            queues: vec![],
            partitions: vec![],
            hashes: vec![],
            blobs: vec![],
        };
        for (g, &sealed) in groups.iter().zip(sealed) {
            let members: Vec<usize> = g
                .iter()
                .copied()
                .filter(|&i| matches!(outcome[i], Outcome::Pending))
                .collect();
            if members.is_empty() {
                continue;
            }
            let frames: Vec<FrameRef<'_>> = members
                .iter()
                .map(|&i| FrameRef {
                    message_id: items[i].message_id,
                    transaction_id: &items[i].transaction_id,
                    payload: &items[i].payload,
                })
                .collect();
            call.hashes.push(
                members
                    .iter()
                    .flat_map(|&i| txn_hash(&items[i].transaction_id))
                    .collect(),
            );
            call.blobs
                .push(segment::pack_with(&frames, sealer.filter(|_| sealed)));
            call.queues.push(items[g[0]].queue.clone());
            call.partitions.push(items[g[0]].partition.clone());
            call.members.push(members);
        }
        call
    }
}

/// Reads the message ids of the stored originals of duplicates, keyed by (partition, offset).
async fn original_ids(
    db: &deadpool_postgres::Object,
    outcome: &[Outcome],
) -> Result<HashMap<(Uuid, i64), Uuid>, ApiError> {
    let mut ids = HashMap::new();
    for o in outcome {
        let Outcome::DuplicateOfStored(pid, off) = o else {
            continue;
        };
        if ids.contains_key(&(*pid, *off)) {
            continue;
        }
        if let Some(frame) = procs::push::frame_at(db, *pid, *off).await? {
            ids.insert((*pid, *off), frame.message_id);
        }
    }
    Ok(ids)
}

/// The message id a duplicate answers with: its stored original's, or its earlier twin's.
fn original_of(
    i: usize,
    items: &[Item],
    outcome: &[Outcome],
    originals: &HashMap<(Uuid, i64), Uuid>,
) -> Option<String> {
    match &outcome[i] {
        Outcome::DuplicateOfStored(pid, off) => originals.get(&(*pid, *off)).map(Uuid::to_string),
        Outcome::DuplicateOfItem(first) => match outcome[*first] {
            Outcome::Queued | Outcome::Pending => Some(items[*first].message_id.to_string()),
            _ => original_of(*first, items, outcome, originals),
        },
        _ => Some(items[i].message_id.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_answer_reads_as_the_results() {
        let item = |txn: &str, queue: &str| Item {
            queue: queue.into(),
            partition: "p".into(),
            transaction_id: txn.into(),
            message_id: Uuid::now_v7(),
            payload: b"null".to_vec(),
        };
        let items = [
            item("t-1", "q"),
            item("t\"2\u{e9}", "q\\u"),
            item("t-3", "q"),
        ];
        let settled = [
            Settled::Queued,
            Settled::Duplicate(Some(Uuid::now_v7())),
            Settled::Duplicate(None),
        ];
        let written: Vec<PushResult> =
            serde_json::from_slice(&answer_body(&items, &settled)).expect("JSON");
        assert_eq!(written, results(&items, &settled));
    }
}
