//! The two ack accelerators (`ack-internals.md`, "Accelerator one: the ack registry",
//! "Accelerator two: ack fusion" and "One connection discipline that matters").
//!
//! - A differential run: one seeded workload under all four settings (both on, registry only,
//!   fusion only, both off) must give identical client-visible answers (lease ids, message ids,
//!   partition ids and timestamps normalised), identical consumer rows after every step and
//!   identical DLQ contents; and the accelerated settings must really have taken their paths.
//! - A registry hit PostgreSQL must refuse (expired lease, reassigned lease, cursor moved since
//!   the pop) is answered by the hash path, and a late ack never evicts the new holder's entry.
//! - LRU eviction under a tiny bound and TTL expiry fall back to the SQL path.
//! - A pool of 2 with fusion on: 100 concurrent full-batch acks complete, in fewer
//!   `log_ack_multi_v1` calls than acks (pg_stat_statements).
//! - Fusion itself: folding, per-worker verdicts and realignment by input ordinal in one flush,
//!   and `max_rows = 1` committing one row per flush.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{txns, Http, Rng, TestBroker, QM};
use ackbench_broker::ack::fusion::{AckFusion, FusedAck, Verdict};
use hyper::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

const LEASE_ERR: &str = "invalid or expired lease";

// ---------------------------------------------------------------------------------------------
// shared helpers

/// Every `name value` line of `/metrics` (labels are part of the name).
async fn metrics(http: &Http) -> HashMap<String, f64> {
    let m = http.get("/metrics").await;
    assert_eq!(m.status, StatusCode::OK);
    m.text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

fn get(m: &HashMap<String, f64>, name: &str) -> f64 {
    m.get(name).copied().unwrap_or(0.0)
}

const PATH_FUSION: &str = "queen_acks_total{path=\"fusion\"}";
const PATH_REGISTRY: &str = "queen_acks_total{path=\"registry\"}";
const PATH_HASH: &str = "queen_acks_total{path=\"hash\"}";
const HITS: &str = "queen_ack_registry_hits_total";
const MISSES: &str = "queen_ack_registry_misses_total";

/// One `/api/v1/ack/batch` request for one (partition, group, lease); asserts 200.
async fn ack(
    http: &Http,
    pid: &str,
    lease: &str,
    group: Option<&str>,
    items: &[&str],
) -> Vec<Value> {
    let acks: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut v = json!({"transactionId": x, "partitionId": pid, "status": "completed"});
            if !lease.is_empty() {
                v["leaseId"] = json!(lease);
            }
            if let Some(g) = group {
                v["consumerGroup"] = json!(g);
            }
            v
        })
        .collect();
    let r = http
        .post("/api/v1/ack/batch", json!({ "acknowledgments": acks }))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let answers = r.json.as_array().unwrap().clone();
    assert_eq!(answers.len(), items.len());
    answers
}

/// A pop of one named partition that must deliver: (partitionId, leaseId, transactionIds).
async fn pop(
    http: &Http,
    queue: &str,
    partition: &str,
    query: &str,
) -> (String, String, Vec<String>) {
    let r = http.pop(queue, partition, query).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    (
        r.json["partitionId"].as_str().unwrap().to_string(),
        r.json["leaseId"].as_str().unwrap().to_string(),
        txns(&r),
    )
}

async fn push_ids(http: &Http, queue: &str, partition: &str, ids: &[String]) {
    let items: Vec<(&str, &str)> = ids.iter().map(|x| (partition, x.as_str())).collect();
    http.push(queue, &items).await;
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|k| format!("{prefix}{k}")).collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Expires the live lease of (partition, group), as time passing would.
async fn expire(db: &tokio_postgres::Client, pid: Uuid, group: &str) {
    db.execute(
        "UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second' \
         WHERE partition_id = $1 AND consumer_group = $2 AND batch_end IS NOT NULL",
        &[&pid, &group],
    )
    .await
    .unwrap();
}

/// (committed, batch_end, total_consumed) of a consumer row.
async fn cursor(db: &tokio_postgres::Client, pid: Uuid, group: &str) -> (i64, Option<i64>, i64) {
    let r = db
        .query_one(
            "SELECT committed, batch_end, total_consumed FROM queen.log_consumers \
             WHERE partition_id = $1 AND consumer_group = $2",
            &[&pid, &group],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

/// Top-level `log_ack_multi_v1` calls recorded by pg_stat_statements in this database only
/// (the cluster is shared with the other tests of this process).
async fn multi_calls(db: &tokio_postgres::Client) -> i64 {
    db.query_one(
        "SELECT COALESCE(sum(s.calls), 0)::bigint FROM pg_stat_statements s \
         JOIN pg_database d ON d.oid = s.dbid \
         WHERE d.datname = current_database() AND s.toplevel \
           AND s.query LIKE '%FROM queen.log_ack_multi_v1(%'",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

fn uuid(s: &str) -> Uuid {
    Uuid::parse_str(s).unwrap()
}

fn assert_all(
    answers: &[Value],
    success: bool,
    error: Option<&str>,
    lease_released: bool,
    noop: bool,
) {
    for a in answers {
        assert_eq!(a["success"], json!(success), "{answers:?}");
        assert_eq!(a["error"], json!(error), "{answers:?}");
        assert_eq!(a["leaseReleased"], json!(lease_released), "{answers:?}");
        assert_eq!(a["noop"], json!(noop), "{answers:?}");
        assert_eq!(a["dlq"], json!(false), "{answers:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// the differential run

/// Replaces every UUID (lease ids, partition ids, message ids) by its first-seen ordinal and
/// every timestamp (`...At` keys) by a placeholder, so two brokers' answers compare.
#[derive(Default)]
struct Norm {
    ids: HashMap<String, usize>,
}

impl Norm {
    fn id(&mut self, s: &str) -> String {
        let n = self.ids.len();
        format!("<id{}>", self.ids.entry(s.to_string()).or_insert(n))
    }

    fn value(&mut self, v: &Value) -> Value {
        match v {
            Value::String(s) if Uuid::parse_str(s).is_ok() => Value::String(self.id(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.value(x)).collect()),
            Value::Object(m) => {
                let mut out = serde_json::Map::new();
                for (k, x) in m {
                    let x = if k.ends_with("At") && x.is_string() {
                        json!("<ts>")
                    } else {
                        self.value(x)
                    };
                    out.insert(k.clone(), x);
                }
                Value::Object(out)
            }
            other => other.clone(),
        }
    }
}

#[derive(Clone, Copy)]
struct Slot {
    queue: &'static str,
    partition: &'static str,
    group: Option<&'static str>,
}

impl Slot {
    fn group(&self) -> &'static str {
        self.group.unwrap_or(QM)
    }

    fn query(&self, batch: usize) -> String {
        match self.group {
            Some(g) => format!("batch={batch}&consumerGroup={g}"),
            None => format!("batch={batch}"),
        }
    }
}

/// Queue `q`: retry limit 1 with a DLQ, two groups on two partitions. Queue `d`: retry limit 0
/// without a DLQ (the poison is dropped). Queue `w`: two partitions popped by wildcard too.
/// Deduplication is off everywhere, so a transactionId may repeat inside one batch.
const SLOTS: &[Slot] = &[
    Slot {
        queue: "q",
        partition: "p0",
        group: None,
    },
    Slot {
        queue: "q",
        partition: "p0",
        group: Some("g1"),
    },
    Slot {
        queue: "q",
        partition: "p1",
        group: None,
    },
    Slot {
        queue: "q",
        partition: "p1",
        group: Some("g1"),
    },
    Slot {
        queue: "d",
        partition: "p0",
        group: None,
    },
    Slot {
        queue: "w",
        partition: "a",
        group: None,
    },
    Slot {
        queue: "w",
        partition: "b",
        group: None,
    },
];

const PARTITIONS: &[(&str, &str)] = &[
    ("q", "p0"),
    ("q", "p1"),
    ("d", "p0"),
    ("w", "a"),
    ("w", "b"),
];

/// One item of an ack request, for one slot.
#[derive(Clone, Debug)]
struct AckPart {
    slot: usize,
    /// Index into every lane's list of pop leases; None = lease-less.
    lease: Option<usize>,
    items: Vec<(String, &'static str, Option<String>)>,
}

/// One broker under one setting, with its own database.
struct Lane {
    name: &'static str,
    registry: bool,
    fusion: bool,
    t: TestBroker,
    db: tokio_postgres::Client,
    pids: HashMap<(String, String), Uuid>,
    /// The raw leaseId of every delivering pop, in script order (identical indices in every lane).
    leases: Vec<String>,
    norm: Norm,
}

impl Lane {
    async fn start(name: &'static str, registry: bool, fusion: bool) -> Lane {
        let t = TestBroker::start_with(|c| {
            c.ack_registry = registry;
            c.ack_fusion = fusion;
            c.pool_size = 6;
        })
        .await;
        for (queue, retry, dlq) in [
            ("q", 1, true),
            ("d", 0, false),
            ("w", 2, true),
            ("c", 3, true),
        ] {
            let r = t
                .http
                .post(
                    "/api/v1/configure",
                    json!({"queue": queue, "options": {"dedupWindowSeconds": 0, "retryLimit": retry,
                           "deadLetterQueue": dlq, "dlqAfterMaxRetries": dlq}}),
                )
                .await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        }
        let db = t.sql().await;
        Lane {
            name,
            registry,
            fusion,
            t,
            db,
            pids: HashMap::new(),
            leases: Vec::new(),
            norm: Norm::default(),
        }
    }

    async fn pid(&mut self, queue: &str, partition: &str) -> Option<Uuid> {
        let key = (queue.to_string(), partition.to_string());
        if let Some(p) = self.pids.get(&key) {
            return Some(*p);
        }
        let row = self
            .db
            .query_opt(
                "SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id \
                 WHERE q.name = $1 AND p.name = $2",
                &[&queue, &partition],
            )
            .await
            .unwrap()?;
        let p: Uuid = row.get(0);
        self.pids.insert(key, p);
        Some(p)
    }

    fn reply(&mut self, r: &crate::common::Reply) -> Value {
        json!({"status": r.status.as_u16(), "body": self.norm.value(&r.json)})
    }

    async fn push(&mut self, queue: &str, items: &[(&str, String)]) -> Value {
        let items: Vec<Value> = items
            .iter()
            .map(|(p, t)| json!({"queue": queue, "partition": p, "transactionId": t, "payload": {"t": t}}))
            .collect();
        let r = self
            .t
            .http
            .post("/api/v1/push", json!({ "items": items }))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        self.reply(&r)
    }

    async fn pop(&mut self, slot: Slot, batch: usize) -> Value {
        let r = self
            .t
            .http
            .pop(slot.queue, slot.partition, &slot.query(batch))
            .await;
        if r.status == StatusCode::OK {
            self.leases
                .push(r.json["leaseId"].as_str().unwrap().to_string());
        }
        self.reply(&r)
    }

    /// A wildcard pop of queue `w`. The partitions come back in random order, so the messages
    /// are sorted by partition (stably) and the top-level partition fields are dropped.
    async fn pop_wildcard(&mut self, batch: usize) -> Value {
        let r = self
            .t
            .http
            .get(&format!("/api/v1/pop/queue/w?batch={batch}&partitions=2"))
            .await;
        let mut body = r.json.clone();
        if r.status == StatusCode::OK {
            self.leases
                .push(r.json["leaseId"].as_str().unwrap().to_string());
            let o = body.as_object_mut().unwrap();
            o.remove("partition");
            o.remove("partitionId");
            let messages = o.get_mut("messages").unwrap().as_array_mut().unwrap();
            messages.sort_by(|a, b| a["partition"].as_str().cmp(&b["partition"].as_str()));
        }
        json!({"status": r.status.as_u16(), "body": self.norm.value(&body)})
    }

    async fn ack(&mut self, parts: &[AckPart]) -> Value {
        let mut acks = Vec::new();
        for part in parts {
            let slot = SLOTS[part.slot];
            let pid = self.pid(slot.queue, slot.partition).await.unwrap();
            for (txn, status, error) in &part.items {
                let mut v = json!({"transactionId": txn, "partitionId": pid, "status": status});
                if let Some(l) = part.lease {
                    v["leaseId"] = json!(self.leases[l]);
                }
                if let Some(g) = slot.group {
                    v["consumerGroup"] = json!(g);
                }
                if let Some(e) = error {
                    v["error"] = json!(e);
                }
                acks.push(v);
            }
        }
        let r = self
            .t
            .http
            .post("/api/v1/ack/batch", json!({ "acknowledgments": acks }))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}: {}", self.name, r.text);
        self.reply(&r)
    }

    async fn expire(&mut self, slot: Slot) {
        if let Some(pid) = self.pid(slot.queue, slot.partition).await {
            expire(&self.db, pid, slot.group()).await;
        }
    }

    /// Every consumer row and every DLQ row, normalised.
    async fn state(&mut self) -> Value {
        let rows = self
            .db
            .query(
                "SELECT q.name, p.name, c.consumer_group, c.committed, c.batch_end, c.worker_id, \
                        c.lease_expires_at > now(), c.batch_retry_count, c.attempt_count, \
                        c.attempt_from, c.total_consumed \
                 FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id \
                 JOIN queen.queues q ON q.id = p.queue_id ORDER BY 1, 2, 3",
                &[],
            )
            .await
            .unwrap();
        let mut consumers = Vec::new();
        for r in rows {
            let worker: Option<String> = r.get(5);
            consumers.push(json!({
                "queue": r.get::<_, String>(0), "partition": r.get::<_, String>(1),
                "group": r.get::<_, String>(2), "committed": r.get::<_, i64>(3),
                "batch_end": r.get::<_, Option<i64>>(4),
                "worker": worker.map(|w| self.norm.id(&w)),
                "lease_live": r.get::<_, Option<bool>>(6),
                "batch_retry_count": r.get::<_, i32>(7), "attempt_count": r.get::<_, i32>(8),
                "attempt_from": r.get::<_, Option<i64>>(9), "total_consumed": r.get::<_, i64>(10),
            }));
        }
        let rows = self
            .db
            .query(
                "SELECT q.name, p.name, d.consumer_group, d.\"offset\", d.message_id, \
                        d.transaction_id, d.payload, d.error, d.retry_count \
                 FROM queen.log_dlq d JOIN queen.log_partitions p ON p.id = d.partition_id \
                 JOIN queen.queues q ON q.id = p.queue_id ORDER BY 1, 2, 3, 4",
                &[],
            )
            .await
            .unwrap();
        let mut dlq = Vec::new();
        for r in rows {
            let message: Uuid = r.get(4);
            dlq.push(json!({
                "queue": r.get::<_, String>(0), "partition": r.get::<_, String>(1),
                "group": r.get::<_, String>(2), "offset": r.get::<_, i64>(3),
                "message_id": self.norm.id(&message.to_string()),
                "transaction_id": r.get::<_, String>(5), "payload": r.get::<_, Value>(6),
                "error": r.get::<_, Option<String>>(7), "retry_count": r.get::<_, i32>(8),
            }));
        }
        json!({"consumers": consumers, "dlq": dlq})
    }
}

#[derive(Clone, Default)]
struct SlotState {
    /// The transactionIds of the slot's last delivered batch.
    delivered: Vec<String>,
    /// Every lease a pop granted on the slot (indices into the lanes' lease lists).
    leases: Vec<usize>,
}

struct Diff {
    lanes: Vec<Lane>,
    rng: Rng,
    slots: Vec<SlotState>,
    /// Every transactionId pushed, per partition (PARTITIONS index).
    logs: Vec<Vec<String>>,
    fresh: usize,
    leases: usize,
    trace: Vec<String>,
    /// How often each kind of ack answer came back (coverage of the run).
    kinds: BTreeMap<String, usize>,
    /// Which slots hold a live lease (in the reference lane's last state).
    live: Vec<bool>,
}

impl Diff {
    /// Every lane's answer must equal the reference lane's (the first: both off).
    fn agree(&mut self, what: String, answers: Vec<Value>) -> Value {
        self.trace.push(what);
        let reference = &answers[0];
        for (lane, a) in self.lanes.iter().zip(&answers).skip(1) {
            assert_eq!(
                a,
                reference,
                "`{}` answered differently from `{}`\nlast steps:\n  {}",
                lane.name,
                self.lanes[0].name,
                self.tail()
            );
        }
        answers.into_iter().next().unwrap()
    }

    fn tail(&self) -> String {
        let n = self.trace.len();
        self.trace[n.saturating_sub(15)..].join("\n  ")
    }

    async fn check_state(&mut self) {
        let mut states = Vec::new();
        for lane in &mut self.lanes {
            states.push(lane.state().await);
        }
        let what = format!("  (state after step {})", self.trace.len());
        let reference = self.agree(what, states);
        self.live = SLOTS
            .iter()
            .map(|slot| {
                reference["consumers"].as_array().unwrap().iter().any(|c| {
                    c["queue"] == json!(slot.queue)
                        && c["partition"] == json!(slot.partition)
                        && c["group"] == json!(slot.group())
                        && c["lease_live"] == json!(true)
                })
            })
            .collect();
    }

    /// A slot for an ack: usually one holding a live lease (when any does).
    fn ack_slot(&mut self) -> usize {
        let live: Vec<usize> = (0..SLOTS.len()).filter(|&s| self.live[s]).collect();
        if !live.is_empty() && self.rng.chance(90) {
            live[self.rng.index(live.len())]
        } else {
            self.rng.index(SLOTS.len())
        }
    }

    /// A slot for a pop: usually one without a live lease.
    fn pop_slot(&mut self) -> usize {
        let idle: Vec<usize> = (0..SLOTS.len()).filter(|&s| !self.live[s]).collect();
        if !idle.is_empty() && self.rng.chance(80) {
            idle[self.rng.index(idle.len())]
        } else {
            self.rng.index(SLOTS.len())
        }
    }

    async fn push(&mut self, step: usize) {
        let part = self.rng.index(PARTITIONS.len());
        let (queue, partition) = PARTITIONS[part];
        let n = 2 + self.rng.index(4);
        let mut txns = Vec::new();
        for _ in 0..n {
            let log = &self.logs[part];
            let txn = if !log.is_empty() && self.rng.chance(12) {
                log[self.rng.index(log.len())].clone()
            } else {
                self.fresh += 1;
                format!("{queue}{partition}-{}", self.fresh)
            };
            txns.push(txn);
        }
        self.push_to(step, part, &txns).await;
    }

    async fn push_to(&mut self, step: usize, part: usize, txns: &[String]) {
        let (queue, partition) = PARTITIONS[part];
        let mut items = Vec::new();
        for txn in txns {
            self.logs[part].push(txn.clone());
            items.push((partition, txn.clone()));
        }
        let mut answers = Vec::new();
        for lane in &mut self.lanes {
            answers.push(lane.push(queue, &items).await);
        }
        let shown: Vec<&str> = items.iter().map(|(_, t)| t.as_str()).collect();
        self.agree(
            format!("{step}: push {queue}/{partition} {shown:?}"),
            answers,
        );
    }

    async fn pop(&mut self, step: usize, s: usize, batch: usize) -> bool {
        let slot = SLOTS[s];
        let mut answers = Vec::new();
        for lane in &mut self.lanes {
            answers.push(lane.pop(slot, batch).await);
        }
        let what = format!(
            "{step}: pop {}/{} {:?} batch={batch}",
            slot.queue, slot.partition, slot.group
        );
        let a = self.agree(what, answers);
        if a["status"] != json!(200) {
            return false;
        }
        self.slots[s].delivered = delivered(&a["body"]["messages"], None);
        self.slots[s].leases.push(self.leases);
        self.leases += 1;
        true
    }

    /// A wildcard pop takes the partitions in random order and shares its batch budget among
    /// them, so only a budget covering every available message is deterministic.
    async fn pop_wildcard(&mut self, step: usize) {
        let batch = 1000;
        let mut answers = Vec::new();
        for lane in &mut self.lanes {
            answers.push(lane.pop_wildcard(batch).await);
        }
        let a = self.agree(format!("{step}: wildcard pop w batch={batch}"), answers);
        if a["status"] != json!(200) {
            return;
        }
        for (s, slot) in SLOTS.iter().enumerate().filter(|(_, s)| s.queue == "w") {
            let got = delivered(&a["body"]["messages"], Some(slot.partition));
            if !got.is_empty() {
                self.slots[s].delivered = got;
                self.slots[s].leases.push(self.leases);
            }
        }
        self.leases += 1;
    }

    async fn expire(&mut self, step: usize, s: usize) {
        for lane in &mut self.lanes {
            lane.expire(SLOTS[s]).await;
        }
        let slot = SLOTS[s];
        self.trace.push(format!(
            "{step}: expire {}/{} {:?}",
            slot.queue, slot.partition, slot.group
        ));
    }

    async fn ack(&mut self, step: usize, parts: Vec<AckPart>) {
        if parts.iter().all(|p| p.items.is_empty()) {
            return;
        }
        let mut answers = Vec::new();
        for lane in &mut self.lanes {
            answers.push(lane.ack(&parts).await);
        }
        let shown: Vec<String> = parts
            .iter()
            .map(|p| {
                let s = SLOTS[p.slot];
                let items: Vec<String> = p
                    .items
                    .iter()
                    .map(|(t, st, _)| format!("{t}:{st}"))
                    .collect();
                format!(
                    "{}/{} {:?} lease={:?} {items:?}",
                    s.queue, s.partition, s.group, p.lease
                )
            })
            .collect();
        let a = self.agree(format!("{step}: ack {}", shown.join(" + ")), answers);
        for x in a["body"].as_array().unwrap() {
            let kind = match (&x["success"], x["error"].as_str(), &x["noop"], &x["dlq"]) {
                (Value::Bool(true), _, Value::Bool(true), _) => "noop".to_string(),
                (Value::Bool(true), _, _, Value::Bool(true)) => "dlq".to_string(),
                (Value::Bool(true), ..) => "ok".to_string(),
                (_, Some(e), ..) => e.to_string(),
                _ => "failed without error".to_string(),
            };
            *self.kinds.entry(kind).or_default() += 1;
        }
    }

    /// One scripted ack request of slot `s`: `lease` is `Some(k)` for the slot's k-th lease
    /// from the end (0 = current), None for a lease-less ack.
    async fn ack_script(
        &mut self,
        step: usize,
        s: usize,
        lease: Option<usize>,
        items: &[(&str, &'static str)],
    ) {
        let leases = &self.slots[s].leases;
        let lease = lease.map(|k| leases[leases.len() - 1 - k]);
        let items = items
            .iter()
            .map(|(t, st)| {
                (
                    t.to_string(),
                    *st,
                    (*st != "completed").then(|| format!("why-{t}")),
                )
            })
            .collect();
        self.ack(
            step,
            vec![AckPart {
                slot: s,
                lease,
                items,
            }],
        )
        .await;
        self.check_state().await;
    }

    /// A scripted prelude that visits every branch the random script might miss.
    async fn prelude(&mut self) {
        const C: &str = "completed";
        let own = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // q/p0 in queue mode (slot 0, partition 0): retry limit 1 with a DLQ
        self.push_to(0, 0, &own(&["a1", "a2", "a3"])).await;
        assert!(self.pop(0, 0, 3).await);
        self.ack_script(0, 0, Some(0), &[("a3", C), ("a1", C), ("a2", C)])
            .await; // a hit
        self.push_to(1, 0, &own(&["b1", "b2", "b3", "b4"])).await;
        assert!(self.pop(1, 0, 4).await);
        self.ack_script(1, 0, Some(0), &[("b1", C), ("b2", C)])
            .await; // partial
        self.ack_script(1, 0, Some(0), &[("b3", C), ("b4", C)])
            .await; // the rest
        self.push_to(2, 0, &own(&["c1", "c2", "c3"])).await;
        assert!(self.pop(2, 0, 3).await);
        self.ack_script(2, 0, Some(0), &[("c1", C), ("c2", "failed"), ("c3", C)])
            .await; // charged
        assert!(self.pop(2, 0, 3).await);
        self.ack_script(2, 0, Some(0), &[("c2", "failed"), ("c3", C)])
            .await; // exhausted: DLQ
        assert!(self.pop(2, 0, 3).await);
        self.ack_script(2, 0, Some(0), &[("c3", C)]).await;
        self.push_to(3, 0, &own(&["e1", "e2", "e3"])).await;
        assert!(self.pop(3, 0, 3).await);
        self.ack_script(3, 0, Some(0), &[("e1", "dlq"), ("e2", C), ("e3", C)])
            .await; // explicit dlq
        assert!(self.pop(3, 0, 3).await);
        self.ack_script(3, 0, Some(0), &[("e2", "retry"), ("e3", C)])
            .await; // budget-free retry
        assert!(self.pop(3, 0, 3).await);
        self.ack_script(3, 0, Some(0), &[("e2", C), ("e3", C)])
            .await;
        // the cursor moves between the pop and the full-batch ack
        self.push_to(4, 0, &own(&["f1", "f2", "f3"])).await;
        assert!(self.pop(4, 0, 3).await);
        self.ack_script(4, 0, None, &[("f1", C)]).await;
        self.ack_script(4, 0, Some(0), &[("f1", C), ("f2", C), ("f3", C)])
            .await;
        // expiry, then reassignment
        self.push_to(5, 0, &own(&["g1", "g2"])).await;
        assert!(self.pop(5, 0, 2).await);
        self.expire(5, 0).await;
        self.ack_script(5, 0, Some(0), &[("g1", C), ("g2", C)])
            .await; // refused
        assert!(self.pop(5, 0, 2).await);
        self.ack_script(5, 0, Some(1), &[("g1", C), ("g2", C)])
            .await; // the old worker: refused
        self.ack_script(5, 0, Some(0), &[("g2", C), ("g1", C)])
            .await; // the new one: a hit
                    // a superset: an unknown transactionId and a nack of a committed one
        self.push_to(6, 0, &own(&["h1", "h2"])).await;
        assert!(self.pop(6, 0, 2).await);
        self.ack_script(
            6,
            0,
            Some(0),
            &[("h1", C), ("nope", C), ("a1", "failed"), ("h2", C)],
        )
        .await;
        // queue d (slot 4, partition 2): retry limit 0 without a DLQ drops the poison
        self.push_to(7, 2, &own(&["x1", "x2"])).await;
        assert!(self.pop(7, 4, 2).await);
        self.ack_script(7, 4, Some(0), &[("x1", "failed"), ("x2", C)])
            .await;
        // one transactionId delivered twice in one batch (q/p1 in g1: slot 3, partition 1)
        self.push_to(8, 1, &own(&["y1", "y2", "y1"])).await;
        assert!(self.pop(8, 3, 3).await);
        self.ack_script(8, 3, Some(0), &[("y1", C), ("y2", C), ("y1", C)])
            .await; // partial
        self.ack_script(8, 3, Some(0), &[("y1", C)]).await; // completes
                                                            // q/p1 in queue mode (slot 2) had not consumed: a lease-less ack of everything
        self.ack_script(9, 2, None, &[("y1", C), ("y2", C)]).await;
    }

    fn completed(items: &[String]) -> Vec<(String, &'static str, Option<String>)> {
        items
            .iter()
            .map(|x| (x.clone(), "completed", None))
            .collect()
    }

    /// A random ack of slot `s`'s last batch; usually one request, two for "cursor moved".
    async fn random_ack(&mut self, step: usize, s: usize) {
        let st = self.slots[s].clone();
        if st.delivered.is_empty() {
            return;
        }
        let current = st.leases.last().copied();
        let mut items = Self::completed(&st.delivered);
        let part =
            |lease: Option<usize>, items: Vec<(String, &'static str, Option<String>)>| AckPart {
                slot: s,
                lease,
                items,
            };
        match self.rng.index(100) {
            // the full batch, completed, in any order, sometimes with a repeat: a registry hit
            0..=34 => {
                self.rng.shuffle(&mut items);
                if self.rng.chance(15) {
                    items.push(items[0].clone());
                }
                self.ack(step, vec![part(current, items)]).await;
            }
            // a strict subset: the hash path, partial
            35..=45 => {
                let mut keep: Vec<_> = items
                    .iter()
                    .filter(|_| self.rng.chance(60))
                    .cloned()
                    .collect();
                if keep.len() == items.len() {
                    keep.pop();
                }
                if keep.is_empty() {
                    keep.push(items[0].clone());
                }
                self.ack(step, vec![part(current, keep)]).await;
            }
            // the full batch with one explicit signal
            46..=57 => {
                let k = self.rng.index(items.len());
                items[k].1 = ["failed", "failed", "retry", "dlq"][self.rng.index(4)];
                if self.rng.chance(50) {
                    items[k].2 = Some(format!("e{step}"));
                }
                self.ack(step, vec![part(current, items)]).await;
            }
            // a lease-less ack of a prefix
            58..=63 => {
                let k = 1 + self.rng.index(items.len());
                items.truncate(k);
                self.ack(step, vec![part(None, items)]).await;
            }
            // the cursor moves (lease-less) between the pop and the full-batch leased ack
            64..=72 => {
                if items.len() > 1 {
                    self.ack(step, vec![part(None, items[..1].to_vec())]).await;
                }
                self.ack(step, vec![part(current, items)]).await;
            }
            // a stale lease of the slot (an earlier pop's) acks the full batch
            73..=80 => {
                let lease = if st.leases.len() > 1 {
                    Some(st.leases[self.rng.index(st.leases.len() - 1)])
                } else {
                    current
                };
                self.ack(step, vec![part(lease, items)]).await;
            }
            // a superset: a transactionId of the partition's history, or an unknown one
            81..=88 => {
                let pi = PARTITIONS
                    .iter()
                    .position(|p| *p == (SLOTS[s].queue, SLOTS[s].partition))
                    .unwrap();
                let extra = if self.rng.chance(60) && !self.logs[pi].is_empty() {
                    self.logs[pi][self.rng.index(self.logs[pi].len())].clone()
                } else {
                    format!("unknown-{step}")
                };
                let at = self.rng.index(items.len() + 1);
                let status =
                    ["completed", "completed", "failed", "dlq", "retry"][self.rng.index(5)];
                items.insert(at, (extra, status, None));
                self.ack(step, vec![part(current, items)]).await;
            }
            // two slots' full batches in one request
            _ => {
                let others: Vec<usize> = (0..SLOTS.len())
                    .filter(|&o| o != s && !self.slots[o].delivered.is_empty())
                    .collect();
                let mut parts = vec![part(current, items)];
                if !others.is_empty() {
                    let o = others[self.rng.index(others.len())];
                    let os = &self.slots[o];
                    parts.push(AckPart {
                        slot: o,
                        lease: os.leases.last().copied(),
                        items: Self::completed(&os.delivered),
                    });
                }
                self.ack(step, parts).await;
            }
        }
    }
}

/// The transactionIds of (normalised) pop messages, optionally of one partition only.
fn delivered(messages: &Value, partition: Option<&str>) -> Vec<String> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| partition.is_none_or(|p| m["partition"] == json!(p)))
        .map(|m| m["transactionId"].as_str().unwrap().to_string())
        .collect()
}

/// One consumer of the concurrent phase: drains its own (partition, group) with full-batch acks
/// (or, when `split`, each batch acked in two halves); its answers, normalised on its own.
async fn drain_consumer(
    http: Http,
    partition: String,
    group: Option<&'static str>,
    batch: usize,
    split: bool,
) -> Vec<Value> {
    let slot = Slot {
        queue: "c",
        partition: "",
        group,
    };
    let mut norm = Norm::default();
    let mut out = Vec::new();
    for _ in 0..100 {
        let r = http.pop("c", &partition, &slot.query(batch)).await;
        out.push(json!({"pop": r.status.as_u16(), "body": norm.value(&r.json)}));
        if r.status == StatusCode::NO_CONTENT {
            return out;
        }
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let pid = r.json["partitionId"].as_str().unwrap().to_string();
        let lease = r.json["leaseId"].as_str().unwrap().to_string();
        let got = txns(&r);
        let all = strs(&got);
        let halves: Vec<&[&str]> = if split && all.len() > 1 {
            let (a, b) = all.split_at(all.len() / 2);
            vec![a, b]
        } else {
            vec![&all[..]]
        };
        for h in halves {
            let answers = ack(&http, &pid, &lease, group, h).await;
            out.push(norm.value(&Value::Array(answers)));
        }
    }
    panic!("consumer of c/{partition} {group:?} did not drain");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn differential_all_four_settings_answer_identically() {
    let settings = [
        ("both off", false, false),
        ("registry only", true, false),
        ("fusion only", false, true),
        ("both on", true, true),
    ];
    let mut lanes = Vec::new();
    for (name, registry, fusion) in settings {
        lanes.push(Lane::start(name, registry, fusion).await);
    }
    let mut d = Diff {
        lanes,
        rng: Rng(0x00c0_ffee_d15e_a5e5),
        slots: vec![SlotState::default(); SLOTS.len()],
        logs: vec![Vec::new(); PARTITIONS.len()],
        fresh: 0,
        leases: 0,
        trace: Vec::new(),
        kinds: BTreeMap::new(),
        live: vec![false; SLOTS.len()],
    };

    // the scripted prelude, then the random script
    d.prelude().await;
    for step in 0..170 {
        let any_live = d.live.contains(&true);
        match d.rng.index(100) {
            0..=19 => d.push(step).await,
            42..=46 => d.pop_wildcard(step).await,
            47..=93 if any_live => {
                let s = d.ack_slot();
                d.random_ack(step, s).await;
            }
            94..=99 if any_live => {
                let s = d.ack_slot();
                d.expire(step, s).await;
            }
            _ => {
                let s = d.pop_slot();
                let batch = 1 + d.rng.index(5);
                d.pop(step, s, batch).await;
            }
        }
        d.check_state().await;
    }
    // drain every slot: expire, re-pop (reassignment to a new lease), full-batch ack
    for s in 0..SLOTS.len() {
        for round in 0..60 {
            assert!(round < 59, "slot {s} did not drain");
            d.expire(1000 + s, s).await;
            if !d.pop(1000 + s, s, 5).await {
                break;
            }
            let st = d.slots[s].clone();
            let part = AckPart {
                slot: s,
                lease: st.leases.last().copied(),
                items: Diff::completed(&st.delivered),
            };
            d.ack(1000 + s, vec![part]).await;
            d.check_state().await;
        }
    }
    d.check_state().await;

    // the concurrent phase: in every lane at once, 12 consumers (6 partitions x 2 groups) race,
    // each on its own consumer row, so each one's answers are deterministic
    let items: Vec<(&str, String)> = (0..6)
        .flat_map(|p| {
            (0..10).map(move |k| (["c0", "c1", "c2", "c3", "c4", "c5"][p], format!("c{p}-{k}")))
        })
        .collect();
    let mut answers = Vec::new();
    for lane in &mut d.lanes {
        answers.push(lane.push("c", &items).await);
    }
    d.agree("push c".into(), answers);
    let mut handles = Vec::new();
    for lane in &d.lanes {
        let mut consumers = Vec::new();
        for p in 0..6usize {
            for group in [None, Some("g1")] {
                let http = lane.t.http.clone();
                let batch = 2 + (p % 3);
                let split = p % 3 == 1 && group.is_some();
                consumers.push((
                    format!("c{p} {group:?}"),
                    tokio::spawn(drain_consumer(http, format!("c{p}"), group, batch, split)),
                ));
            }
        }
        handles.push(consumers);
    }
    let mut answers = Vec::new();
    for consumers in handles {
        let mut seen = BTreeMap::new();
        for (label, h) in consumers {
            let got = tokio::time::timeout(Duration::from_secs(30), h)
                .await
                .expect("no deadlock in the concurrent phase")
                .unwrap();
            seen.insert(label, Value::Array(got));
        }
        answers.push(json!(seen));
    }
    d.agree("concurrent phase".into(), answers);
    d.check_state().await;

    // the workload covered what it claims to
    eprintln!("answers by kind: {:?}", d.kinds);
    for kind in [
        "ok",
        "noop",
        "dlq",
        "already committed",
        "unresolvable",
        LEASE_ERR,
    ] {
        assert!(
            d.kinds.contains_key(kind),
            "the workload never produced `{kind}`: {:?}",
            d.kinds
        );
    }
    let state = d.lanes[0].state().await;
    assert!(!state["dlq"].as_array().unwrap().is_empty(), "{state}");

    // and the accelerated settings really took their paths
    let mut totals = Vec::new();
    for lane in &d.lanes {
        let m = metrics(&lane.t.http).await;
        let app = lane.t.broker.app();
        let (fusion, registry, hash) = (
            get(&m, PATH_FUSION),
            get(&m, PATH_REGISTRY),
            get(&m, PATH_HASH),
        );
        eprintln!(
            "{}: fusion {fusion} registry {registry} hash {hash} hits {} misses {}",
            lane.name,
            get(&m, HITS),
            get(&m, MISSES)
        );
        assert_eq!(
            get(&m, "queen_ack_registry_enabled"),
            f64::from(u8::from(lane.registry))
        );
        assert_eq!(
            get(&m, "queen_ack_fusion_enabled"),
            f64::from(u8::from(lane.fusion))
        );
        assert!(
            hash > 0.0,
            "{}: every setting answers non-full-batch acks by hash",
            lane.name
        );
        match (lane.registry, lane.fusion) {
            (true, true) => {
                assert!(get(&m, HITS) > 0.0 && fusion > 0.0, "{}: {m:?}", lane.name);
                assert_eq!(registry, 0.0, "{}", lane.name);
                let stats = &app.fusion.as_ref().unwrap().stats;
                assert!(stats.committed.load(Relaxed) > 0);
                assert!(
                    stats.rejected.load(Relaxed) > 0,
                    "some hits were refused by PostgreSQL"
                );
                assert_eq!(stats.flush_errors.load(Relaxed), 0);
                assert!(multi_calls(&lane.db).await > 0);
            }
            (true, false) => {
                assert!(
                    get(&m, HITS) > 0.0 && registry > 0.0,
                    "{}: {m:?}",
                    lane.name
                );
                assert_eq!(fusion, 0.0, "{}", lane.name);
                assert_eq!(multi_calls(&lane.db).await, 0);
            }
            // fusion fuses registry hits: without the registry there is nothing to fuse
            (false, _) => {
                assert!(!m.contains_key(HITS), "{}", lane.name);
                assert_eq!((fusion, registry), (0.0, 0.0), "{}", lane.name);
                assert_eq!(multi_calls(&lane.db).await, 0);
            }
        }
        totals.push((
            fusion + registry + hash,
            get(&m, "queen_messages_acked_total"),
        ));
    }
    assert!(
        totals.iter().all(|t| *t == totals[0]),
        "acked items and acked messages agree across settings: {totals:?}"
    );
    for lane in d.lanes {
        lane.t.broker.shutdown().await;
    }
}

// ---------------------------------------------------------------------------------------------
// stale registry hits

async fn stale_hits_fall_back(fusion: bool) {
    let t = TestBroker::start_with(|c| {
        c.ack_registry = true;
        c.ack_fusion = fusion;
    })
    .await;
    let app = t.broker.app().clone();
    let reg = app.registry.as_ref().unwrap();
    let rejected = || {
        app.fusion
            .as_ref()
            .map_or(0, |f| f.stats.rejected.load(Relaxed))
    };
    let db = t.sql().await;
    let fast = if fusion { PATH_FUSION } else { PATH_REGISTRY };

    // 1. the lease expired between the pop and the ack: the hit is refused by PostgreSQL
    let batch = ids("e", 4);
    push_ids(&t.http, "q", "p", &batch).await;
    let (pid, a, got) = pop(&t.http, "q", "p", "batch=4").await;
    assert_eq!(got, batch);
    let p = uuid(&pid);
    expire(&db, p, QM).await;
    let answers = ack(&t.http, &pid, &a, None, &strs(&batch)).await;
    assert_all(&answers, false, Some(LEASE_ERR), false, false);
    assert_eq!(reg.counters.hits.load(Relaxed), 1, "it was a registry hit");
    assert_eq!(rejected(), u64::from(fusion));
    let m = metrics(&t.http).await;
    assert_eq!(
        (get(&m, fast), get(&m, PATH_HASH)),
        (0.0, 4.0),
        "answered by the hash path"
    );
    assert_eq!(cursor(&db, p, QM).await, (-1, Some(3), 0));

    // 2. reassigned: another consumer re-pops the expired batch; the old worker's full-batch
    // ack is refused item by item and does not evict the new holder's entry
    let (_, b, again) = pop(&t.http, "q", "p", "batch=4").await;
    assert_eq!(again, batch);
    assert_eq!(reg.entries(), 1);
    let answers = ack(&t.http, &pid, &a, None, &strs(&batch)).await;
    assert_all(&answers, false, Some(LEASE_ERR), false, false);
    assert_eq!(
        reg.counters.hits.load(Relaxed),
        1,
        "a miss: the entry is the new holder's"
    );
    assert_eq!(
        reg.entries(),
        1,
        "the old worker's refusal kept the new holder's entry"
    );
    let answers = ack(&t.http, &pid, &b, None, &strs(&batch)).await;
    assert_all(&answers, true, None, true, false);
    assert_eq!(
        reg.counters.hits.load(Relaxed),
        2,
        "the new holder's full-batch ack is still a hit"
    );
    assert_eq!(reg.entries(), 0);
    assert_eq!(get(&metrics(&t.http).await, fast), 4.0);
    assert_eq!(cursor(&db, p, QM).await, (3, None, 4));

    // 3. reassigned behind this broker's back (another broker re-leased the row after an
    // expiry): the registry still holds the old worker, the hit is refused by PostgreSQL
    let batch = ids("r", 3);
    push_ids(&t.http, "q", "p", &batch).await;
    let (_, c, _) = pop(&t.http, "q", "p", "batch=3").await;
    db.execute(
        "UPDATE queen.log_consumers SET worker_id = 'another-brokers-lease', \
         lease_expires_at = now() + interval '1 minute' WHERE partition_id = $1",
        &[&p],
    )
    .await
    .unwrap();
    let answers = ack(&t.http, &pid, &c, None, &strs(&batch)).await;
    assert_all(&answers, false, Some(LEASE_ERR), false, false);
    assert_eq!(reg.counters.hits.load(Relaxed), 3);
    assert_eq!(rejected(), 2 * u64::from(fusion));
    assert_eq!(cursor(&db, p, QM).await, (3, Some(6), 4), "nothing changed");

    // 4. a lease-less ack moved the cursor between the pop and the full-batch ack: the hit is
    // refused ('cursor moved since the pop') and the hash path answers noop for the items the
    // lease-less ack already committed
    let batch = ids("m", 5);
    push_ids(&t.http, "q", "p2", &batch).await;
    let (pid2, d, _) = pop(&t.http, "q", "p2", "batch=5").await;
    let p2 = uuid(&pid2);
    let answers = ack(&t.http, &pid2, "", None, &strs(&batch[..2])).await;
    assert_all(&answers, true, None, false, false);
    assert_eq!(cursor(&db, p2, QM).await, (1, Some(4), 2));
    {
        // what PostgreSQL answers the registry's advance (a refusal changes nothing)
        let db2 = t.sql().await;
        let v: Value = db2
            .query_one(
                "SELECT queen.log_ack_at_v1($1, $2, $3, 4, true, 5)",
                &[&p2, &QM, &d],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(v["ok"], json!(false), "{v}");
        assert_eq!(v["error"], json!("cursor moved since the pop"), "{v}");
    }
    let hits = reg.counters.hits.load(Relaxed);
    let mut shuffled = strs(&batch);
    shuffled.reverse();
    let answers = ack(&t.http, &pid2, &d, None, &shuffled).await;
    assert_eq!(
        reg.counters.hits.load(Relaxed),
        hits + 1,
        "it was a registry hit"
    );
    assert_eq!(rejected(), 3 * u64::from(fusion));
    for a in &answers {
        let early = ["m0", "m1"].contains(&a["transactionId"].as_str().unwrap());
        assert_eq!(a["success"], json!(true), "{answers:?}");
        assert_eq!(a["noop"], json!(early), "{answers:?}");
        assert_eq!(a["leaseReleased"], json!(true), "{answers:?}");
        assert_eq!(a["error"], Value::Null, "{answers:?}");
    }
    assert_eq!(cursor(&db, p2, QM).await, (4, None, 5));
    let m = metrics(&t.http).await;
    assert_eq!(
        get(&m, fast),
        4.0,
        "only case 2 was answered by the fast path"
    );
    assert_eq!(get(&m, "queen_messages_acked_total"), 9.0);
    t.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_registry_hits_are_refused_by_postgres_and_answered_by_the_hash_path() {
    stale_hits_fall_back(true).await;
    stale_hits_fall_back(false).await;
}

// ---------------------------------------------------------------------------------------------
// eviction and expiry

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lru_eviction_and_ttl_expiry_fall_back_to_the_sql_path() {
    // a 0 MiB bound evicts every entry on insert
    let t = TestBroker::start_with(|c| c.ack_registry_mb = 0).await;
    let app = t.broker.app().clone();
    let reg = app.registry.as_ref().unwrap();
    let db = t.sql().await;
    let batch = ids("x", 3);
    push_ids(&t.http, "q", "p", &batch).await;
    let (pid, lease, _) = pop(&t.http, "q", "p", "batch=3").await;
    assert_eq!(
        (reg.entries(), reg.counters.evictions.load(Relaxed)),
        (0, 1)
    );
    let answers = ack(&t.http, &pid, &lease, None, &strs(&batch)).await;
    assert_all(&answers, true, None, true, false);
    assert_eq!(cursor(&db, uuid(&pid), QM).await, (2, None, 3));
    let m = metrics(&t.http).await;
    assert_eq!((get(&m, HITS), get(&m, MISSES)), (0.0, 1.0));
    assert_eq!(get(&m, "queen_ack_registry_evictions_total"), 1.0);
    assert_eq!((get(&m, PATH_HASH), get(&m, PATH_FUSION)), (3.0, 0.0));
    t.broker.shutdown().await;

    // TTL: an expired entry is swept by the next insert, or missed at lookup if not swept yet
    let t = TestBroker::start().await;
    let app = t.broker.app().clone();
    let reg = app.registry.as_ref().unwrap();
    let db = t.sql().await;
    let mut batches = Vec::new();
    for p in ["p1", "p2", "p3"] {
        let batch = ids(&format!("{p}-"), 3);
        push_ids(&t.http, "q", p, &batch).await;
        batches.push(batch);
    }
    let (pid1, l1, _) = pop(&t.http, "q", "p1", "batch=3").await;
    reg.expire_all_for_test();
    let (pid2, l2, _) = pop(&t.http, "q", "p2", "batch=3").await;
    assert_eq!(
        reg.counters.expirations.load(Relaxed),
        1,
        "the insert swept p1's expired entry"
    );
    assert_eq!(reg.entries(), 1);
    let answers = ack(&t.http, &pid1, &l1, None, &strs(&batches[0])).await;
    assert_all(&answers, true, None, true, false);
    assert_eq!(
        (
            reg.counters.hits.load(Relaxed),
            reg.counters.misses.load(Relaxed)
        ),
        (0, 1)
    );
    let answers = ack(&t.http, &pid2, &l2, None, &strs(&batches[1])).await;
    assert_all(&answers, true, None, true, false);
    assert_eq!(
        (
            reg.counters.hits.load(Relaxed),
            reg.counters.misses.load(Relaxed)
        ),
        (1, 1)
    );

    let (pid3, l3, _) = pop(&t.http, "q", "p3", "batch=3").await;
    reg.expire_all_for_test();
    assert_eq!(reg.entries(), 1, "not swept: no insert since");
    let answers = ack(&t.http, &pid3, &l3, None, &strs(&batches[2])).await;
    assert_all(&answers, true, None, true, false);
    assert_eq!(
        (
            reg.counters.hits.load(Relaxed),
            reg.counters.misses.load(Relaxed)
        ),
        (1, 2),
        "past its TTL: a miss"
    );
    assert_eq!(reg.entries(), 0, "the SQL-path outcome removed it");
    for pid in [&pid1, &pid2, &pid3] {
        assert_eq!(cursor(&db, uuid(pid), QM).await, (2, None, 3));
    }
    let m = metrics(&t.http).await;
    assert_eq!((get(&m, PATH_HASH), get(&m, PATH_FUSION)), (6.0, 3.0));
    assert_eq!(get(&m, "queen_ack_registry_expirations_total"), 1.0);
    assert_eq!(get(&m, "queen_messages_acked_total"), 9.0);
    t.broker.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// fusion under a tiny pool

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pool_of_two_completes_100_concurrent_fused_acks_in_fewer_commits() {
    const N: usize = 100;
    let t = TestBroker::start_with(|c| {
        c.pool_size = 2;
        c.ack_registry = true;
        c.ack_fusion = true;
    })
    .await;
    let app = t.broker.app().clone();
    let items: Vec<Value> = (0..N)
        .flat_map(|p| {
            (0..3).map(move |k| json!({"queue": "q", "partition": format!("p{p}"), "transactionId": format!("t{p}-{k}"), "payload": k}))
        })
        .collect();
    let r = t.http.post("/api/v1/push", json!({ "items": items })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let mut leases = Vec::new();
    for p in 0..N {
        leases.push(pop(&t.http, "q", &format!("p{p}"), "batch=3").await);
    }
    let db = t.sql().await;
    let before = multi_calls(&db).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(N));
    let mut tasks = Vec::new();
    for (pid, lease, batch) in leases {
        let (http, barrier) = (t.http.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            ack(&http, &pid, &lease, None, &strs(&batch)).await
        }));
    }
    let all = async {
        let mut out = Vec::new();
        for task in tasks {
            out.push(task.await.unwrap());
        }
        out
    };
    let answers = tokio::time::timeout(Duration::from_secs(30), all)
        .await
        .expect("no deadlock: 100 parked acks with a pool of 2");
    for a in &answers {
        assert_all(a, true, None, true, false);
    }
    let calls = multi_calls(&db).await - before;
    let stats = &app.fusion.as_ref().unwrap().stats;
    eprintln!(
        "{N} acks in {calls} log_ack_multi_v1 calls ({} rows)",
        stats.rows.load(Relaxed)
    );
    assert!(calls >= 1 && calls < N as i64, "{calls} calls for {N} acks");
    assert_eq!(calls as u64, stats.flushes.load(Relaxed));
    assert_eq!(stats.rows.load(Relaxed), N as u64);
    assert_eq!(
        (stats.requests.load(Relaxed), stats.committed.load(Relaxed)),
        (N as u64, N as u64)
    );
    let m = metrics(&t.http).await;
    assert_eq!(
        (get(&m, HITS), get(&m, PATH_FUSION), get(&m, PATH_HASH)),
        (N as f64, 3.0 * N as f64, 0.0)
    );
    let done: i64 = db
        .query_one(
            "SELECT count(*) FROM queen.log_consumers WHERE committed = 2 AND batch_end IS NULL \
             AND total_consumed = 3",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(done, N as i64);
    t.broker.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// fusion on its own

/// A fusion instance of its own (one flush at a time, no linger) on the test broker's database.
fn fusion_on(t: &TestBroker, max_rows: usize) -> AckFusion {
    use ackbench_broker::lanes::control::{ConcurrencyMode, Linger};
    let config: tokio_postgres::Config = t.db_url.parse().unwrap();
    let pool = ackbench_broker::storage::pool(&config, 4).unwrap();
    let no_linger = Linger::Fixed {
        linger: Duration::ZERO,
        min_rate: 0,
    };
    let demand = std::sync::Arc::default();
    ackbench_broker::fusion::ack_only(pool, ConcurrencyMode::Fixed(1), no_linger, max_rows, demand)
}

fn fused(pid: &str, group: &str, lease_id: &str, batch_end: i64) -> FusedAck {
    FusedAck {
        partition: uuid(pid),
        group: group.to_string(),
        lease_id: lease_id.to_string(),
        batch_end,
        // the registry's count: offsets from the span start (0 here) through batch_end
        count: batch_end as i32 + 1,
    }
}

/// Holds partition `pid`'s consumer row lock, submits a fused ack for it and waits until its
/// flush is blocked on that lock: while it is, later submissions pile up in the shard's inbox.
async fn block_the_shard(
    t: &TestBroker,
    fusion: &Arc<AckFusion>,
    pid: &str,
    lease: &str,
    batch_end: i64,
) -> (tokio_postgres::Client, tokio::task::JoinHandle<Verdict>) {
    let locker = t.sql().await;
    locker.batch_execute("BEGIN").await.unwrap();
    locker
        .execute(
            "SELECT 1 FROM queen.log_consumers WHERE partition_id = $1 FOR UPDATE",
            &[&uuid(pid)],
        )
        .await
        .unwrap();
    let f = fusion.clone();
    let blocker = tokio::spawn({
        let ack = fused(pid, QM, lease, batch_end);
        async move { f.submit(ack).await }
    });
    let db = t.sql().await;
    for _ in 0..500 {
        let waiting: i64 = db
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock' AND query LIKE '%FROM queen.log_ack_multi_v1%'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting == 1 {
            return (locker, blocker);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the blocker flush never waited on the row lock");
}

/// Submits `ack` on its own task and returns once it is enqueued (so arrival order is fixed).
async fn submit_in_order(
    fusion: &Arc<AckFusion>,
    ack: FusedAck,
) -> tokio::task::JoinHandle<Verdict> {
    let before = fusion.stats.requests.load(Relaxed);
    let f = fusion.clone();
    let h = tokio::spawn(async move { f.submit(ack).await });
    while fusion.stats.requests.load(Relaxed) == before {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fusion_folds_one_worker_keeps_workers_apart_and_realigns_verdicts() {
    let t = TestBroker::start_with(|c| c.ack_fusion = false).await;
    let db = t.sql().await;
    push_ids(&t.http, "q", "z", &ids("z", 1)).await;
    push_ids(&t.http, "q", "p", &ids("p", 3)).await;
    push_ids(&t.http, "q", "r", &ids("r", 2)).await;
    let (zp, zl, _) = pop(&t.http, "q", "z", "batch=1").await;
    // worker B leased p first; its lease expired and worker A holds the batch now
    let (pp, lb, _) = pop(&t.http, "q", "p", "batch=3").await;
    expire(&db, uuid(&pp), QM).await;
    let (_, la, _) = pop(&t.http, "q", "p", "batch=3").await;
    let (rp, lr, _) = pop(&t.http, "q", "r", "batch=2").await;

    let fusion = Arc::new(fusion_on(&t, usize::MAX));
    let (locker, blocker) = block_the_shard(&t, &fusion, &zp, &zl, 0).await;
    // Submit so that input ordinals run against the execution order (by partition id): the
    // row executed first gets the last ordinal.
    let r_first = uuid(&rp) > uuid(&pp);
    let mut handles: Vec<(&str, tokio::task::JoinHandle<Verdict>)> = Vec::new();
    if r_first {
        handles.push(("R", submit_in_order(&fusion, fused(&rp, QM, &lr, 1)).await));
    }
    handles.push(("A1", submit_in_order(&fusion, fused(&pp, QM, &la, 2)).await));
    handles.push(("B", submit_in_order(&fusion, fused(&pp, QM, &lb, 2)).await));
    handles.push(("A2", submit_in_order(&fusion, fused(&pp, QM, &la, 2)).await));
    if !r_first {
        handles.push(("R", submit_in_order(&fusion, fused(&rp, QM, &lr, 1)).await));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        fusion.stats.flushes.load(Relaxed),
        1,
        "only the blocker has flushed"
    );
    locker.batch_execute("COMMIT").await.unwrap();

    let blocked = tokio::time::timeout(Duration::from_secs(10), blocker)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        blocked,
        Verdict::Committed {
            acked: 1,
            lease_released: true
        }
    );
    let mut verdicts = HashMap::new();
    for (name, h) in handles {
        let v = tokio::time::timeout(Duration::from_secs(10), h)
            .await
            .unwrap()
            .unwrap();
        verdicts.insert(name, v);
    }
    let committed_a = Verdict::Committed {
        acked: 3,
        lease_released: true,
    };
    assert_eq!(verdicts["A1"], committed_a, "{verdicts:?}");
    assert_eq!(
        verdicts["A2"], committed_a,
        "folded requests share the row's verdict"
    );
    assert_eq!(
        verdicts["B"],
        Verdict::Rejected(LEASE_ERR.into()),
        "{verdicts:?}"
    );
    assert_eq!(
        verdicts["R"],
        Verdict::Committed {
            acked: 2,
            lease_released: true
        },
        "{verdicts:?}"
    );

    let s = &fusion.stats;
    assert_eq!(
        s.flushes.load(Relaxed),
        2,
        "the four requests went in one flush"
    );
    assert_eq!(s.rows.load(Relaxed), 1 + 3, "A folded; B stayed apart");
    assert_eq!(
        (
            s.requests.load(Relaxed),
            s.committed.load(Relaxed),
            s.rejected.load(Relaxed)
        ),
        (5, 4, 1)
    );
    assert_eq!(multi_calls(&db).await, 2);
    assert_eq!(cursor(&db, uuid(&pp), QM).await, (2, None, 3));
    assert_eq!(cursor(&db, uuid(&rp), QM).await, (1, None, 2));
    assert_eq!(cursor(&db, uuid(&zp), QM).await, (0, None, 1));
    t.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fusion_with_max_rows_one_commits_one_row_per_flush() {
    let t = TestBroker::start_with(|c| c.ack_fusion = false).await;
    let db = t.sql().await;
    let mut leased = Vec::new();
    for p in ["z", "m0", "m1", "m2"] {
        push_ids(&t.http, "q", p, &ids(p, 2)).await;
        leased.push(pop(&t.http, "q", p, "batch=2").await);
    }
    let fusion = Arc::new(fusion_on(&t, 1));
    let (zp, zl, _) = &leased[0];
    let (locker, blocker) = block_the_shard(&t, &fusion, zp, zl, 1).await;
    let (m0, l0, _) = &leased[1];
    let mut handles = vec![
        submit_in_order(&fusion, fused(m0, QM, l0, 1)).await,
        submit_in_order(&fusion, fused(m0, QM, l0, 1)).await,
    ];
    for (pid, lease, _) in &leased[2..] {
        handles.push(submit_in_order(&fusion, fused(pid, QM, lease, 1)).await);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    locker.batch_execute("COMMIT").await.unwrap();
    let z = tokio::time::timeout(Duration::from_secs(10), blocker)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        z,
        Verdict::Committed {
            acked: 2,
            lease_released: true
        }
    );
    for h in handles {
        let v = tokio::time::timeout(Duration::from_secs(10), h)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            v,
            Verdict::Committed {
                acked: 2,
                lease_released: true
            }
        );
    }
    let s = &fusion.stats;
    // z; then m0 (its two requests still fold: one row); then m1; then m2
    assert_eq!(
        (s.flushes.load(Relaxed), s.rows.load(Relaxed)),
        (4, 4),
        "one row per flush"
    );
    assert_eq!(multi_calls(&db).await, 4);
    for (pid, _, _) in &leased[1..] {
        assert_eq!(cursor(&db, uuid(pid), QM).await, (1, None, 2));
    }
    t.broker.shutdown().await;

    // the same knob on a broker: every HTTP full-batch ack is its own commit
    let t = TestBroker::start_with(|c| c.ack_fusion_max_rows = 1).await;
    let mut leased = Vec::new();
    for p in 0..12 {
        let p = format!("p{p}");
        push_ids(&t.http, "q", &p, &ids(&p, 2)).await;
        leased.push(pop(&t.http, "q", &p, "batch=2").await);
    }
    let mut tasks = Vec::new();
    for (pid, lease, batch) in leased {
        let http = t.http.clone();
        tasks.push(tokio::spawn(async move {
            ack(&http, &pid, &lease, None, &strs(&batch)).await
        }));
    }
    for task in tasks {
        assert_all(&task.await.unwrap(), true, None, true, false);
    }
    let m = metrics(&t.http).await;
    assert_eq!(get(&m, "queen_ack_fusion_rows_total"), 12.0);
    assert_eq!(get(&m, "queen_ack_fusion_flushes_total"), 12.0);
    assert_eq!(multi_calls(&t.sql().await).await, 12);
    t.broker.shutdown().await;
}
