//! Push-path throughput: messages/s for batches of 1, 10 and 100 with 1 and 16 concurrent
//! clients, against a real broker (in-process, real HTTP) and a throwaway PostgreSQL with
//! production-like durability (fsync and synchronous_commit on).
//!
//! Run: `cargo bench -p ackbench-broker --bench push_throughput` (optionally
//! `PUSH_BENCH_SECS=N`, default 5 s per cell).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ackbench_broker::{Broker, Config};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use serde_json::json;

fn main() {
    let secs: u64 = std::env::var("PUSH_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let cluster = throwaway_pg::Cluster::start().expect("throwaway PostgreSQL");
    let url = cluster.create_database("push_bench").expect("database");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let mut config = Config::for_database(url.parse().unwrap());
        config.listen = "127.0.0.1:0".parse().unwrap();
        let broker = Broker::start(config).await.expect("broker");
        println!(
            "push throughput, {secs} s per cell, PostgreSQL {} (fsync on)",
            cluster.version()
        );
        println!(
            "{:>6} {:>8} {:>8} {:>12} {:>12} {:>10}",
            "dedup", "batch", "clients", "requests/s", "messages/s", "p50 ms"
        );
        for dedup_window in [0u32, 3600] {
            for batch in [1usize, 10, 100] {
                for clients in [1usize, 16] {
                    let queue = format!("bench-{dedup_window}-{batch}-{clients}");
                    configure(&broker.url(), &queue, dedup_window).await;
                    let (reqs, p50) = run_cell(
                        &broker.url(),
                        &queue,
                        batch,
                        clients,
                        Duration::from_secs(secs),
                    )
                    .await;
                    let rps = reqs as f64 / secs as f64;
                    let dedup = if dedup_window == 0 {
                        "off".to_string()
                    } else {
                        format!("{dedup_window}s")
                    };
                    println!(
                        "{dedup:>6} {batch:>8} {clients:>8} {rps:>12.0} {:>12.0} {p50:>10.2}",
                        rps * batch as f64
                    );
                }
            }
        }
        broker.shutdown().await;
    });
}

async fn configure(base: &str, queue: &str, dedup_window: u32) {
    let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http::<Full<Bytes>>();
    let body = json!({"queue": queue, "options": {"dedupWindowSeconds": dedup_window}});
    let req = hyper::Request::post(format!("{base}/api/v1/configure"))
        .body(Full::new(Bytes::from(serde_json::to_vec(&body).unwrap())))
        .unwrap();
    assert_eq!(client.request(req).await.expect("configure").status(), 200);
}

async fn run_cell(
    base: &str,
    queue: &str,
    batch: usize,
    clients: usize,
    window: Duration,
) -> (u64, f64) {
    let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http::<Full<Bytes>>();
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + window;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (client, done, base, queue) = (
            client.clone(),
            done.clone(),
            base.to_string(),
            queue.to_string(),
        );
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut n = 0u64;
            while Instant::now() < deadline {
                let items: Vec<_> = (0..batch)
                    .map(|i| {
                        json!({"queue": queue, "partition": format!("p{c}"),
                               "transactionId": format!("{c}-{n}-{i}"), "payload": {"n": n, "pad": "x".repeat(64)}})
                    })
                    .collect();
                let body = serde_json::to_vec(&json!({ "items": items })).unwrap();
                let req = hyper::Request::post(format!("{base}/api/v1/push"))
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body)))
                    .unwrap();
                let t0 = Instant::now();
                let resp = client.request(req).await.expect("push");
                assert_eq!(resp.status(), 201);
                resp.into_body().collect().await.unwrap();
                latencies.push(t0.elapsed().as_secs_f64() * 1000.0);
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (
        done.load(Ordering::Relaxed),
        all.get(all.len() / 2).copied().unwrap_or(0.0),
    )
}
