//! The ack path's PostgreSQL cost at the head of a deep partition: execution time per call of
//! `queen.log_ack_by_hash_v1` (the SQL path) for a 100-message batch acked in full at the head of
//! a partition holding 10 000 and 1 000 000 messages, with a lease and without, and of
//! `queen.log_ack_at_v1` (the registry's positional advance) for the same acks. Figures come
//! from `pg_stat_statements` (top-level calls of the benchmark database; execution time only,
//! the commit's fsync is not in it).
//!
//! Run: `cargo bench -p ackbench-broker --bench ack_path` (`ACK_BENCH_ACKS=N` acks per cell,
//! default 40).

use std::time::Instant;

use ackbench_broker::{Broker, Config};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use serde_json::{json, Value};

type Http = Client<HttpConnector, Full<Bytes>>;

fn main() {
    let acks: usize = std::env::var("ACK_BENCH_ACKS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let cluster = throwaway_pg::Cluster::start().expect("throwaway PostgreSQL");
    let url = cluster.create_database("ack_bench").expect("database");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let hash_broker = broker(&url, false).await;
        let registry_broker = broker(&url, true).await;
        let http: Http = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
        let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        println!(
            "ack path cost, {acks} acks of 100 messages per cell, PostgreSQL {} (fsync on)",
            cluster.version()
        );
        println!(
            "{:>9}  {:<34} {:>7} {:>12} {:>14}",
            "depth", "procedure (mode)", "calls", "ms/call", "ms/acked msg"
        );
        for depth in [10_000usize, 1_000_000] {
            let queue = format!("deep{depth}");
            post(
                &http,
                &hash_broker.url(),
                "/api/v1/configure",
                json!({"queue": queue, "options": {"dedupWindowSeconds": 0}}),
            )
            .await;
            let started = Instant::now();
            // the depth stays about `depth` while three modes each ack `acks` batches at the head
            fill(&http, &hash_broker.url(), &queue, depth + 3 * acks * 100).await;
            eprintln!(
                "  filled {depth} messages in {:.1}s",
                started.elapsed().as_secs_f64()
            );
            for (mode, via, lease) in [
                ("registry, leased", &registry_broker, true),
                ("hash, leased", &hash_broker, true),
                ("hash, lease-less", &hash_broker, false),
            ] {
                let proc_ = if mode.starts_with("registry") {
                    "log_ack_at_v1"
                } else {
                    "log_ack_by_hash_v1"
                };
                let before = pgss(&db, proc_).await;
                for _ in 0..acks {
                    pop_and_ack(&http, &via.url(), &queue, lease).await;
                }
                let after = pgss(&db, proc_).await;
                let (calls, ms) = (after.0 - before.0, after.1 - before.1);
                println!(
                    "{depth:>9}  {:<34} {calls:>7} {:>12.3} {:>14.5}",
                    format!("{proc_} ({mode})"),
                    ms / calls,
                    ms / calls / 100.0
                );
            }
        }
        hash_broker.shutdown().await;
        registry_broker.shutdown().await;
    });
}

async fn broker(url: &str, registry: bool) -> Broker {
    let mut config = Config::for_database(url.parse().unwrap());
    config.ack_registry = registry;
    config.ack_fusion = false;
    Broker::start(config).await.expect("broker")
}

async fn post(http: &Http, base: &str, path: &str, body: Value) -> Value {
    let req = hyper::Request::post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(&body).unwrap())))
        .unwrap();
    let resp = http.request(req).await.expect("request");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    assert!(
        status.is_success(),
        "{path}: {status}: {}",
        String::from_utf8_lossy(&bytes)
    );
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

/// Pushes `depth` messages to partition `p` in batches of 1000, 8 requests in flight.
async fn fill(http: &Http, base: &str, queue: &str, depth: usize) {
    let batches = depth.div_ceil(1000);
    let mut tasks = Vec::new();
    for w in 0..8 {
        let (http, base, queue) = (http.clone(), base.to_string(), queue.to_string());
        tasks.push(tokio::spawn(async move {
            for b in (w..batches).step_by(8) {
                let items: Vec<Value> = (0..1000)
                    .map(|i| json!({"queue": queue, "partition": "p", "transactionId": format!("{b}-{i}"), "payload": {"n": i}}))
                    .collect();
                post(&http, &base, "/api/v1/push", json!({ "items": items })).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Pops 100 messages at the head and acks them all `completed` (with the lease or without).
async fn pop_and_ack(http: &Http, base: &str, queue: &str, lease: bool) {
    let req = hyper::Request::get(format!(
        "{base}/api/v1/pop/queue/{queue}/partition/p?batch=100"
    ))
    .body(Full::new(Bytes::new()))
    .unwrap();
    let resp = http.request(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let popped: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "pop answered {status} {}: {e}",
            String::from_utf8_lossy(&bytes)
        )
    });
    let acks: Vec<Value> = popped["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let mut a = json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed"});
            if lease {
                a["leaseId"] = m["leaseId"].clone();
            }
            a
        })
        .collect();
    let answers = post(
        http,
        base,
        "/api/v1/ack/batch",
        json!({ "acknowledgments": acks }),
    )
    .await;
    assert!(
        answers
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["success"] == true),
        "{answers}"
    );
}

/// (calls, total execution ms) of a procedure's top-level statements in this database.
async fn pgss(db: &tokio_postgres::Client, procedure: &str) -> (f64, f64) {
    let row = db
        .query_one(
            "SELECT COALESCE(sum(calls), 0)::float8, COALESCE(sum(total_exec_time), 0)::float8 \
             FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
             WHERE d.datname = current_database() AND s.toplevel AND s.query LIKE $1",
            &[&format!("%queen.{procedure}(%")],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}
