//! Queen's wire for a consumer: `HttpConsumer` pops (wildcard or a named partition,
//! optionally long-polling, routes built once), reads the answer in place (every variant a
//! known broker writes, `workload::answers`), and answers items with one `POST /api/v1/ack/batch`
//! carrying their leaseIds (or not: lease-less acks), matched back by `index` and
//! transactionId. An ack without an answer is sent again; what the broker said of each item is
//! kept for the consumer loop in a buffer reused from request to request.

use std::time::Duration;

use bytes::Bytes;
use hyper::StatusCode;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::client::{encode, parse, routes, BodyBuf, Connection};
use crate::workload::answers::{note_acks, AckAnswer, PopAnswer, Popped};
use crate::workload::calls::{AckRequest, AckSent, Batch, Consume, ItemAnswer};
use crate::workload::plan::{ConsumerPlan, DRAIN_POP_BATCH};
use crate::workload::{CellContext, Phase};

/// One consumer's connection, routes and buffers.
pub struct HttpConsumer {
    pub conn: Connection,
    routes: PopRoutes,
    turn: u32,
    group: Option<String>,
    body: BodyBuf,
    answers: Vec<ItemAnswer>,
}

impl HttpConsumer {
    pub fn new(plan: &ConsumerPlan, conn: Connection) -> HttpConsumer {
        HttpConsumer {
            conn,
            routes: PopRoutes::new(plan),
            turn: plan.id,
            group: plan.group.clone(),
            body: BodyBuf::default(),
            answers: Vec::new(),
        }
    }

    /// Sends the ack body last written until it is answered (or given up), counting requests.
    async fn send_ack(&mut self, ctx: &CellContext, requests: &mut u32) -> Result<Bytes, String> {
        let body = self.body.written();
        loop {
            let answer = self
                .conn
                .post(routes::ACK_BATCH, body, StatusCode::OK)
                .await;
            *requests += 1;
            match answer {
                Err(e) if e.retryable && *requests <= ACK_RETRIES && ctx.phase() != Phase::Stop => {
                    ctx.error(format!("ack (sent again): {e}"));
                    tokio::time::sleep(ACK_RETRY_PAUSE).await;
                }
                Err(e) => return Err(e.to_string()),
                Ok(a) => return Ok(a),
            }
        }
    }

    /// Keeps what the broker answered for each item of `messages`.
    fn keep_answers(&mut self, messages: &[Popped<'_>], results: &[AckAnswer<'_>]) {
        self.answers.clear();
        self.answers
            .extend(messages.iter().enumerate().map(|(i, m)| {
                match answer_for(results, i, &m.transaction_id) {
                    None => ItemAnswer {
                        missing: true,
                        ..ItemAnswer::default()
                    },
                    Some(r) => ItemAnswer {
                        missing: false,
                        success: r.success,
                        noop: r.noop(),
                        dlq: r.dlq,
                        dropped: r.error.as_deref().is_some_and(|e| e.contains("dropped")),
                        lease_refused: r.lease_refused(),
                    },
                }
            }));
    }
}

impl Consume for HttpConsumer {
    type Popped = Bytes;
    type Batch<'a> = PopAnswer<'a>;
    const LEASES: bool = true;

    /// An empty pop is a 204 (`None`), or a 200 whose `messages` is empty (Queen's).
    async fn pop(&mut self, draining: bool) -> Result<Option<Bytes>, String> {
        let path = self.routes.pick(self.turn, draining);
        self.turn = self.turn.wrapping_add(1);
        self.conn.get(path).await.map_err(|e| e.to_string())
    }

    fn read<'a>(&self, popped: &'a Bytes, ctx: &CellContext) -> Result<PopAnswer<'a>, String> {
        let batch: PopAnswer<'a> = parse("pop", popped).map_err(|e| e.to_string())?;
        batch.note(&ctx.variants);
        Ok(batch)
    }

    fn write_ack(&mut self, batch: &Self::Batch<'_>, ack: &AckRequest<'_>) {
        self.body.json(&AckBody {
            acknowledgments: AckItems {
                messages: &batch.messages[ack.range.clone()],
                statuses: &ack.statuses[ack.range.clone()],
                lease_less: ack.lease_less,
            },
            consumer_group: self.group.as_deref(),
        });
    }

    async fn ack(
        &mut self,
        ctx: &CellContext,
        batch: &Self::Batch<'_>,
        ack: &AckRequest<'_>,
    ) -> AckSent {
        let mut requests = 0;
        let answered = match self.send_ack(ctx, &mut requests).await {
            Ok(answer) => match parse::<Vec<AckAnswer<'_>>>("ack", &answer) {
                Ok(results) => {
                    note_acks(&results, &ctx.variants);
                    self.keep_answers(&batch.messages[ack.range.clone()], &results);
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e),
        };
        AckSent { requests, answered }
    }

    fn answers(&self) -> &[ItemAnswer] {
        &self.answers
    }
}

impl Batch for PopAnswer<'_> {
    fn len(&self) -> usize {
        self.messages.len()
    }

    fn transaction_id(&self, i: usize) -> &str {
        &self.messages[i].transaction_id
    }

    fn partition_id(&self, i: usize) -> &str {
        &self.messages[i].partition_id
    }

    fn lease_id(&self, i: usize) -> Option<&str> {
        self.messages[i].lease_id.as_deref()
    }

    fn sent_at(&self, i: usize) -> Option<u64> {
        sent_at(self.messages[i].data)
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

/// How often an ack that got no answer (or a 503) is sent again, and the pause between: long
/// enough to outlast a broker restart or a PostgreSQL recovery of a few seconds. Sending an
/// ack again is safe: what the first one committed answers as a no-op.
const ACK_RETRIES: u32 = 100;
const ACK_RETRY_PAUSE: Duration = Duration::from_millis(100);

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
