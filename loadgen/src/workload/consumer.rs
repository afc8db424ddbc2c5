//! A consumer: pops (wildcard or a named partition, optionally long-polling), decides an
//! outcome per message from the scenario's mix, optionally works, stalls past its lease or
//! drops the leaseId, and answers with one `/ack/batch` per pop or one per message.
//!
//! The hot loop allocates almost nothing: the consumer owns its connection, its pop paths are
//! built once, answers are parsed into borrowed types, and ack bodies are serialised straight
//! into a reused buffer.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::StatusCode;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use ackbench_wire::{txn_hash, TxnHash};

use super::answers::{note_acks, AckAnswer, PopAnswer, Popped};
use super::{now_us, CellContext, Counters, Phase};
use crate::client::{encode, parse, routes, BodyBuf, Connection};
use crate::history::{self, AckOutcome, Status, Verdict};

#[derive(Debug, Clone)]
pub struct ConsumerPlan {
    pub id: u32,
    /// Index of the group in the ledger, and its name (`None` = queue mode).
    pub group_index: usize,
    pub group: Option<String>,
    pub queue: String,
    /// The queue's partition names (`p-0` ..).
    pub partitions: std::sync::Arc<[String]>,
    /// Pop a named partition (rotating) instead of the wildcard route.
    pub named_partition: bool,
    pub pop_batch: u32,
    pub partitions_per_pop: u32,
    pub long_poll: bool,
    pub long_poll_timeout_ms: u64,
    pub lease_seconds: Option<u32>,
    /// The lease actually granted (for stalls): `lease_seconds` or the queue's lease time.
    pub effective_lease: Duration,
    pub processing_ms: u64,
    pub empty_backoff_ms: u64,
    pub per_message_acks: bool,
    pub lease_less: f64,
    pub stall: f64,
    pub stall_extra_ms: u64,
    /// Cumulative shares of completed, failed, retry, dlq.
    pub outcome_shares: [(&'static str, f64); 4],
    pub seed: u64,
}

/// Pop size while draining.
const DRAIN_POP_BATCH: u32 = 1000;

/// What one consumer keeps from request to request.
struct Worker {
    conn: Connection,
    routes: PopRoutes,
    body: BodyBuf,
    rng: fastrand::Rng,
    /// The current batch's transactionId hashes and outcomes, by message.
    hashes: Vec<TxnHash>,
    statuses: Vec<&'static str>,
    /// The history's record number of the current batch's first message.
    first_record: usize,
}

pub async fn run(plan: ConsumerPlan, ctx: Arc<CellContext>) {
    let mut w = Worker {
        conn: ctx.connection(plan.id),
        routes: PopRoutes::new(&plan),
        body: BodyBuf::default(),
        rng: fastrand::Rng::with_seed(plan.seed),
        hashes: Vec::new(),
        statuses: Vec::new(),
        first_record: 0,
    };
    let mut turn: u32 = plan.id;
    while ctx.phase() != Phase::Stop {
        ctx.hold_while_consumers_paused().await;
        let path = w.routes.pick(turn, ctx.phase() == Phase::Drain);
        turn = turn.wrapping_add(1);
        let started = Instant::now();
        let popped = w.conn.get(path).await;
        let pop = PopTimes {
            sent: started,
            answered: Instant::now(),
        };
        Counters::bump(&ctx.counters.pop_requests, 1);
        // An empty pop is a 204, or a 200 whose `messages` is empty (Queen's).
        match popped {
            Ok(Some(body)) => match parse::<PopAnswer<'_>>("pop", &body) {
                Ok(batch) => {
                    batch.note(&ctx.variants);
                    if batch.messages.is_empty() {
                        empty_pop(&plan).await;
                        continue;
                    }
                    ctx.latency.record("pop", started.elapsed());
                    handle_batch(&plan, &ctx, &mut w, &batch.messages, pop).await;
                }
                Err(e) => ctx.error(format!("pop: {e}")),
            },
            Ok(None) => empty_pop(&plan).await,
            Err(e) => {
                ctx.error(format!("pop: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// After an empty pop: a pause unless the pop long-polled (it already waited).
async fn empty_pop(plan: &ConsumerPlan) {
    if !plan.long_poll {
        tokio::time::sleep(Duration::from_millis(plan.empty_backoff_ms)).await;
    }
}

/// A consumer's pop requests, built once: one per named partition (or one wildcard), for the
/// measured load and for the drain.
struct PopRoutes {
    load: Vec<String>,
    drain: Vec<String>,
}

impl PopRoutes {
    fn new(plan: &ConsumerPlan) -> PopRoutes {
        let count = if plan.named_partition {
            plan.partitions.len().max(1)
        } else {
            1
        };
        let build = |draining| (0..count).map(|i| pop_path(plan, i, draining)).collect();
        PopRoutes {
            load: build(false),
            drain: build(true),
        }
    }

    fn pick(&self, turn: u32, draining: bool) -> &str {
        let routes = if draining { &self.drain } else { &self.load };
        &routes[turn as usize % routes.len()]
    }
}

/// The pop request for partition `index` (named route) or the wildcard. During the drain
/// (nothing is measured any more) consumers pop at least `DRAIN_POP_BATCH` messages, so a
/// deep backlog is accounted for in bounded time.
fn pop_path(plan: &ConsumerPlan, index: usize, draining: bool) -> String {
    let batch = if draining {
        plan.pop_batch.max(DRAIN_POP_BATCH)
    } else {
        plan.pop_batch
    };
    let mut q = format!("batch={batch}");
    if let Some(g) = &plan.group {
        q.push_str(&format!("&consumerGroup={}", encode(g)));
    }
    if plan.long_poll {
        q.push_str(&format!("&wait=true&timeout={}", plan.long_poll_timeout_ms));
    }
    if let Some(s) = plan.lease_seconds {
        q.push_str(&format!("&leaseSeconds={s}"));
    }
    let queue = encode(&plan.queue);
    if plan.named_partition {
        let name = &plan.partitions[index % plan.partitions.len().max(1)];
        format!("/api/v1/pop/queue/{queue}/partition/{}?{q}", encode(name))
    } else {
        format!(
            "/api/v1/pop/queue/{queue}?{q}&partitions={}",
            plan.partitions_per_pop
        )
    }
}

/// When a pop was sent and answered.
#[derive(Clone, Copy)]
struct PopTimes {
    sent: Instant,
    answered: Instant,
}

async fn handle_batch(
    plan: &ConsumerPlan,
    ctx: &CellContext,
    w: &mut Worker,
    messages: &[Popped<'_>],
    pop: PopTimes,
) {
    Counters::bump(&ctx.counters.popped_messages, messages.len() as u64);
    w.hashes.clear();
    w.hashes
        .extend(messages.iter().map(|m| txn_hash(&m.transaction_id)));
    w.first_record = record_pop(plan, ctx, &w.hashes, messages, pop);
    let redelivered = ctx.ledger.delivered(plan.group_index, &w.hashes);
    Counters::bump(&ctx.counters.redeliveries, redelivered);
    ctx.hold_while_consumers_paused().await;
    if plan.processing_ms > 0 {
        tokio::time::sleep(Duration::from_millis(plan.processing_ms)).await;
    }
    if ctx.phase() != Phase::Drain && plan.stall > 0.0 && w.rng.f64() < plan.stall {
        tokio::time::sleep(plan.effective_lease + Duration::from_millis(plan.stall_extra_ms)).await;
    }
    let lease_less = plan.lease_less > 0.0 && w.rng.f64() < plan.lease_less;
    // The outcome mix shapes the measured load; the drain only finishes the accounting, so it
    // completes everything (a nack in a drain-sized pop would redeliver the rest of it).
    let draining = ctx.phase() == Phase::Drain;
    w.statuses.clear();
    for _ in messages {
        let status = if draining {
            "completed"
        } else {
            pick_outcome(&plan.outcome_shares, &mut w.rng)
        };
        w.statuses.push(status);
    }
    if plan.per_message_acks {
        for i in 0..messages.len() {
            ack(plan, ctx, w, messages, i..i + 1, lease_less).await;
        }
    } else {
        ack(plan, ctx, w, messages, 0..messages.len(), lease_less).await;
    }
}

/// Records the deliveries of one pop answer in the history; returns the first's record number.
fn record_pop(
    plan: &ConsumerPlan,
    ctx: &CellContext,
    hashes: &[TxnHash],
    messages: &[Popped<'_>],
    pop: PopTimes,
) -> usize {
    let answer = history::Pop {
        consumer: plan.id,
        group: plan.group_index as u16,
        lease_ms: plan.effective_lease.as_millis().min(u32::MAX as u128) as u32,
        sent: pop.sent,
        answered: pop.answered,
    };
    let records = messages.iter().zip(hashes).map(|(m, h)| history::Popped {
        txn: *h,
        transaction_id: &m.transaction_id,
        partition_id: &m.partition_id,
        lease_id: m.lease_id.as_deref(),
    });
    ctx.history.popped(&answer, records)
}

fn pick_outcome(shares: &[(&'static str, f64); 4], rng: &mut fastrand::Rng) -> &'static str {
    let total: f64 = shares.iter().map(|s| s.1).sum();
    let mut x = rng.f64() * total;
    for (name, share) in shares {
        if x < *share {
            return name;
        }
        x -= share;
    }
    "completed"
}

/// The `error` an ack of `status` carries (none for `completed`).
fn simulated_error(status: &str) -> Option<&'static str> {
    match status {
        "completed" => None,
        "failed" => Some("ackbench: simulated failed"),
        "retry" => Some("ackbench: simulated retry"),
        "dlq" => Some("ackbench: simulated dlq"),
        _ => Some("ackbench: simulated nack"),
    }
}

/// The body of `POST /api/v1/ack/batch`, serialised straight from the popped messages.
#[derive(Serialize)]
struct AckBody<'a, 'm> {
    acknowledgments: AckItems<'a, 'm>,
    #[serde(rename = "consumerGroup", skip_serializing_if = "Option::is_none")]
    consumer_group: Option<&'a str>,
}

struct AckItems<'a, 'm> {
    messages: &'a [Popped<'m>],
    statuses: &'a [&'static str],
    lease_less: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AckItem<'a> {
    transaction_id: &'a str,
    partition_id: &'a str,
    status: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
}

impl Serialize for AckItems<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            self.messages
                .iter()
                .zip(self.statuses)
                .map(|(m, status)| AckItem {
                    transaction_id: &m.transaction_id,
                    partition_id: &m.partition_id,
                    status,
                    lease_id: m.lease_id.as_deref().filter(|_| !self.lease_less),
                    error: simulated_error(status),
                }),
        )
    }
}

async fn ack(
    plan: &ConsumerPlan,
    ctx: &CellContext,
    w: &mut Worker,
    messages: &[Popped<'_>],
    range: Range<usize>,
    lease_less: bool,
) {
    let body = w.body.json(&AckBody {
        acknowledgments: AckItems {
            messages: &messages[range.clone()],
            statuses: &w.statuses[range.clone()],
            lease_less,
        },
        consumer_group: plan.group.as_deref(),
    });
    let started = Instant::now();
    let first = w.first_record + range.start;
    ctx.history
        .ack_sent(first, &w.statuses[range.clone()], lease_less, started);
    let mut attempt = 0;
    let answer = loop {
        let answer = w.conn.post(routes::ACK_BATCH, body, StatusCode::OK).await;
        Counters::bump(&ctx.counters.ack_requests, 1);
        match answer {
            Err(e) if e.retryable && attempt < ACK_RETRIES && ctx.phase() != Phase::Stop => {
                ctx.error(format!("ack (sent again): {e}"));
                attempt += 1;
                tokio::time::sleep(ACK_RETRY_PAUSE).await;
            }
            Err(e) => return ctx.error(format!("ack: {e}")),
            Ok(a) => break a,
        }
    };
    match parse::<Vec<AckAnswer<'_>>>("ack", &answer) {
        Ok(results) => {
            note_acks(&results, &ctx.variants);
            ctx.latency.record("ack", started.elapsed());
            let acked = Acked {
                messages: &messages[range.clone()],
                hashes: &w.hashes[range.clone()],
                statuses: &w.statuses[range],
                sent_again: attempt > 0,
                first_record: first,
                lease_less,
                sent: started,
            };
            record_answers(plan, ctx, &acked, &results);
        }
        Err(e) => ctx.error(format!("ack: {e}")),
    }
}

/// How often an ack that got no answer (or a 503) is sent again, and the pause between: long
/// enough to outlast a broker restart or a PostgreSQL recovery of a few seconds. Sending an
/// ack again is safe: what the first one committed answers as a no-op.
const ACK_RETRIES: u32 = 100;
const ACK_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The items of one ack request, by request index.
struct Acked<'a, 'm> {
    messages: &'a [Popped<'m>],
    hashes: &'a [TxnHash],
    statuses: &'a [&'static str],
    /// The ack was sent again after an attempt without an answer (see `settled_before`).
    sent_again: bool,
    /// The history's record number of the first item, whether the ack carried no leaseId, and
    /// when it was first sent.
    first_record: usize,
    lease_less: bool,
    sent: Instant,
}

/// Books each item's answer in the ledger; end-to-end latency runs from the intended push time
/// to the first successful completion.
fn record_answers(
    plan: &ConsumerPlan,
    ctx: &CellContext,
    items: &Acked<'_, '_>,
    results: &[AckAnswer<'_>],
) {
    let now = now_us();
    let answered = Instant::now();
    let measuring = ctx.latency.measuring();
    for (i, m) in items.messages.iter().enumerate() {
        let Some(r) = answer_for(results, i, &m.transaction_id) else {
            ctx.error(format!("ack answer has no element for index {i}"));
            continue;
        };
        if !r.success {
            Counters::bump(&ctx.counters.refused_acks, 1);
        }
        let acked = items.statuses[i] == "completed"
            && ((r.success && !r.noop()) || (items.sent_again && settled_before(r)));
        let dropped = r.error.as_deref().is_some_and(|e| e.contains("dropped"));
        let outcome = AckOutcome {
            status: Status::of(items.statuses[i]),
            lease_less: items.lease_less,
            verdict: verdict(r, items.sent_again),
            sent: items.sent,
            answered,
        };
        ctx.history.answered(items.first_record + i, &outcome);
        if ctx
            .ledger
            .answered(plan.group_index, &items.hashes[i], acked, r.dlq, dropped)
        {
            Counters::bump(&ctx.counters.acked_messages, 1);
            if let Some(ts) = measuring.then(|| sent_at(m.data)).flatten() {
                ctx.latency
                    .record("e2e", Duration::from_micros(now.saturating_sub(ts)));
            }
        }
    }
}

/// What the broker's answer to one ack item says, for the history.
fn verdict(r: &AckAnswer<'_>, sent_again: bool) -> Verdict {
    match r.success {
        true if !r.noop() => Verdict::Accepted,
        _ if sent_again && settled_before(r) => Verdict::AssumedSettled,
        true => Verdict::Noop,
        false => Verdict::Refused,
    }
}

/// For an ack sent again after an attempt that got no answer: whether the item's answer says
/// the lost attempt settled it. A no-op, or a refused lease (the lease the lost attempt used is
/// released once it commits), counts so. If the lost attempt had not committed after all, the
/// message redelivers when its lease ends and is acked again (a duplicate, not a loss); the
/// audit cannot tell the two apart without reading the cursor.
fn settled_before(r: &AckAnswer<'_>) -> bool {
    (r.success && r.noop()) || r.lease_refused()
}

/// The answer to request item `i`, whose transactionId is `txn`: answers come in request order
/// with `index` the item's position; else searched by index, then by transactionId (Queen's
/// `index` is the item's place in the SQL batch its server combined several requests into).
fn answer_for<'r, 'a>(
    results: &'r [AckAnswer<'a>],
    i: usize,
    txn: &str,
) -> Option<&'r AckAnswer<'a>> {
    match results.get(i) {
        Some(r) if r.index == i && r.transaction_id == txn => Some(r),
        _ => results
            .iter()
            .find(|r| r.index == i && r.transaction_id == txn)
            .or_else(|| results.iter().find(|r| r.transaction_id == txn)),
    }
}

/// The intended send time a producer stamped in the payload (`ts`, µs since the epoch).
fn sent_at(data: &RawValue) -> Option<u64> {
    #[derive(Deserialize)]
    struct Stamp {
        ts: Option<u64>,
    }
    // A derived struct also reads from an array (`[1]`); only an object carries a stamp.
    let text = data.get();
    if !text.starts_with('{') {
        return None;
    }
    serde_json::from_str::<Stamp>(text).ok()?.ts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(text: &str) -> Vec<Popped<'_>> {
        serde_json::from_str(text).unwrap()
    }

    const TWO: &str = r#"[
        {"id":"1","transactionId":"t-1","data":{"ts":5,"pad":"x"},"createdAt":"c","queue":"q",
         "partition":"p-0","partitionId":"P0","leaseId":"L","consumerGroup":null,"deliveryAttempt":1},
        {"id":"2","transactionId":"t-\"2\"","data":[1],"createdAt":"c","queue":"q",
         "partition":"p-0","partitionId":"P0","leaseId":"L","consumerGroup":null,"deliveryAttempt":1}]"#;

    /// The body is streamed from the popped messages for speed; it must still read as the
    /// broker's request type.
    #[test]
    fn ack_body_reads_as_the_wire_request() {
        let m = messages(TWO);
        let mut buf = BodyBuf::default();
        let body = buf.json(&AckBody {
            acknowledgments: AckItems {
                messages: &m,
                statuses: &["completed", "dlq"],
                lease_less: false,
            },
            consumer_group: Some("g"),
        });
        let body: ackbench_wire::AckBatchBody = serde_json::from_slice(body).unwrap();
        assert_eq!(body.consumer_group.as_deref(), Some("g"));
        let second = &body.acknowledgments[1];
        assert_eq!(
            (second.transaction_id.as_str(), second.status.as_str()),
            ("t-\"2\"", "dlq")
        );
        assert_eq!(second.lease_id.as_deref(), Some("L"));
        assert_eq!(second.error.as_deref(), Some("ackbench: simulated dlq"));
    }

    #[test]
    fn ack_body_is_written_from_the_popped_messages() {
        let m = messages(TWO);
        let mut buf = BodyBuf::default();
        let body = buf.json(&AckBody {
            acknowledgments: AckItems {
                messages: &m,
                statuses: &["completed", "failed"],
                lease_less: false,
            },
            consumer_group: Some("g"),
        });
        let v: serde_json::Value = serde_json::from_slice(body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"consumerGroup": "g", "acknowledgments": [
                {"transactionId": "t-1", "partitionId": "P0", "status": "completed", "leaseId": "L"},
                {"transactionId": "t-\"2\"", "partitionId": "P0", "status": "failed", "leaseId": "L",
                 "error": "ackbench: simulated failed"}]})
        );
        let lease_less = buf.json(&AckBody {
            acknowledgments: AckItems {
                messages: &m[..1],
                statuses: &["completed"],
                lease_less: true,
            },
            consumer_group: None,
        });
        assert_eq!(
            lease_less,
            br#"{"acknowledgments":[{"transactionId":"t-1","partitionId":"P0","status":"completed"}]}"#
        );
    }

    #[test]
    fn send_time_comes_from_the_payload_stamp() {
        let m = messages(TWO);
        assert_eq!(sent_at(m[0].data), Some(5));
        assert_eq!(
            sent_at(m[1].data),
            None,
            "a payload that is no object has no stamp"
        );
    }

    #[test]
    fn answers_are_matched_by_index() {
        let results: Vec<AckAnswer<'_>> = serde_json::from_str(
            r#"[{"index":1,"transactionId":"b","success":true,"error":null,"leaseReleased":true,"dlq":false,"noop":false},
                {"index":0,"transactionId":"a","success":false,"error":"x","leaseReleased":false,"dlq":false,"noop":false}]"#,
        )
        .unwrap();
        assert_eq!(answer_for(&results, 0, "a").unwrap().transaction_id, "a");
        assert_eq!(answer_for(&results, 1, "b").unwrap().transaction_id, "b");
        assert!(answer_for(&results, 2, "c").is_none());
        let queen: Vec<AckAnswer<'_>> = serde_json::from_str(
            r#"[{"index":3,"transactionId":"a","success":true,"error":null,"dlq":false}]"#,
        )
        .unwrap();
        assert_eq!(
            answer_for(&queen, 0, "a").unwrap().index,
            3,
            "Queen's index is its SQL batch's"
        );
    }
}
