//! A failover to an asynchronous standby that lacked the last commits: the broker, given both
//! servers with `target_session_attrs=read-write`, follows the promotion, and what it still
//! holds from the old primary's history (segments it wrote through to its cache, at offsets
//! the new primary hands out again, here to another broker) is never served in place of what
//! the new primary stores, nor is an ack under a lease the new primary never had accepted on the
//! strength of the broker's ack registry. A frozen database gets requests answered 503 once the
//! pool timeout passes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{engine_from_env, Http};
use ackbench_broker::{Broker, Config};
use hyper::StatusCode;
use serde_json::{json, Value};
use throwaway_pg::Cluster;

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// Waits until the standby has replayed everything the primary flushed.
fn wait_caught_up(primary: &Cluster) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let sql = "SELECT replay_lsn >= pg_current_wal_flush_lsn() FROM pg_stat_replication";
    while primary.psql("postgres", sql).unwrap() != "t" {
        assert!(Instant::now() < deadline, "the standby did not catch up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Pushes until the broker serves the push (it answers 503 while it finds the new primary).
async fn push_until_served(http: &Http, partition: &str, txns: &[&str]) {
    let items: Vec<Value> = txns
        .iter()
        .map(|t| json!({"queue": "q", "partition": partition, "transactionId": t, "payload": {"t": t}}))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = http.post("/api/v1/push", json!({ "items": items })).await;
        if r.status == StatusCode::CREATED {
            return;
        }
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
        assert!(r.headers.contains_key("retry-after"), "{}", r.text);
        assert!(Instant::now() < deadline, "no push served: {}", r.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn transaction_ids(reply: &Value) -> Vec<String> {
    reply["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| m["transactionId"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A primary with an asynchronous standby, and the URL of database `failover` on both.
async fn pair() -> (Arc<Cluster>, Arc<Cluster>, String) {
    let (primary, standby) = blocking(|| {
        let primary = Cluster::start().unwrap();
        let standby = Cluster::builder().start_standby_of(&primary).unwrap();
        (Arc::new(primary), Arc::new(standby))
    })
    .await;
    primary.create_database("failover").unwrap();
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/failover?target_session_attrs=read-write",
        primary.port(),
        standby.port()
    );
    (primary, standby, url)
}

async fn start_broker(url: &str) -> Broker {
    let mut config = Config::for_database(url.parse().unwrap());
    engine_from_env(&mut config);
    Broker::start(config).await.expect("broker starts")
}

/// Once the standby has everything, freezes the primary's WAL sender: what the primary
/// commits from now on never reaches the standby.
async fn cut_replication(primary: &Arc<Cluster>) {
    let p = primary.clone();
    blocking(move || wait_caught_up(&p)).await;
    let sender = primary
        .psql("postgres", "SELECT pid FROM pg_stat_replication")
        .unwrap();
    let stop = std::process::Command::new("kill")
        .args(["-STOP", &sender])
        .status()
        .unwrap();
    assert!(stop.success());
}

/// SIGKILLs the primary and promotes the standby.
async fn fail_over(primary: &Arc<Cluster>, standby: &Arc<Cluster>) {
    let (p, s) = (primary.clone(), standby.clone());
    blocking(move || {
        p.kill_processes().unwrap();
        s.promote().unwrap();
    })
    .await;
}

/// Sends until the answer is not a 503 (the broker finding the new primary), up to 30 s.
async fn post_until_served(http: &Http, path: &str, body: Value) -> crate::common::Reply {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = http.post(path, body.clone()).await;
        if r.status != StatusCode::SERVICE_UNAVAILABLE || Instant::now() > deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn after_a_lossy_failover_the_broker_serves_what_the_new_primary_stores() {
    let (primary, standby, url) = pair().await;
    let broker = start_broker(&url).await;
    let http = Http::new(broker.url());
    http.push("q", &[("p", "kept-1"), ("p", "kept-2")]).await;
    cut_replication(&primary).await;
    http.push("q", &[("p", "lost-1"), ("p", "lost-2")]).await;
    fail_over(&primary, &standby).await;

    let other = start_broker(&url).await;
    push_until_served(&Http::new(other.url()), "p", &["new-1", "new-2"]).await;
    let r = loop {
        let r = http.pop("q", "p", "batch=10").await;
        if r.status != StatusCode::SERVICE_UNAVAILABLE {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        transaction_ids(&r.json),
        ["kept-1", "kept-2", "new-1", "new-2"],
        "{}",
        r.text
    );
    other.shutdown().await;
    broker.shutdown().await;
}

#[tokio::test]
async fn an_ack_under_a_lease_the_new_primary_never_had_is_refused_and_the_message_returns() {
    let (primary, standby, url) = pair().await;
    let broker = start_broker(&url).await;
    let http = Http::new(broker.url());
    http.push("q", &[("p", "m-1")]).await;
    cut_replication(&primary).await;
    let r = http.pop("q", "p", "batch=1").await;
    assert_eq!(transaction_ids(&r.json), ["m-1"], "{}", r.text);
    let m = &r.json["messages"][0];
    let ack = json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                     "leaseId": m["leaseId"], "status": "completed"});
    fail_over(&primary, &standby).await;

    let r = post_until_served(&http, "/api/v1/ack", ack).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json[0]["success"], json!(false), "{}", r.text);
    let again = http.pop("q", "p", "batch=1").await;
    assert_eq!(transaction_ids(&again.json), ["m-1"], "{}", again.text);
    broker.shutdown().await;
}

/// Sends `n` pushes at once and returns each one's status and how long it took.
async fn pushes_at_once(http: &Http, n: usize) -> Vec<(StatusCode, Duration)> {
    let sends = (0..n).map(|i| async move {
        let started = Instant::now();
        let body = json!({"items": [{"queue": "q", "partition": format!("f{i}"), "payload": i}]});
        let r = http.post("/api/v1/push", body).await;
        (r.status, started.elapsed())
    });
    futures_util::future::join_all(sends).await
}

#[tokio::test]
async fn a_frozen_database_gets_requests_answered_503_within_the_pool_timeout() {
    let cluster = Arc::new(blocking(|| Cluster::start().unwrap()).await);
    let url = cluster.create_database("frozen").unwrap();
    let mut config = Config::for_database(url.parse().unwrap());
    engine_from_env(&mut config);
    config.pool_size = 2;
    config.pool_timeout_ms = 300;
    let broker = Broker::start(config).await.expect("broker starts");
    let http = Http::new(broker.url());
    http.push("q", &[("p", "before")]).await;

    let c = cluster.clone();
    let pids = blocking(move || c.stop_processes().unwrap()).await;
    let c = cluster.clone();
    let thaw = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        blocking(move || c.continue_processes(&pids).unwrap()).await;
    });
    // The pool's two connections are taken by requests that wait out the freeze; every other
    // request is answered 503 once the pool timeout passes.
    let answers = pushes_at_once(&http, 8).await;
    let quick: Vec<_> = answers
        .iter()
        .filter(|(status, took)| {
            *status == StatusCode::SERVICE_UNAVAILABLE && *took < Duration::from_millis(2500)
        })
        .collect();
    assert!(quick.len() >= 6, "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|(s, _)| *s == StatusCode::CREATED || *s == StatusCode::SERVICE_UNAVAILABLE),
        "{answers:?}"
    );
    thaw.await.unwrap();
    push_until_served(&http, "p", &["after"]).await;
    broker.shutdown().await;
}
