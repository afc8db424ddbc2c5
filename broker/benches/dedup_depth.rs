//! Dedup cost against depth (issue 16): a 1 000-item push into an empty partition and into one
//! already holding 100 000 messages inside the dedup window (3600 s, the default) should cost
//! the same. Real broker in-process, real HTTP, a throwaway PostgreSQL with fsync on. The two
//! kinds of push are interleaved (empty, deep, empty, deep, ...) so drift on a shared machine
//! hits both alike; the medians and their ratio are printed.
//!
//! Run: `cargo bench -p ackbench-broker --bench dedup_depth` (optionally `DEDUP_BENCH_ROUNDS=N`,
//! default 20 pairs, and `DEDUP_BENCH_DEPTH=N`, default 100 000).

use std::time::{Duration, Instant};

use ackbench_broker::{Broker, Config};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use serde_json::{json, Value};

type Http = Client<HttpConnector, Full<Bytes>>;

const BATCH: usize = 1000;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let rounds = env_or("DEDUP_BENCH_ROUNDS", 20);
    let depth = env_or("DEDUP_BENCH_DEPTH", 100_000);
    let cluster = throwaway_pg::Cluster::start().expect("throwaway PostgreSQL");
    let url = cluster.create_database("dedup_bench").expect("database");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let mut config = Config::for_database(url.parse().unwrap());
        config.listen = "127.0.0.1:0".parse().unwrap();
        let broker = Broker::start(config).await.expect("broker");
        let base = broker.url();
        let http: Http = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
        println!(
            "dedup cost against depth: {BATCH}-item pushes, dedup window 3600 s, PostgreSQL {} (fsync on)",
            cluster.version()
        );
        let filled = Instant::now();
        for k in 0..depth.div_ceil(BATCH) {
            push(&http, &base, "deep", "p", &format!("fill-{k}")).await;
        }
        println!(
            "filled partition deep/p with {depth} messages in {:.1} s",
            filled.elapsed().as_secs_f64()
        );
        let (mut empty, mut deep) = (Vec::new(), Vec::new());
        for i in 0..rounds {
            empty.push(push(&http, &base, "shallow", &format!("e-{i}"), &format!("e-{i}")).await);
            deep.push(push(&http, &base, "deep", "p", &format!("d-{i}")).await);
        }
        let (e, d) = (median(&mut empty), median(&mut deep));
        println!("{:>28} {:>10} {:>10} {:>10}", "", "median ms", "min ms", "max ms");
        report("into an empty partition", &empty, e);
        report(&format!("into one of {}+ messages", depth), &deep, d);
        println!("ratio deep / empty (medians): {:.2}", d.as_secs_f64() / e.as_secs_f64());
        broker.shutdown().await;
    });
}

/// One push of `BATCH` new items to (queue, partition); its wall time.
async fn push(http: &Http, base: &str, queue: &str, partition: &str, prefix: &str) -> Duration {
    let items: Vec<Value> = (0..BATCH)
        .map(|i| {
            json!({"queue": queue, "partition": partition,
                        "transactionId": format!("{prefix}-{i}"), "payload": {"i": i}})
        })
        .collect();
    let body = serde_json::to_vec(&json!({ "items": items })).unwrap();
    let req = hyper::Request::post(format!("{base}/api/v1/push"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let started = Instant::now();
    let res = http.request(req).await.expect("push");
    let status = res.status();
    let text = res.into_body().collect().await.expect("body").to_bytes();
    let took = started.elapsed();
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&text));
    took
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn report(label: &str, v: &[Duration], median: Duration) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{label:>28} {:>10.1} {:>10.1} {:>10.1}",
        ms(median),
        ms(v[0]),
        ms(v[v.len() - 1])
    );
}
