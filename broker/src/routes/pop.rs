//! The three pop routes: a named partition, a wildcard over a queue's partitions, and discovery
//! across queues by namespace/task.
//!
//! This module parses the request and writes the answer; `crate::pop` decides what to claim
//! and delivers decoded frames. With `wait=true` an empty pop parks in `longpoll` without a
//! database connection until a push (or an ack releasing a lease) wakes it, or the periodic
//! re-check finds messages, or its deadline passes (204). The answer is written straight into
//! one buffer: payloads are stored JSON text and go out as they are.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::StatusCode;
use uuid::Uuid;

use crate::ack::{self, LeasedSpan};
use crate::app::App;
use crate::http::{self, write, Answer, ApiError, Request, Route};
use crate::longpoll::Scope;
use crate::metrics::Metrics;
use crate::pop::{DeliveredSpan, Delivery, PopParams, Subscription, Target};
use ackbench_wire::QUEUE_MODE_GROUP;

pub async fn handle(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let params = parse(req)?;
    let deadline = Instant::now() + params.timeout;
    let scope = match &params.target {
        Target::Partition { queue, partition } => {
            Scope::Partition(req.tenant, queue.clone(), partition.clone())
        }
        Target::Queue { queue, .. } => Scope::Queue(req.tenant, queue.clone()),
        Target::Discover { .. } => Scope::AnyQueueOf(req.tenant),
    };
    let waiter = params.wait.then(|| {
        app.ready
            .long_poll
            .park(scope, params.group.as_deref().unwrap_or(QUEUE_MODE_GROUP))
    });
    // Set once the pop found nothing and waits: counts it as waiting for messages until the
    // request ends.
    let mut parked = None;
    let mut recheck = false;
    loop {
        let notified = waiter.as_ref().map(|w| w.slot().notify.notified());
        tokio::pin!(notified);
        if let Some(n) = notified.as_mut().as_pin_mut() {
            n.enable();
        }
        if let Some(delivery) =
            crate::pop::pop_once(&app.pop_context(), req.tenant, &params, recheck).await?
        {
            return Ok(deliver(app, req.tenant, &params, delivery));
        }
        let now = Instant::now();
        if !params.wait || now >= deadline {
            Metrics::add(&app.metrics.counters.pops_empty, 1);
            app.demand.came_back_empty();
            return Ok(http::empty(StatusCode::NO_CONTENT));
        }
        if parked.is_none() {
            parked = Some(app.demand.waiting());
            Metrics::add(&app.metrics.counters.long_poll_parked, 1);
        }
        let recheck_in = Duration::from_millis(app.config.long_poll_recheck_ms).min(deadline - now);
        let woken = async {
            match notified.as_mut().as_pin_mut() {
                Some(n) => n.await,
                None => std::future::pending().await,
            }
        };
        recheck = tokio::select! {
            _ = woken => {
                Metrics::add(&app.metrics.counters.long_poll_woken, 1);
                false
            }
            _ = tokio::time::sleep(recheck_in) => true,
        };
        if waiter.as_ref().is_some_and(|w| w.slot().is_closed()) {
            return Ok(http::empty(StatusCode::NO_CONTENT)); // the queue was deleted
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
    let subscription = subscription(req)?;
    Ok(PopParams {
        target,
        batch: int_param(req, "batch", 200, 1, 10_000)?,
        wait: bool_param(req, "wait")?,
        timeout: Duration::from_millis(int_param(req, "timeout", 30_000, 0, 3_600_000)? as u64),
        group,
        subscription,
        auto_ack: bool_param(req, "autoAck")?,
        lease_seconds: match req.param("leaseSeconds") {
            None => None,
            Some(_) => Some(int_param(req, "leaseSeconds", 0, 1, 30 * 86_400)?),
        },
    })
}

/// `subscriptionMode` (with Queen's aliases `new-only` and `from_beginning`) and
/// `subscriptionFrom` (`now` or an ISO-8601 time), which overrides the mode.
fn subscription(req: &Request) -> Result<Subscription, ApiError> {
    let mode = match req.param("subscriptionMode").unwrap_or("all") {
        "all" | "from_beginning" => Subscription::All,
        "new" | "new-only" => Subscription::New,
        other => {
            return Err(ApiError::bad_request(format!(
                "subscriptionMode must be `all`, `new`, `new-only` or `from_beginning`, not \
                 `{other}`"
            )))
        }
    };
    match req.param("subscriptionFrom") {
        None => Ok(mode),
        Some("now") => Ok(Subscription::New),
        Some(raw) => crate::pop::subscription::parse_time(raw)
            .map(Subscription::From)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "subscriptionFrom must be `now` or an ISO-8601 time \
                 (2026-01-31T12:00:00Z), not `{raw}`"
                ))
            }),
    }
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

/// Answers a delivery, and hands its spans to the ack registry.
fn deliver(app: &App, tenant: Uuid, p: &PopParams, d: Delivery) -> Answer {
    let (body, spans) = write_answer(p, &d);
    Metrics::add(
        &app.metrics.counters.messages_delivered,
        spans.iter().map(|s| s.frames.len() as u64).sum(),
    );
    for span in &spans {
        app.ready
            .long_poll
            .learn(tenant, span.partition_id, &span.queue, &span.partition);
    }
    if !p.auto_ack {
        ack::on_leased(app, tenant, p.group_name(), &d.lease_id, &spans);
    }
    http::with_type(StatusCode::OK, Bytes::from(body), "application/json")
}

/// Writes the pop answer (`wire.md`): the first span's queue and partition at the top, then
/// every delivered message in partition then offset order.
fn write_answer(p: &PopParams, d: &Delivery) -> (Vec<u8>, Vec<LeasedSpan>) {
    let group = p.group.as_deref();
    let mut out = Vec::with_capacity(answer_size(d, group));
    let first = &d.spans[0];
    out.extend_from_slice(b"{\"success\":true,");
    write_location(&mut out, first, &d.lease_id, group);
    out.extend_from_slice(
        format!(",\"partitionsClaimed\":{},\"messages\":[", d.spans.len()).as_bytes(),
    );
    let mut spans = Vec::with_capacity(d.spans.len());
    let mut comma = false;
    // What every message of a span repeats (its location and attempt), written once per span.
    let mut tail = Vec::with_capacity(256);
    for span in &d.spans {
        tail.clear();
        tail.extend_from_slice(b"\",");
        write_location(&mut tail, span, &d.lease_id, group);
        tail.extend_from_slice(format!(",\"deliveryAttempt\":{}}}", span.attempt).as_bytes());
        let mut leased = LeasedSpan {
            partition_id: span.partition_id,
            queue: span.queue.clone(),
            partition: span.partition.clone(),
            span_end: span.span_end,
            lease_expires_at: span.lease_expires_at,
            frames: Vec::with_capacity((span.span_end - span.span_start + 1) as usize),
        };
        for (offset, frame, created_at) in span.frames() {
            if comma {
                out.push(b',');
            }
            comma = true;
            out.extend_from_slice(b"{\"id\":\"");
            write::uuid(&mut out, frame.message_id);
            out.extend_from_slice(b"\",\"transactionId\":");
            write::str(&mut out, frame.transaction_id);
            out.extend_from_slice(b",\"data\":");
            out.extend_from_slice(frame.payload);
            out.extend_from_slice(b",\"createdAt\":\"");
            out.extend_from_slice(created_at.as_bytes());
            out.extend_from_slice(&tail);
            leased.frames.push((frame.hash, offset));
        }
        spans.push(leased);
    }
    out.extend_from_slice(b"]}");
    (out, spans)
}

/// About the size of the pop answer (its messages' variable parts counted exactly): growing
/// the buffer of a hundred messages copies it again and again.
fn answer_size(d: &Delivery, group: Option<&str>) -> usize {
    let group = group.map_or(0, str::len);
    let location =
        |s: &DeliveredSpan| 160 + s.queue.len() + s.partition.len() + d.lease_id.len() + group;
    let mut size = 512 + location(&d.spans[0]);
    for span in &d.spans {
        let per_message = 112 + location(span);
        for (_, frame, created_at) in span.frames() {
            size +=
                per_message + frame.transaction_id.len() + frame.payload.len() + created_at.len();
        }
    }
    size
}

/// `"queue":..,"partition":..,"partitionId":..,"leaseId":..,"consumerGroup":..` of a span: the
/// answer's head and every message carry them.
fn write_location(out: &mut Vec<u8>, span: &DeliveredSpan, lease_id: &str, group: Option<&str>) {
    out.extend_from_slice(b"\"queue\":");
    write::str(out, &span.queue);
    out.extend_from_slice(b",\"partition\":");
    write::str(out, &span.partition);
    out.extend_from_slice(b",\"partitionId\":\"");
    write::uuid(out, span.partition_id);
    out.extend_from_slice(b"\",\"leaseId\":");
    write::str(out, lease_id);
    out.extend_from_slice(b",\"consumerGroup\":");
    write::opt_str(out, group);
}
