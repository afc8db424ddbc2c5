//! `POST /api/v1/push`: one segment per (partition, request), with its hash-sidecar row.
//!
//! The request is validated whole before anything is written. Items are grouped by (queue,
//! partition) in order of first appearance; each group becomes one segment of compressed frames
//! and one `log_txns` row of 16-byte hashes, all written by one `queen.log_push_v1` call (one
//! transaction). When the procedure reports duplicates it has written nothing; the duplicates
//! are set aside and the call is repeated without them (each round only shrinks the input). A
//! duplicate answers with the original message's id, read back from the stored segment.

use std::collections::HashMap;

use hyper::StatusCode;
use serde_json::Value;
use uuid::Uuid;

use crate::app::App;
use crate::http::json::{parse_object, Fields};
use crate::http::{self, Answer, ApiError, Request};
use crate::metrics::Metrics;
use crate::segment::{self, FrameRef};
use crate::storage::DbError;
use ackbench_wire::{txn_hash, PushResult};

const MAX_TXN_BYTES: usize = 65535;

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
    let body = parse_object(&req.body)?;
    let items = validate_items(Fields::root(&body).req_array("items")?, "items")?;
    if items.is_empty() {
        return Ok(http::json(StatusCode::CREATED, &Vec::<PushResult>::new()));
    }
    let results = push_items(app, req.tenant, &items).await?;
    Ok(http::json(StatusCode::CREATED, &results))
}

/// Validates push items (`path` names the array in errors: `items`, `operations[2].items`).
pub fn validate_items(values: &[Value], path: &str) -> Result<Vec<Item>, ApiError> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let f = Fields::of(v, format!("{path}[{i}]"))?;
            let queue = f.req_nonempty("queue")?.to_string();
            let partition = f
                .opt_nonempty("partition")?
                .unwrap_or("Default")
                .to_string();
            let message_id = Uuid::now_v7();
            let transaction_id = match f.opt_nonempty("transactionId")? {
                Some(t) if t.len() > MAX_TXN_BYTES => {
                    return Err(ApiError::bad_request(format!(
                        "{} must be at most {MAX_TXN_BYTES} bytes",
                        f.name("transactionId")
                    )))
                }
                Some(t) => t.to_string(),
                None => message_id.to_string(),
            };
            let payload = match f.map.get("payload") {
                Some(p) => serde_json::to_vec(p).expect("JSON values serialise"),
                None => {
                    return Err(ApiError::bad_request(format!(
                        "{} is required",
                        f.name("payload")
                    )))
                }
            };
            Ok(Item {
                queue,
                partition,
                transaction_id,
                message_id,
                payload,
            })
        })
        .collect()
}

/// Writes the items and answers one result per item, in input order.
pub async fn push_items(
    app: &App,
    tenant: Uuid,
    items: &[Item],
) -> Result<Vec<PushResult>, ApiError> {
    let groups = group_by_partition(items);
    let mut outcome: Vec<Outcome> = items.iter().map(|_| Outcome::Pending).collect();
    let db = app.db("push").await?;
    let stmt = db
        .prepare_cached(
            "SELECT ordinal, partition_id, written, dup_index, dup_offset, dup_first, base_offset \
                         FROM queen.log_push_v1($1, $2, $3, $4, $5)",
        )
        .await
        .map_err(|e| DbError::from_pg("log_push_v1", e))?;
    loop {
        let call = PushCall::build(items, &groups, &outcome);
        if call.members.is_empty() {
            break;
        }
        let rows = db
            .query(
                &stmt,
                &[
                    &tenant,
                    &call.queues,
                    &call.partitions,
                    &call.hashes,
                    &call.blobs,
                ],
            )
            .await
            .map_err(|e| DbError::from_pg("log_push_v1", e))?;
        let written = rows.iter().all(|r| r.get::<_, bool>("written"));
        for row in &rows {
            let members = &call.members[row.get::<_, i32>("ordinal") as usize - 1];
            if written {
                members.iter().for_each(|&i| outcome[i] = Outcome::Queued);
                let (pid, base): (Uuid, i64) = (row.get("partition_id"), row.get("base_offset"));
                let queue = &items[members[0]].queue;
                crate::pop::on_pushed(app, tenant, queue, pid, base + members.len() as i64 - 1);
                continue;
            }
            let pid: Uuid = row.get("partition_id");
            let idx: Vec<i32> = row.get("dup_index");
            let offs: Vec<i64> = row.get("dup_offset");
            let firsts: Vec<i32> = row.get("dup_first");
            for ((k, off), first) in idx.iter().zip(&offs).zip(&firsts) {
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

    let queued = outcome
        .iter()
        .filter(|o| matches!(o, Outcome::Queued))
        .count() as u64;
    Metrics::add(&app.metrics.messages_pushed, queued);
    Metrics::add(&app.metrics.messages_duplicate, items.len() as u64 - queued);
    for g in &groups {
        let queued_here = g
            .iter()
            .filter(|&&i| matches!(outcome[i], Outcome::Queued))
            .count();
        if queued_here > 0 {
            app.long_poll
                .pushed(tenant, &items[g[0]].queue, queued_here);
        }
    }
    Ok(items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let (status, message_id) = match &outcome[i] {
                Outcome::Queued | Outcome::Pending => ("queued", Some(item.message_id.to_string())),
                _ => ("duplicate", original_of(i, items, &outcome, &originals)),
            };
            PushResult {
                index: i,
                message_id,
                transaction_id: item.transaction_id.clone(),
                queue_name: item.queue.clone(),
                status: status.to_string(),
            }
        })
        .collect())
}

/// Item indices grouped by (queue, partition), groups in order of first appearance.
fn group_by_partition(items: &[Item]) -> Vec<Vec<usize>> {
    let mut index: HashMap<(&str, &str), usize> = HashMap::new();
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

/// The arrays of one `log_push_v1` call, built from the items still pending.
struct PushCall {
    members: Vec<Vec<usize>>,
    queues: Vec<String>,
    partitions: Vec<String>,
    hashes: Vec<Vec<u8>>,
    blobs: Vec<Vec<u8>>,
}

impl PushCall {
    fn build(items: &[Item], groups: &[Vec<usize>], outcome: &[Outcome]) -> PushCall {
        let mut call = PushCall {
            members: vec![],
            queues: vec![],
            partitions: vec![],
            hashes: vec![],
            blobs: vec![],
        };
        for g in groups {
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
            call.blobs.push(segment::pack(&frames));
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
        if let Some(frame) = crate::routes::frame_at(db, *pid, *off).await? {
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
