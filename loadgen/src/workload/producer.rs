//! A producer: pushes batches to the queue's partitions, open loop (a fixed schedule of intended
//! send times, latency counted from the intended time so a stalled broker cannot hide behind a
//! slowed client) or closed loop (back to back).
//!
//! `PushWriter` writes a push body straight into a reused buffer (transactionIds formatted in
//! place, the padding built once) and hashes each transactionId for the ledger as it goes.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use hyper::StatusCode;
use serde::{Serialize, Serializer};

use ackbench_wire::{txn_hash, PushResultRef, TxnHash};

use super::answers::Variant;
use super::{now_us, CellContext, Counters, Phase, Schedule};
use crate::client::{parse, routes, BodyBuf, ClientError, Connection};

/// What one producer does.
#[derive(Debug, Clone)]
pub struct ProducerPlan {
    pub id: u32,
    pub queue: String,
    /// The queue's partition names (`p-0` ..).
    pub partitions: std::sync::Arc<[String]>,
    pub batch: u32,
    pub payload_bytes: u32,
    /// Messages per second for this producer (open loop); `None` = closed loop.
    pub rate: Option<f64>,
    /// How many producers the scenario runs in all (across shards): the round robin and the
    /// open-loop phases are shared among them.
    pub producers: u32,
    pub random_partitions: bool,
    /// Makes transactionIds unique across cells and rounds.
    pub tag: String,
    pub seed: u64,
}

pub async fn run(plan: ProducerPlan, ctx: Arc<CellContext>) {
    let mut rng = fastrand::Rng::with_seed(plan.seed);
    let schedule = Schedule::new(plan.rate, plan.batch, plan.id, plan.producers);
    let mut seq: u64 = 0;
    let count = plan.partitions.len().max(1) as u32;
    let mut pusher = Pusher::new(&plan, &ctx);
    while matches!(ctx.phase(), Phase::Warmup | Phase::Measure) {
        let Some((intended, _in_flight)) = schedule.next_push(&ctx, seq).await else {
            break;
        };
        let partition = if plan.random_partitions {
            rng.u32(0..count)
        } else {
            round_robin_partition(plan.id, plan.producers, seq, count)
        };
        let intended_us = now_us().saturating_sub(intended.elapsed().as_micros() as u64);
        pusher.writer.write(seq, partition, Some(intended_us));
        let sent = Instant::now();
        if schedule.open_loop() {
            // Schedule lag: how late the send starts against its intended time (a producer
            // sends one batch at a time, so it grows when pushes outlast the interval or the
            // load generator is short of CPU).
            ctx.latency
                .record("schedule_lag", sent.saturating_duration_since(intended));
        }
        match pusher.push(&ctx).await {
            Ok(()) => {
                let done = Instant::now();
                ctx.latency.record("push", done - intended);
                if schedule.open_loop() {
                    ctx.latency.record("push_uncorrected", done - sent);
                }
            }
            Err(e) => ctx.error(format!("push: {e}")),
        }
        seq += 1;
    }
}

/// The partition of producer `id`'s push `seq` under `round_robin`: the producers take turns in
/// one shared rotation (push `seq` of every producer, then push `seq + 1`, ...), so pushes that
/// are due together go to different partitions and every partition gets one push per
/// `partitions` pushes. Each producer walking the partitions on its own from its own start made
/// producers due together pile onto the same partition one after another: with 8 producers, 8
/// pushes in a row into one partition and then none for `partitions` intervals.
pub fn round_robin_partition(id: u32, producers: u32, seq: u64, partitions: u32) -> u32 {
    let turn = seq * producers.max(1) as u64 + id as u64;
    (turn % partitions.max(1) as u64) as u32
}

/// A producer's connection and body writer.
pub struct Pusher {
    conn: Connection,
    pub writer: PushWriter,
}

impl Pusher {
    pub fn new(plan: &ProducerPlan, ctx: &CellContext) -> Pusher {
        Pusher {
            conn: ctx.connection(plan.id),
            writer: PushWriter::new(plan),
        }
    }

    /// Sends the body last written and books what the broker queued. A push is answered 201
    /// with a result per item; a 200 with the same array (Queen's) means the same.
    pub async fn push(&mut self, ctx: &CellContext) -> Result<(), ClientError> {
        let body = self.writer.body.written();
        ctx.ledger.sending(&self.writer.hashes);
        let answer = self
            .conn
            .post_any(routes::PUSH, body, &[StatusCode::CREATED, StatusCode::OK])
            .await;
        Counters::bump(&ctx.counters.push_requests, 1);
        let failed = |e| {
            ctx.ledger.push_failed(&self.writer.hashes);
            e
        };
        let (status, answer) = answer.map_err(failed)?;
        if status == StatusCode::OK {
            ctx.variants.saw(Variant::PushAnswered200);
        }
        let results: Vec<PushResultRef<'_>> = parse("push", &answer).map_err(failed)?;
        let queued = results.iter().filter(|r| r.status == "queued").count();
        Counters::bump(&ctx.counters.pushed_messages, queued as u64);
        ctx.ledger.pushed(&self.writer.hashes);
        Ok(())
    }
}

/// Writes push bodies for one producer plan.
pub struct PushWriter {
    queue: String,
    partitions: Arc<[String]>,
    batch: u32,
    /// `{tag}-{producer id}-`: what every transactionId of this producer starts with.
    prefix: String,
    pad: String,
    body: BodyBuf,
    scratch: String,
    /// The transactionId hashes of the body last written, in order.
    pub hashes: Vec<TxnHash>,
}

impl PushWriter {
    pub fn new(plan: &ProducerPlan) -> PushWriter {
        PushWriter {
            queue: plan.queue.clone(),
            partitions: plan.partitions.clone(),
            batch: plan.batch,
            prefix: format!("{}-{}-", plan.tag, plan.id),
            pad: "x".repeat(plan.payload_bytes as usize),
            body: BodyBuf::default(),
            scratch: String::new(),
            hashes: Vec::with_capacity(plan.batch as usize),
        }
    }

    /// Writes the body of push request `seq` to `partition`: `batch` messages whose
    /// transactionIds are `{tag}-{id}-{seq}-{i}` and whose payload carries `ts` (the intended
    /// send time, for end-to-end latency; none for backlog) and the padding.
    pub fn write(&mut self, seq: u64, partition: u32, ts: Option<u64>) -> &[u8] {
        self.hashes.clear();
        for i in 0..self.batch {
            self.scratch.clear();
            let id = TxnId {
                prefix: &self.prefix,
                seq,
                i,
            };
            write!(self.scratch, "{id}").expect("formatting into a String");
            self.hashes.push(txn_hash(&self.scratch));
        }
        let body = PushBody {
            items: PushItems {
                queue: &self.queue,
                partition: &self.partitions[partition as usize],
                prefix: &self.prefix,
                seq,
                batch: self.batch,
                payload: Payload { ts, pad: &self.pad },
            },
        };
        self.body.json(&body)
    }
}

/// A transactionId, formatted where it is written.
struct TxnId<'a> {
    prefix: &'a str,
    seq: u64,
    i: u32,
}

impl std::fmt::Display for TxnId<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}-{}", self.prefix, self.seq, self.i)
    }
}

impl Serialize for TxnId<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[derive(Serialize)]
struct PushBody<'a> {
    items: PushItems<'a>,
}

struct PushItems<'a> {
    queue: &'a str,
    partition: &'a str,
    prefix: &'a str,
    seq: u64,
    batch: u32,
    payload: Payload<'a>,
}

#[derive(Serialize, Clone, Copy)]
struct Payload<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<u64>,
    pad: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PushItem<'a> {
    queue: &'a str,
    partition: &'a str,
    transaction_id: TxnId<'a>,
    payload: Payload<'a>,
}

impl Serialize for PushItems<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((0..self.batch).map(|i| PushItem {
            queue: self.queue,
            partition: self.partition,
            transaction_id: TxnId {
                prefix: self.prefix,
                seq: self.seq,
                i,
            },
            payload: self.payload,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> ProducerPlan {
        ProducerPlan {
            id: 3,
            queue: "q".into(),
            partitions: vec!["p-0".to_string(), "p-1".to_string()].into(),
            batch: 2,
            payload_bytes: 4,
            rate: None,
            producers: 4,
            random_partitions: false,
            tag: "cell_r1".into(),
            seed: 1,
        }
    }

    #[test]
    fn round_robin_producers_due_together_push_to_different_partitions() {
        let (producers, partitions) = (8u32, 256u32);
        let mut pushes_per_partition = vec![0u32; partitions as usize];
        for seq in 0..64u64 {
            let due_together: std::collections::HashSet<u32> = (0..producers)
                .map(|id| round_robin_partition(id, producers, seq, partitions))
                .collect();
            assert_eq!(due_together.len(), producers as usize, "push {seq}");
            for p in due_together {
                pushes_per_partition[p as usize] += 1;
            }
        }
        assert!(
            pushes_per_partition.iter().all(|&n| n == 2),
            "64 turns of 8 producers visit each of 256 partitions twice"
        );
        assert_eq!(round_robin_partition(0, 0, 5, 0), 0, "no division by zero");
    }

    #[test]
    fn push_body_and_hashes() {
        let mut w = PushWriter::new(&plan());
        let body = w.write(7, 1, Some(99));
        let v: serde_json::Value = serde_json::from_slice(body).unwrap();
        let item = |i: u32| {
            serde_json::json!({"queue": "q", "partition": "p-1",
                "transactionId": format!("cell_r1-3-7-{i}"), "payload": {"ts": 99, "pad": "xxxx"}})
        };
        assert_eq!(v, serde_json::json!({"items": [item(0), item(1)]}));
        assert_eq!(
            w.hashes,
            vec![txn_hash("cell_r1-3-7-0"), txn_hash("cell_r1-3-7-1")]
        );
        let backlog = w.write(8, 0, None);
        let v: serde_json::Value = serde_json::from_slice(backlog).unwrap();
        assert_eq!(
            v["items"][1]["payload"],
            serde_json::json!({"pad": "xxxx"}),
            "backlog carries no send time"
        );
        assert_eq!(w.hashes[1], txn_hash("cell_r1-3-8-1"));
    }

    /// The body is streamed by hand for speed; it must still read as the broker's request type.
    #[test]
    fn push_body_reads_as_the_wire_request() {
        let mut w = PushWriter::new(&plan());
        let body: ackbench_wire::PushBody =
            serde_json::from_slice(w.write(7, 1, Some(99))).unwrap();
        assert_eq!(body.items.len(), 2);
        let item = &body.items[1];
        assert_eq!(
            (item.queue.as_str(), item.partition.as_deref()),
            ("q", Some("p-1"))
        );
        assert_eq!(item.transaction_id.as_deref(), Some("cell_r1-3-7-1"));
        let payload = item.payload.0.as_ref().expect("a payload").get();
        assert_eq!(payload, r#"{"ts":99,"pad":"xxxx"}"#);
    }
}
