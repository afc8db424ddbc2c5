//! Queen's wire for a producer: `HttpProducer` pushes a batch with one `POST /api/v1/push`
//! and reads what the broker queued. `PushWriter` writes a push body straight into a reused
//! buffer (transactionIds formatted in place, the padding built once) and hashes each
//! transactionId for the ledger as it goes.

use std::fmt::Write as _;
use std::sync::Arc;

use hyper::StatusCode;
use serde::{Serialize, Serializer};

use ackbench_wire::{txn_hash, PushResultRef, TxnHash};

use crate::client::{parse, routes, BodyBuf, Connection};
use crate::workload::answers::Variant;
use crate::workload::calls::Produce;
use crate::workload::plan::ProducerPlan;
use crate::workload::CellContext;

/// A producer's connection and body writer.
pub struct HttpProducer {
    pub conn: Connection,
    pub writer: PushWriter,
}

impl Produce for HttpProducer {
    fn write(&mut self, seq: u64, partition: u32, ts: Option<u64>) {
        self.writer.write(seq, partition, ts);
    }

    fn hashes(&self) -> &[TxnHash] {
        &self.writer.hashes
    }

    /// Sends the body last written. A push is answered 201 with a result per item; a 200 with
    /// the same array (Queen's) means the same.
    async fn push(&mut self, ctx: &CellContext) -> Result<u64, String> {
        let body = self.writer.body.written();
        let (status, answer) = self
            .conn
            .post_any(routes::PUSH, body, &[StatusCode::CREATED, StatusCode::OK])
            .await
            .map_err(|e| e.to_string())?;
        if status == StatusCode::OK {
            ctx.variants.saw(Variant::PushAnswered200);
        }
        let results: Vec<PushResultRef<'_>> = parse("push", &answer).map_err(|e| e.to_string())?;
        Ok(results.iter().filter(|r| r.status == "queued").count() as u64)
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
