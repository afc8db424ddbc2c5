//! Lease renewal and the dead-letter routes (list, retry, delete) through the real HTTP server
//! against real PostgreSQL.
//!
//! DLQ rows are filed by the ack path, which is built elsewhere; these tests insert them with
//! SQL into `queen.log_dlq` (and set consumer cursors with SQL) to exercise the routes.

use crate::common::{txns, Reply, TestBroker, TENANT_A, TENANT_B};
use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

/// A timestamptz column formatted as the wire formats timestamps.
const ISO: &str = "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'";

// ---------------------------------------------------------------------------------------------
// helpers

async fn extend(t: &TestBroker, lease: &str, body: Value) -> Reply {
    t.http
        .post(&format!("/api/v1/lease/{lease}/extend"), body)
        .await
}

async fn extend_as(t: &TestBroker, tenant: Option<&str>, lease: &str, seconds: i64) -> Reply {
    let path = format!("/api/v1/lease/{lease}/extend");
    t.send_as(
        tenant,
        Method::POST,
        &path,
        Some(json!({ "seconds": seconds })),
    )
    .await
}

async fn push_as(t: &TestBroker, tenant: &str, queue: &str, items: &[(&str, &str)]) {
    let items: Vec<Value> = items
        .iter()
        .map(|(p, x)| json!({"queue": queue, "partition": p, "transactionId": x, "payload": {"t": x}}))
        .collect();
    let r = t
        .send_as(
            Some(tenant),
            Method::POST,
            "/api/v1/push",
            Some(json!({ "items": items })),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
}

/// Pops with `query`, asserting 200; returns (answer, leaseId).
async fn pop_ok(t: &TestBroker, path: &str) -> (Reply, String) {
    let p = t.http.get(path).await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.text);
    let lease = p.json["leaseId"].as_str().unwrap().to_string();
    (p, lease)
}

/// The worker's lease expiries, wire-formatted, in (partition, group) order.
async fn expiries(t: &TestBroker, worker: &str) -> Vec<String> {
    let db = t.sql().await;
    let sql = format!(
        "SELECT to_char(lease_expires_at AT TIME ZONE 'UTC', {ISO}) FROM queen.log_consumers \
         WHERE worker_id = $1 ORDER BY partition_id, consumer_group"
    );
    db.query(&sql, &[&worker])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// How many of the worker's leases expire later than now() + `secs`.
async fn leases_beyond(t: &TestBroker, worker: &str, secs: f64) -> i64 {
    let db = t.sql().await;
    db.query_one(
        "SELECT count(*) FROM queen.log_consumers \
         WHERE worker_id = $1 AND lease_expires_at > now() + make_interval(secs => $2)",
        &[&worker, &secs],
    )
    .await
    .unwrap()
    .get(0)
}

async fn partition_id(t: &TestBroker, queue: &str, partition: &str) -> Uuid {
    let db = t.sql().await;
    db.query_one(
        "SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id \
         WHERE q.name = $1 AND p.name = $2",
        &[&queue, &partition],
    )
    .await
    .unwrap()
    .get(0)
}

/// Files a DLQ row with SQL (as `log_dlq_head_v3` would), payload `{"t": txn}`, a random
/// message id; returns the row id.
async fn file_dlq(
    t: &TestBroker,
    pid: Uuid,
    group: &str,
    offset: i64,
    txn: &str,
    error: &str,
    retries: i32,
) -> i64 {
    let db = t.sql().await;
    db.query_one(
        "INSERT INTO queen.log_dlq (partition_id, consumer_group, \"offset\", message_id, \
         transaction_id, payload, error, retry_count) \
         VALUES ($1, $2, $3, gen_random_uuid(), $4, jsonb_build_object('t', $4::text), $5, $6) \
         RETURNING id",
        &[&pid, &group, &offset, &txn, &error, &retries],
    )
    .await
    .unwrap()
    .get(0)
}

async fn dlq_rows(t: &TestBroker) -> i64 {
    t.sql()
        .await
        .query_one("SELECT count(*) FROM queen.log_dlq", &[])
        .await
        .unwrap()
        .get(0)
}

async fn last_offset(t: &TestBroker, pid: Uuid) -> i64 {
    let db = t.sql().await;
    db.query_one(
        "SELECT last_offset FROM queen.log_partitions WHERE id = $1",
        &[&pid],
    )
    .await
    .unwrap()
    .get(0)
}

fn list_txns(r: &Reply) -> Vec<String> {
    r.json["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["transactionId"].as_str().unwrap().to_string())
        .collect()
}

fn is_wire_timestamp(s: &str) -> bool {
    s.len() == 27 && s.ends_with('Z') && s.as_bytes()[10] == b'T' && s.as_bytes()[19] == b'.'
}

// ---------------------------------------------------------------------------------------------
// lease renewal

#[tokio::test]
async fn extend_renews_every_lease_of_a_multi_partition_pop() {
    let t = TestBroker::start().await;
    t.http
        .push("q", &[("p1", "a"), ("p2", "b"), ("p3", "c")])
        .await;
    let (p, lease) = pop_ok(&t, "/api/v1/pop/queue/q?partitions=3&leaseSeconds=30").await;
    assert_eq!(p.json["partitionsClaimed"], 3);
    assert_eq!(leases_beyond(&t, &lease, 60.0).await, 0);

    let r = extend(&t, &lease, json!({"seconds": 600})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["leaseId"], lease.as_str());
    assert_eq!(r.json["success"], true);
    assert_eq!(r.json["renewed"], 3);
    assert_eq!(
        leases_beyond(&t, &lease, 590.0).await,
        3,
        "every partition of the pop is renewed"
    );
    let all = expiries(&t, &lease).await;
    let earliest = all.iter().min().unwrap();
    assert_eq!(r.json["expiresAt"], earliest.as_str());
    assert!(is_wire_timestamp(earliest), "{earliest}");
    // the pop's partitions stay leased: nothing to pop
    assert_eq!(
        t.http.get("/api/v1/pop/queue/q?partitions=3").await.status,
        StatusCode::NO_CONTENT
    );
    t.broker.shutdown().await;
}

#[tokio::test]
async fn extend_never_shortens_and_reports_the_earliest_expiry() {
    let t = TestBroker::start().await;
    t.http
        .push("q", &[("p1", "a"), ("p2", "b"), ("p3", "c")])
        .await;
    let (_, lease) = pop_ok(&t, "/api/v1/pop/queue/q?partitions=3").await; // queue default: 300 s
    let p2 = partition_id(&t, "q", "p2").await;
    t.sql()
        .await
        .execute(
            "UPDATE queen.log_consumers SET lease_expires_at = now() + interval '100 seconds' \
             WHERE partition_id = $1",
            &[&p2],
        )
        .await
        .unwrap();
    let before = expiries(&t, &lease).await;

    // 1 second is shorter than every remaining lease: renewed (they are live) but unchanged.
    let r = extend(&t, &lease, json!({"seconds": 1})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["renewed"], 3);
    assert_eq!(
        expiries(&t, &lease).await,
        before,
        "renewal never shortens a lease"
    );
    assert_eq!(
        r.json["expiresAt"],
        before.iter().min().unwrap().as_str(),
        "the earliest expiry"
    );

    // 200 s lengthens only the lease that had 100 s left; it stays the earliest.
    let r = extend(&t, &lease, json!({"seconds": 200})).await;
    assert_eq!(r.json["renewed"], 3);
    let after = expiries(&t, &lease).await;
    let changed: Vec<usize> = (0..3).filter(|&i| after[i] != before[i]).collect();
    assert_eq!(changed.len(), 1, "{before:?} -> {after:?}");
    assert!(after[changed[0]] > before[changed[0]]);
    assert_eq!(r.json["expiresAt"], after.iter().min().unwrap().as_str());
    assert_eq!(leases_beyond(&t, &lease, 190.0).await, 3);
    assert_eq!(leases_beyond(&t, &lease, 250.0).await, 2);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn unknown_or_expired_lease_answers_200_and_renews_nothing() {
    let t = TestBroker::start().await;
    for lease in [Uuid::now_v7().to_string(), "not-a-lease".to_string()] {
        let r = extend(&t, &lease, json!({"seconds": 60})).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert_eq!(
            r.json,
            json!({"leaseId": lease, "success": false, "renewed": 0, "expiresAt": null})
        );
    }

    // an expired lease is not revived
    t.http.push("q", &[("p", "a")]).await;
    let (_, lease) = pop_ok(&t, "/api/v1/pop/queue/q/partition/p").await;
    let db = t.sql().await;
    db.execute(
        "UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'",
        &[],
    )
    .await
    .unwrap();
    let r = extend(&t, &lease, json!({"seconds": 600})).await;
    assert_eq!(
        r.json,
        json!({"leaseId": lease, "success": false, "renewed": 0, "expiresAt": null})
    );
    let live: i64 = db
        .query_one(
            "SELECT count(*) FROM queen.log_consumers WHERE lease_expires_at > now()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(live, 0);
    assert_eq!(
        t.http.pop("q", "p", "").await.status,
        StatusCode::OK,
        "the span redelivers"
    );
    t.broker.shutdown().await;
}

#[tokio::test]
async fn bad_seconds_is_400_naming_seconds_and_changes_nothing() {
    let t = TestBroker::start().await;
    t.http.push("q", &[("p", "a")]).await;
    let (_, lease) = pop_ok(&t, "/api/v1/pop/queue/q/partition/p?leaseSeconds=30").await;
    let before = expiries(&t, &lease).await;
    let path = format!("/api/v1/lease/{lease}/extend");
    for bad in [
        json!(0),
        json!(-5),
        json!(2_592_001),
        json!("60"),
        json!(1.5),
        json!(true),
        json!({}),
    ] {
        let r = t.http.post(&path, json!({ "seconds": bad })).await;
        assert_eq!(
            r.status,
            StatusCode::BAD_REQUEST,
            "seconds = {bad}: {}",
            r.text
        );
        assert!(
            r.json["error"].as_str().unwrap().contains("seconds"),
            "{}",
            r.text
        );
    }
    for raw in [&b"nope"[..], b"[60]", b"60", b"null"] {
        let r = t.http.post_raw(&path, raw).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
        assert!(r.json["error"].is_string());
    }
    assert_eq!(
        expiries(&t, &lease).await,
        before,
        "a refused request changes nothing"
    );

    // an empty body (or no `seconds`) renews for 60 s
    let db = t.sql().await;
    let shorten = "UPDATE queen.log_consumers SET lease_expires_at = now() + interval '5 seconds'";
    db.execute(shorten, &[]).await.unwrap();
    let r = t.http.post_raw(&path, b"").await;
    assert_eq!(
        (r.status, r.json["renewed"].clone()),
        (StatusCode::OK, json!(1)),
        "{}",
        r.text
    );
    assert_eq!(leases_beyond(&t, &lease, 50.0).await, 1);
    assert_eq!(leases_beyond(&t, &lease, 70.0).await, 0);
    db.execute(shorten, &[]).await.unwrap();
    let r = t.http.post(&path, json!({})).await;
    assert_eq!(r.json["renewed"], 1);
    assert_eq!(leases_beyond(&t, &lease, 50.0).await, 1);
    // the upper bound itself is accepted
    let r = t.http.post(&path, json!({"seconds": 2_592_000})).await;
    assert_eq!(r.json["renewed"], 1, "{}", r.text);
    assert_eq!(leases_beyond(&t, &lease, 2_591_000.0).await, 1);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn tenancy_foreign_lease_answers_like_an_unknown_one_and_is_not_renewed() {
    let t = TestBroker::start_with(|c| c.tenancy_header = true).await;
    push_as(&t, TENANT_A, "q", &[("p1", "a"), ("p2", "b")]).await;
    let p = t
        .send_as(
            Some(TENANT_A),
            Method::GET,
            "/api/v1/pop/queue/q?partitions=2&leaseSeconds=30",
            None,
        )
        .await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.text);
    let lease = p.json["leaseId"].as_str().unwrap().to_string();
    let before = expiries(&t, &lease).await;
    assert_eq!(before.len(), 2);

    let unknown = json!({"leaseId": lease, "success": false, "renewed": 0, "expiresAt": null});
    // another tenant, and the default tenant (no header), see an unknown lease
    for tenant in [Some(TENANT_B), None] {
        let r = extend_as(&t, tenant, &lease, 600).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert_eq!(r.json, unknown);
    }
    let never = Uuid::now_v7().to_string();
    let r = extend_as(&t, Some(TENANT_B), &never, 600).await;
    assert_eq!(r.json["success"], false);
    assert_eq!(r.json["renewed"], 0);
    assert_eq!(r.json["expiresAt"], Value::Null);
    assert_eq!(
        expiries(&t, &lease).await,
        before,
        "a foreign tenant renews nothing"
    );
    assert_eq!(leases_beyond(&t, &lease, 60.0).await, 0);

    // the owner renews both partitions
    let r = extend_as(&t, Some(TENANT_A), &lease, 600).await;
    assert_eq!(r.json["renewed"], 2, "{}", r.text);
    assert_eq!(leases_beyond(&t, &lease, 590.0).await, 2);

    let r = t
        .send_as(
            Some("nope"),
            Method::POST,
            &format!("/api/v1/lease/{lease}/extend"),
            None,
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::BAD_REQUEST,
        "a malformed tenant header"
    );
    t.broker.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// dead letters

#[tokio::test]
async fn dlq_list_filters_pages_and_counts() {
    let t = TestBroker::start().await;
    let pushed = t
        .http
        .push("orders", &[("p1", "a"), ("p1", "b"), ("p2", "c")])
        .await;
    t.http.push("billing", &[("Default", "d")]).await;
    let p1 = partition_id(&t, "orders", "p1").await;
    let p2 = partition_id(&t, "orders", "p2").await;
    let bd = partition_id(&t, "billing", "Default").await;
    let first = file_dlq(&t, p1, "__QUEUE_MODE__", 0, "a", "boom", 3).await;
    file_dlq(&t, p1, "g1", 1, "b", "bad", 2).await;
    file_dlq(&t, p2, "g1", 0, "c", "worse", 0).await;
    file_dlq(&t, bd, "__QUEUE_MODE__", 0, "d", "worst", 1).await;
    assert!(!pushed.is_empty());

    let all = t.http.get("/api/v1/dlq").await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.text);
    let page: ackbench_wire::DlqPage = serde_json::from_str(&all.text).expect("wire shape");
    assert_eq!(page.pagination.total, Some(4));
    assert_eq!((page.pagination.limit, page.pagination.offset), (100, 0));
    assert_eq!(list_txns(&all), ["a", "b", "c", "d"], "filing order");
    let m = &page.messages[0];
    let first_message: Uuid = t
        .sql()
        .await
        .query_one(
            "SELECT message_id FROM queen.log_dlq WHERE id = $1",
            &[&first],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(m.id, first_message.to_string(), "id is the message id");
    assert_eq!((m.queue.as_str(), m.partition.as_str()), ("orders", "p1"));
    assert_eq!(m.partition_id, p1.to_string());
    assert_eq!(m.consumer_group, None, "queue mode lists as null");
    assert_eq!((m.offset, m.retry_count), (Some(0), 3));
    assert_eq!(m.data.get(), r#"{"t": "a"}"#, "the stored text, as filed");
    assert_eq!(m.error_message.as_deref(), Some("boom"));
    let failed_at = m.failed_at.as_deref().unwrap_or_default();
    assert!(is_wire_timestamp(failed_at), "{failed_at}");
    assert_eq!(all.json["messages"][0]["errorMessage"], json!("boom"));
    assert!(
        all.json["messages"][0].get("error").is_none(),
        "Queen's name only"
    );
    assert_eq!(page.messages[1].consumer_group.as_deref(), Some("g1"));

    for (query, expected) in [
        ("queue=orders", vec!["a", "b", "c"]),
        ("consumerGroup=g1", vec!["b", "c"]),
        ("consumerGroup=__QUEUE_MODE__", vec!["a", "d"]),
        ("partition=p1", vec!["a", "b"]),
        ("queue=orders&partition=p2", vec!["c"]),
        ("queue=billing&consumerGroup=g1", vec![]),
        ("queue=nope", vec![]),
        ("queue=&consumerGroup=&partition=", vec!["a", "b", "c", "d"]),
    ] {
        let r = t.http.get(&format!("/api/v1/dlq?{query}")).await;
        assert_eq!(r.status, StatusCode::OK, "{query}: {}", r.text);
        assert_eq!(list_txns(&r), expected, "{query}");
        assert_eq!(r.json["pagination"]["total"], expected.len(), "{query}");
    }
    for (query, expected) in [
        ("limit=2", vec!["a", "b"]),
        ("limit=2&offset=2", vec!["c", "d"]),
        ("limit=1&offset=3", vec!["d"]),
        ("offset=4", vec![]),
        ("offset=100", vec![]),
        ("queue=orders&limit=1&offset=1", vec!["b"]),
    ] {
        let r = t.http.get(&format!("/api/v1/dlq?{query}")).await;
        assert_eq!(list_txns(&r), expected, "{query}");
        let total = if query.starts_with("queue") { 3 } else { 4 };
        assert_eq!(
            r.json["pagination"]["total"], total,
            "{query}: total ignores paging"
        );
    }
    for (query, name) in [
        ("limit=0", "limit"),
        ("limit=10001", "limit"),
        ("limit=abc", "limit"),
        ("offset=-1", "offset"),
        ("offset=x", "offset"),
    ] {
        let r = t.http.get(&format!("/api/v1/dlq?{query}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}");
        assert!(
            r.json["error"].as_str().unwrap().contains(name),
            "{query}: {}",
            r.text
        );
    }
    assert_eq!(
        t.http.get("/api/v1/dlq?limit=10000").await.status,
        StatusCode::OK
    );
    t.broker.shutdown().await;
}

#[tokio::test]
async fn dlq_retry_replays_at_the_tail_under_a_fresh_identity() {
    let t = TestBroker::start().await;
    let pushed = t
        .http
        .push("q", &[("p1", "a"), ("p1", "b"), ("p1", "c")])
        .await;
    let pid = partition_id(&t, "q", "p1").await;
    // `b` (offset 1) was dead-lettered and the cursor stepped past it: committed = 1.
    let db = t.sql().await;
    db.execute(
        "INSERT INTO queen.log_consumers (partition_id, consumer_group, committed) \
         VALUES ($1, '__QUEUE_MODE__', 1)",
        &[&pid],
    )
    .await
    .unwrap();
    let original_id = Uuid::parse_str(pushed[1]["message_id"].as_str().unwrap()).unwrap();
    db.execute(
        "INSERT INTO queen.log_dlq (partition_id, consumer_group, \"offset\", message_id, \
         transaction_id, payload, error, retry_count) \
         VALUES ($1, '__QUEUE_MODE__', 1, $2, 'b', '{\"t\": \"b\"}', 'boom', 3)",
        &[&pid, &original_id],
    )
    .await
    .unwrap();

    let r = t
        .http
        .post(&format!("/api/v1/messages/{pid}/b/retry"), json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["retried"], true);
    assert_eq!(r.json["partitionId"], pid.to_string());
    assert_eq!(
        (r.json["queue"].as_str(), r.json["partition"].as_str()),
        (Some("q"), Some("p1"))
    );
    assert_eq!(r.json["originalTransactionId"], "b");
    assert_eq!(r.json["deleted"], 1);
    let new_id = r.json["messageId"].as_str().unwrap().to_string();
    let new_txn = r.json["transactionId"].as_str().unwrap().to_string();
    assert_ne!(new_id, original_id.to_string(), "a fresh message id");
    assert_ne!(new_txn, "b", "a fresh transactionId");
    assert_eq!(
        new_txn, new_id,
        "the fresh transactionId is the new message id"
    );
    assert_eq!(
        r.json["messages"],
        json!([{"messageId": new_id, "transactionId": new_txn, "originalOffset": 1, "status": "queued"}])
    );

    assert_eq!(dlq_rows(&t).await, 0, "the DLQ row is gone");
    assert_eq!(
        t.http.get("/api/v1/dlq").await.json["pagination"]["total"],
        0
    );
    assert_eq!(last_offset(&t, pid).await, 3, "appended at the tail");

    // the original offset stays committed; the replay comes after what was already there
    let p = t.http.pop("q", "p1", "batch=10").await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.text);
    assert_eq!(txns(&p), ["c", new_txn.as_str()]);
    assert_eq!(p.json["messages"][1]["id"], new_id.as_str());
    assert_eq!(p.json["messages"][1]["data"], json!({"t": "b"}));
    let committed: i64 = db
        .query_one(
            "SELECT committed FROM queen.log_consumers WHERE partition_id = $1",
            &[&pid],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(committed, 1);

    // the row is gone: a second retry is a 404
    let again = t
        .http
        .post(&format!("/api/v1/messages/{pid}/b/retry"), json!({}))
        .await;
    assert_eq!(again.status, StatusCode::NOT_FOUND, "{}", again.text);
    assert!(again.json["error"].is_string());
    assert_eq!(last_offset(&t, pid).await, 3);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn dlq_retry_of_a_transaction_dead_lettered_by_several_groups() {
    let t = TestBroker::start().await;
    t.http.push("q", &[("p1", "a")]).await;
    let pid = partition_id(&t, "q", "p1").await;
    for g in ["g1", "g2", "g3"] {
        file_dlq(&t, pid, g, 0, "a", "boom", 3).await;
    }
    // narrowed to one group: that row only
    let r = t
        .http
        .post(
            &format!("/api/v1/messages/{pid}/a/retry?consumerGroup=g1"),
            json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["deleted"], 1);
    assert_eq!(r.json["messages"].as_array().unwrap().len(), 1);
    let left = t.http.get("/api/v1/dlq").await;
    assert_eq!(left.json["pagination"]["total"], 2);
    assert_eq!(left.json["messages"][0]["consumerGroup"], "g2");
    assert_eq!(last_offset(&t, pid).await, 1);
    let none = t
        .http
        .post(
            &format!("/api/v1/messages/{pid}/a/retry?consumerGroup=g1"),
            json!({}),
        )
        .await;
    assert_eq!(none.status, StatusCode::NOT_FOUND);

    // every remaining row of the pair: one replay per distinct offset, every row deleted
    let r = t
        .http
        .post(&format!("/api/v1/messages/{pid}/a/retry"), json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["deleted"], 2);
    assert_eq!(r.json["messages"].as_array().unwrap().len(), 1);
    assert_eq!(
        last_offset(&t, pid).await,
        2,
        "one message per original offset"
    );
    assert_eq!(dlq_rows(&t).await, 0);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn dlq_delete_removes_rows_and_404s_when_none() {
    let t = TestBroker::start().await;
    t.http.push("q", &[("p1", "a"), ("p1", "b")]).await;
    let pid = partition_id(&t, "q", "p1").await;
    file_dlq(&t, pid, "g1", 0, "a", "boom", 3).await;
    file_dlq(&t, pid, "g2", 0, "a", "boom", 3).await;
    file_dlq(&t, pid, "g1", 1, "b", "boom", 3).await;

    let r = t
        .http
        .delete(&format!("/api/v1/messages/{pid}/a?consumerGroup=g1"))
        .await;
    assert_eq!(
        (r.status, r.json.clone()),
        (StatusCode::OK, json!({"deleted": 1})),
        "{}",
        r.text
    );
    let r = t.http.delete(&format!("/api/v1/messages/{pid}/a")).await;
    assert_eq!(r.json, json!({"deleted": 1}));
    let r = t.http.delete(&format!("/api/v1/messages/{pid}/a")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    assert!(r.json["error"].is_string());
    let other = Uuid::new_v4();
    assert_eq!(
        t.http
            .delete(&format!("/api/v1/messages/{other}/b"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        list_txns(&t.http.get("/api/v1/dlq").await),
        ["b"],
        "other rows untouched"
    );
    assert_eq!(last_offset(&t, pid).await, 1, "a delete pushes nothing");
    t.broker.shutdown().await;
}

#[tokio::test]
async fn dlq_malformed_ids_are_400_and_unknown_ones_404() {
    let t = TestBroker::start().await;
    let r = t
        .http
        .post("/api/v1/messages/not-a-uuid/a/retry", json!({}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.json["error"].as_str().unwrap().contains("partitionId"));
    let r = t.http.delete("/api/v1/messages/not-a-uuid/a").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.json["error"].as_str().unwrap().contains("partitionId"));
    let pid = Uuid::new_v4();
    let r = t
        .http
        .post(&format!("/api/v1/messages/{pid}//retry"), json!({}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.json["error"].as_str().unwrap().contains("transactionId"));
    let r = t
        .http
        .post(&format!("/api/v1/messages/{pid}/a/retry"), json!({}))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = t.http.delete(&format!("/api/v1/messages/{pid}/a")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    // percent-encoded transactionIds are decoded
    t.http.push("q", &[("p", "a b/c")]).await;
    let real = partition_id(&t, "q", "p").await;
    file_dlq(&t, real, "g", 0, "a b/c", "boom", 0).await;
    let r = t
        .http
        .delete(&format!("/api/v1/messages/{real}/a%20b%2Fc"))
        .await;
    assert_eq!(r.json, json!({"deleted": 1}), "{}", r.text);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn dlq_rows_of_another_tenant_are_invisible() {
    let t = TestBroker::start_with(|c| c.tenancy_header = true).await;
    push_as(&t, TENANT_A, "q", &[("p1", "a")]).await;
    let pid = partition_id(&t, "q", "p1").await;
    file_dlq(&t, pid, "g", 0, "a", "boom", 3).await;

    for tenant in [Some(TENANT_B), None] {
        let r = t.send_as(tenant, Method::GET, "/api/v1/dlq", None).await;
        assert_eq!(r.json["messages"], json!([]));
        assert_eq!(r.json["pagination"]["total"], 0);
        let retry = format!("/api/v1/messages/{pid}/a/retry");
        let r = t
            .send_as(tenant, Method::POST, &retry, Some(json!({})))
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
        let r = t
            .send_as(
                tenant,
                Method::DELETE,
                &format!("/api/v1/messages/{pid}/a"),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    }
    assert_eq!(dlq_rows(&t).await, 1, "a foreign tenant changes nothing");
    assert_eq!(
        last_offset(&t, pid).await,
        0,
        "a foreign retry pushes nothing"
    );

    let r = t
        .send_as(Some(TENANT_A), Method::GET, "/api/v1/dlq", None)
        .await;
    assert_eq!(r.json["pagination"]["total"], 1);
    let r = t
        .send_as(
            Some(TENANT_A),
            Method::POST,
            &format!("/api/v1/messages/{pid}/a/retry"),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        last_offset(&t, pid).await,
        1,
        "replayed into the owner's partition"
    );
    let p = t
        .send_as(
            Some(TENANT_A),
            Method::GET,
            "/api/v1/pop/queue/q/partition/p1?batch=10",
            None,
        )
        .await;
    assert_eq!(txns(&p).len(), 2);
    assert_eq!(dlq_rows(&t).await, 0);
    t.broker.shutdown().await;
}

#[test]
fn a_queen_dlq_page_without_total_reads() {
    let page: ackbench_wire::DlqPage = serde_json::from_str(
        r#"{"messages": [{"id": "0190b7a2-0000-7000-8000-000000000000", "transactionId": "t",
            "data": {"a": 1}, "errorMessage": "e", "consumerGroup": null}],
            "pagination": {"limit": 100, "offset": 0}}"#,
    )
    .expect("Queen's listing shape");
    assert_eq!(page.pagination.total, None);
    assert_eq!(page.messages[0].error_message.as_deref(), Some("e"));
}
