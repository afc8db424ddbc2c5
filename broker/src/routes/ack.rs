//! `POST /api/v1/ack` and `POST /api/v1/ack/batch` (shared spec `wire.md`, "Ack"); bodies read
//! into `ackbench_wire::{AckBody, AckBatchBody}`.
//!
//! Single: `{transactionId, partitionId, status, consumerGroup?, leaseId?, error?}`. Batch:
//! `{consumerGroup?, acknowledgments: [{transactionId, partitionId, status, leaseId?, error?,
//! consumerGroup?}]}`; an item's own consumerGroup wins over the batch's. An absent group is
//! queue mode (`__QUEUE_MODE__`, which is also accepted literally); an absent or empty leaseId
//! is a lease-less ack. The whole request is validated before anything is acked: a missing
//! field, an unknown status or a partitionId that is not a UUID is a 400 naming the field, and
//! nothing changes. Unknown extra fields are ignored (Queen clients send some). Both routes
//! answer 200 with a top-level array, one element per item in request order; an empty
//! `acknowledgments` answers `[]`.
//!
//! Items are acked group by group (`crate::ack`), each group its own transaction: a database
//! failure in a later group answers 503/500 after earlier groups committed. Repeating the
//! request is safe (those items then come back `noop`, or refused for their released lease).

use bytes::Bytes;
use hyper::StatusCode;
use uuid::Uuid;

use crate::ack::{self, AckItem, AckStatus};
use crate::app::App;
use crate::http::json::{field, nonempty, read_body_scanned, Fields};
use crate::http::limits;
use crate::http::{self, write, Answer, ApiError, Request, Route};
use ackbench_wire::{scan, AckBatchBodyRef, AckBodyRef, AckResult, QUEUE_MODE_GROUP};

pub async fn handle(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let items = parse(req)?;
    let results = ack::ack_items(app, req.tenant, items).await?;
    Ok(http::with_type(
        StatusCode::OK,
        Bytes::from(answer_body(&results)),
        "application/json",
    ))
}

/// Validates the body of either route into ack items (index = request position).
pub fn parse(req: &Request) -> Result<Vec<AckItem>, ApiError> {
    if req.route == Route::Ack {
        let body: AckBodyRef = read_body_scanned(&req.body, scan::ack_body, explain_item)?;
        return Ok(vec![item(&body, String::new, 0, None)?]);
    }
    let body: AckBatchBodyRef = read_body_scanned(&req.body, scan::ack_batch_body, explain_batch)?;
    let group = nonempty(body.consumer_group.as_deref(), || "consumerGroup".into())?;
    if let Some(g) = group {
        limits::name(g, "consumerGroup")?;
    }
    body.acknowledgments
        .iter()
        .enumerate()
        .map(|(i, a)| item(a, || format!("acknowledgments[{i}]"), i, group))
        .collect()
}

/// One item read from the object at `path` (made only to name a refused field);
/// `default_group` is the batch's consumerGroup.
pub fn item(
    a: &AckBodyRef,
    path: impl Fn() -> String,
    index: usize,
    default_group: Option<&str>,
) -> Result<AckItem, ApiError> {
    let name = |key: &str| field(&path(), key);
    let transaction_id = required(&a.transaction_id, || name("transactionId"))?;
    limits::bounded_lazy(transaction_id, limits::MAX_TXN_BYTES, || {
        name("transactionId")
    })?;
    let partition_id = Uuid::parse_str(required(&a.partition_id, || name("partitionId"))?)
        .map_err(|_| ApiError::bad_request(format!("{} must be a UUID", name("partitionId"))))?;
    let status = required(&a.status, || name("status"))?;
    let status = AckStatus::parse(status).ok_or_else(|| {
        ApiError::bad_request(format!(
            "{} must be one of completed, failed, retry, dlq (not `{status}`)",
            name("status")
        ))
    })?;
    let own_group = nonempty(a.consumer_group.as_deref(), || name("consumerGroup"))?;
    if let Some(g) = own_group {
        limits::bounded_lazy(g, limits::MAX_NAME_BYTES, || name("consumerGroup"))?;
    }
    let lease_id = a.lease_id.as_deref().unwrap_or_default().to_string();
    limits::bounded_lazy(&lease_id, limits::MAX_NAME_BYTES, || name("leaseId"))?;
    let error = a.error.as_deref().map(limits::reason);
    let consumer_group = own_group
        .or(default_group)
        .unwrap_or(QUEUE_MODE_GROUP)
        .to_string();
    Ok(AckItem {
        index,
        transaction_id: transaction_id.to_string(),
        partition_id,
        consumer_group,
        lease_id,
        status,
        error,
    })
}

/// The answer's text, as `results` serialised, written straight into one buffer.
pub fn answer_body(results: &[AckResult]) -> Vec<u8> {
    // Sized for the whole answer: growing a buffer of a hundred results copies it again and again.
    let size: usize = results
        .iter()
        .map(|r| 128 + r.transaction_id.len() + r.error.as_ref().map_or(0, |e| e.len() + 8))
        .sum();
    let mut out = Vec::with_capacity(2 + size);
    out.push(b'[');
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"index\":");
        write::int(&mut out, r.index);
        out.extend_from_slice(b",\"transactionId\":");
        write::str(&mut out, &r.transaction_id);
        out.extend_from_slice(b",\"success\":");
        write::bool(&mut out, r.success);
        out.extend_from_slice(b",\"error\":");
        write::opt_str(&mut out, r.error.as_deref());
        out.extend_from_slice(b",\"leaseReleased\":");
        write::bool(&mut out, r.lease_released);
        out.extend_from_slice(b",\"dlq\":");
        write::bool(&mut out, r.dlq);
        out.extend_from_slice(b",\"noop\":");
        write::bool(&mut out, r.noop);
        out.push(b'}');
    }
    out.push(b']');
    out
}

/// A required string: present (serde saw to that) and not empty.
fn required(value: &str, name: impl FnOnce() -> String) -> Result<&str, ApiError> {
    nonempty(Some(value), name).map(|v| v.unwrap_or_default())
}

/// Names the field of a batch body that does not fit `AckBatchBody`.
fn explain_batch(root: &Fields<'_>) -> Result<(), ApiError> {
    root.opt_str("consumerGroup")?;
    for (i, v) in root.req_array("acknowledgments")?.iter().enumerate() {
        explain_item(&Fields::of(v, format!("acknowledgments[{i}]"))?)?;
    }
    Ok(())
}

/// Names the field of an ack object that does not fit `AckBody`.
pub fn explain_item(f: &Fields<'_>) -> Result<(), ApiError> {
    for key in ["transactionId", "partitionId", "status"] {
        f.req_nonempty(key)?;
    }
    for key in ["consumerGroup", "leaseId", "error"] {
        f.opt_str(key)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_answer_reads_as_the_results() {
        let result = |index: usize, error: Option<&str>, flags: [bool; 4]| AckResult {
            index,
            transaction_id: format!("t\"{index}\u{e9}"),
            success: flags[0],
            error: error.map(str::to_string),
            lease_released: flags[1],
            dlq: flags[2],
            noop: flags[3],
        };
        let results = vec![
            result(0, None, [true, true, false, false]),
            result(
                1,
                Some("invalid or expired lease"),
                [false, false, false, false],
            ),
            result(2, None, [true, false, true, true]),
        ];
        let written: Vec<AckResult> = serde_json::from_slice(&answer_body(&results)).expect("JSON");
        assert_eq!(written, results);
    }
}
