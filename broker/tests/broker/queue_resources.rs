//! Queue resources: the tenant's queues listed with options, partitions and depth; one queue
//! with its partitions and cursors (404 when unknown); deletion purging every row of the queue
//! (segments, sidecar, cursors, groups, DLQ), answering its parked long-polls 204, and leaving
//! no broker-side hint that could grant anything afterwards.

use std::time::{Duration, Instant};

use hyper::{Method, StatusCode};
use serde_json::json;

use crate::common::{TestBroker, TENANT_A, TENANT_B};

/// Rows left in each table that holds queue data.
async fn rows(t: &TestBroker) -> Vec<(&'static str, i64)> {
    let db = t.sql().await;
    let mut out = Vec::new();
    for table in [
        "queues",
        "log_partitions",
        "log_segments",
        "log_txns",
        "log_consumers",
        "log_groups",
        "log_dlq",
    ] {
        let n: i64 = db
            .query_one(&format!("SELECT count(*) FROM queen.{table}"), &[])
            .await
            .unwrap()
            .get(0);
        out.push((table, n));
    }
    out
}

#[tokio::test]
async fn queues_are_listed_with_options_partitions_and_depth() {
    let t = TestBroker::start().await;
    let body = json!({"queue": "orders", "options": {"maxSize": 10, "priority": 4}});
    assert_eq!(
        t.http.post("/api/v1/configure", body).await.status,
        StatusCode::OK
    );
    t.http
        .push("orders", &[("p1", "a"), ("p1", "b"), ("p2", "c")])
        .await;
    t.http.push("billing", &[("Default", "d")]).await;
    let popped = t.http.pop("orders", "p1", "batch=1&autoAck=true").await;
    assert_eq!(popped.status, StatusCode::OK, "{}", popped.text);

    let r = t.http.get("/api/v1/resources/queues").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let list: ackbench_wire::QueueList = serde_json::from_value(r.json.clone()).unwrap();
    let names: Vec<&str> = list.queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["billing", "orders"]);
    let orders = &list.queues[1];
    assert_eq!((orders.partitions, orders.depth), (2, 2), "{}", r.text);
    assert_eq!((orders.options.max_size, orders.options.priority), (10, 4));

    let r = t.http.get("/api/v1/resources/queues/orders").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let detail: ackbench_wire::QueueDetail = serde_json::from_value(r.json.clone()).unwrap();
    assert_eq!(detail.depth, 2);
    let p1 = &detail.partitions[0];
    assert_eq!((p1.name.as_str(), p1.last_offset, p1.depth), ("p1", 1, 1));
    assert_eq!(p1.consumers.len(), 1, "{}", r.text);
    assert_eq!(p1.consumers[0].consumer_group, None, "queue mode is null");
    assert_eq!(
        (p1.consumers[0].committed, p1.consumers[0].leased),
        (0, false)
    );
    assert_eq!(detail.partitions[1].consumers.len(), 0);

    let r = t.http.get("/api/v1/resources/queues/nope").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = t.http.delete("/api/v1/resources/queues/nope").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = t
        .http
        .post("/api/v1/resources/queues/orders", json!({}))
        .await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{}", r.text);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn deleting_a_queue_purges_its_rows_and_wakes_its_long_polls() {
    let t = TestBroker::start().await;
    t.http
        .push("doomed", &[("p1", "a"), ("p1", "b"), ("p2", "c")])
        .await;
    t.http.push("kept", &[("Default", "k")]).await;
    // A group cursor with a `new` subscription (log_groups), a leased span, a DLQ row.
    let sub = t
        .http
        .get("/api/v1/pop/queue/doomed?consumerGroup=g&subscriptionMode=new")
        .await;
    assert!(sub.status.is_success(), "{}", sub.text);
    let r = t.http.pop("doomed", "p1", "batch=1").await;
    let m = &r.json["messages"][0];
    let ack = json!({"transactionId": "a", "partitionId": m["partitionId"],
                     "leaseId": m["leaseId"], "status": "dlq", "error": "x"});
    assert_eq!(
        t.http.post("/api/v1/ack", ack).await.json[0]["success"],
        json!(true)
    );
    let _ = t.http.pop("doomed", "p1", "batch=1").await; // a live lease on b
    let before = rows(&t).await;

    // Long-polls parked on the queue, on a named partition, and one on another queue.
    let park = |path: String| {
        let http = t.http.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let r = http.get(&path).await;
            (r.status, started.elapsed())
        })
    };
    let on_queue = park(
        "/api/v1/pop/queue/doomed?wait=true&timeout=20000&consumerGroup=w&subscriptionMode=new"
            .into(),
    );
    let on_partition = park("/api/v1/pop/queue/doomed/partition/p9?wait=true&timeout=20000".into());
    let elsewhere = park("/api/v1/pop/queue/quiet?wait=true&timeout=1500".into());
    tokio::time::sleep(Duration::from_millis(300)).await;

    let r = t.http.delete("/api/v1/resources/queues/doomed").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json, json!({"deleted": true, "queue": "doomed"}));
    for waiter in [on_queue, on_partition] {
        let (status, took) = waiter.await.unwrap();
        assert_eq!(status, StatusCode::NO_CONTENT);
        assert!(
            took < Duration::from_secs(5),
            "answered at once, took {took:?}"
        );
    }
    let (status, took) = elsewhere.await.unwrap();
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(
        took >= Duration::from_millis(1400),
        "another queue's poll kept waiting"
    );

    let after = rows(&t).await;
    let kept = |table: &str, rows: &[(&str, i64)]| rows.iter().find(|r| r.0 == table).unwrap().1;
    for (table, n) in &after {
        let expected_after = match *table {
            // `kept` and `quiet` (created by its pop) stay; `doomed` goes.
            "queues" => 2,
            "log_partitions" | "log_segments" | "log_txns" => 1,
            "log_consumers" => kept("log_consumers", &after),
            _ => 0,
        };
        assert_eq!(
            *n, expected_after,
            "{table}: before {before:?}, after {after:?}"
        );
    }
    assert!(
        kept("log_dlq", &before) > 0 && kept("log_groups", &before) > 0,
        "{before:?}"
    );
    let consumers_of_doomed: i64 = t
        .sql()
        .await
        .query_one(
            "SELECT count(*) FROM queen.log_consumers c WHERE NOT EXISTS \
             (SELECT 1 FROM queen.log_partitions p WHERE p.id = c.partition_id)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(consumers_of_doomed, 0, "no orphan cursor");
    assert_eq!(
        t.http.get("/api/v1/dlq").await.json["pagination"]["total"],
        0
    );
    t.broker.shutdown().await;
}

#[tokio::test]
async fn a_queue_recreated_after_deletion_starts_empty() {
    let t = TestBroker::start().await;
    t.http.push("q", &[("p", "old-1"), ("p", "old-2")]).await;
    // Warm every hint: the named partition's id, the hotlist, the segment cache, a cursor.
    let r = t.http.pop("q", "p", "batch=1&autoAck=true").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = t.http.get("/api/v1/pop/queue/q?batch=1&autoAck=true").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = t.http.delete("/api/v1/resources/queues/q").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    // The same transactionId is new again (the sidecar went with the queue).
    let again = t.http.push("q", &[("p", "old-1"), ("p", "new-1")]).await;
    assert!(again.iter().all(|x| x["status"] == "queued"), "{again:?}");
    let r = t.http.pop("q", "p", "batch=10").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(crate::common::txns(&r), ["old-1", "new-1"]);
    assert_eq!(r.json["messages"][0]["partitionId"], r.json["partitionId"]);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn queue_resources_are_per_tenant() {
    let t = TestBroker::start_with(|c| c.tenancy_header = true).await;
    let push = json!({"items": [{"queue": "shared", "payload": 1}]});
    for tenant in [TENANT_A, TENANT_B] {
        let r = t
            .send_as(
                Some(tenant),
                Method::POST,
                "/api/v1/push",
                Some(push.clone()),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let r = t
        .send_as(
            Some(TENANT_A),
            Method::DELETE,
            "/api/v1/resources/queues/shared",
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = t
        .send_as(
            Some(TENANT_A),
            Method::GET,
            "/api/v1/resources/queues/shared",
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = t
        .send_as(
            Some(TENANT_B),
            Method::GET,
            "/api/v1/resources/queues",
            None,
        )
        .await;
    assert_eq!(r.json["queues"].as_array().unwrap().len(), 1, "{}", r.text);
    assert_eq!(
        r.json["queues"][0]["depth"],
        json!(1),
        "B's queue untouched"
    );
    let r = t
        .send_as(
            Some(TENANT_A),
            Method::GET,
            "/api/v1/resources/queues",
            None,
        )
        .await;
    assert_eq!(r.json["queues"], json!([]), "{}", r.text);
    t.broker.shutdown().await;
}
