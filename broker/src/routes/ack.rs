//! `POST /api/v1/ack` and `POST /api/v1/ack/batch` (shared spec `wire.md`, "Ack").
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

use hyper::StatusCode;
use uuid::Uuid;

use crate::ack::{self, AckItem, AckStatus};
use crate::app::App;
use crate::http::json::{parse_object, Fields};
use crate::http::{self, Answer, ApiError, Request, Route};
use ackbench_wire::QUEUE_MODE_GROUP;

const MAX_TXN_BYTES: usize = 65535;

pub async fn handle(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let items = parse(req)?;
    let results = ack::ack_items(app, req.tenant, items).await?;
    Ok(http::json(StatusCode::OK, &results))
}

/// Validates the body of either route into ack items (index = request position).
pub fn parse(req: &Request) -> Result<Vec<AckItem>, ApiError> {
    let body = parse_object(&req.body)?;
    let root = Fields::root(&body);
    if req.route == Route::Ack {
        return Ok(vec![parse_item(&root, 0, None)?]);
    }
    let default_group = root.opt_nonempty("consumerGroup")?;
    root.req_array("acknowledgments")?
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let f = Fields::of(v, format!("acknowledgments[{i}]"))?;
            parse_item(&f, i, default_group)
        })
        .collect()
}

/// One item; `default_group` is the batch's consumerGroup.
pub fn parse_item(
    f: &Fields<'_>,
    index: usize,
    default_group: Option<&str>,
) -> Result<AckItem, ApiError> {
    let transaction_id = f.req_nonempty("transactionId")?;
    if transaction_id.len() > MAX_TXN_BYTES {
        return Err(ApiError::bad_request(format!(
            "{} must be at most {MAX_TXN_BYTES} bytes",
            f.name("transactionId")
        )));
    }
    let partition_id = Uuid::parse_str(f.req_nonempty("partitionId")?)
        .map_err(|_| ApiError::bad_request(format!("{} must be a UUID", f.name("partitionId"))))?;
    let status = f.req_nonempty("status")?;
    let status = AckStatus::parse(status).ok_or_else(|| {
        ApiError::bad_request(format!(
            "{} must be one of completed, failed, retry, dlq (not `{status}`)",
            f.name("status")
        ))
    })?;
    let consumer_group = f
        .opt_nonempty("consumerGroup")?
        .or(default_group)
        .unwrap_or(QUEUE_MODE_GROUP)
        .to_string();
    Ok(AckItem {
        index,
        transaction_id: transaction_id.to_string(),
        partition_id,
        consumer_group,
        lease_id: f.opt_str("leaseId")?.unwrap_or("").to_string(),
        status,
        error: f.opt_str("error")?.map(str::to_string),
    })
}
