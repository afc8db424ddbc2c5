//! The three pop routes: a named partition, a wildcard over a queue's partitions, and discovery
//! across queues by namespace/task.
//!
//! A pop mints one leaseId (UUIDv7) per request, shared by every partition it leases, calls the
//! matching `queen.log_pop*_v1` procedure, and unpacks from the returned segments only the
//! frames inside each claimed span. With `wait=true` an empty pop parks in `longpoll` without a
//! database connection until a push to its queue (or the periodic re-check) finds messages, or
//! its deadline passes (204).

use std::time::{Duration, Instant, SystemTime};

use hyper::StatusCode;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::app::App;
use crate::http::{self, Answer, ApiError, Request, Route};
use crate::longpoll::Scope;
use crate::metrics::Metrics;
use crate::segment;
use crate::storage::DbError;
use ackbench_wire::{txn_hash, TxnHash, QUEUE_MODE_GROUP};

/// Which partitions a pop may lease.
#[derive(Debug, Clone)]
pub enum Target {
    Partition {
        queue: String,
        partition: String,
    },
    Queue {
        queue: String,
        partitions: i32,
    },
    Discover {
        namespace: String,
        task: String,
        partitions: i32,
    },
}

/// A validated pop request.
#[derive(Debug, Clone)]
pub struct PopParams {
    pub target: Target,
    pub batch: i32,
    pub wait: bool,
    pub timeout: Duration,
    pub group: Option<String>,
    pub subscription_new: bool,
    pub auto_ack: bool,
    pub lease_seconds: Option<i32>,
}

/// The span one partition delivered, with what the ack registry needs.
pub struct LeasedSpan {
    pub partition_id: Uuid,
    pub queue: String,
    pub partition: String,
    pub span_end: i64,
    pub lease_expires_at: Option<SystemTime>,
    /// (hash, offset) of every delivered frame.
    pub frames: Vec<(TxnHash, i64)>,
}

pub async fn handle(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let params = parse(req)?;
    let deadline = Instant::now() + params.timeout;
    let scope = match &params.target {
        Target::Partition { queue, .. } | Target::Queue { queue, .. } => {
            Scope::Queue(req.tenant, queue.clone())
        }
        Target::Discover { .. } => Scope::AnyQueueOf(req.tenant),
    };
    let waiter = params.wait.then(|| {
        app.long_poll
            .park(scope, params.group.as_deref().unwrap_or(QUEUE_MODE_GROUP))
    });
    let mut parked = false;
    loop {
        let notified = waiter.as_ref().map(|w| w.slot().notify.notified());
        tokio::pin!(notified);
        if let Some(n) = notified.as_mut().as_pin_mut() {
            n.enable();
        }
        if let Some(answer) = pop_once(app, req.tenant, &params).await? {
            return Ok(answer);
        }
        let now = Instant::now();
        if !params.wait || now >= deadline {
            Metrics::add(&app.metrics.pops_empty, 1);
            return Ok(http::empty(StatusCode::NO_CONTENT));
        }
        if !parked {
            parked = true;
            Metrics::add(&app.metrics.long_poll_parked, 1);
        }
        let recheck = Duration::from_millis(app.config.long_poll_recheck_ms).min(deadline - now);
        let woken = async {
            match notified.as_mut().as_pin_mut() {
                Some(n) => n.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = woken => Metrics::add(&app.metrics.long_poll_woken, 1),
            _ = tokio::time::sleep(recheck) => {}
        }
    }
}

fn parse(req: &Request) -> Result<PopParams, ApiError> {
    let partitions = || int_param(req, "partitions", 1, 1, 10_000);
    let target = match &req.route {
        Route::PopPartition { queue, partition } => Target::Partition {
            queue: queue.clone(),
            partition: partition.clone(),
        },
        Route::PopQueue { queue } => Target::Queue {
            queue: queue.clone(),
            partitions: partitions()?,
        },
        _ => {
            let namespace = req.param("namespace").unwrap_or("").to_string();
            let task = req.param("task").unwrap_or("").to_string();
            if namespace.is_empty() && task.is_empty() {
                return Err(ApiError::bad_request(
                    "namespace or task is required for a discovery pop",
                ));
            }
            Target::Discover {
                namespace,
                task,
                partitions: partitions()?,
            }
        }
    };
    let group = match req.param("consumerGroup") {
        None => None,
        Some("") => {
            return Err(ApiError::bad_request(
                "consumerGroup must be a non-empty string",
            ))
        }
        Some(g) if g == QUEUE_MODE_GROUP => None,
        Some(g) => Some(g.to_string()),
    };
    let subscription_new = match req.param("subscriptionMode").unwrap_or("all") {
        "all" => false,
        "new" => true,
        other => {
            return Err(ApiError::bad_request(format!(
                "subscriptionMode must be `all` or `new`, not `{other}`"
            )))
        }
    };
    Ok(PopParams {
        target,
        batch: int_param(req, "batch", 200, 1, 10_000)?,
        wait: bool_param(req, "wait")?,
        timeout: Duration::from_millis(int_param(req, "timeout", 30_000, 0, 3_600_000)? as u64),
        group,
        subscription_new,
        auto_ack: bool_param(req, "autoAck")?,
        lease_seconds: match req.param("leaseSeconds") {
            None => None,
            Some(_) => Some(int_param(req, "leaseSeconds", 0, 1, 30 * 86_400)?),
        },
    })
}

fn int_param(req: &Request, name: &str, default: i32, min: i32, max: i32) -> Result<i32, ApiError> {
    match req.param(name) {
        None => Ok(default),
        Some(raw) => raw
            .parse::<i32>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "{name} must be a whole number in {min}..={max}, not `{raw}`"
                ))
            }),
    }
}

fn bool_param(req: &Request, name: &str) -> Result<bool, ApiError> {
    match req.param(name) {
        None => Ok(false),
        Some("true" | "1") => Ok(true),
        Some("false" | "0") => Ok(false),
        Some(raw) => Err(ApiError::bad_request(format!(
            "{name} must be true or false, not `{raw}`"
        ))),
    }
}

/// One attempt: claim and unpack, or `None` when there is nothing to deliver.
async fn pop_once(app: &App, tenant: Uuid, p: &PopParams) -> Result<Option<Answer>, ApiError> {
    let worker = if p.auto_ack {
        String::new()
    } else {
        Uuid::now_v7().to_string()
    };
    let group = p.group.as_deref().unwrap_or(QUEUE_MODE_GROUP);
    let rows = claim(app, tenant, p, group, &worker).await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let (answer, spans) = build_answer(&rows, p, &worker)?;
    Metrics::add(
        &app.metrics.messages_delivered,
        answer.messages.len() as u64,
    );
    for span in &spans {
        app.long_poll.learn(tenant, span.partition_id, &span.queue);
    }
    if !p.auto_ack {
        crate::routes::on_leased(app, tenant, group, &worker, &spans);
    }
    Ok(Some(http::json(StatusCode::OK, &answer)))
}

async fn claim(
    app: &App,
    tenant: Uuid,
    p: &PopParams,
    group: &str,
    worker: &str,
) -> Result<Vec<Row>, ApiError> {
    const COLUMNS: &str =
        "partition_id, queue_name, partition_name, span_start, span_end, attempt, \
         lease_expires_at, seg_base, seg_created, blob";
    let db = app.db("pop").await?;
    let common = (&p.batch, &p.lease_seconds, &p.subscription_new, &p.auto_ack);
    let result = match &p.target {
        Target::Partition { queue, partition } => {
            let sql = format!(
                "SELECT {COLUMNS} FROM queen.log_pop_v1($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            );
            let stmt = db
                .prepare_cached(&sql)
                .await
                .map_err(|e| DbError::from_pg("log_pop_v1", e))?;
            db.query(
                &stmt,
                &[
                    &tenant, queue, partition, &group, &worker, common.0, common.1, common.2,
                    common.3,
                ],
            )
            .await
        }
        Target::Queue { queue, partitions } => {
            let sql =
                format!("SELECT {COLUMNS} FROM queen.log_pop_wildcard_v1($1, $2, $3, $4, $5, $6, $7, $8, $9)");
            let stmt = db
                .prepare_cached(&sql)
                .await
                .map_err(|e| DbError::from_pg("log_pop_wildcard_v1", e))?;
            db.query(
                &stmt,
                &[
                    &tenant, queue, &group, &worker, common.0, partitions, common.1, common.2,
                    common.3,
                ],
            )
            .await
        }
        Target::Discover {
            namespace,
            task,
            partitions,
        } => {
            let sql = format!(
                "SELECT {COLUMNS} FROM queen.log_pop_discover_v1($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
            );
            let stmt = db
                .prepare_cached(&sql)
                .await
                .map_err(|e| DbError::from_pg("log_pop_discover_v1", e))?;
            db.query(
                &stmt,
                &[
                    &tenant, namespace, task, &group, &worker, common.0, partitions, common.1,
                    common.2, common.3,
                ],
            )
            .await
        }
    };
    result.map_err(|e| ApiError::from(DbError::from_pg("pop", e)))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PopAnswer<'a> {
    success: bool,
    queue: &'a str,
    partition: &'a str,
    partition_id: String,
    lease_id: &'a str,
    consumer_group: Option<&'a str>,
    partitions_claimed: usize,
    messages: Vec<MessageOut<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MessageOut<'a> {
    id: String,
    transaction_id: String,
    data: Box<RawValue>,
    created_at: String,
    queue: &'a str,
    partition: &'a str,
    partition_id: String,
    lease_id: &'a str,
    consumer_group: Option<&'a str>,
    delivery_attempt: i32,
}

/// Unpacks the frames inside each claimed span, in partition then offset order.
fn build_answer<'a>(
    rows: &'a [Row],
    p: &'a PopParams,
    worker: &'a str,
) -> Result<(PopAnswer<'a>, Vec<LeasedSpan>), ApiError> {
    let group = p.group.as_deref();
    let mut messages = Vec::new();
    let mut spans: Vec<LeasedSpan> = Vec::new();
    for row in rows {
        let pid: Uuid = row.get("partition_id");
        let (start, end): (i64, i64) = (row.get("span_start"), row.get("span_end"));
        if spans.last().is_none_or(|s| s.partition_id != pid) {
            spans.push(LeasedSpan {
                partition_id: pid,
                queue: row.get("queue_name"),
                partition: row.get("partition_name"),
                span_end: end,
                lease_expires_at: row.get("lease_expires_at"),
                frames: Vec::new(),
            });
        }
        let base: i64 = row.get("seg_base");
        let created: SystemTime = row.get("seg_created");
        let created_at = humantime::format_rfc3339_micros(created).to_string();
        let frames = segment::unpack(row.get("blob")).map_err(|e| {
            tracing::error!(partition_id = %pid, base, error = %e, "stored segment cannot be unpacked");
            ApiError::internal(format!("segment of partition {pid} at {base}: {e}"))
        })?;
        for (k, frame) in frames.into_iter().enumerate() {
            let offset = base + k as i64;
            if offset < start || offset > end {
                continue;
            }
            let data = RawValue::from_string(String::from_utf8_lossy(&frame.payload).into_owned())
                .map_err(|e| {
                    ApiError::internal(format!("stored payload at {pid}/{offset} is not JSON: {e}"))
                })?;
            let span = spans.last_mut().expect("pushed above");
            span.frames.push((txn_hash(&frame.transaction_id), offset));
            messages.push(MessageOut {
                id: frame.message_id.to_string(),
                transaction_id: frame.transaction_id,
                data,
                created_at: created_at.clone(),
                queue: row.get("queue_name"),
                partition: row.get("partition_name"),
                partition_id: pid.to_string(),
                lease_id: worker,
                consumer_group: group,
                delivery_attempt: row.get("attempt"),
            });
        }
    }
    let first = &rows[0];
    let answer = PopAnswer {
        success: true,
        queue: first.get("queue_name"),
        partition: first.get("partition_name"),
        partition_id: first.get::<_, Uuid>("partition_id").to_string(),
        lease_id: worker,
        consumer_group: group,
        partitions_claimed: spans.len(),
        messages,
    };
    Ok((answer, spans))
}
