//! Test harness shared by every broker suite: a real broker (in-process, real HTTP on a
//! loopback port) against a fresh database on the process's throwaway PostgreSQL cluster, a
//! small HTTP client, a second broker on the same database, a seeded random source, and the
//! names (queue mode, tenants) the suites share.
#![allow(dead_code)]

pub mod legacy;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ackbench_broker::{Broker, Config};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use serde_json::Value;

/// The consumer group of queue mode.
pub const QM: &str = ackbench_wire::QUEUE_MODE_GROUP;
/// Two tenants, for the tenancy suites.
pub const TENANT_A: &str = "0a0a0a0a-0000-4000-8000-00000000000a";
pub const TENANT_B: &str = "0b0b0b0b-0000-4000-8000-00000000000b";
/// The tenant of a request without the header.
pub const DEFAULT_TENANT: &str = ackbench_wire::DEFAULT_TENANT;

static NEXT_DB: AtomicUsize = AtomicUsize::new(0);

/// A fresh database on the shared cluster; returns (url, tokio_postgres config).
///
/// `ACKBENCH_TEST_DB_LAYOUT=upgraded` hands out a database at the numbered layout of commit
/// 4fa2920 instead of an empty one (see `legacy`), so that the broker's start upgrades it in
/// place and a suite runs on an upgraded schema; `fresh` (the default) hands out an empty one.
pub fn fresh_database(prefix: &str) -> (String, tokio_postgres::Config) {
    let (url, config) = empty_database(prefix);
    match std::env::var("ACKBENCH_TEST_DB_LAYOUT").as_deref() {
        Ok("upgraded") => legacy::apply_blocking(&url),
        Ok("fresh") | Err(_) => {}
        Ok(other) => panic!("ACKBENCH_TEST_DB_LAYOUT must be `fresh` or `upgraded`, not `{other}`"),
    }
    (url, config)
}

/// An empty database on the shared cluster, whatever `ACKBENCH_TEST_DB_LAYOUT` says.
pub fn empty_database(prefix: &str) -> (String, tokio_postgres::Config) {
    let cluster = throwaway_pg::shared();
    let n = NEXT_DB.fetch_add(1, Ordering::SeqCst);
    let name = format!("{prefix}_{}_{n}", std::process::id());
    let url = cluster
        .create_database(&name)
        .expect("create test database");
    (url.clone(), url.parse().expect("a valid url"))
}

/// A broker on its own database.
pub struct TestBroker {
    pub broker: Broker,
    pub http: Http,
    pub db_url: String,
}

impl TestBroker {
    pub async fn start() -> TestBroker {
        TestBroker::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> TestBroker {
        let (db_url, database) = fresh_database("broker");
        let mut config = Config::for_database(database);
        engine_from_env(&mut config);
        tweak(&mut config);
        let broker = Broker::start(config).await.expect("broker starts");
        let http = Http::new(broker.url());
        TestBroker {
            broker,
            http,
            db_url,
        }
    }

    /// A second broker on this one's database (the engine settings of the environment), with
    /// its client.
    pub async fn twin(&self) -> (Broker, Http) {
        self.twin_with(|_| {}).await
    }

    /// A second broker on this one's database, its configuration tweaked after the
    /// environment's engine settings.
    pub async fn twin_with(&self, tweak: impl FnOnce(&mut Config)) -> (Broker, Http) {
        let mut config = Config::for_database(self.db_url.parse().unwrap());
        engine_from_env(&mut config);
        tweak(&mut config);
        let broker = Broker::start(config).await.expect("second broker starts");
        let http = Http::new(broker.url());
        (broker, http)
    }

    /// A request with the tenant header when `tenant` is given.
    pub async fn send_as(
        &self,
        tenant: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Reply {
        let headers: Vec<(&str, &str)> =
            tenant.map(|v| ("x-queen-tenant", v)).into_iter().collect();
        let body = body.map(|b| serde_json::to_vec(&b).unwrap());
        self.http.send(method, path, body, &headers).await
    }

    /// A direct database connection for assertions.
    pub async fn sql(&self) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::connect(&self.db_url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(conn);
        client
    }
}

/// `ACKBENCH_TEST_ENGINE=off` runs a suite with every push/pop engine shortcut off (hotlist,
/// pending gate, pop fusion, segment cache, push fusion, ack hand-off), so the contract tests
/// cover both paths; `on` (the default) keeps the broker's defaults. A test's own tweak still
/// wins.
pub fn engine_from_env(config: &mut Config) {
    match std::env::var("ACKBENCH_TEST_ENGINE").as_deref() {
        Ok("off") => {
            config.hotlist = false;
            config.pop_pending_gate = false;
            config.pop_fusion = false;
            config.segment_cache_mb = 0;
            config.push_fusion = false;
            config.ack_handoff = false;
        }
        Ok("on") | Err(_) => {}
        Ok(other) => panic!("ACKBENCH_TEST_ENGINE must be `on` or `off`, not `{other}`"),
    }
}

/// A small JSON-over-HTTP client.
#[derive(Clone)]
pub struct Http {
    pub base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// An answer: status, parsed JSON body (Null when empty), raw body, headers.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub json: Value,
    pub text: String,
    pub headers: hyper::HeaderMap,
}

impl Http {
    pub fn new(base: String) -> Http {
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
        Http { base, client }
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(60), self.client.request(req))
            .await
            .expect("answer within 60 s")
            .expect("request succeeds");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        Reply {
            status,
            json,
            text,
            headers,
        }
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(
            Method::POST,
            path,
            Some(serde_json::to_vec(&body).unwrap()),
            &[],
        )
        .await
    }

    pub async fn post_raw(&self, path: &str, body: &[u8]) -> Reply {
        self.send(Method::POST, path, Some(body.to_vec()), &[])
            .await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, None, &[]).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send(Method::DELETE, path, None, &[]).await
    }

    /// Pushes `(partition, transactionId)` items to `queue`, asserting 201.
    pub async fn push(&self, queue: &str, items: &[(&str, &str)]) -> Vec<Value> {
        let items: Vec<Value> = items
            .iter()
            .map(|(p, t)| serde_json::json!({"queue": queue, "partition": p, "transactionId": t, "payload": {"t": t}}))
            .collect();
        let r = self
            .post("/api/v1/push", serde_json::json!({ "items": items }))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "push failed: {}", r.text);
        r.json.as_array().unwrap().clone()
    }

    /// Pops a named partition; `query` is appended (e.g. "batch=10&consumerGroup=g").
    pub async fn pop(&self, queue: &str, partition: &str, query: &str) -> Reply {
        self.get(&format!(
            "/api/v1/pop/queue/{queue}/partition/{partition}?{query}"
        ))
        .await
    }

    /// Acks as completed, in one request asserted 200, the messages of a pop answer whose
    /// transactionIds `only` names (every message when `None`); the per-item answers.
    pub async fn ack_completed(&self, reply: &Reply, only: Option<&[&str]>) -> Vec<Value> {
        let named =
            |m: &&Value| only.is_none_or(|o| o.contains(&m["transactionId"].as_str().unwrap()));
        let items: Vec<Value> = reply.json["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(named)
            .map(|m| {
                serde_json::json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                       "leaseId": m["leaseId"], "status": "completed",
                       "consumerGroup": m["consumerGroup"]})
            })
            .collect();
        let r = self
            .post(
                "/api/v1/ack/batch",
                serde_json::json!({ "acknowledgments": items }),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "ack failed: {}", r.text);
        r.json.as_array().unwrap().clone()
    }
}

/// One series of `/metrics` (0 when absent).
pub async fn metric(http: &Http, name: &str) -> f64 {
    let m = http.get("/metrics").await;
    assert_eq!(m.status, StatusCode::OK);
    m.text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The transactionIds of a pop answer, in order.
pub fn txns(reply: &Reply) -> Vec<String> {
    reply.json["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|x| x["transactionId"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A seeded xorshift* source: the random suites replay exactly from their seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-ish in `0..n` (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// `below` for indices.
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.index(i + 1);
            v.swap(i, j);
        }
    }
}

/// Runs each named `async fn(push_fusion: bool)` twice: push fusion on (the default) and off
/// (`log_push_v1`), as `push_fusion_on::name` and `push_fusion_off::name`.
macro_rules! on_both_push_paths {
    ($($name:ident),* $(,)?) => {
        mod push_fusion_on {
            $(#[tokio::test]
            async fn $name() {
                super::$name(true).await
            })*
        }
        mod push_fusion_off {
            $(#[tokio::test]
            async fn $name() {
                super::$name(false).await
            })*
        }
    };
}

/// Every consumer row as text, its lease as an offset from the transaction's now(), so that
/// two rolled-back transactions from one state compare equal when they wrote the same.
pub async fn consumer_rows(db: &tokio_postgres::Client) -> Vec<String> {
    db.query(
        "SELECT format('%s %s %s %s %s %s %s %s %s %s', partition_id, consumer_group, committed, \
         batch_end, worker_id, lease_expires_at - now(), batch_retry_count, attempt_count, \
         attempt_from, total_consumed) FROM queen.log_consumers \
         ORDER BY partition_id, consumer_group",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}
