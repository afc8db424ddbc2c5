//! `maxSize` on push: a push that would take a queue above its unconsumed-message limit is
//! refused (409 naming the queue, the limit and the depth) and writes nothing of the request,
//! on both push paths and in the transaction route; consuming makes room again; concurrent
//! pushes never overshoot.

use hyper::StatusCode;
use serde_json::{json, Value};

use crate::common::TestBroker;

async fn configure(t: &TestBroker, queue: &str, max_size: i64) {
    let body = json!({"queue": queue, "options": {"maxSize": max_size}});
    let r = t.http.post("/api/v1/configure", body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

fn items(queue: &str, partition: &str, prefix: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| json!({"queue": queue, "partition": partition, "transactionId": format!("{prefix}-{i}"), "payload": {"i": i}}))
        .collect()
}

/// Rows in the log tables: (segments, sidecar rows, partitions).
async fn stored(t: &TestBroker) -> (i64, i64, i64) {
    let db = t.sql().await;
    let n = |sql: &'static str| {
        let db = &db;
        async move { db.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    (
        n("SELECT count(*) FROM queen.log_segments").await,
        n("SELECT count(*) FROM queen.log_txns").await,
        n("SELECT count(*) FROM queen.log_partitions").await,
    )
}

async fn refusal_writes_nothing(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    configure(&t, "capped", 5).await;
    let r = t
        .http
        .post(
            "/api/v1/push",
            json!({"items": items("capped", "p1", "a", 4)}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let before = stored(&t).await;

    // 4 + 2 > 5: refused whole, even the items of another queue and another partition.
    let mut mixed = items("capped", "p2", "b", 2);
    mixed.extend(items("free", "p1", "c", 3));
    let r = t.http.post("/api/v1/push", json!({ "items": mixed })).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert_eq!(r.json["queue"], json!("capped"), "{}", r.text);
    assert_eq!(r.json["maxSize"], json!(5));
    assert_eq!(r.json["depth"], json!(4));
    assert_eq!(r.json["pushing"], json!(2));
    let error = r.json["error"].as_str().unwrap();
    assert!(
        error.contains("capped") && error.contains('5') && error.contains('4'),
        "{error}"
    );
    assert_eq!(
        stored(&t).await,
        before,
        "nothing of the refused request was written"
    );

    // Up to the limit is fine.
    let r = t
        .http
        .post(
            "/api/v1/push",
            json!({"items": items("capped", "p2", "d", 1)}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let r = t
        .http
        .post(
            "/api/v1/push",
            json!({"items": items("capped", "p1", "e", 1)}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "full at 5: {}", r.text);

    // Consuming (queue mode) makes room.
    let popped = t.http.pop("capped", "p1", "batch=10&autoAck=true").await;
    assert_eq!(popped.status, StatusCode::OK, "{}", popped.text);
    let r = t
        .http
        .post(
            "/api/v1/push",
            json!({"items": items("capped", "p1", "f", 4)}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    t.broker.shutdown().await;
}

async fn duplicates_do_not_count(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    configure(&t, "capped", 3).await;
    let first = items("capped", "p", "x", 3);
    let r = t.http.post("/api/v1/push", json!({ "items": first })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    // The same three again are duplicates: nothing to add, so no refusal.
    let r = t.http.post("/api/v1/push", json!({ "items": first })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert!(r
        .json
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x["status"] == "duplicate"));
    t.broker.shutdown().await;
}

async fn concurrent_pushes_never_overshoot(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    configure(&t, "capped", 50).await;
    let mut tasks = Vec::new();
    for c in 0..16 {
        let http = t.http.clone();
        tasks.push(tokio::spawn(async move {
            let mut accepted = 0;
            for r in 0..5 {
                let body = json!({"items": items("capped", &format!("p{}", c % 4), &format!("{c}-{r}"), 2)});
                let reply = http.post("/api/v1/push", body).await;
                match reply.status {
                    StatusCode::CREATED => accepted += 2,
                    StatusCode::CONFLICT => {}
                    s => panic!("unexpected {s}: {}", reply.text),
                }
            }
            accepted
        }));
    }
    let mut accepted = 0;
    for task in tasks {
        accepted += task.await.unwrap();
    }
    assert_eq!(accepted, 50, "exactly the limit was accepted (160 offered)");
    let db = t.sql().await;
    let written: i64 = db
        .query_one(
            "SELECT sum(last_offset + 1)::bigint FROM queen.log_partitions",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(written, 50);
    t.broker.shutdown().await;
}

on_both_push_paths!(
    refusal_writes_nothing,
    duplicates_do_not_count,
    concurrent_pushes_never_overshoot,
);

#[tokio::test]
async fn a_transaction_over_the_limit_rolls_back() {
    let t = TestBroker::start().await;
    configure(&t, "capped", 2).await;
    let body = json!({"operations": [
        {"type": "push", "items": items("free", "p", "a", 1)},
        {"type": "push", "items": items("capped", "p", "b", 3)},
    ]});
    let r = t.http.post("/api/v1/transaction", body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["success"], json!(false), "{}", r.text);
    let error = r.json["error"].as_str().unwrap();
    assert!(
        error.contains("capped") && error.contains("maxSize 2"),
        "{error}"
    );
    let segments: i64 = t
        .sql()
        .await
        .query_one("SELECT count(*) FROM queen.log_segments", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(segments, 0, "the other queue's push rolled back too");
    t.broker.shutdown().await;
}
