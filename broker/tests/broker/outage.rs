//! A PostgreSQL outage under live leases: push, pop, ack and ack/batch answer 503 with
//! `Retry-After` (a failure to retry), never 200 `success: false` (a final refusal), and the
//! same acks succeed once the database is back. The broker runs on a cluster of its own, which
//! the test stops and starts (the shared cluster serves the other suites).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{engine_from_env, Http, Reply};
use ackbench_broker::{Broker, Config};
use hyper::StatusCode;
use serde_json::{json, Value};
use throwaway_pg::Cluster;

/// Runs a blocking cluster operation off the runtime thread.
async fn on_cluster(cluster: &Arc<Cluster>, op: fn(&Cluster) -> Result<(), throwaway_pg::Error>) {
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || op(&c).expect("cluster operation"))
        .await
        .unwrap();
}

/// Pops one message of q/`partition` and answers its ack item (completed).
async fn lease_one(http: &Http, partition: &str) -> Value {
    let r = http.pop("q", partition, "batch=1").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let m = &r.json["messages"][0];
    json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
           "leaseId": m["leaseId"], "status": "completed"})
}

/// A 503 that tells the client to retry.
fn assert_retry_later(r: &Reply, what: &str) {
    assert_eq!(
        r.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{what}: {}",
        r.text
    );
    assert!(
        r.headers.contains_key("retry-after"),
        "{what}: no Retry-After"
    );
    assert!(r.json["error"].is_string(), "{what}: {}", r.text);
}

/// Posts until the answer is not a 503 (what a client told `Retry-After` does), up to 30 s.
async fn post_until_served(http: &Http, path: &str, body: Value) -> Reply {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = http.post(path, body.clone()).await;
        if r.status != StatusCode::SERVICE_UNAVAILABLE || Instant::now() > deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn an_outage_answers_503_with_retry_after_and_acks_succeed_once_it_ends() {
    let cluster = Arc::new(
        tokio::task::spawn_blocking(Cluster::start)
            .await
            .unwrap()
            .unwrap(),
    );
    let url = cluster.create_database("outage").expect("a database");
    let mut config = Config::for_database(url.parse().unwrap());
    engine_from_env(&mut config);
    let broker = Broker::start(config).await.expect("broker starts");
    let http = Http::new(broker.url());
    http.push("q", &[("p1", "a"), ("p2", "b")]).await;
    let single = lease_one(&http, "p1").await;
    let batch = json!({"acknowledgments": [lease_one(&http, "p2").await]});

    on_cluster(&cluster, Cluster::pause).await;
    let r = http.post("/api/v1/ack", single.clone()).await;
    assert_retry_later(&r, "ack");
    let r = http.post("/api/v1/ack/batch", batch.clone()).await;
    assert_retry_later(&r, "ack/batch");
    let push = json!({"items": [{"queue": "q", "partition": "p3", "payload": 1}]});
    assert_retry_later(&http.post("/api/v1/push", push).await, "push");
    assert_retry_later(&http.pop("q", "p3", "batch=1").await, "pop");

    on_cluster(&cluster, Cluster::resume).await;
    for (path, body) in [("/api/v1/ack", single), ("/api/v1/ack/batch", batch)] {
        let r = post_until_served(&http, path, body).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
        assert_eq!(r.json[0]["success"], json!(true), "{path}: {}", r.text);
    }
    broker.shutdown().await;
}
