//! Push and pop through the real HTTP server against real PostgreSQL.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::common::{txns, TestBroker};
use hyper::StatusCode;
use serde_json::json;

on_both_push_paths!(
    push_then_pop_in_order,
    order_holds_across_pushes_and_batches,
    message_without_transaction_id_uses_its_message_id,
    empty_push_answers_201_empty_array,
    dedup_inside_window_answers_duplicate_with_original_id,
    dedup_off_or_outside_window_accepts_repeats_and_still_writes_sidecar,
    multi_partition_push_writes_one_segment_per_partition,
    sidecar_holds_big_endian_xxh3_in_frame_order,
    long_poll_is_woken_by_a_push,
    parked_long_polls_hold_no_connection,
    health_and_metrics,
);

async fn push_then_pop_in_order(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    let r = t
        .http
        .push("orders", &[("p1", "a"), ("p1", "b"), ("p1", "c")])
        .await;
    assert_eq!(r.len(), 3);
    assert_eq!(r[0]["status"], "queued");
    assert_eq!(r[1]["index"], 1);
    assert_eq!(r[2]["transaction_id"], "c");
    assert_eq!(r[0]["queueName"], "orders");
    let p = t.http.pop("orders", "p1", "batch=10").await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.text);
    assert_eq!(txns(&p), ["a", "b", "c"]);
    let m = &p.json["messages"][0];
    assert_eq!(m["data"], json!({"t": "a"}));
    assert_eq!(m["deliveryAttempt"], 1);
    assert_eq!(m["id"], r[0]["message_id"]);
    assert_eq!(m["queue"], "orders");
    assert_eq!(m["partition"], "p1");
    assert_eq!(m["leaseId"], p.json["leaseId"]);
    assert!(m["createdAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(p.json["partitionsClaimed"], 1);
    assert_eq!(p.json["consumerGroup"], json!(null));
    // leased: a second pop finds nothing
    assert_eq!(
        t.http.pop("orders", "p1", "batch=10").await.status,
        StatusCode::NO_CONTENT
    );
    t.broker.shutdown().await;
}

async fn order_holds_across_pushes_and_batches(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    let ids: Vec<String> = (0..25).map(|i| format!("m{i:02}")).collect();
    for chunk in ids.chunks(7) {
        let items: Vec<(&str, &str)> = chunk.iter().map(|s| ("p", s.as_str())).collect();
        t.http.push("q", &items).await;
    }
    let mut seen = Vec::new();
    loop {
        let p = t.http.pop("q", "p", "batch=4&autoAck=true").await;
        if p.status == StatusCode::NO_CONTENT {
            break;
        }
        assert_eq!(p.json["leaseId"], "");
        seen.extend(txns(&p));
    }
    assert_eq!(seen, ids);
    t.broker.shutdown().await;
}

async fn message_without_transaction_id_uses_its_message_id(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    let r = t
        .http
        .post(
            "/api/v1/push",
            json!({"items": [{"queue": "q", "payload": 7}]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.json[0]["transaction_id"], r.json[0]["message_id"]);
    let p = t.http.pop("q", "Default", "").await;
    assert_eq!(p.json["messages"][0]["data"], 7);
    assert_eq!(p.json["partition"], "Default");
    t.broker.shutdown().await;
}

async fn empty_push_answers_201_empty_array(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    let r = t.http.post("/api/v1/push", json!({"items": []})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.json, json!([]));
    t.broker.shutdown().await;
}

async fn dedup_inside_window_answers_duplicate_with_original_id(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    let first = t.http.push("q", &[("p", "x"), ("p", "y")]).await;
    let again = t
        .http
        .push("q", &[("p", "y"), ("p", "z"), ("p", "z")])
        .await;
    assert_eq!(again[0]["status"], "duplicate");
    assert_eq!(again[0]["message_id"], first[1]["message_id"]);
    assert_eq!(again[1]["status"], "queued");
    // first of two equal ids in one request wins
    assert_eq!(again[2]["status"], "duplicate");
    assert_eq!(again[2]["message_id"], again[1]["message_id"]);
    let p = t.http.pop("q", "p", "batch=100").await;
    assert_eq!(txns(&p), ["x", "y", "z"]);
    // another partition is another dedup scope
    let other = t.http.push("q", &[("p2", "x")]).await;
    assert_eq!(other[0]["status"], "queued");
    t.broker.shutdown().await;
}

async fn dedup_off_or_outside_window_accepts_repeats_and_still_writes_sidecar(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    let c = t
        .http
        .post(
            "/api/v1/configure",
            json!({"queue": "off", "options": {"dedupWindowSeconds": 0}}),
        )
        .await;
    assert_eq!(c.status, StatusCode::OK, "{}", c.text);
    let r = t.http.push("off", &[("p", "a"), ("p", "a")]).await;
    assert!(r.iter().all(|x| x["status"] == "queued"));
    let db = t.sql().await;
    let n: i64 = db
        .query_one(
            "SELECT sum(length(hashes) / 16)::bigint FROM queen.log_txns",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2, "the sidecar is written with dedup off");

    // outside the window: age the stored sidecar row past a 1 s window
    t.http
        .post(
            "/api/v1/configure",
            json!({"queue": "short", "options": {"dedupWindowSeconds": 1}}),
        )
        .await;
    t.http.push("short", &[("p", "k")]).await;
    db.execute(
        "UPDATE queen.log_txns SET created_at = now() - interval '5 seconds'",
        &[],
    )
    .await
    .unwrap();
    let r = t.http.push("short", &[("p", "k")]).await;
    assert_eq!(r[0]["status"], "queued");
    let r = t.http.push("short", &[("p", "k")]).await;
    assert_eq!(
        r[0]["status"], "duplicate",
        "the fresh copy is inside the window again"
    );
    t.broker.shutdown().await;
}

async fn multi_partition_push_writes_one_segment_per_partition(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    t.http
        .push("q", &[("a", "1"), ("b", "2"), ("a", "3"), ("c", "4")])
        .await;
    let db = t.sql().await;
    let rows = db
        .query(
            "SELECT p.name, s.base_offset, s.end_offset FROM queen.log_segments s \
             JOIN queen.log_partitions p ON p.id = s.partition_id ORDER BY p.name",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(String, i64, i64)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        got,
        [("a".into(), 0, 1), ("b".into(), 0, 0), ("c".into(), 0, 0)]
    );
    let txns_rows: i64 = db
        .query_one("SELECT count(*) FROM queen.log_txns", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(txns_rows, 3);
    t.broker.shutdown().await;
}

async fn sidecar_holds_big_endian_xxh3_in_frame_order(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    t.http.push("q", &[("p", "first"), ("p", "second")]).await;
    let db = t.sql().await;
    let hashes: Vec<u8> = db
        .query_one("SELECT hashes FROM queen.log_txns", &[])
        .await
        .unwrap()
        .get(0);
    let mut expected = ackbench_wire::txn_hash("first").to_vec();
    expected.extend(ackbench_wire::txn_hash("second"));
    assert_eq!(hashes, expected);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn wildcard_pops_lease_distinct_partitions() {
    let t = TestBroker::start().await;
    let items: Vec<(String, String)> = (0..6).map(|i| (format!("p{i}"), format!("t{i}"))).collect();
    let refs: Vec<(&str, &str)> = items
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    t.http.push("wq", &refs).await;
    let mut leased = HashSet::new();
    let mut lease_ids = HashSet::new();
    for _ in 0..3 {
        let p = t
            .http
            .get("/api/v1/pop/queue/wq?partitions=2&batch=10")
            .await;
        assert_eq!(p.status, StatusCode::OK, "{}", p.text);
        assert_eq!(p.json["partitionsClaimed"], 2);
        let msgs = p.json["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 2);
        for m in msgs {
            assert!(
                leased.insert(m["partitionId"].as_str().unwrap().to_string()),
                "partition leased twice"
            );
            assert_eq!(
                m["leaseId"], p.json["leaseId"],
                "one leaseId per pop request"
            );
        }
        lease_ids.insert(p.json["leaseId"].as_str().unwrap().to_string());
    }
    assert_eq!(leased.len(), 6);
    assert_eq!(lease_ids.len(), 3);
    assert_eq!(
        t.http.get("/api/v1/pop/queue/wq?partitions=2").await.status,
        StatusCode::NO_CONTENT
    );
    t.broker.shutdown().await;
}

#[tokio::test]
async fn wildcard_batch_is_a_total_budget() {
    let t = TestBroker::start().await;
    t.http
        .push(
            "b",
            &[
                ("p1", "a"),
                ("p1", "b"),
                ("p1", "c"),
                ("p2", "d"),
                ("p2", "e"),
            ],
        )
        .await;
    let p = t.http.get("/api/v1/pop/queue/b?partitions=5&batch=4").await;
    assert_eq!(p.json["messages"].as_array().unwrap().len(), 4);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn discovery_pops_across_queues_by_namespace_and_task() {
    let t = TestBroker::start().await;
    t.http.push("shop.orders", &[("p", "o1")]).await;
    t.http.push("shop.refunds", &[("p", "r1")]).await;
    t.http.push("other.orders", &[("p", "x1")]).await;
    let c = t
        .http
        .post(
            "/api/v1/configure",
            json!({"queue": "plain", "namespace": "shop", "task": "misc"}),
        )
        .await;
    assert_eq!(c.json["namespace"], "shop");
    t.http.push("plain", &[("p", "m1")]).await;

    let p = t
        .http
        .get("/api/v1/pop?namespace=shop&partitions=10&batch=10&consumerGroup=g")
        .await;
    let mut got = txns(&p);
    got.sort();
    assert_eq!(got, ["m1", "o1", "r1"]);
    let p = t
        .http
        .get("/api/v1/pop?task=orders&partitions=10&consumerGroup=h")
        .await;
    let mut got = txns(&p);
    got.sort();
    assert_eq!(got, ["o1", "x1"]);
    assert_eq!(
        t.http.get("/api/v1/pop").await.status,
        StatusCode::BAD_REQUEST
    );
    t.broker.shutdown().await;
}

#[tokio::test]
async fn consumer_groups_are_independent_and_queue_mode_competes() {
    let t = TestBroker::start().await;
    t.http.push("q", &[("p", "a"), ("p", "b")]).await;
    let g1 = t.http.pop("q", "p", "consumerGroup=g1&autoAck=true").await;
    let g2 = t.http.pop("q", "p", "consumerGroup=g2").await;
    assert_eq!(txns(&g1), ["a", "b"]);
    assert_eq!(txns(&g2), ["a", "b"]);
    assert_eq!(g2.json["consumerGroup"], "g2");
    assert_eq!(g2.json["messages"][0]["consumerGroup"], "g2");
    // queue mode: one shared cursor, still untouched by the groups
    let qm = t.http.pop("q", "p", "batch=1&autoAck=true").await;
    assert_eq!(txns(&qm), ["a"]);
    let qm = t.http.pop("q", "p", "batch=1&autoAck=true").await;
    assert_eq!(txns(&qm), ["b"]);
    assert_eq!(
        t.http.pop("q", "p", "autoAck=true").await.status,
        StatusCode::NO_CONTENT
    );
    t.broker.shutdown().await;
}

#[tokio::test]
async fn subscription_mode_new_starts_at_the_tail() {
    let t = TestBroker::start().await;
    t.http.push("s", &[("p", "old")]).await;
    assert_eq!(
        t.http
            .pop("s", "p", "consumerGroup=late&subscriptionMode=new")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    t.http.push("s", &[("p", "fresh")]).await;
    let p = t
        .http
        .pop("s", "p", "consumerGroup=late&subscriptionMode=new")
        .await;
    assert_eq!(txns(&p), ["fresh"]);
    // wildcard with `new`: a group first seen now skips the backlog of every partition
    t.http.push("s", &[("p2", "old2")]).await;
    assert_eq!(
        t.http
            .get("/api/v1/pop/queue/s?consumerGroup=w&subscriptionMode=new&partitions=5")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    t.http.push("s", &[("p2", "new2")]).await;
    let p = t
        .http
        .get("/api/v1/pop/queue/s?consumerGroup=w&subscriptionMode=new&partitions=5")
        .await;
    assert_eq!(txns(&p), ["new2"]);
    let all = t
        .http
        .pop("s", "p", "consumerGroup=early&subscriptionMode=all")
        .await;
    assert_eq!(txns(&all), ["old", "fresh"]);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn lease_expiry_makes_the_span_poppable_again() {
    let t = TestBroker::start().await;
    t.http.push("l", &[("p", "a"), ("p", "b")]).await;
    let first = t.http.pop("l", "p", "leaseSeconds=1").await;
    assert_eq!(first.json["messages"][0]["deliveryAttempt"], 1);
    assert_eq!(
        t.http.pop("l", "p", "").await.status,
        StatusCode::NO_CONTENT
    );
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let again = t.http.pop("l", "p", "").await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(txns(&again), ["a", "b"]);
    assert_eq!(again.json["messages"][0]["deliveryAttempt"], 2);
    assert_ne!(again.json["leaseId"], first.json["leaseId"]);
    let db = t.sql().await;
    let retry: i32 = db
        .query_one("SELECT batch_retry_count FROM queen.log_consumers", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(retry, 0, "a lease expiry never spends the retry budget");
    t.broker.shutdown().await;
}

#[tokio::test]
async fn queue_lease_time_is_the_default_lease() {
    let t = TestBroker::start().await;
    t.http
        .post(
            "/api/v1/configure",
            json!({"queue": "lt", "options": {"leaseTime": 1}}),
        )
        .await;
    t.http.push("lt", &[("p", "a")]).await;
    t.http.pop("lt", "p", "").await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(t.http.pop("lt", "p", "").await.status, StatusCode::OK);
    t.broker.shutdown().await;
}

async fn long_poll_is_woken_by_a_push(fusion: bool) {
    let t = TestBroker::start_with(|c| {
        c.push_fusion = fusion;
        c.long_poll_recheck_ms = 60_000;
    })
    .await;
    let http = t.http.clone();
    let started = Instant::now();
    let waiter = tokio::spawn(async move { http.pop("lp", "p", "wait=true&timeout=20000").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    t.http.push("lp", &[("p", "wake")]).await;
    let r = waiter.await.unwrap();
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(txns(&r), ["wake"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woken by the push, not by a re-check"
    );
    t.broker.shutdown().await;
}

#[tokio::test]
async fn long_poll_times_out_with_204() {
    let t = TestBroker::start().await;
    let started = Instant::now();
    let r = t.http.pop("empty", "p", "wait=true&timeout=700").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(r.text.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(650));
    t.broker.shutdown().await;
}

async fn parked_long_polls_hold_no_connection(fusion: bool) {
    // A pool of 2 serves 20 parked pops and a push that wakes them.
    let t = TestBroker::start_with(|c| {
        c.push_fusion = fusion;
        c.pool_size = 2;
        c.long_poll_recheck_ms = 60_000;
    })
    .await;
    let mut waiters = Vec::new();
    for i in 0..20 {
        let http = t.http.clone();
        let part = format!("p{i}");
        waiters.push(tokio::spawn(async move {
            http.pop("park", &part, "wait=true&timeout=30000").await
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let items: Vec<(String, String)> = (0..20)
        .map(|i| (format!("p{i}"), format!("m{i}")))
        .collect();
    let refs: Vec<(&str, &str)> = items
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let push = tokio::time::timeout(Duration::from_secs(5), t.http.push("park", &refs)).await;
    assert!(
        push.is_ok(),
        "the push must not wait for a connection held by a parked pop"
    );
    for w in waiters {
        let r = tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .expect("woken")
            .unwrap();
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(txns(&r).len(), 1);
    }
    t.broker.shutdown().await;
}

async fn health_and_metrics(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    let h = t.http.get("/health").await;
    assert_eq!(h.status, StatusCode::OK);
    assert_eq!(h.json, json!({"status": "healthy"}));
    t.http.push("m", &[("p", "a"), ("p", "b")]).await;
    t.http.pop("m", "p", "").await;
    let m = t.http.get("/metrics").await;
    assert_eq!(m.status, StatusCode::OK);
    assert!(
        m.text.contains("queen_messages_pushed_total 2"),
        "{}",
        m.text
    );
    assert!(m.text.contains("queen_messages_delivered_total 2"));
    assert!(m
        .text
        .contains("queen_requests_total{route=\"push\",status=\"201\"} 1"));
    t.broker.shutdown().await;
}

#[tokio::test]
async fn an_ack_releasing_a_lease_wakes_a_parked_pop() {
    let t = TestBroker::start_with(|c| c.long_poll_recheck_ms = 60_000).await;
    t.http.push("rel", &[("p", "a"), ("p", "b")]).await;
    let first = t.http.get("/api/v1/pop/queue/rel?batch=1").await;
    assert_eq!(txns(&first), ["a"]);
    let http = t.http.clone();
    let started = Instant::now();
    let waiter = tokio::spawn(async move {
        http.get("/api/v1/pop/queue/rel?batch=1&wait=true&timeout=20000")
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ack = json!({"transactionId": "a", "partitionId": first.json["partitionId"], "status": "completed",
                     "leaseId": first.json["leaseId"]});
    let r = t.http.post("/api/v1/ack", ack).await;
    assert_eq!(r.json[0]["leaseReleased"], true, "{}", r.text);
    let second = waiter.await.unwrap();
    assert_eq!(txns(&second), ["b"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woken by the release, not by a re-check"
    );
    t.broker.shutdown().await;
}
