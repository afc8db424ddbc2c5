//! `POST /api/v1/transaction`: pushes and acks committed together, or not at all (shared spec
//! `wire.md`, "Transaction"; `ack-internals.md`, "Acks inside a transaction").
//!
//! Body `{"operations": [{"type": "push", "items": [...]} | {"type": "ack", "transactionId",
//! "partitionId", "status", "consumerGroup"?, "leaseId"?, "error"?}], "requiredLeases"?:
//! [leaseId, ...]}`. The whole body is validated first (a 400 names the field, e.g.
//! `operations[2].type`, and nothing is written); then everything goes to PostgreSQL as ONE
//! `log_transaction_wire_v2(payload jsonb)` call, one transaction:
//!
//! - Pushes: the items of every push operation are grouped by (queue, partition) in order of
//!   first appearance, each group one segment packed here (`segment::pack`) with its 16-byte
//!   hashes (`txn_hash`), both hex-encoded in the payload. A duplicate (of a stored message in
//!   the dedup window, or of an earlier item of this transaction, whichever operation it came
//!   from) rolls everything back. On a queue with `dedupWindowSeconds: 0` deduplication is off,
//!   here as on the push route.
//! - Acks: grouped by (partition, group, leaseId) like the ack route. A group whose items are all
//!   `completed` under a leaseId, and whose every transactionId the ack registry knows from the
//!   pop this process served, is sent positional (`log_ack_v1` by queue/partition name, upto =
//!   the highest acked offset, count 0 = no cursor assertion); any other group is sent by hash
//!   (`log_ack_by_hash_v1`). An unresolvable or already-committed position, or a refused lease,
//!   rolls everything back. A partition of another tenant is unknown: 'unresolvable'.
//! - `requiredLeases`: each must be a live lease on a partition of the caller's tenant, checked
//!   under the consumer row locks, before the acks (which may then release them).
//!
//! Answers: 200 `{"success": true, "transactionId": <fresh UUIDv7>, "results": [...]}`, one
//! result per operation in request order: push `{"index", "type": "push", "success": true,
//! "items": [<the push route's per-item answers>]}`, ack `{"index", "type": "ack", "success",
//! "transactionId", "error", "leaseReleased", "dlq", "noop"}`. A refusal raised by the procedure
//! (a JSON object in the exception's DETAIL, read through `DbError::detail`) answers 200 `{"success": false, "error": "<operation and transactionId, and
//! why>", "results": []}` with nothing committed; any other database failure is a logged 5xx.
//!
//! After the commit: a hash-mode group whose answer handed off a DLQ (`dlq: true`, lease kept)
//! is filed through `ack::dlq_filing` under that lease. The filing is its own statement; if it
//! is refused or fails, that ack answers `success: false` with why while the transaction stays
//! committed (the hand-off is pending under the kept lease, which expires and redelivers the
//! poison: nothing is lost). Every acked group's registry entry is forgotten (an SQL outcome
//! ends it); on a rollback only a refused positional group's entry is, so a retry takes the
//! hash path, the authority.

use std::collections::{HashMap, HashSet};

use hyper::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::ack::dlq_filing::{self, DlqFiling};
use crate::ack::hash_path::success;
use crate::ack::registry::Positions;
use crate::ack::{self, AckGroup, AckItem, AckStatus, HashOutcome, PositionalOutcome};
use crate::app::App;
use crate::crypto::Sealer;
use crate::http::json::{field, read_body, Fields};
use crate::http::limits;
use crate::http::{self, Answer, ApiError, Request};
use crate::metrics::Metrics;
use crate::routes::ack::{explain_item as explain_ack, item as ack_item};
use crate::routes::push::{explain_items, validate_items, Item};
use crate::segment::{self, FrameRef};
use crate::storage::{procs, DbError};
use ackbench_wire::hash::hash_hex;
use ackbench_wire::{
    txn_hash, AckResult, Operation, PushItem, PushResult, TransactionBody, TxnHash,
};

/// One validated operation.
enum Op {
    Push(Vec<Item>),
    Ack(AckItem),
}

/// A validated body.
struct Body {
    ops: Vec<Op>,
    required_leases: Vec<String>,
}

/// One push group: the (operation, item) positions of its members, in frame order.
struct PushGroup {
    queue: String,
    partition: String,
    members: Vec<(usize, usize)>,
}

/// How an ack group is sent.
enum Mode {
    /// Where the registry saw the acked transactionIds delivered.
    Positional(Positions),
    Hash,
}

/// One ack group with what the payload says about it.
struct AckPlan {
    group: AckGroup,
    hashes: Vec<TxnHash>,
    mode: Mode,
}

pub async fn handle(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let body = parse(&req.body)?;
    let pushes = push_groups(&body.ops);
    let names: Vec<&str> = pushes.iter().map(|g| g.queue.as_str()).collect();
    let sealed = crate::routes::push::queue_facts(app, req.tenant, &names)
        .await?
        .groups;
    let acks = ack_plans(app, req.tenant, &body.ops);
    let sealer = app.sealer.as_deref();
    let payload = payload(req.tenant, &body, &pushes, &sealed, sealer, &acks);
    let transaction_id = Uuid::now_v7();

    let db = app.db("transaction").await?;
    let answer: Value = match procs::transaction::transaction_wire(&db, &payload).await {
        Ok(answer) => answer,
        Err(e) => {
            drop(db);
            let Some((r, why)) = Refusal::of(&e)
                .and_then(|r| refusal(&r, &body, &pushes, &acks).map(|why| (r, why)))
            else {
                return Err(e.into());
            };
            forget_refused_positional(app, &r, &acks);
            tracing::debug!(%transaction_id, error = %why, "transaction rolled back");
            return Ok(http::json(
                StatusCode::OK,
                &json!({ "success": false, "error": why, "results": [] }),
            ));
        }
    };

    // Committed: wake the parked pops, end the acked groups' registry entries.
    let pushed: usize = pushes.iter().map(|g| g.members.len()).sum();
    Metrics::add(&app.metrics.counters.messages_pushed, pushed as u64);
    for g in &pushes {
        // Pushed without partition ids at hand: the queue's candidate lists are reseeded.
        if let Some(hot) = &app.ready.hotlist {
            hot.invalidate(&(req.tenant, g.queue.clone()));
        }
        app.ready
            .long_poll
            .pushed(req.tenant, &g.queue, Some(&g.partition), g.members.len());
        app.ready
            .publish(crate::peers::message::Event::QueueChanged {
                tenant: req.tenant,
                queue: g.queue.clone(),
            });
    }
    if let Some(registry) = &app.registry {
        for g in acks.iter().map(|plan| &plan.group) {
            registry.forget(g.partition_id, &g.consumer_group, &g.lease_id);
        }
    }

    // DLQ hand-offs are filed now, each its own statement on this connection.
    let mut per_item: HashMap<usize, AckResult> = HashMap::new();
    let outcomes = ack_outcomes(&answer)?;
    for (ordinal, plan) in acks.iter().enumerate() {
        let result = outcomes.get(&ordinal).ok_or_else(|| {
            ApiError::internal(format!(
                "log_transaction_wire_v2 did not answer ack group {ordinal}"
            ))
        })?;
        let results = match plan.mode {
            Mode::Positional(_) => positional_results(app, plan, result)?,
            Mode::Hash => hash_results(app, &db, plan, result).await?,
        };
        for r in results {
            per_item.insert(r.index, r);
        }
    }
    drop(db);

    let results: Vec<Value> = body
        .ops
        .iter()
        .enumerate()
        .map(|(i, op)| match op {
            Op::Push(items) => json!({
                "index": i,
                "type": "push",
                "success": true,
                "items": push_results(items),
            }),
            Op::Ack(_) => {
                let r = &per_item[&i];
                json!({
                    "index": i,
                    "type": "ack",
                    "success": r.success,
                    "transactionId": r.transaction_id,
                    "error": r.error,
                    "leaseReleased": r.lease_released,
                    "dlq": r.dlq,
                    "noop": r.noop,
                })
            }
        })
        .collect();
    Ok(http::json(
        StatusCode::OK,
        &json!({
            "success": true,
            "transactionId": transaction_id.to_string(),
            "results": results,
        }),
    ))
}

// ---------------------------------------------------------------------------------------------
// validation

fn parse(raw: &[u8]) -> Result<Body, ApiError> {
    let body: TransactionBody = read_body(raw, explain)?;
    if body.operations.is_empty() {
        return Err(ApiError::bad_request(
            "operations must hold at least one operation",
        ));
    }
    let ops = body
        .operations
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let path = format!("operations[{i}]");
            match op {
                Operation::Push { items } => {
                    let items: Vec<_> = items.iter().map(PushItem::borrowed).collect();
                    Ok(Op::Push(validate_items(&items, &field(&path, "items"))?))
                }
                Operation::Ack(a) => {
                    Ok(Op::Ack(ack_item(&a.borrowed(), || path.clone(), i, None)?))
                }
            }
        })
        .collect::<Result<Vec<Op>, ApiError>>()?;
    let required_leases = body.required_leases.unwrap_or_default();
    if let Some(i) = required_leases.iter().position(String::is_empty) {
        return Err(lease_not_a_string(i));
    }
    for (i, lease) in required_leases.iter().enumerate() {
        limits::name(lease, &format!("requiredLeases[{i}]"))?;
    }
    Ok(Body {
        ops,
        required_leases,
    })
}

fn lease_not_a_string(i: usize) -> ApiError {
    ApiError::bad_request(format!("requiredLeases[{i}] must be a non-empty string"))
}

/// Names the field of a body that does not fit `TransactionBody`.
fn explain(root: &Fields<'_>) -> Result<(), ApiError> {
    for (i, v) in root.req_array("operations")?.iter().enumerate() {
        let f = Fields::of(v, format!("operations[{i}]"))?;
        match f.req_nonempty("type")? {
            "push" => explain_items(f.req_array("items")?, &f.name("items"))?,
            "ack" => explain_ack(&f)?,
            other => {
                return Err(ApiError::bad_request(format!(
                    "{} must be \"push\" or \"ack\" (not `{other}`)",
                    f.name("type")
                )))
            }
        }
    }
    let leases = root.opt_array("requiredLeases")?.into_iter().flatten();
    match leases.enumerate().find(|(_, v)| !v.is_string()) {
        Some((i, _)) => Err(lease_not_a_string(i)),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// the payload

/// Every push operation's items grouped by (queue, partition), in order of first appearance.
fn push_groups(ops: &[Op]) -> Vec<PushGroup> {
    let mut index: HashMap<(&str, &str), usize> = HashMap::new();
    let mut groups: Vec<PushGroup> = Vec::new();
    for (o, op) in ops.iter().enumerate() {
        let Op::Push(items) = op else { continue };
        for (k, item) in items.iter().enumerate() {
            let g = *index
                .entry((&item.queue, &item.partition))
                .or_insert_with(|| {
                    groups.push(PushGroup {
                        queue: item.queue.clone(),
                        partition: item.partition.clone(),
                        members: Vec::new(),
                    });
                    groups.len() - 1
                });
            groups[g].members.push((o, k));
        }
    }
    groups
}

/// The item at an (operation, item) position.
fn item_at(ops: &[Op], (o, k): (usize, usize)) -> &Item {
    match &ops[o] {
        Op::Push(items) => &items[k],
        Op::Ack(_) => unreachable!("push groups only hold push items"),
    }
}

/// The ack operations grouped by (partition, group, leaseId), each with its mode.
fn ack_plans(app: &App, tenant: Uuid, ops: &[Op]) -> Vec<AckPlan> {
    let items: Vec<AckItem> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Ack(a) => Some(a.clone()),
            Op::Push(_) => None,
        })
        .collect();
    ack::group_items(items)
        .into_iter()
        .map(|group| {
            let hashes: Vec<TxnHash> = group
                .items
                .iter()
                .map(|i| txn_hash(&i.transaction_id))
                .collect();
            let eligible = !group.lease_id.is_empty()
                && group.items.iter().all(|i| i.status == AckStatus::Completed);
            let positions = app.registry.as_ref().filter(|_| eligible).and_then(|r| {
                r.positions(
                    tenant,
                    group.partition_id,
                    &group.consumer_group,
                    &group.lease_id,
                    &hashes,
                )
            });
            AckPlan {
                group,
                hashes,
                mode: positions.map_or(Mode::Hash, Mode::Positional),
            }
        })
        .collect()
}

/// The jsonb argument of `log_transaction_wire_v2` (see `sql/procedures/transaction.sql`); the push
/// groups of encrypted queues (`sealed`) are packed sealed.
fn payload(
    tenant: Uuid,
    body: &Body,
    pushes: &[PushGroup],
    sealed: &[bool],
    sealer: Option<&Sealer>,
    acks: &[AckPlan],
) -> Value {
    let mut hashes = Vec::with_capacity(pushes.len());
    let mut blobs = Vec::with_capacity(pushes.len());
    for (g, &sealed) in pushes.iter().zip(sealed) {
        let items: Vec<&Item> = g.members.iter().map(|&m| item_at(&body.ops, m)).collect();
        let frames: Vec<FrameRef<'_>> = items
            .iter()
            .map(|i| FrameRef {
                message_id: i.message_id,
                transaction_id: &i.transaction_id,
                payload: &i.payload,
            })
            .collect();
        let h: Vec<u8> = items
            .iter()
            .flat_map(|i| txn_hash(&i.transaction_id))
            .collect();
        hashes.push(hex::encode(h));
        let blob = segment::pack_with(&frames, sealer.filter(|_| sealed));
        blobs.push(hex::encode(blob));
    }
    let acks: Vec<Value> = acks
        .iter()
        .enumerate()
        .map(|(ordinal, plan)| {
            let g = &plan.group;
            let mut a = json!({
                "ordinal": ordinal,
                "partition_id": g.partition_id,
                "group": g.consumer_group,
                "worker": g.lease_id,
            });
            match &plan.mode {
                // count 0: no "cursor still where the pop left it" assertion (the registry's
                // count is of distinct acked ids, not of the span).
                Mode::Positional(p) => {
                    a["mode"] = json!("positional");
                    a["queue"] = json!(p.queue);
                    a["partition"] = json!(p.partition);
                    a["upto"] = json!(p.upto);
                    a["count"] = json!(0);
                }
                Mode::Hash => {
                    a["mode"] = json!("hash");
                    a["hashes"] = json!(plan.hashes.iter().map(hash_hex).collect::<Vec<_>>());
                    a["statuses"] = json!(g
                        .items
                        .iter()
                        .map(|i| i.status.as_str())
                        .collect::<Vec<_>>());
                }
            }
            a
        })
        .collect();
    json!({
        "tenant": tenant,
        "required_leases": body.required_leases,
        "push": {
            "queues": pushes.iter().map(|g| &g.queue).collect::<Vec<_>>(),
            "partitions": pushes.iter().map(|g| &g.partition).collect::<Vec<_>>(),
            "hashes": hashes,
            "blobs": blobs,
        },
        "acks": acks,
    })
}

// ---------------------------------------------------------------------------------------------
// after the commit

/// The procedure's per-group answers, by ack ordinal.
fn ack_outcomes(answer: &Value) -> Result<HashMap<usize, Value>, ApiError> {
    let shape = || ApiError::internal("log_transaction_wire_v2 answered an unknown shape");
    answer["acks"]
        .as_array()
        .ok_or_else(shape)?
        .iter()
        .map(|a| {
            let ordinal = a["ordinal"].as_u64().ok_or_else(shape)? as usize;
            Ok((ordinal, a["result"].clone()))
        })
        .collect()
}

fn positional_results(
    app: &App,
    plan: &AckPlan,
    result: &Value,
) -> Result<Vec<AckResult>, ApiError> {
    let o: PositionalOutcome = ack::outcome("log_ack_v1", result.clone())?;
    Metrics::add(&app.metrics.acks_positional, plan.group.items.len() as u64);
    Metrics::add(&app.metrics.counters.messages_acked, o.acked.max(0) as u64);
    Ok(plan
        .group
        .items
        .iter()
        .map(|i| AckResult {
            lease_released: o.lease_released,
            ..success(i)
        })
        .collect())
}

async fn hash_results(
    app: &App,
    db: &deadpool_postgres::Object,
    plan: &AckPlan,
    result: &Value,
) -> Result<Vec<AckResult>, ApiError> {
    let o: HashOutcome = ack::outcome("log_ack_by_hash_v1", result.clone())?;
    let filing: Option<Result<DlqFiling, String>> = if o.ok && o.dlq {
        Some(
            dlq_filing::file_head(db, &plan.group, &o)
                .await
                .map_err(|e| {
                    tracing::error!(partition = %plan.group.partition_id, error = %e,
                        "transaction committed; its DLQ hand-off could not be filed (pending under the kept lease)");
                    format!("DLQ hand-off not filed ({e}); it stays pending under the lease")
                }),
        )
    } else {
        None
    };
    Metrics::add(&app.metrics.acks_hash, plan.group.items.len() as u64);
    let filed_acked = match &filing {
        Some(Ok(f)) => f.acked,
        _ => 0,
    };
    Metrics::add(
        &app.metrics.counters.messages_acked,
        (o.acked + filed_acked).max(0) as u64,
    );
    let noop: HashSet<&str> = o.noop_hashes.iter().map(String::as_str).collect();
    let lease_released = o.lease_released || matches!(&filing, Some(Ok(f)) if f.lease_released);
    Ok(plan
        .group
        .items
        .iter()
        .zip(&plan.hashes)
        .enumerate()
        .map(|(k, (item, hash))| {
            let at_poison = o.dlq && o.offsets.get(k).copied().flatten() == o.dlq_offset;
            let mut r = match &filing {
                Some(Ok(f)) if at_poison && f.filed => AckResult {
                    dlq: true,
                    ..success(item)
                },
                Some(Ok(f)) if at_poison => failure(
                    item,
                    f.error.as_deref().unwrap_or(ack::ERR_LEASE).to_string(),
                ),
                Some(Err(e)) if at_poison => failure(item, e.clone()),
                _ if item.status == AckStatus::Completed
                    && noop.contains(hash_hex(hash).as_str()) =>
                {
                    AckResult {
                        noop: true,
                        ..success(item)
                    }
                }
                _ => success(item),
            };
            r.lease_released = lease_released;
            r
        })
        .collect())
}

fn failure(item: &AckItem, error: String) -> AckResult {
    AckResult {
        success: false,
        error: Some(error),
        ..success(item)
    }
}

/// A push operation's per-item answers (all queued: the transaction committed).
fn push_results(items: &[Item]) -> Vec<PushResult> {
    items
        .iter()
        .enumerate()
        .map(|(k, i)| PushResult {
            index: k,
            message_id: Some(i.message_id.to_string()),
            transaction_id: i.transaction_id.clone(),
            queue_name: i.queue.clone(),
            status: "queued".to_string(),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// refusals

/// A refusal `log_transaction_wire_v2` raised, read from its DETAIL (`DbError::detail`, the
/// shapes listed at the head of `sql/procedures/transaction.sql`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "refusal", rename_all = "snake_case")]
enum Refusal {
    /// `requiredLeases[index]` is not a live lease of the caller's tenant.
    RequiredLease { index: usize },
    /// Frame `item` of push group `group` (1-based) duplicates frame `of_item` of the same
    /// group, or the stored message at `of_offset`.
    Duplicate {
        group: usize,
        item: usize,
        #[serde(default)]
        of_item: Option<usize>,
    },
    /// Ack group `ordinal` was refused for `reason`, at the position of `hash` when given.
    Ack {
        ordinal: usize,
        reason: String,
        #[serde(default)]
        hash: Option<String>,
    },
    /// A push would take `queue` above its maxSize.
    QueueFull {
        queue: String,
        #[serde(rename = "maxSize")]
        max_size: i64,
        depth: i64,
        pushing: i64,
    },
}

impl Refusal {
    fn of(e: &DbError) -> Option<Refusal> {
        serde_json::from_value(Value::Object(e.detail()?)).ok()
    }
}

/// The readable error of a refusal, naming the operation and the transactionId; `None` when
/// the refusal names something this request does not have (a 5xx then).
fn refusal(r: &Refusal, body: &Body, pushes: &[PushGroup], acks: &[AckPlan]) -> Option<String> {
    match r {
        Refusal::RequiredLease { index } => {
            let lease = body.required_leases.get(*index)?;
            Some(format!(
                "requiredLeases[{index}]: lease \"{lease}\" is not held; nothing was committed"
            ))
        }
        Refusal::Duplicate {
            group,
            item,
            of_item,
        } => duplicate_refusal(body, pushes.get(group.checked_sub(1)?)?, *item, *of_item),
        Refusal::Ack {
            ordinal,
            reason,
            hash,
        } => {
            let plan = acks.get(*ordinal)?;
            let item = hash
                .as_deref()
                .and_then(|h| plan.hashes.iter().position(|x| hash_hex(x) == h))
                .map_or(&plan.group.items[0], |k| &plan.group.items[k]);
            Some(format!(
                "operations[{}]: ack of transactionId \"{}\" refused: {reason}; nothing was \
                 committed",
                item.index, item.transaction_id
            ))
        }
        Refusal::QueueFull {
            queue,
            max_size,
            depth,
            pushing,
        } => Some(format!(
            "queue `{queue}` is full: maxSize {max_size}, {depth} unconsumed messages, this \
             transaction adds {pushing}; nothing was committed"
        )),
    }
}

fn duplicate_refusal(
    body: &Body,
    group: &PushGroup,
    item: usize,
    of_item: Option<usize>,
) -> Option<String> {
    let at = *group.members.get(item)?;
    let of = match of_item {
        Some(first) => {
            let first = *group.members.get(first)?;
            format!(
                "of operations[{}].items[{}] in this transaction",
                first.0, first.1
            )
        }
        None => format!(
            "of a message already pushed to queue \"{}\" partition \"{}\" inside the dedup \
             window",
            group.queue, group.partition
        ),
    };
    Some(format!(
        "operations[{}].items[{}]: transactionId \"{}\" is a duplicate {of}; nothing was \
         committed",
        at.0,
        at.1,
        item_at(&body.ops, at).transaction_id
    ))
}

/// A positional group PostgreSQL refused: its registry entry is stale, so it dies and a retry
/// goes by hash.
fn forget_refused_positional(app: &App, r: &Refusal, acks: &[AckPlan]) {
    let (Some(registry), Refusal::Ack { ordinal, .. }) = (&app.registry, r) else {
        return;
    };
    if let Some(plan) = acks.get(*ordinal) {
        if matches!(plan.mode, Mode::Positional(_)) {
            let g = &plan.group;
            registry.forget(g.partition_id, &g.consumer_group, &g.lease_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_details_read_into_refusals() {
        let read = |s: &str| serde_json::from_str::<Refusal>(s).unwrap();
        assert_eq!(
            read(r#"{"refusal":"required_lease","index":2,"lease":"w"}"#),
            Refusal::RequiredLease { index: 2 }
        );
        assert_eq!(
            read(r#"{"refusal":"duplicate","group":1,"item":3,"of_offset":7}"#),
            Refusal::Duplicate {
                group: 1,
                item: 3,
                of_item: None
            }
        );
        assert_eq!(
            read(r#"{"refusal":"ack","ordinal":0,"reason":"unresolvable","hash":null}"#),
            Refusal::Ack {
                ordinal: 0,
                reason: "unresolvable".into(),
                hash: None
            }
        );
    }
}
