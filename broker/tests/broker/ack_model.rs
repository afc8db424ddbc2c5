//! A pure-Rust model of the cursor contract of `ack-internals.md`, run side by side with the
//! real broker on seeded random sequences of pushes, pops, acks with random statuses, lease-less
//! acks, stale leases and lease expiries. After every step the consumer row, the DLQ rows and
//! every ack answer must agree with the model.
//!
//! The queue runs with deduplication off, so transactionIds repeat across offsets (re-pushes
//! below and above the cursor exercise the MIN resolution and the honesty lists). Leases expire
//! only when the test says so (by SQL), so every step is deterministic.

use crate::common::{Rng, TestBroker, QM};
use hyper::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// the model

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Completed,
    Failed,
    Retry,
    Dlq,
}

impl Status {
    fn wire(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Retry => "retry",
            Status::Dlq => "dlq",
        }
    }

    /// Tie-break rank at one offset: dlq > failed > retry.
    fn rank(self) -> u8 {
        match self {
            Status::Dlq => 0,
            Status::Failed => 1,
            _ => 2,
        }
    }
}

#[derive(Debug, Clone)]
struct Item {
    txn: String,
    status: Status,
    error: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
struct Expect {
    success: bool,
    error: Option<String>,
    lease_released: bool,
    dlq: bool,
    noop: bool,
}

#[derive(Debug, Clone, PartialEq)]
struct DlqRow {
    offset: i64,
    txn: String,
    retry_count: i32,
    error: String,
}

/// The consumer row as the model sees it.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    committed: i64,
    batch_end: Option<i64>,
    worker: Option<String>,
    retry: i32,
    attempt: i32,
    attempt_from: Option<i64>,
    total: i64,
}

struct Model {
    log: Vec<String>,
    row: Row,
    expired: bool,
    dlq: Vec<DlqRow>,
    retry_limit: i32,
    dlq_enabled: bool,
}

impl Model {
    fn new(retry_limit: i32, dlq_enabled: bool) -> Model {
        Model {
            log: Vec::new(),
            row: Row {
                committed: -1,
                batch_end: None,
                worker: None,
                retry: 0,
                attempt: 0,
                attempt_from: None,
                total: 0,
            },
            expired: false,
            dlq: Vec::new(),
            retry_limit,
            dlq_enabled,
        }
    }

    fn last(&self) -> i64 {
        self.log.len() as i64 - 1
    }

    fn live_lease(&self) -> bool {
        self.row.batch_end.is_some() && !self.expired
    }

    /// A pop of at most `batch`: the span and its delivery attempt, or None (204).
    fn pop(&mut self, batch: i64) -> Option<(i64, i64, i32)> {
        let start = self.row.committed + 1;
        if self.live_lease() || start > self.last() {
            return None;
        }
        let end = (start + batch - 1).min(self.last());
        let r = &mut self.row;
        r.attempt = if r.attempt_from == Some(start) {
            r.attempt + 1
        } else {
            1
        };
        r.attempt_from = Some(start);
        r.batch_end = Some(end);
        self.expired = false;
        Some((start, end, r.attempt))
    }

    fn expire(&mut self) {
        if self.row.batch_end.is_some() {
            self.expired = true;
        }
    }

    fn release(&mut self) {
        self.row.batch_end = None;
        self.row.worker = None;
        self.expired = false;
    }

    fn reset(&mut self) {
        self.row.retry = 0;
        self.row.attempt = 0;
        self.row.attempt_from = None;
    }

    fn commit(&mut self, to: i64) {
        self.row.total += to - self.row.committed;
        self.row.committed = to;
    }

    /// One `(partition, group, lease)` ack call and its DLQ filing.
    fn ack(&mut self, lease: &str, items: &[Item]) -> Vec<Expect> {
        let leased = !lease.is_empty();
        let lease_ok = self.row.worker.as_deref() == Some(lease) && self.live_lease();
        if leased && !lease_ok {
            return items
                .iter()
                .map(|_| Expect::fail("invalid or expired lease", false))
                .collect();
        }
        let old = self.row.committed;
        let lo = old + 1;
        let hi = if leased {
            self.row.batch_end.unwrap()
        } else {
            self.last()
        };
        let eff: Vec<Option<i64>> = items
            .iter()
            .map(|it| (lo..=hi).find(|&o| self.log[o as usize] == it.txn))
            .collect();
        let below: Vec<bool> = items
            .iter()
            .map(|it| (0..=old).any(|o| self.log[o as usize] == it.txn))
            .collect();
        let max_ok = items
            .iter()
            .zip(&eff)
            .filter(|(it, _)| it.status == Status::Completed)
            .filter_map(|(_, e)| *e)
            .max();
        let sig = items
            .iter()
            .zip(&eff)
            .filter(|(it, e)| it.status != Status::Completed && e.is_some())
            .map(|(it, e)| (e.unwrap(), it.status.rank(), it.status))
            .min_by_key(|(o, r, _)| (*o, *r));
        let mut new = max_ok.unwrap_or(old);
        if let Some((s, _, _)) = sig {
            new = new.min(s - 1);
        }
        new = new.max(old);

        let (mut release, mut reset, mut charge, mut dlq) = (false, false, false, false);
        let mut exhausted = false;
        match sig {
            None => {
                let reached = match self.row.batch_end {
                    Some(be) => new >= be,
                    None => new > old,
                };
                release = reached;
                reset = reached;
            }
            Some((_, _, Status::Dlq)) => dlq = true,
            Some((_, _, Status::Retry)) => release = true,
            Some(_) if self.row.retry < self.retry_limit => {
                release = true;
                charge = true;
            }
            Some(_) if self.dlq_enabled => {
                dlq = true;
                exhausted = true;
            }
            Some((s, _, _)) => {
                release = true;
                reset = true;
                new = old.max(s);
            }
        }
        let mut lease_released = release && self.row.batch_end.is_some();
        self.commit(new);
        if release {
            self.release();
        }
        if charge {
            self.row.retry += 1;
        }
        if reset {
            self.reset();
        }

        let mut filed = None;
        if dlq {
            let (s, _, status) = sig.unwrap();
            let at = |k: usize| eff[k] == Some(s) && items[k].status != Status::Completed;
            let nack = (0..items.len())
                .find(|&k| at(k) && items[k].status == status)
                .or_else(|| (0..items.len()).find(|&k| at(k)))
                .unwrap();
            let error = items[nack].error.clone().unwrap_or_else(|| {
                if exhausted {
                    "retry limit exhausted".into()
                } else {
                    "dead-lettered by the consumer".into()
                }
            });
            self.dlq.push(DlqRow {
                offset: s,
                txn: self.log[s as usize].clone(),
                retry_count: self.row.retry,
                error,
            });
            lease_released |= self.row.batch_end.is_some();
            self.commit(s.max(self.row.committed));
            self.release();
            self.reset();
            filed = Some(s);
        }

        items
            .iter()
            .enumerate()
            .map(|(k, it)| {
                let mut e = if eff[k].is_none() && below[k] && it.status == Status::Completed {
                    Expect {
                        noop: true,
                        ..Expect::ok()
                    }
                } else if eff[k].is_none() && below[k] {
                    Expect::fail("already committed", false)
                } else if eff[k].is_none() {
                    Expect::fail("unresolvable", false)
                } else {
                    Expect {
                        dlq: filed.is_some() && eff[k] == filed,
                        ..Expect::ok()
                    }
                };
                e.lease_released = lease_released;
                e
            })
            .collect()
    }
}

impl Expect {
    fn ok() -> Expect {
        Expect {
            success: true,
            error: None,
            lease_released: false,
            dlq: false,
            noop: false,
        }
    }

    fn fail(error: &str, lease_released: bool) -> Expect {
        Expect {
            success: false,
            error: Some(error.into()),
            lease_released,
            dlq: false,
            noop: false,
        }
    }

    fn of(v: &Value) -> Expect {
        Expect {
            success: v["success"].as_bool().unwrap(),
            error: v["error"].as_str().map(str::to_string),
            lease_released: v["leaseReleased"].as_bool().unwrap(),
            dlq: v["dlq"].as_bool().unwrap(),
            noop: v["noop"].as_bool().unwrap(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// the random driver

struct Run {
    t: TestBroker,
    pid: Option<Uuid>,
    model: Model,
    rng: Rng,
    /// The transactionIds of the last delivered batch.
    delivered: Vec<String>,
    leases: Vec<String>,
    fresh: usize,
    log_lines: Vec<String>,
    /// How often each kind of answer came back (coverage of the run).
    seen: std::collections::BTreeMap<&'static str, usize>,
}

impl Run {
    async fn push(&mut self) {
        let n = 1 + self.rng.below(4) as usize;
        let mut ids = Vec::new();
        for _ in 0..n {
            let id = if !self.model.log.is_empty() && self.rng.chance(20) {
                let k = self.rng.below(self.model.log.len() as u64) as usize;
                self.model.log[k].clone()
            } else {
                self.fresh += 1;
                format!("m{}", self.fresh)
            };
            ids.push(id);
        }
        let items: Vec<(&str, &str)> = ids.iter().map(|x| ("p", x.as_str())).collect();
        let r = self.t.http.push("q", &items).await;
        assert!(r.iter().all(|x| x["status"] == "queued"), "{r:?}");
        self.log_lines.push(format!("push {ids:?}"));
        self.model.log.extend(ids);
    }

    async fn pop(&mut self) {
        let batch = 1 + self.rng.below(5) as i64;
        let r = self.t.http.pop("q", "p", &format!("batch={batch}")).await;
        let expected = self.model.pop(batch);
        self.log_lines
            .push(format!("pop {batch} -> {} {expected:?}", r.status));
        let Some((start, end, attempt)) = expected else {
            assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", self.trace());
            return;
        };
        assert_eq!(r.status, StatusCode::OK, "{}\n{}", r.text, self.trace());
        let got = crate::common::txns(&r);
        let want = &self.model.log[start as usize..=end as usize];
        assert_eq!(got, want, "{}", self.trace());
        let m = &r.json["messages"][0];
        assert_eq!(m["deliveryAttempt"], attempt, "{}", self.trace());
        let lease = r.json["leaseId"].as_str().unwrap().to_string();
        self.pid = Some(Uuid::parse_str(r.json["partitionId"].as_str().unwrap()).unwrap());
        self.model.row.worker = Some(lease.clone());
        self.leases.push(lease);
        self.delivered = got;
    }

    fn status(&mut self) -> Status {
        match self.rng.below(100) {
            0..=69 => Status::Completed,
            70..=81 => Status::Failed,
            82..=90 => Status::Retry,
            _ => Status::Dlq,
        }
    }

    fn items(&mut self, step: usize) -> Vec<Item> {
        let mut txns: Vec<String> = Vec::new();
        let delivered = self.delivered.clone();
        for x in &delivered {
            if self.rng.chance(70) {
                txns.push(x.clone());
            }
        }
        if self.rng.chance(30) && txns.len() > 1 {
            txns.reverse();
        }
        let c = self.model.row.committed;
        if c >= 0 && self.rng.chance(20) {
            let k = self.rng.below(c as u64 + 1) as usize;
            txns.push(self.model.log[k].clone());
        }
        if self.rng.chance(8) {
            txns.push(format!("zz{step}"));
        }
        if !self.model.log.is_empty() && (txns.is_empty() || self.rng.chance(8)) {
            let k = self.rng.below(self.model.log.len() as u64) as usize;
            txns.push(self.model.log[k].clone());
        }
        if txns.len() > 1 && self.rng.chance(5) {
            txns.push(txns[0].clone());
        }
        txns.into_iter()
            .map(|txn| {
                let status = self.status();
                let error = (status != Status::Completed && self.rng.chance(50))
                    .then(|| format!("e{step}"));
                Item { txn, status, error }
            })
            .collect()
    }

    async fn ack(&mut self, step: usize) {
        let Some(pid) = self.pid else { return };
        let items = self.items(step);
        if items.is_empty() {
            return;
        }
        let lease = match self.rng.below(100) {
            0..=64 => self.model.row.worker.clone().unwrap_or_default(),
            65..=79 if !self.leases.is_empty() => {
                let k = self.rng.below(self.leases.len() as u64) as usize;
                self.leases[k].clone()
            }
            _ => String::new(),
        };
        let acks: Vec<Value> = items
            .iter()
            .map(|it| {
                let mut v = json!({"transactionId": it.txn, "partitionId": pid,
                                   "status": it.status.wire()});
                if !lease.is_empty() {
                    v["leaseId"] = json!(lease);
                }
                if let Some(e) = &it.error {
                    v["error"] = json!(e);
                }
                v
            })
            .collect();
        let r = self
            .t
            .http
            .post("/api/v1/ack/batch", json!({ "acknowledgments": acks }))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let want = self.model.ack(&lease, &items);
        let got: Vec<Expect> = r.json.as_array().unwrap().iter().map(Expect::of).collect();
        let shown: Vec<(&str, &str)> = items
            .iter()
            .map(|i| (i.txn.as_str(), i.status.wire()))
            .collect();
        self.log_lines
            .push(format!("ack lease={lease:.8} {shown:?}"));
        assert_eq!(got, want, "answers differ\n{}", self.trace());
        for e in &got {
            let kind = match (e.success, e.error.as_deref(), e.noop, e.dlq) {
                (true, _, true, _) => "noop",
                (true, _, _, true) => "dlq",
                (true, ..) => "ok",
                (false, Some("already committed"), ..) => "stale",
                (false, Some("unresolvable"), ..) => "unresolvable",
                _ => "refused",
            };
            *self.seen.entry(kind).or_default() += 1;
        }
        if lease.is_empty() {
            *self.seen.entry("lease-less calls").or_default() += 1;
        }
    }

    async fn expire(&mut self) {
        self.t
            .sql()
            .await
            .execute(
                "UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1s' \
                 WHERE batch_end IS NOT NULL",
                &[],
            )
            .await
            .unwrap();
        self.model.expire();
        self.log_lines.push("expire".into());
    }

    async fn check_state(&self) {
        let Some(pid) = self.pid else { return };
        let db = self.t.sql().await;
        let row = db
            .query_opt(
                "SELECT committed, batch_end, worker_id, batch_retry_count, attempt_count, \
                 attempt_from, total_consumed FROM queen.log_consumers \
                 WHERE partition_id = $1 AND consumer_group = $2",
                &[&pid, &QM],
            )
            .await
            .unwrap()
            .map(|r| Row {
                committed: r.get(0),
                batch_end: r.get(1),
                worker: r.get(2),
                retry: r.get(3),
                attempt: r.get(4),
                attempt_from: r.get(5),
                total: r.get(6),
            });
        assert_eq!(
            row.as_ref(),
            Some(&self.model.row),
            "cursor differs\n{}",
            self.trace()
        );
        let dlq: Vec<DlqRow> = db
            .query(
                "SELECT \"offset\", transaction_id, retry_count, error, payload \
                 FROM queen.log_dlq ORDER BY id",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| {
                let txn: String = r.get(1);
                assert_eq!(r.get::<_, Value>(4), json!({ "t": txn }));
                DlqRow {
                    offset: r.get(0),
                    txn,
                    retry_count: r.get(2),
                    error: r.get(3),
                }
            })
            .collect();
        assert_eq!(dlq, self.model.dlq, "DLQ differs\n{}", self.trace());
    }

    fn trace(&self) -> String {
        let n = self.log_lines.len();
        let tail = &self.log_lines[n.saturating_sub(12)..];
        format!(
            "model log {:?}\nmodel row {:?}\nlast steps:\n  {}",
            self.model.log,
            self.model.row,
            tail.join("\n  ")
        )
    }
}

async fn run_seed(seed: u64, steps: usize) {
    let (retry_limit, dlq_enabled) =
        [(1, true), (0, false), (2, true), (0, true), (1, false)][(seed % 5) as usize];
    let t = TestBroker::start().await;
    let r = t
        .http
        .post(
            "/api/v1/configure",
            json!({"queue": "q", "options": {"dedupWindowSeconds": 0, "retryLimit": retry_limit,
                   "deadLetterQueue": dlq_enabled, "dlqAfterMaxRetries": dlq_enabled}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let mut run = Run {
        t,
        pid: None,
        model: Model::new(retry_limit, dlq_enabled),
        rng: Rng(0x9e37_79b9_7f4a_7c15 ^ seed.wrapping_mul(0x1234_5678_9abc_def1)),
        delivered: Vec::new(),
        leases: Vec::new(),
        fresh: 0,
        log_lines: Vec::new(),
        seen: Default::default(),
    };
    for step in 0..steps {
        match run.rng.below(100) {
            0..=21 => run.push().await,
            22..=47 => run.pop().await,
            48..=94 => run.ack(step).await,
            _ => run.expire().await,
        }
        run.check_state().await;
    }
    // drain: everything pushed ends committed or dead-lettered
    for _ in 0..400 {
        if run.model.row.committed == run.model.last() {
            break;
        }
        run.expire().await;
        run.pop().await;
        let delivered = run.delivered.clone();
        let items: Vec<Item> = delivered
            .into_iter()
            .map(|txn| Item {
                txn,
                status: Status::Completed,
                error: None,
            })
            .collect();
        let lease = run.model.row.worker.clone().unwrap_or_default();
        let want = run.model.ack(&lease, &items);
        let acks: Vec<Value> = items
            .iter()
            .map(|it| {
                json!({"transactionId": it.txn, "partitionId": run.pid.unwrap(),
                             "status": "completed", "leaseId": lease})
            })
            .collect();
        let r = run
            .t
            .http
            .post("/api/v1/ack/batch", json!({ "acknowledgments": acks }))
            .await;
        let got: Vec<Expect> = r.json.as_array().unwrap().iter().map(Expect::of).collect();
        assert_eq!(got, want, "drain answers differ\n{}", run.trace());
        run.check_state().await;
    }
    eprintln!(
        "seed {seed}: {} offsets, {} DLQ rows, answers {:?}",
        run.model.log.len(),
        run.model.dlq.len(),
        run.seen
    );
    for kind in [
        "ok",
        "noop",
        "stale",
        "unresolvable",
        "refused",
        "lease-less calls",
    ] {
        assert!(run.seen.contains_key(kind), "seed {seed} never saw {kind}");
    }
    assert_eq!(run.model.row.committed, run.model.last(), "drained");
    assert_eq!(run.model.row.total, run.model.last() + 1);
    run.t.broker.shutdown().await;
}

#[tokio::test]
async fn model_seed_1() {
    run_seed(1, 160).await;
}

#[tokio::test]
async fn model_seed_2() {
    run_seed(2, 160).await;
}

#[tokio::test]
async fn model_seed_3() {
    run_seed(3, 160).await;
}

#[tokio::test]
async fn model_seed_4() {
    run_seed(4, 160).await;
}

#[tokio::test]
async fn model_seed_5() {
    run_seed(5, 160).await;
}
