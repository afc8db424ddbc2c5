//! `POST /api/v1/transaction` through the real HTTP server against real PostgreSQL: pushes and
//! acks commit together or not at all, the positional and hash forms of its acks, the DLQ
//! hand-off, bad input, and the lock order under concurrency.

use crate::common::{txns, Http, Reply, TestBroker, QM};
use ackbench_broker::{Broker, Config};
use hyper::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// helpers

async fn txn(http: &Http, body: Value) -> Reply {
    http.post("/api/v1/transaction", body).await
}

/// Asserts a committed transaction and returns its results.
fn committed(r: &Reply) -> Vec<Value> {
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["success"], json!(true), "{}", r.text);
    let id = Uuid::parse_str(r.json["transactionId"].as_str().expect("a transactionId"))
        .expect("transactionId is a UUID");
    assert_eq!(id.get_version_num(), 7, "transactionId is a UUIDv7");
    r.json["results"].as_array().unwrap().clone()
}

/// Asserts a rolled-back transaction and returns its error.
fn rolled_back(r: &Reply) -> String {
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["success"], json!(false), "{}", r.text);
    assert_eq!(r.json["results"], json!([]), "{}", r.text);
    r.json["error"].as_str().expect("an error").to_string()
}

fn push_op(queue: &str, partition: &str, txns: &[&str]) -> Value {
    let items: Vec<Value> = txns
        .iter()
        .map(|t| json!({"queue": queue, "partition": partition, "transactionId": t, "payload": {"t": t}}))
        .collect();
    json!({"type": "push", "items": items})
}

fn ack_op(txn: &str, pid: &str, status: &str, lease: Option<&str>) -> Value {
    let mut op = json!({"type": "ack", "transactionId": txn, "partitionId": pid, "status": status});
    if let Some(l) = lease {
        op["leaseId"] = json!(l);
    }
    op
}

/// Pops (asserting 200): (partitionId, leaseId, transactionIds).
async fn pop(
    http: &Http,
    queue: &str,
    partition: &str,
    query: &str,
) -> (String, String, Vec<String>) {
    let r = http.pop(queue, partition, query).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    (
        r.json["partitionId"].as_str().unwrap().to_string(),
        r.json["leaseId"].as_str().unwrap().to_string(),
        txns(&r),
    )
}

/// (committed, total_consumed, worker_id) of a consumer row.
async fn cursor(t: &TestBroker, pid: &str, group: &str) -> Option<(i64, i64, Option<String>)> {
    let db = t.sql().await;
    db.query_opt(
        "SELECT committed, total_consumed, worker_id FROM queen.log_consumers \
         WHERE partition_id = $1 AND consumer_group = $2",
        &[&Uuid::parse_str(pid).unwrap(), &group],
    )
    .await
    .unwrap()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
}

/// Messages stored in a queue (every tenant), counted from the segments.
async fn messages_in(t: &TestBroker, queue: &str) -> i64 {
    let db = t.sql().await;
    db.query_one(
        "SELECT COALESCE(sum(s.end_offset - s.base_offset + 1), 0)::bigint \
         FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id \
         JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1",
        &[&queue],
    )
    .await
    .unwrap()
    .get(0)
}

/// Calls of a procedure in this test's database, nested ones included (track = all).
async fn calls(t: &TestBroker, procedure: &str) -> i64 {
    let db = t.sql().await;
    // The pattern travels as a parameter so this statement's own text does not match it.
    db.query_one(
        "SELECT COALESCE(sum(s.calls), 0)::bigint FROM pg_stat_statements s \
         JOIN pg_database d ON d.oid = s.dbid \
         WHERE d.datname = current_database() AND s.query LIKE $1",
        &[&format!("%{procedure}(%")],
    )
    .await
    .unwrap()
    .get(0)
}

// ---------------------------------------------------------------------------------------------
// all or nothing

#[tokio::test]
async fn push_and_ack_commit_together() {
    let t = TestBroker::start().await;
    t.http.push("in", &[("p", "m1"), ("p", "m2")]).await;
    let (pid, lease, got) = pop(&t.http, "in", "p", "batch=2").await;
    assert_eq!(got, ["m1", "m2"]);

    let r = txn(
        &t.http,
        json!({"operations": [
            push_op("out", "q", &["o1", "o2"]),
            ack_op("m1", &pid, "completed", Some(&lease)),
            ack_op("m2", &pid, "completed", Some(&lease)),
        ]}),
    )
    .await;
    let results = committed(&r);
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["index"], json!(0));
    assert_eq!(results[0]["type"], json!("push"));
    assert_eq!(results[0]["success"], json!(true));
    let items = results[0]["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    for (k, item) in items.iter().enumerate() {
        assert_eq!(item["index"], json!(k));
        assert_eq!(item["status"], json!("queued"));
        assert_eq!(item["queueName"], json!("out"));
        assert!(Uuid::parse_str(item["message_id"].as_str().unwrap()).is_ok());
    }
    assert_eq!(items[1]["transaction_id"], json!("o2"));
    for (i, m) in [(1, "m1"), (2, "m2")] {
        assert_eq!(results[i]["index"], json!(i));
        assert_eq!(results[i]["type"], json!("ack"));
        assert_eq!(results[i]["success"], json!(true), "{}", r.text);
        assert_eq!(results[i]["transactionId"], json!(m));
        assert_eq!(results[i]["leaseReleased"], json!(true));
        assert_eq!(results[i]["dlq"], json!(false));
        assert_eq!(results[i]["noop"], json!(false));
    }

    // The acked messages are committed and the pushed ones visible.
    assert_eq!(cursor(&t, &pid, QM).await, Some((1, 2, None)));
    let out = t.http.pop("out", "q", "batch=10").await;
    assert_eq!(txns(&out), ["o1", "o2"]);
    let again = t.http.pop("in", "p", "batch=10").await;
    assert_eq!(again.status, StatusCode::NO_CONTENT);
    // The message ids answered are the stored ones.
    assert_eq!(out.json["messages"][0]["id"], items[0]["message_id"]);
}

#[tokio::test]
async fn duplicate_push_rolls_back_the_ack() {
    let t = TestBroker::start().await;
    t.http.push("in", &[("p", "m1")]).await;
    t.http.push("out", &[("q", "d1")]).await;
    let (pid, lease, _) = pop(&t.http, "in", "p", "batch=1").await;

    // A duplicate of a stored message.
    let r = txn(
        &t.http,
        json!({"operations": [
            ack_op("m1", &pid, "completed", Some(&lease)),
            push_op("out", "q", &["n1", "d1"]),
        ]}),
    )
    .await;
    let error = rolled_back(&r);
    assert!(error.contains("operations[1].items[1]"), "{error}");
    assert!(error.contains("\"d1\""), "{error}");
    assert!(error.contains("duplicate"), "{error}");
    assert_eq!(
        cursor(&t, &pid, QM).await,
        Some((-1, 0, Some(lease.clone())))
    );
    assert_eq!(messages_in(&t, "out").await, 1);

    // A duplicate inside the transaction, across two push operations.
    let r = txn(
        &t.http,
        json!({"operations": [
            push_op("out", "q", &["x1"]),
            ack_op("m1", &pid, "completed", Some(&lease)),
            push_op("out", "q", &["x2", "x1"]),
        ]}),
    )
    .await;
    let error = rolled_back(&r);
    assert!(error.contains("operations[2].items[1]"), "{error}");
    assert!(error.contains("operations[0].items[0]"), "{error}");
    assert!(error.contains("\"x1\""), "{error}");
    assert_eq!(messages_in(&t, "out").await, 1);
    assert_eq!(
        cursor(&t, &pid, QM).await,
        Some((-1, 0, Some(lease.clone())))
    );

    // The same transaction without the duplicates commits.
    let r = txn(
        &t.http,
        json!({"operations": [
            push_op("out", "q", &["x1"]),
            ack_op("m1", &pid, "completed", Some(&lease)),
            push_op("out", "q", &["x2"]),
        ]}),
    )
    .await;
    committed(&r);
    assert_eq!(messages_in(&t, "out").await, 3);
    assert_eq!(cursor(&t, &pid, QM).await, Some((0, 1, None)));
}

#[tokio::test]
async fn unresolvable_or_committed_ack_rolls_back_the_pushes() {
    let t = TestBroker::start().await;
    t.http.push("in", &[("p", "m1"), ("p", "m2")]).await;
    let pid = pop(&t.http, "in", "p", "batch=1&consumerGroup=g").await.0;
    // Release that lease again so the lease-less acks below act on a free row.
    let r = t
        .http
        .post(
            "/api/v1/ack",
            json!({"transactionId": "m1", "partitionId": pid, "status": "retry", "consumerGroup": "g"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    // A transactionId that was never pushed.
    let mut nope = ack_op("nope", &pid, "completed", None);
    nope["consumerGroup"] = json!("g");
    let r = txn(
        &t.http,
        json!({"operations": [push_op("out", "q", &["n1"]), nope]}),
    )
    .await;
    let error = rolled_back(&r);
    assert!(error.contains("operations[1]"), "{error}");
    assert!(error.contains("\"nope\""), "{error}");
    assert!(error.contains("unresolvable"), "{error}");
    assert_eq!(messages_in(&t, "out").await, 0);

    // An unknown partition.
    let r = txn(
        &t.http,
        json!({"operations": [
            push_op("out", "q", &["n1"]),
            ack_op("m1", &Uuid::new_v4().to_string(), "completed", None),
        ]}),
    )
    .await;
    assert!(rolled_back(&r).contains("unresolvable"));
    assert_eq!(messages_in(&t, "out").await, 0);

    // A nack of an already committed position.
    let mut done = ack_op("m1", &pid, "completed", None);
    done["consumerGroup"] = json!("g");
    committed(&txn(&t.http, json!({"operations": [done]})).await);
    assert_eq!(cursor(&t, &pid, "g").await.unwrap().0, 0);
    let mut stale = ack_op("m1", &pid, "failed", None);
    stale["consumerGroup"] = json!("g");
    let mut fine = ack_op("m2", &pid, "completed", None);
    fine["consumerGroup"] = json!("g");
    let r = txn(
        &t.http,
        json!({"operations": [fine, push_op("out", "q", &["n1"]), stale]}),
    )
    .await;
    let error = rolled_back(&r);
    assert!(error.contains("operations[2]"), "{error}");
    assert!(error.contains("already committed"), "{error}");
    assert_eq!(messages_in(&t, "out").await, 0);
    assert_eq!(
        cursor(&t, &pid, "g").await.unwrap().0,
        0,
        "m2's ack was rolled back"
    );

    // A completed ack below the cursor is a harmless noop.
    let mut dup = ack_op("m1", &pid, "completed", None);
    dup["consumerGroup"] = json!("g");
    let results = committed(&txn(&t.http, json!({"operations": [dup]})).await);
    assert_eq!(results[0]["noop"], json!(true));
    assert_eq!(results[0]["success"], json!(true));
}

#[tokio::test]
async fn lease_refused_ack_rolls_back() {
    let t = TestBroker::start().await;
    t.http.push("in", &[("p", "m1"), ("p", "m2")]).await;
    let (pid, lease, _) = pop(&t.http, "in", "p", "batch=2").await;

    // A lease that is not the row's (hash form: not every status is completed).
    let r = txn(
        &t.http,
        json!({"operations": [
            push_op("out", "q", &["n1"]),
            ack_op("m1", &pid, "failed", Some(&Uuid::now_v7().to_string())),
        ]}),
    )
    .await;
    let error = rolled_back(&r);
    assert!(error.contains("operations[1]"), "{error}");
    assert!(error.contains("invalid or expired lease"), "{error}");
    assert_eq!(messages_in(&t, "out").await, 0);
    assert_eq!(
        cursor(&t, &pid, QM).await,
        Some((-1, 0, Some(lease.clone())))
    );

    // The right lease, but expired: the registry knows the batch (positional form), PostgreSQL
    // refuses it; the retry goes by hash and is refused likewise.
    let db = t.sql().await;
    db.execute(
        "UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'",
        &[],
    )
    .await
    .unwrap();
    let body = json!({"operations": [
        ack_op("m1", &pid, "completed", Some(&lease)),
        ack_op("m2", &pid, "completed", Some(&lease)),
        push_op("out", "q", &["n1"]),
    ]});
    let (positional, by_hash) = (
        calls(&t, "log_ack_v1").await,
        calls(&t, "log_ack_by_hash_v1").await,
    );
    let error = rolled_back(&txn(&t.http, body.clone()).await);
    assert!(error.contains("operations[0]"), "{error}");
    assert!(error.contains("invalid or expired lease"), "{error}");
    assert_eq!(calls(&t, "log_ack_v1").await, positional + 1);
    assert_eq!(calls(&t, "log_ack_by_hash_v1").await, by_hash);
    let error = rolled_back(&txn(&t.http, body).await);
    assert!(error.contains("invalid or expired lease"), "{error}");
    assert_eq!(calls(&t, "log_ack_v1").await, positional + 1);
    assert_eq!(calls(&t, "log_ack_by_hash_v1").await, by_hash + 1);
    assert_eq!(messages_in(&t, "out").await, 0);
    assert_eq!(cursor(&t, &pid, QM).await.unwrap().0, -1);
}

#[tokio::test]
async fn required_leases_not_held_roll_back() {
    let t = TestBroker::start().await;
    t.http.push("in", &[("p", "m1")]).await;
    let (pid, lease, _) = pop(&t.http, "in", "p", "batch=1").await;

    let unknown = Uuid::now_v7().to_string();
    let r = txn(
        &t.http,
        json!({"operations": [push_op("out", "q", &["n1"])], "requiredLeases": [lease, unknown]}),
    )
    .await;
    let error = rolled_back(&r);
    assert!(error.contains("requiredLeases[1]"), "{error}");
    assert!(error.contains(&unknown), "{error}");
    assert_eq!(messages_in(&t, "out").await, 0);

    // Held: commits, and an ack in the same transaction may then release it.
    let r = txn(
        &t.http,
        json!({"operations": [
            push_op("out", "q", &["n1"]),
            ack_op("m1", &pid, "completed", Some(&lease)),
        ], "requiredLeases": [lease]}),
    )
    .await;
    committed(&r);
    assert_eq!(messages_in(&t, "out").await, 1);
    assert_eq!(cursor(&t, &pid, QM).await, Some((0, 1, None)));

    // Released now: no longer held.
    let r = txn(
        &t.http,
        json!({"operations": [push_op("out", "q", &["n2"])], "requiredLeases": [lease]}),
    )
    .await;
    assert!(rolled_back(&r).contains("requiredLeases[0]"));
    assert_eq!(messages_in(&t, "out").await, 1);
}

// ---------------------------------------------------------------------------------------------
// the two forms of its acks

#[tokio::test]
async fn positional_form_when_this_broker_served_the_pop() {
    let t = TestBroker::start().await;
    t.http
        .push("pos", &[("x", "x0"), ("x", "x1"), ("x", "x2")])
        .await;
    t.http
        .push("pos", &[("y", "y0"), ("y", "y1"), ("y", "y2")])
        .await;
    let (pid_x, lease_x, _) = pop(&t.http, "pos", "x", "batch=3&consumerGroup=g").await;
    let (pid_y, lease_y, _) = pop(&t.http, "pos", "y", "batch=3&consumerGroup=g").await;

    // This broker served the pop: positional (log_ack_v1), no hash resolution.
    let (p0, h0) = (
        calls(&t, "log_ack_v1").await,
        calls(&t, "log_ack_by_hash_v1").await,
    );
    let mut ops = vec![push_op("pos-out", "o", &["ox"])];
    for m in ["x0", "x1", "x2"] {
        let mut op = ack_op(m, &pid_x, "completed", Some(&lease_x));
        op["consumerGroup"] = json!("g");
        ops.push(op);
    }
    let rx = committed(&txn(&t.http, json!({ "operations": ops })).await);
    assert_eq!(calls(&t, "log_ack_v1").await, p0 + 1);
    assert_eq!(calls(&t, "log_ack_by_hash_v1").await, h0);
    let metrics = t.http.get("/metrics").await.text;
    assert!(
        metrics.contains("queen_acks_total{path=\"positional\"} 3"),
        "{metrics}"
    );

    // Another broker on the same database did not serve the pop: hash form.
    let database: tokio_postgres::Config = t.db_url.parse().unwrap();
    let other = Broker::start(Config::for_database(database)).await.unwrap();
    let other_http = Http::new(other.url());
    let mut ops = vec![push_op("pos-out", "o", &["oy"])];
    for m in ["y0", "y1", "y2"] {
        let mut op = ack_op(m, &pid_y, "completed", Some(&lease_y));
        op["consumerGroup"] = json!("g");
        ops.push(op);
    }
    let ry = committed(&txn(&other_http, json!({ "operations": ops })).await);
    assert_eq!(calls(&t, "log_ack_v1").await, p0 + 1);
    assert_eq!(calls(&t, "log_ack_by_hash_v1").await, h0 + 1);

    // Both forms end in the same place and answer alike.
    let (cx, cy) = (cursor(&t, &pid_x, "g").await, cursor(&t, &pid_y, "g").await);
    assert_eq!(cx, Some((2, 3, None)));
    assert_eq!(cx, cy);
    for (a, b) in rx.iter().zip(&ry).skip(1) {
        for field in ["success", "leaseReleased", "dlq", "noop", "error"] {
            assert_eq!(a[field], b[field], "{field}");
        }
    }
    assert_eq!(
        txns(&t.http.pop("pos-out", "o", "batch=10").await),
        ["ox", "oy"]
    );
    other.shutdown().await;
}

#[tokio::test]
async fn transaction_dlq_hand_off_is_filed() {
    let t = TestBroker::start().await;
    t.http.push("in", &[("p", "m1"), ("p", "m2")]).await;
    let (pid, lease, _) = pop(&t.http, "in", "p", "batch=2").await;

    let mut poison = ack_op("m1", &pid, "dlq", Some(&lease));
    poison["error"] = json!("cannot parse");
    let r = txn(
        &t.http,
        json!({"operations": [poison, push_op("out", "q", &["n1"])]}),
    )
    .await;
    let results = committed(&r);
    assert_eq!(results[0]["success"], json!(true), "{}", r.text);
    assert_eq!(results[0]["dlq"], json!(true), "{}", r.text);
    assert_eq!(results[0]["leaseReleased"], json!(true), "{}", r.text);

    let dlq = t.http.get("/api/v1/dlq?queue=in").await;
    assert_eq!(dlq.status, StatusCode::OK, "{}", dlq.text);
    assert_eq!(dlq.json["pagination"]["total"], json!(1), "{}", dlq.text);
    let row = &dlq.json["messages"][0];
    assert_eq!(row["transactionId"], json!("m1"));
    assert_eq!(row["errorMessage"], json!("cannot parse"));
    assert_eq!(row["data"], json!({"t": "m1"}));
    assert_eq!(row["offset"], json!(0));
    // The cursor stepped past the poison; the lease is gone; m2 redelivers.
    assert_eq!(cursor(&t, &pid, QM).await, Some((0, 1, None)));
    assert_eq!(txns(&t.http.pop("in", "p", "batch=10").await), ["m2"]);
    assert_eq!(messages_in(&t, "out").await, 1);
}

// ---------------------------------------------------------------------------------------------
// bad input

#[tokio::test]
async fn bad_input_is_400_naming_the_field_and_writes_nothing() {
    let t = TestBroker::start().await;
    let push = push_op("bad", "p", &["b1"]);
    let pid = Uuid::new_v4().to_string();
    let ack = ack_op("m1", &pid, "completed", None);
    let cases: Vec<(Value, &str)> = vec![
        (json!({}), "operations"),
        (json!({"operations": {}}), "operations"),
        (json!({"operations": []}), "operations"),
        (json!({"operations": [push, 7]}), "operations[1]"),
        (
            json!({"operations": [push, {"items": []}]}),
            "operations[1].type",
        ),
        (
            json!({"operations": [push, {"type": "pop"}]}),
            "operations[1].type",
        ),
        (
            json!({"operations": [push, {"type": 3}]}),
            "operations[1].type",
        ),
        (
            json!({"operations": [push, ack, {"type": "push"}]}),
            "operations[2].items",
        ),
        (
            json!({"operations": [push, {"type": "push", "items": [{"payload": 1}]}]}),
            "operations[1].items[0].queue",
        ),
        (
            json!({"operations": [push, {"type": "push", "items": [{"queue": "q"}]}]}),
            "operations[1].items[0].payload",
        ),
        (
            json!({"operations": [push, {"type": "ack", "partitionId": pid, "status": "completed"}]}),
            "operations[1].transactionId",
        ),
        (
            json!({"operations": [push, {"type": "ack", "transactionId": "m", "partitionId": "x", "status": "completed"}]}),
            "operations[1].partitionId",
        ),
        (
            json!({"operations": [push, {"type": "ack", "transactionId": "m", "partitionId": pid, "status": "done"}]}),
            "operations[1].status",
        ),
        (
            json!({"operations": [push, {"type": "ack", "transactionId": "m", "partitionId": pid, "status": "completed", "leaseId": 5}]}),
            "operations[1].leaseId",
        ),
        (
            json!({"operations": [push], "requiredLeases": "l"}),
            "requiredLeases",
        ),
        (
            json!({"operations": [push], "requiredLeases": ["l", 1]}),
            "requiredLeases[1]",
        ),
        (
            json!({"operations": [push], "requiredLeases": [""]}),
            "requiredLeases[0]",
        ),
    ];
    for (body, field) in cases {
        let r = txn(&t.http, body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.text);
        let error = r.json["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with(field),
            "{body}: `{error}` should name {field}"
        );
    }
    for raw in [&b"not json"[..], b"[1]", b""] {
        let r = t.http.post_raw("/api/v1/transaction", raw).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    }
    let db = t.sql().await;
    for table in ["queues", "log_partitions", "log_segments", "log_consumers"] {
        let n: i64 = db
            .query_one(&format!("SELECT count(*) FROM queen.{table}"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "queen.{table} was written");
    }
}

// ---------------------------------------------------------------------------------------------
// lock order under concurrency

/// Transactions acking two partitions in opposite operation orders, plain acks of the same
/// consumer rows and plain pushes to the same partitions, all at once, many times: no deadlock
/// (a deadlock would answer 5xx), every transaction commits, and every consumer row ends with
/// total_consumed == committed + 1 (no lost or double-counted offset).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_transactions_and_plain_acks_keep_lock_order() {
    let t = TestBroker::start().await;
    const ROUNDS: usize = 30;
    let n = 2 * ROUNDS;
    let a: Vec<String> = (0..n).map(|i| format!("a-{i}")).collect();
    let b: Vec<String> = (0..n).map(|i| format!("b-{i}")).collect();
    let pa: Vec<(&str, &str)> = a.iter().map(|x| ("p0", x.as_str())).collect();
    let pb: Vec<(&str, &str)> = b.iter().map(|x| ("p1", x.as_str())).collect();
    t.http.push("lock", &pa).await;
    t.http.push("lock", &pb).await;
    let db = t.sql().await;
    let pid = |name: &'static str| {
        let db = &db;
        async move {
            db.query_one(
                "SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id \
                 WHERE q.name = 'lock' AND p.name = $1",
                &[&name],
            )
            .await
            .unwrap()
            .get::<_, Uuid>(0)
            .to_string()
        }
    };
    let (p0, p1) = (pid("p0").await, pid("p1").await);
    // Group "h" holds a lease on each partition's whole backlog for the whole test.
    let (_, lease_h0, _) = pop(&t.http, "lock", "p0", "batch=1000&consumerGroup=h").await;
    let (_, lease_h1, _) = pop(&t.http, "lock", "p1", "batch=1000&consumerGroup=h").await;
    let ack = |txn: &str, pid: &str| json!({"type": "ack", "transactionId": txn, "partitionId": pid, "status": "completed", "consumerGroup": "g"});

    for r in 0..ROUNDS {
        let (lo, hi) = (2 * r, 2 * r + 1);
        // t1 and t2 push to partitions of their own (so no partition lock serialises them) and
        // take the two consumer rows in opposite operation orders; t3 takes both partition rows
        // of the acked partitions, then a consumer row.
        let t1 = json!({"operations": [
            push_op("lock-side", "s1", &[&format!("t1-{r}")]),
            ack(&a[lo], &p0),
            ack(&b[lo], &p1),
        ]});
        let t2 = json!({"operations": [
            ack(&b[hi], &p1),
            push_op("lock-side", "s2", &[&format!("t2-{r}")]),
            ack(&a[hi], &p0),
        ]});
        let t3 = json!({"operations": [
            ack(&a[lo], &p0),
            push_op("lock", "p1", &[&format!("t3-{r}")]),
            push_op("lock", "p0", &[&format!("t3x-{r}")]),
        ]});
        // t4 and t5 each require the lease of one row and ack (partially, keeping the lease)
        // through the other: their consumer rows are only locked in one order when the
        // required leases' rows and the acks' rows are locked together, sorted.
        let t4 = json!({"operations": [
            {"type": "ack", "transactionId": a[r], "partitionId": p0, "status": "completed",
             "consumerGroup": "h", "leaseId": lease_h0},
        ], "requiredLeases": [lease_h1]});
        let t5 = json!({"operations": [
            {"type": "ack", "transactionId": b[r], "partitionId": p1, "status": "completed",
             "consumerGroup": "h", "leaseId": lease_h1},
        ], "requiredLeases": [lease_h0]});
        let plain_ack = json!({"consumerGroup": "g", "acknowledgments": [
            {"transactionId": a[hi], "partitionId": p0, "status": "completed"},
            {"transactionId": b[lo], "partitionId": p1, "status": "completed"},
        ]});
        let plain_push = json!({"items": [
            {"queue": "lock", "partition": "p1", "transactionId": format!("pp1-{r}"), "payload": 1},
            {"queue": "lock", "partition": "p0", "transactionId": format!("pp0-{r}"), "payload": 0},
        ]});
        let (r1, r2, r3, r4, r5, r6, r7) = tokio::join!(
            txn(&t.http, t1),
            txn(&t.http, t2),
            txn(&t.http, t3),
            txn(&t.http, t4),
            txn(&t.http, t5),
            t.http.post("/api/v1/ack/batch", plain_ack),
            t.http.post("/api/v1/push", plain_push),
        );
        committed(&r1);
        committed(&r2);
        committed(&r3);
        committed(&r4);
        committed(&r5);
        assert_eq!(r6.status, StatusCode::OK, "{}", r6.text);
        for item in r6.json.as_array().unwrap() {
            assert_eq!(item["success"], json!(true), "{}", r6.text);
        }
        assert_eq!(r7.status, StatusCode::CREATED, "{}", r7.text);
    }

    for pid in [&p0, &p1] {
        let (committed, total, _) = cursor(&t, pid, "g").await.unwrap();
        assert_eq!(committed, (n - 1) as i64);
        assert_eq!(total, committed + 1, "lost or double-counted offsets");
        let (committed, total, worker) = cursor(&t, pid, "h").await.unwrap();
        assert_eq!(committed, (ROUNDS - 1) as i64);
        assert_eq!(total, committed + 1, "lost or double-counted offsets");
        assert!(worker.is_some(), "the partial acks kept the lease");
    }
    // Every push committed exactly once.
    assert_eq!(messages_in(&t, "lock").await, (2 * n + 4 * ROUNDS) as i64);
    assert_eq!(messages_in(&t, "lock-side").await, (2 * ROUNDS) as i64);
}
