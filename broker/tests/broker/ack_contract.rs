//! The ack contract of `ack-internals.md`, one test per table row and per rule, through the real
//! HTTP server against real PostgreSQL (and, where the contract is about a procedure's answer,
//! by calling the procedure directly).

use std::time::Duration;

use crate::common::{txns, Reply, TestBroker, QM};
use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// helpers

/// A popped batch: its lease, partition and messages.
struct Batch {
    lease: String,
    pid: String,
    txns: Vec<String>,
    attempt: i64,
}

async fn configure(t: &TestBroker, queue: &str, options: Value) {
    let r = t
        .http
        .post(
            "/api/v1/configure",
            json!({"queue": queue, "options": options}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "configure: {}", r.text);
}

async fn push(t: &TestBroker, queue: &str, ids: &[&str]) -> Vec<Value> {
    let items: Vec<(&str, &str)> = ids.iter().map(|x| ("p", *x)).collect();
    t.http.push(queue, &items).await
}

async fn pop(t: &TestBroker, queue: &str, query: &str) -> Batch {
    let r = t.http.pop(queue, "p", query).await;
    assert_eq!(r.status, StatusCode::OK, "pop: {}", r.text);
    batch_of(&r)
}

fn batch_of(r: &Reply) -> Batch {
    let m = r.json["messages"].as_array().unwrap();
    Batch {
        lease: r.json["leaseId"].as_str().unwrap().to_string(),
        pid: r.json["partitionId"].as_str().unwrap().to_string(),
        txns: txns(r),
        attempt: m[0]["deliveryAttempt"].as_i64().unwrap(),
    }
}

/// A batch ack: `(transactionId, status)` items on one partition under `lease` ("" = none).
async fn ack(t: &TestBroker, pid: &str, lease: &str, items: &[(&str, &str)]) -> Vec<Value> {
    let acks: Vec<Value> = items
        .iter()
        .map(|(x, s)| {
            let mut v = json!({"transactionId": x, "partitionId": pid, "status": s});
            if !lease.is_empty() {
                v["leaseId"] = json!(lease);
            }
            v
        })
        .collect();
    let r = t
        .http
        .post("/api/v1/ack/batch", json!({ "acknowledgments": acks }))
        .await;
    assert_eq!(r.status, StatusCode::OK, "ack: {}", r.text);
    let a = r.json.as_array().unwrap().clone();
    assert_eq!(a.len(), items.len());
    for (i, x) in a.iter().enumerate() {
        assert_eq!(x["index"], i);
        assert_eq!(x["transactionId"], items[i].0);
    }
    a
}

/// The consumer row, as plain values.
#[derive(Debug, PartialEq)]
struct Cursor {
    committed: i64,
    batch_end: Option<i64>,
    worker: Option<String>,
    retry: i32,
    attempt: i32,
    total: i64,
}

async fn cursor(t: &TestBroker, pid: &str, group: &str) -> Cursor {
    let db = t.sql().await;
    let r = db
        .query_one(
            "SELECT committed, batch_end, worker_id, batch_retry_count, attempt_count, \
             total_consumed FROM queen.log_consumers WHERE partition_id = $1 AND consumer_group = $2",
            &[&Uuid::parse_str(pid).unwrap(), &group],
        )
        .await
        .unwrap();
    Cursor {
        committed: r.get(0),
        batch_end: r.get(1),
        worker: r.get(2),
        retry: r.get(3),
        attempt: r.get(4),
        total: r.get(5),
    }
}

async fn expire_leases(t: &TestBroker) {
    t.sql()
        .await
        .execute(
            "UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1s' \
             WHERE batch_end IS NOT NULL",
            &[],
        )
        .await
        .unwrap();
}

async fn dlq_rows(t: &TestBroker) -> Vec<tokio_postgres::Row> {
    t.sql()
        .await
        .query(
            "SELECT \"offset\", message_id, transaction_id, payload, error, retry_count, \
             consumer_group FROM queen.log_dlq ORDER BY \"offset\"",
            &[],
        )
        .await
        .unwrap()
}

fn hash_hex(txn: &str) -> String {
    hex_of(&ackbench_wire::txn_hash(txn))
}

fn hex_of(h: &[u8]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// Calls `queen.log_ack_by_hash_v1` directly.
async fn by_hash(
    t: &TestBroker,
    pid: &str,
    group: &str,
    worker: &str,
    items: &[(&str, &str)],
) -> Value {
    let hashes: Vec<Vec<u8>> = items
        .iter()
        .map(|(x, _)| ackbench_wire::txn_hash(x).to_vec())
        .collect();
    let statuses: Vec<&str> = items.iter().map(|(_, s)| *s).collect();
    t.sql()
        .await
        .query_one(
            "SELECT queen.log_ack_by_hash_v1($1, $2, $3, $4, $5)",
            &[
                &Uuid::parse_str(pid).unwrap(),
                &group,
                &worker,
                &hashes,
                &statuses,
            ],
        )
        .await
        .unwrap()
        .get(0)
}

fn ok(x: &Value) -> bool {
    x["success"] == json!(true)
}

fn err(x: &Value) -> &str {
    x["error"].as_str().unwrap_or("")
}

// ---------------------------------------------------------------------------------------------
// The three honesty lists

#[tokio::test]
async fn noop_list_below_cursor_completed_is_a_harmless_duplicate() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b", "c"]).await;
    let b = pop(&t, "q", "batch=3").await;
    let r = ack(&t, &b.pid, &b.lease, &[("a", "completed")]).await;
    assert!(ok(&r[0]) && r[0]["noop"] == json!(false));
    // again, under the same (still live) lease: below the cursor now
    let r = ack(
        &t,
        &b.pid,
        &b.lease,
        &[("a", "completed"), ("b", "completed")],
    )
    .await;
    assert!(ok(&r[0]), "{r:?}");
    assert_eq!(r[0]["noop"], json!(true));
    assert_eq!(r[0]["error"], Value::Null);
    assert!(ok(&r[1]) && r[1]["noop"] == json!(false));
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!((c.committed, c.batch_end), (1, Some(2)));
    // the procedure's own list: lowercase 32-char hex tokens
    let v = by_hash(
        &t,
        &b.pid,
        QM,
        &b.lease,
        &[("a", "completed"), ("b", "completed")],
    )
    .await;
    assert_eq!(v["noopHashes"], json!([hash_hex("a"), hash_hex("b")]));
    assert_eq!(v["acked"], 0);
    let tok = v["noopHashes"][0].as_str().unwrap();
    assert!(
        tok.len() == 32
            && tok
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_uppercase())
    );
}

#[tokio::test]
async fn stale_list_below_cursor_nack_is_already_committed() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b", "c"]).await;
    let b = pop(&t, "q", "batch=3").await;
    ack(&t, &b.pid, &b.lease, &[("b", "completed")]).await;
    for status in ["failed", "dlq", "retry"] {
        let r = ack(&t, &b.pid, &b.lease, &[("a", status)]).await;
        assert!(!ok(&r[0]), "{status}: {r:?}");
        assert_eq!(err(&r[0]), "already committed");
        assert_eq!(r[0]["noop"], json!(false));
        assert_eq!(r[0]["dlq"], json!(false));
    }
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!((c.committed, c.batch_end, c.retry), (1, Some(2), 0));
    assert!(dlq_rows(&t).await.is_empty());
    let v = by_hash(&t, &b.pid, QM, &b.lease, &[("a", "failed")]).await;
    assert_eq!(v["staleHashes"], json!([hash_hex("a")]));
    assert_eq!(v["noopHashes"], json!([]));
}

#[tokio::test]
async fn unresolved_list_no_occurrence_is_unresolvable() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b"]).await;
    let b = pop(&t, "q", "batch=1").await;
    // "zzz" never existed; "b" exists but above the leased batch (a row above batch_end
    // resolves to nothing under a lease)
    let r = ack(
        &t,
        &b.pid,
        &b.lease,
        &[("zzz", "completed"), ("b", "failed"), ("a", "completed")],
    )
    .await;
    assert_eq!(err(&r[0]), "unresolvable");
    assert_eq!(err(&r[1]), "unresolvable");
    assert!(ok(&r[2]));
    assert_eq!(r[2]["leaseReleased"], json!(true));
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!((c.committed, c.retry, c.batch_end), (0, 0, None));
    let v = by_hash(&t, &b.pid, QM, "", &[("zzz", "dlq")]).await;
    assert_eq!(v["unresolvedHashes"], json!([hash_hex("zzz")]));
    assert_eq!(v["dlq"], json!(false));
}

// ---------------------------------------------------------------------------------------------
// The branches

#[tokio::test]
async fn branch_dlq_advances_prefix_keeps_lease_and_hands_off() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b", "c"]).await;
    let b = pop(&t, "q", "batch=3").await;
    // straight to the procedure: it keeps the lease and hands the offset to the broker
    let v = by_hash(
        &t,
        &b.pid,
        QM,
        &b.lease,
        &[("a", "completed"), ("b", "dlq"), ("c", "completed")],
    )
    .await;
    assert_eq!(v["ok"], json!(true));
    assert_eq!(
        (v["dlq"].clone(), v["dlq_offset"].clone()),
        (json!(true), json!(1))
    );
    assert_eq!(
        (v["acked"].clone(), v["committed"].clone()),
        (json!(1), json!(0))
    );
    assert_eq!(v["lease_released"], json!(false));
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!(
        (c.committed, c.worker.as_deref()),
        (0, Some(b.lease.as_str()))
    );
    assert!(
        dlq_rows(&t).await.is_empty(),
        "SQL never files: only the broker can unpack"
    );
}

#[tokio::test]
async fn branch_dlq_through_the_broker_files_the_snapshot_and_releases() {
    let t = TestBroker::start().await;
    let pushed = push(&t, "q", &["a", "b", "c"]).await;
    let b = pop(&t, "q", "batch=3").await;
    let acks = json!({"acknowledgments": [
        {"transactionId": "a", "partitionId": b.pid, "status": "completed", "leaseId": b.lease},
        {"transactionId": "b", "partitionId": b.pid, "status": "dlq", "leaseId": b.lease,
         "error": "cannot parse b"},
        {"transactionId": "c", "partitionId": b.pid, "status": "completed", "leaseId": b.lease},
    ]});
    let r = t.http.post("/api/v1/ack/batch", acks).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = r.json.as_array().unwrap();
    assert!(ok(&r[0]) && r[0]["dlq"] == json!(false));
    assert!(ok(&r[1]) && r[1]["dlq"] == json!(true), "{r:?}");
    assert!(
        ok(&r[2]) && r[2]["dlq"] == json!(false),
        "c sits above the signal: redelivers"
    );
    assert!(r.iter().all(|x| x["leaseReleased"] == json!(true)));
    let rows = dlq_rows(&t).await;
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.get::<_, i64>(0), 1);
    assert_eq!(
        row.get::<_, Uuid>(1).to_string(),
        pushed[1]["message_id"].as_str().unwrap()
    );
    assert_eq!(row.get::<_, String>(2), "b");
    assert_eq!(row.get::<_, Value>(3), json!({"t": "b"}));
    assert_eq!(
        row.get::<_, Option<String>>(4).as_deref(),
        Some("cannot parse b")
    );
    assert_eq!(row.get::<_, i32>(5), 0);
    assert_eq!(row.get::<_, String>(6), QM);
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!(
        c,
        Cursor {
            committed: 1,
            batch_end: None,
            worker: None,
            retry: 0,
            attempt: 0,
            total: 2
        }
    );
    // c redelivers, as a fresh batch
    let again = pop(&t, "q", "batch=3").await;
    assert_eq!(
        (again.txns.clone(), again.attempt),
        (vec!["c".to_string()], 1)
    );

    // a second filing call for the same hand-off is harmless: the lease is gone
    let db = t.sql().await;
    let v: Value = db
        .query_one(
            "SELECT queen.log_dlq_head_v3($1, $2, $3, 1, $4, 'b', '{}'::json, false, 'again')",
            &[
                &Uuid::parse_str(&b.pid).unwrap(),
                &QM,
                &b.lease,
                &Uuid::now_v7(),
            ],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(v["ok"], json!(false));
    assert_eq!(v["error"], json!("invalid or expired lease"));
    assert_eq!(dlq_rows(&t).await.len(), 1);
    let c2 = cursor(&t, &b.pid, QM).await;
    assert_eq!((c2.committed, c2.worker), (1, Some(again.lease.clone())));
}

#[tokio::test]
async fn branch_failed_with_budget_releases_and_charges_once() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b", "c", "d"]).await;
    let b = pop(&t, "q", "batch=4").await;
    let r = ack(
        &t,
        &b.pid,
        &b.lease,
        &[
            ("a", "completed"),
            ("b", "failed"),
            ("c", "failed"),
            ("d", "completed"),
        ],
    )
    .await;
    assert!(
        r.iter().all(|x| ok(x) && x["leaseReleased"] == json!(true)),
        "{r:?}"
    );
    assert!(r.iter().all(|x| x["dlq"] == json!(false)));
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!(
        (c.committed, c.batch_end, c.retry),
        (0, None, 1),
        "charged once per call"
    );
    let again = pop(&t, "q", "batch=4").await;
    assert_eq!(again.txns, ["b", "c", "d"]);
    assert_eq!(again.attempt, 1, "a new span start (the prefix advanced)");
    // the same head fails again: the same span redelivers, attempt 2
    ack(&t, &again.pid, &again.lease, &[("b", "failed")]).await;
    let third = pop(&t, "q", "batch=4").await;
    assert_eq!((third.txns.len(), third.attempt), (3, 2));
    assert_eq!(cursor(&t, &b.pid, QM).await.retry, 2);
    assert!(dlq_rows(&t).await.is_empty());
}

#[tokio::test]
async fn branch_failed_exhausted_with_dlq_hands_off_the_poison() {
    let t = TestBroker::start().await;
    configure(&t, "q", json!({"retryLimit": 1})).await;
    push(&t, "q", &["a", "b"]).await;
    let b = pop(&t, "q", "batch=2").await;
    let r = ack(&t, &b.pid, &b.lease, &[("a", "failed")]).await;
    assert!(ok(&r[0]) && r[0]["dlq"] == json!(false));
    assert_eq!(cursor(&t, &b.pid, QM).await.retry, 1);
    let b2 = pop(&t, "q", "batch=2").await;
    // exhausted: 1 charge taken, limit 1: the next failed dead-letters (the procedure keeps
    // the lease and the broker files under it)
    let v = by_hash(&t, &b2.pid, QM, &b2.lease, &[("a", "failed")]).await;
    assert_eq!(
        (
            v["branch"].clone(),
            v["dlq"].clone(),
            v["dlq_offset"].clone()
        ),
        (json!("failed_dlq"), json!(true), json!(0))
    );
    assert_eq!(
        cursor(&t, &b.pid, QM).await.worker.as_deref(),
        Some(b2.lease.as_str())
    );
    // through the broker (the SQL call above changed nothing but the hand-off answer)
    let r = ack(
        &t,
        &b2.pid,
        &b2.lease,
        &[("a", "failed"), ("b", "completed")],
    )
    .await;
    assert!(ok(&r[0]) && r[0]["dlq"] == json!(true), "{r:?}");
    assert!(ok(&r[1]) && r[1]["dlq"] == json!(false));
    let rows = dlq_rows(&t).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i64>(0), 0);
    assert_eq!(
        rows[0].get::<_, i32>(5),
        1,
        "snapshot of the retry budget consumed"
    );
    assert_eq!(
        rows[0].get::<_, Option<String>>(4).as_deref(),
        Some("retry limit exhausted")
    );
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!(
        (c.committed, c.batch_end, c.retry, c.attempt),
        (0, None, 0, 0)
    );
    let b3 = pop(&t, "q", "batch=2").await;
    assert_eq!((b3.txns.clone(), b3.attempt), (vec!["b".to_string()], 1));
}

#[tokio::test]
async fn branch_failed_exhausted_without_dlq_drops_the_poison() {
    let t = TestBroker::start().await;
    configure(
        &t,
        "q",
        json!({"retryLimit": 0, "deadLetterQueue": false, "dlqAfterMaxRetries": false}),
    )
    .await;
    push(&t, "q", &["a", "b", "c"]).await;
    let b = pop(&t, "q", "batch=3").await;
    let r = ack(
        &t,
        &b.pid,
        &b.lease,
        &[("a", "completed"), ("b", "failed"), ("c", "completed")],
    )
    .await;
    assert!(
        r.iter().all(|x| ok(x) && x["leaseReleased"] == json!(true)),
        "{r:?}"
    );
    assert!(r.iter().all(|x| x["dlq"] == json!(false)));
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!(
        (c.committed, c.batch_end, c.retry, c.attempt),
        (1, None, 0, 0)
    );
    assert!(dlq_rows(&t).await.is_empty());
    // one DLQ flag alone still enables the DLQ
    configure(&t, "q", json!({"dlqAfterMaxRetries": true})).await;
    let b2 = pop(&t, "q", "batch=3").await;
    assert_eq!(b2.txns, ["c"]);
    let r = ack(&t, &b2.pid, &b2.lease, &[("c", "failed")]).await;
    assert_eq!(r[0]["dlq"], json!(true));
    assert_eq!(dlq_rows(&t).await.len(), 1);
}

#[tokio::test]
async fn branch_retry_releases_without_charge() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b", "c"]).await;
    let b = pop(&t, "q", "batch=3").await;
    let r = ack(&t, &b.pid, &b.lease, &[("b", "retry"), ("a", "completed")]).await;
    assert!(r.iter().all(|x| ok(x) && x["leaseReleased"] == json!(true)));
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!((c.committed, c.batch_end, c.retry), (0, None, 0));
    let b2 = pop(&t, "q", "batch=3").await;
    assert_eq!(b2.txns, ["b", "c"]);
    ack(&t, &b2.pid, &b2.lease, &[("b", "retry")]).await;
    let b3 = pop(&t, "q", "batch=3").await;
    assert_eq!(b3.attempt, 2);
    assert_eq!(
        cursor(&t, &b.pid, QM).await.retry,
        0,
        "retry is budget-free"
    );
}

#[tokio::test]
async fn branch_all_completed_to_batch_end_releases_and_resets() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b", "c"]).await;
    let b = pop(&t, "q", "batch=3").await;
    ack(&t, &b.pid, &b.lease, &[("a", "failed")]).await;
    let b2 = pop(&t, "q", "batch=3").await;
    assert_eq!(b2.attempt, 2);
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!((c.retry, c.attempt), (1, 2));
    let r = ack(
        &t,
        &b2.pid,
        &b2.lease,
        &[("c", "completed"), ("a", "completed"), ("b", "completed")],
    )
    .await;
    assert!(r
        .iter()
        .all(|x| ok(x) && x["leaseReleased"] == json!(true) && x["noop"] == json!(false)));
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!(
        c,
        Cursor {
            committed: 2,
            batch_end: None,
            worker: None,
            retry: 0,
            attempt: 0,
            total: 3
        }
    );
    push(&t, "q", &["d"]).await;
    assert_eq!(pop(&t, "q", "batch=3").await.attempt, 1);
}

#[tokio::test]
async fn branch_all_completed_partial_keeps_the_lease() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b", "c"]).await;
    let b = pop(&t, "q", "batch=3").await;
    let r = ack(
        &t,
        &b.pid,
        &b.lease,
        &[("a", "completed"), ("b", "completed")],
    )
    .await;
    assert!(r
        .iter()
        .all(|x| ok(x) && x["leaseReleased"] == json!(false)));
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!(
        (c.committed, c.batch_end, c.worker.as_deref(), c.attempt),
        (1, Some(2), Some(b.lease.as_str()), 1)
    );
    assert_eq!(
        t.http.pop("q", "p", "batch=3").await.status,
        StatusCode::NO_CONTENT
    );
    let r = ack(&t, &b.pid, &b.lease, &[("c", "completed")]).await;
    assert!(ok(&r[0]) && r[0]["leaseReleased"] == json!(true));
    assert_eq!(cursor(&t, &b.pid, QM).await.committed, 2);
}

// ---------------------------------------------------------------------------------------------
// The rules in the prose

#[tokio::test]
async fn an_explicit_signal_is_never_skipped() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b", "c", "d", "e"]).await;
    let b = pop(&t, "q", "batch=5").await;
    // completed positions above the signal, in either order, never carry the cursor past it
    let r = ack(
        &t,
        &b.pid,
        &b.lease,
        &[("e", "completed"), ("c", "retry"), ("d", "completed")],
    )
    .await;
    assert!(r.iter().all(ok), "{r:?}");
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!(
        c.committed, 1,
        "clamped below c; a and b were silent gaps below e"
    );
    let b2 = pop(&t, "q", "batch=5").await;
    assert_eq!(b2.txns, ["c", "d", "e"], "d and e redeliver");
    // ties on one offset: dlq beats failed beats retry
    let v = by_hash(
        &t,
        &b2.pid,
        QM,
        &b2.lease,
        &[("c", "retry"), ("c", "failed"), ("c", "dlq")],
    )
    .await;
    assert_eq!(
        (v["signal"].clone(), v["branch"].clone()),
        (json!("dlq"), json!("dlq"))
    );
    // the same transactionId acked completed and failed in one call: the signal wins
    let t2 = TestBroker::start().await;
    push(&t2, "q", &["x", "y"]).await;
    let b = pop(&t2, "q", "batch=2").await;
    ack(
        &t2,
        &b.pid,
        &b.lease,
        &[("x", "completed"), ("y", "completed"), ("x", "failed")],
    )
    .await;
    let c = cursor(&t2, &b.pid, QM).await;
    assert_eq!((c.committed, c.retry), (-1, 1));
}

#[tokio::test]
async fn silent_gaps_are_implicitly_completed() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b", "c", "d"]).await;
    let b = pop(&t, "q", "batch=4").await;
    let r = ack(&t, &b.pid, &b.lease, &[("c", "completed")]).await;
    assert!(ok(&r[0]) && r[0]["leaseReleased"] == json!(false));
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!((c.committed, c.total), (2, 3));
    // a signal alone advances nothing (no completed position reaches past the cursor)
    let v = by_hash(&t, &b.pid, QM, &b.lease, &[("d", "retry")]).await;
    assert_eq!(
        (v["acked"].clone(), v["committed"].clone()),
        (json!(0), json!(2))
    );
}

#[tokio::test]
async fn a_repush_below_the_cursor_never_shadows_the_copy_being_acked() {
    let t = TestBroker::start().await;
    configure(&t, "q", json!({"dedupWindowSeconds": 0})).await;
    push(&t, "q", &["a", "b"]).await;
    let b = pop(&t, "q", "batch=2").await;
    ack(
        &t,
        &b.pid,
        &b.lease,
        &[("a", "completed"), ("b", "completed")],
    )
    .await;
    let again = push(&t, "q", &["a"]).await;
    assert_eq!(again[0]["status"], "queued");
    let b2 = pop(&t, "q", "batch=2").await;
    assert_eq!(b2.txns, ["a"]);
    let r = ack(&t, &b2.pid, &b2.lease, &[("a", "completed")]).await;
    assert!(ok(&r[0]), "{r:?}");
    assert_eq!(
        r[0]["noop"],
        json!(false),
        "the in-span copy (offset 2) is the one acked"
    );
    assert_eq!(r[0]["leaseReleased"], json!(true));
    assert_eq!(cursor(&t, &b.pid, QM).await.committed, 2);
    // and a nack of the re-pushed copy acts on it, not on the committed original
    push(&t, "q", &["b"]).await;
    let b3 = pop(&t, "q", "batch=2").await;
    let r = ack(&t, &b3.pid, &b3.lease, &[("b", "failed")]).await;
    assert!(ok(&r[0]), "{r:?}");
    assert_eq!(cursor(&t, &b.pid, QM).await.retry, 1);
}

#[tokio::test]
async fn a_lease_less_ack_advances_the_cursor() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b", "c", "d"]).await;
    // no lease at all: nobody popped; the consumer row is created at log_start - 1
    let pid = pop(&t, "q", "batch=2").await.pid;
    expire_leases(&t).await;
    let r = ack(&t, &pid, "", &[("b", "completed")]).await;
    assert!(ok(&r[0]), "{r:?}");
    assert_eq!(
        r[0]["leaseReleased"],
        json!(true),
        "it reached the (expired) lease's end"
    );
    let c = cursor(&t, &pid, QM).await;
    assert_eq!((c.committed, c.batch_end, c.worker), (1, None, None));
    // a live lease: a lease-less partial ack keeps it, reaching its batch_end releases it
    let b = pop(&t, "q", "batch=2").await;
    assert_eq!(b.txns, ["c", "d"]);
    let r = ack(&t, &b.pid, "", &[("c", "completed")]).await;
    assert!(ok(&r[0]) && r[0]["leaseReleased"] == json!(false));
    assert_eq!(
        cursor(&t, &pid, QM).await.worker.as_deref(),
        Some(b.lease.as_str())
    );
    let r = ack(&t, &b.pid, "", &[("d", "completed"), ("c", "completed")]).await;
    assert!(ok(&r[0]) && r[0]["leaseReleased"] == json!(true));
    assert_eq!(r[1]["noop"], json!(true));
    let c = cursor(&t, &pid, QM).await;
    assert_eq!((c.committed, c.batch_end, c.total), (3, None, 4));
    // beyond any lease: a lease-less ack reaches up to the partition's last offset
    push(&t, "q", &["e", "f"]).await;
    ack(&t, &pid, "", &[("f", "completed")]).await;
    assert_eq!(cursor(&t, &pid, QM).await.committed, 5);
    // the holder of a lease a lease-less ack completed is refused afterwards
    push(&t, "q", &["g"]).await;
    let b = pop(&t, "q", "batch=2").await;
    ack(&t, &pid, "", &[("g", "completed")]).await;
    let r = ack(&t, &b.pid, &b.lease, &[("g", "completed")]).await;
    assert_eq!(err(&r[0]), "invalid or expired lease");
}

#[tokio::test]
async fn a_lease_less_ack_creates_a_missing_cursor() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b"]).await;
    let b = pop(&t, "q", "batch=2&autoAck=true").await;
    // group g never popped: its cursor starts at the retained backlog
    let acks = json!({"consumerGroup": "g", "acknowledgments": [
        {"transactionId": "a", "partitionId": b.pid, "status": "completed"}]});
    let r = t.http.post("/api/v1/ack/batch", acks).await;
    assert!(ok(&r.json[0]), "{}", r.text);
    assert_eq!(cursor(&t, &b.pid, "g").await.committed, 0);
    // under a leaseId there is no lease to validate: refused, nothing created
    let acks = json!({"consumerGroup": "h", "acknowledgments": [
        {"transactionId": "a", "partitionId": b.pid, "status": "completed", "leaseId": "0190aaaa-0000-7000-8000-000000000000"}]});
    let r = t.http.post("/api/v1/ack/batch", acks).await;
    assert_eq!(err(&r.json[0]), "invalid or expired lease");
    let n: i64 = t
        .sql()
        .await
        .query_one(
            "SELECT count(*) FROM queen.log_consumers WHERE consumer_group = 'h'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn an_ack_after_the_sidecar_purge_is_unresolvable_and_redelivers() {
    let t = TestBroker::start_with(|c| {
        c.txns_min_retention_seconds = 0;
        c.retention_interval_ms = 3_600_000;
    })
    .await;
    configure(
        &t,
        "q",
        json!({"dedupWindowSeconds": 0, "completedRetentionSeconds": 0}),
    )
    .await;
    push(&t, "q", &["a", "b"]).await;
    let b = pop(&t, "q", "batch=2").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    ackbench_broker::retention::pass(t.broker.app())
        .await
        .unwrap();
    let txns_start: i64 = t
        .sql()
        .await
        .query_one("SELECT txns_start FROM queen.log_partitions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(txns_start, 2, "the sidecar is purged");
    let r = ack(&t, &b.pid, &b.lease, &[("a", "completed"), ("b", "failed")]).await;
    assert!(
        r.iter().all(|x| !ok(x) && err(x) == "unresolvable"),
        "{r:?}"
    );
    let r = ack(&t, &b.pid, "", &[("b", "dlq")]).await;
    assert_eq!(err(&r[0]), "unresolvable");
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!(
        (c.committed, c.retry),
        (-1, 0),
        "the cursor stops before them"
    );
    assert!(dlq_rows(&t).await.is_empty());
    expire_leases(&t).await;
    let b2 = pop(&t, "q", "batch=2").await;
    assert_eq!(
        (b2.txns.clone(), b2.attempt),
        (vec!["a".into(), "b".into()], 2)
    );
}

#[tokio::test]
async fn a_dlq_hand_off_survives_a_segment_retained_away() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a"]).await;
    push(&t, "q", &["b"]).await;
    let b = pop(&t, "q", "batch=9").await;
    t.sql()
        .await
        .execute("DELETE FROM queen.log_segments WHERE base_offset = 1", &[])
        .await
        .unwrap();
    let acks = json!({"acknowledgments": [
        {"transactionId": "a", "partitionId": b.pid, "status": "completed", "leaseId": b.lease},
        {"transactionId": "b", "partitionId": b.pid, "status": "dlq", "leaseId": b.lease,
         "error": "poison"}]});
    let r = t.http.post("/api/v1/ack/batch", acks).await;
    assert!(
        ok(&r.json[1]) && r.json[1]["dlq"] == json!(true),
        "{}",
        r.text
    );
    let rows = dlq_rows(&t).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i64>(0), 1);
    assert_eq!(rows[0].get::<_, Value>(3), Value::Null);
    assert_eq!(rows[0].get::<_, String>(2), "b");
    let reason = rows[0].get::<_, String>(4);
    assert!(
        reason.starts_with("poison") && reason.contains("retention"),
        "{reason}"
    );
    assert_eq!(rows[0].get::<_, Uuid>(1), Uuid::nil());
    assert_eq!(cursor(&t, &b.pid, QM).await.committed, 1);
}

#[tokio::test]
async fn the_retry_budget_is_charged_only_by_failed_never_by_lease_expiry() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b"]).await;
    let b = pop(&t, "q", "batch=2&leaseSeconds=1").await;
    assert_eq!(b.attempt, 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let b2 = pop(&t, "q", "batch=2&leaseSeconds=1").await;
    assert_eq!(b2.attempt, 2);
    assert_eq!(cursor(&t, &b.pid, QM).await.retry, 0);
    // the late ack of the expired holder is refused and charges nothing either
    let r = ack(&t, &b.pid, &b.lease, &[("a", "failed")]).await;
    assert_eq!(err(&r[0]), "invalid or expired lease");
    let r = ack(&t, &b2.pid, &b2.lease, &[("a", "failed")]).await;
    assert!(ok(&r[0]));
    let b3 = pop(&t, "q", "batch=2").await;
    assert_eq!(b3.attempt, 3);
    expire_leases(&t).await;
    let b4 = pop(&t, "q", "batch=2").await;
    assert_eq!(b4.attempt, 4);
    assert_eq!(cursor(&t, &b.pid, QM).await.retry, 1);
}

#[tokio::test]
async fn bad_input_is_400_naming_the_field_and_changes_nothing() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b"]).await;
    let b = pop(&t, "q", "batch=2").await;
    let good = json!({"transactionId": "a", "partitionId": b.pid, "status": "completed",
                      "leaseId": b.lease});
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/api/v1/ack",
            json!({"partitionId": b.pid, "status": "completed"}),
            "transactionId",
        ),
        (
            "/api/v1/ack",
            json!({"transactionId": "a", "status": "completed"}),
            "partitionId",
        ),
        (
            "/api/v1/ack",
            json!({"transactionId": "a", "partitionId": "p-1", "status": "completed"}),
            "partitionId",
        ),
        (
            "/api/v1/ack",
            json!({"transactionId": "a", "partitionId": b.pid, "status": "done"}),
            "status",
        ),
        (
            "/api/v1/ack",
            json!({"transactionId": "a", "partitionId": b.pid}),
            "status",
        ),
        (
            "/api/v1/ack",
            json!({"transactionId": 7, "partitionId": b.pid, "status": "completed"}),
            "transactionId",
        ),
        (
            "/api/v1/ack",
            json!({"transactionId": "a", "partitionId": b.pid, "status": "completed",
                              "leaseId": 5}),
            "leaseId",
        ),
        (
            "/api/v1/ack",
            json!({"transactionId": "a", "partitionId": b.pid, "status": "completed",
                              "consumerGroup": ""}),
            "consumerGroup",
        ),
        ("/api/v1/ack/batch", json!({}), "acknowledgments"),
        (
            "/api/v1/ack/batch",
            json!({"acknowledgments": {}}),
            "acknowledgments",
        ),
        (
            "/api/v1/ack/batch",
            json!({"acknowledgments": [good, 3]}),
            "acknowledgments[1]",
        ),
        (
            "/api/v1/ack/batch",
            json!({"acknowledgments": [good, {"transactionId": "b", "partitionId": b.pid,
                                          "status": "FAILED"}]}),
            "acknowledgments[1].status",
        ),
        (
            "/api/v1/ack/batch",
            json!({"consumerGroup": 1, "acknowledgments": [good]}),
            "consumerGroup",
        ),
    ];
    for (path, body, field) in cases {
        let r = t.http.post(path, body.clone()).await;
        assert_eq!(
            r.status,
            StatusCode::BAD_REQUEST,
            "{path} {body}: {}",
            r.text
        );
        let msg = r.json["error"].as_str().unwrap_or_default();
        assert!(
            msg.contains(field),
            "{path} {body}: `{msg}` should name {field}"
        );
    }
    for raw in [&b"not json"[..], b"[1]", b""] {
        let r = t.http.post_raw("/api/v1/ack/batch", raw).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
    }
    let r = t.http.send(Method::GET, "/api/v1/ack", None, &[]).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!(
        (c.committed, c.batch_end, c.worker),
        (-1, Some(1), Some(b.lease.clone()))
    );
    let r = t
        .http
        .post("/api/v1/ack/batch", json!({"acknowledgments": []}))
        .await;
    assert_eq!((r.status, r.json.clone()), (StatusCode::OK, json!([])));
}

// ---------------------------------------------------------------------------------------------
// Wire shape, groups, tenancy, the positional procedures, cost

#[tokio::test]
async fn single_ack_answers_a_one_element_array_and_counts_the_hash_path() {
    // Accelerators off: this full-batch ack would otherwise be a registry hit.
    let t = TestBroker::start_with(|c| {
        c.ack_registry = false;
        c.ack_fusion = false;
    })
    .await;
    push(&t, "q", &["a"]).await;
    let b = pop(&t, "q", "").await;
    let r = t
        .http
        .post(
            "/api/v1/ack",
            json!({"transactionId": "a", "partitionId": b.pid, "status": "completed",
                   "leaseId": b.lease, "consumerGroup": QM, "extra": "ignored"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        r.json,
        json!([{"index": 0, "transactionId": "a", "success": true, "error": null,
                "leaseReleased": true, "dlq": false, "noop": false}])
    );
    let m = t.http.get("/metrics").await;
    assert!(
        m.text.contains("queen_acks_total{path=\"hash\"} 1"),
        "{}",
        m.text
    );
    assert!(m.text.contains("queen_messages_acked_total 1"));
}

#[tokio::test]
async fn items_group_by_partition_group_and_lease_in_request_order() {
    let t = TestBroker::start().await;
    t.http
        .push("q", &[("p", "a"), ("p", "b"), ("r", "x")])
        .await;
    let g = t.http.pop("q", "p", "batch=2&consumerGroup=g").await;
    let g = batch_of(&g);
    let qm = pop(&t, "q", "batch=2").await;
    let x = batch_of(&t.http.pop("q", "r", "consumerGroup=g").await);
    let acks = json!({"consumerGroup": "g", "acknowledgments": [
        {"transactionId": "b", "partitionId": g.pid, "status": "completed", "leaseId": g.lease},
        {"transactionId": "a", "partitionId": qm.pid, "status": "completed", "leaseId": qm.lease,
         "consumerGroup": QM},
        {"transactionId": "x", "partitionId": x.pid, "status": "completed", "leaseId": x.lease},
        {"transactionId": "a", "partitionId": g.pid, "status": "completed", "leaseId": "stale"},
    ]});
    let r = t.http.post("/api/v1/ack/batch", acks).await;
    let r = r.json.as_array().unwrap();
    assert!(ok(&r[0]) && ok(&r[1]) && ok(&r[2]), "{r:?}");
    assert_eq!(err(&r[3]), "invalid or expired lease");
    assert_eq!(r[0]["leaseReleased"], json!(true));
    assert_eq!(r[1]["leaseReleased"], json!(false));
    assert_eq!(cursor(&t, &g.pid, "g").await.committed, 1);
    assert_eq!(cursor(&t, &qm.pid, QM).await.committed, 0);
    assert_eq!(cursor(&t, &x.pid, "g").await.committed, 0);
}

#[tokio::test]
async fn a_partition_of_another_tenant_answers_as_an_unknown_one() {
    let t = TestBroker::start_with(|c| c.tenancy_header = true).await;
    let ta = "0a0a0a0a-0000-4000-8000-00000000000a";
    let tb = "0b0b0b0b-0000-4000-8000-00000000000b";
    let body = json!({"items": [{"queue": "q", "partition": "p", "transactionId": "a",
                                 "payload": 1}]});
    let r = t
        .http
        .send(
            Method::POST,
            "/api/v1/push",
            Some(body.to_string().into_bytes()),
            &[("x-queen-tenant", ta)],
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let p = t
        .http
        .send(
            Method::GET,
            "/api/v1/pop/queue/q/partition/p",
            None,
            &[("x-queen-tenant", ta)],
        )
        .await;
    let b = batch_of(&p);
    let unknown = Uuid::now_v7().to_string();
    let mut answers = Vec::new();
    for (pid, tenant) in [(&b.pid, tb), (&unknown, tb), (&unknown, ta)] {
        for lease in [b.lease.as_str(), ""] {
            let mut item = json!({"transactionId": "a", "partitionId": pid, "status": "completed"});
            if !lease.is_empty() {
                item["leaseId"] = json!(lease);
            }
            let r = t
                .http
                .send(
                    Method::POST,
                    "/api/v1/ack",
                    Some(item.to_string().into_bytes()),
                    &[("x-queen-tenant", tenant)],
                )
                .await;
            assert_eq!(r.status, StatusCode::OK);
            answers.push(r.json);
        }
    }
    assert_eq!(answers[0][0]["error"], json!("invalid or expired lease"));
    assert_eq!(answers[1][0]["error"], json!("unresolvable"));
    assert_eq!(answers[0], answers[2]);
    assert_eq!(answers[1], answers[3]);
    assert_eq!(answers[0], answers[4]);
    assert_eq!(answers[1], answers[5]);
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!((c.committed, c.worker), (-1, Some(b.lease.clone())));
    // the owner acks fine
    let item = json!({"transactionId": "a", "partitionId": b.pid, "status": "completed",
                      "leaseId": b.lease});
    let r = t
        .http
        .send(
            Method::POST,
            "/api/v1/ack",
            Some(item.to_string().into_bytes()),
            &[("x-queen-tenant", ta)],
        )
        .await;
    assert!(ok(&r.json[0]), "{}", r.text);
}

#[tokio::test]
async fn positional_procedures_validate_clamp_and_release() {
    let t = TestBroker::start().await;
    push(&t, "q", &["a", "b", "c", "d"]).await;
    let b = pop(&t, "q", "batch=3").await;
    let pid = Uuid::parse_str(&b.pid).unwrap();
    let db = t.sql().await;
    let at = |worker: String, upto: i64, ok: bool| {
        let db = &db;
        async move {
            db.query_one(
                "SELECT queen.log_ack_at_v1($1, $2, $3, $4, $5, 0)",
                &[&pid, &QM, &worker, &upto, &ok],
            )
            .await
            .unwrap()
            .get::<_, Value>(0)
        }
    };
    let v = at("other".into(), 1, true).await;
    assert_eq!(
        (v["ok"].clone(), v["error"].clone()),
        (json!(false), json!("invalid or expired lease"))
    );
    let v = at(b.lease.clone(), 3, true).await;
    assert_eq!(v["error"], json!("beyond the leased batch"));
    let v = at(b.lease.clone(), 0, true).await;
    assert_eq!(
        (
            v["ok"].clone(),
            v["acked"].clone(),
            v["lease_released"].clone()
        ),
        (json!(true), json!(1), json!(false))
    );
    let v = at(b.lease.clone(), 0, true).await;
    assert_eq!(v["acked"], json!(0), "idempotent");
    // count > 0 asserts the cursor is where the pop left it (upto - count): it moved to 0
    let moved: Value = db
        .query_one(
            "SELECT queen.log_ack_at_v1($1, $2, $3, 2, true, 3)",
            &[&pid, &QM, &b.lease],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        (moved["ok"].clone(), moved["error"].clone()),
        (json!(false), json!("cursor moved since the pop"))
    );
    let v = at(b.lease.clone(), 2, true).await;
    assert_eq!(
        (
            v["acked"].clone(),
            v["committed"].clone(),
            v["lease_released"].clone()
        ),
        (json!(2), json!(2), json!(true))
    );
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!(
        c,
        Cursor {
            committed: 2,
            batch_end: None,
            worker: None,
            retry: 0,
            attempt: 0,
            total: 3
        }
    );
    // a positional nack releases without advancing or charging
    let b2 = pop(&t, "q", "batch=3").await;
    let v = at(b2.lease.clone(), 3, false).await;
    assert_eq!(
        (
            v["ok"].clone(),
            v["acked"].clone(),
            v["lease_released"].clone()
        ),
        (json!(true), json!(0), json!(true))
    );
    let c = cursor(&t, &b.pid, QM).await;
    assert_eq!((c.committed, c.batch_end, c.retry), (2, None, 0));
    // lease-less: up to the log end, not beyond
    let v = at(String::new(), 4, true).await;
    assert_eq!(v["error"], json!("beyond the log end"));
    // by names, tenant-scoped
    let tenant = Uuid::parse_str(ackbench_wire::DEFAULT_TENANT).unwrap();
    let other = Uuid::now_v7();
    let v: Value = db
        .query_one(
            "SELECT queen.log_ack_v1($1, 'q', 'p', $2, '', 3, true, 1)",
            &[&other, &QM],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(v["error"], json!("unknown partition"));
    let v: Value = db
        .query_one(
            "SELECT queen.log_ack_v1($1, 'q', 'p', $2, '', 3, true, 1)",
            &[&tenant, &QM],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        (v["ok"].clone(), v["committed"].clone()),
        (json!(true), json!(3))
    );
    assert_eq!(cursor(&t, &b.pid, QM).await.total, 4);
}

/// The deep-partition case: an ack at the head of a long sidecar reads only the rows of the
/// leased batch (index-bounded on both sides), not the backlog above nor the history below.
#[tokio::test]
async fn a_head_ack_on_a_deep_partition_reads_only_the_batch_rows() {
    let t = TestBroker::start().await;
    push(&t, "q", &["seed"]).await;
    let db = t.sql().await;
    // 20 000 one-frame sidecar rows after the seed (offsets 1..=20000), hash = md5(offset)
    db.batch_execute(
        "INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, hashes)
         SELECT p.id, g, g, decode(md5(g::text), 'hex')
         FROM queen.log_partitions p, generate_series(1, 20000) g;
         UPDATE queen.log_partitions SET last_offset = 20000;
         INSERT INTO queen.log_consumers (partition_id, consumer_group, committed, batch_end,
                                          worker_id, lease_expires_at)
         SELECT id, 'g', 10000, 10010, 'w', now() + interval '1 hour' FROM queen.log_partitions;
         ANALYZE queen.log_txns;",
    )
    .await
    .unwrap();
    let fetched = |sql: &'static str| {
        let db = &db;
        async move {
            db.batch_execute("BEGIN").await.unwrap();
            let v: Value = db.query_one(sql, &[]).await.unwrap().get(0);
            let n: i64 = db
                .query_one(
                    "SELECT COALESCE(idx_tup_fetch, 0) + COALESCE(seq_tup_read, 0) \
                     FROM pg_stat_xact_user_tables WHERE relname = 'log_txns'",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            db.batch_execute("ROLLBACK").await.unwrap();
            (v, n)
        }
    };
    let (v, n) = fetched(
        "SELECT queen.log_ack_by_hash_v1(p.id, 'g', 'w',
             ARRAY[decode(md5('10005'), 'hex'), decode(md5('10010'), 'hex')],
             ARRAY['completed', 'completed']) FROM queen.log_partitions p",
    )
    .await;
    assert_eq!(
        (v["committed"].clone(), v["branch"].clone()),
        (json!(10010), json!("completed"))
    );
    eprintln!("deep partition: head ack read {n} sidecar rows");
    assert!(n <= 20, "a leased head ack read {n} sidecar rows");
    // an unknown hash costs the probe below the cursor, which reads no blob above it
    let (v, n2) = fetched(
        "SELECT queen.log_ack_by_hash_v1(p.id, 'g', 'w',
             ARRAY[decode(md5('nope'), 'hex'), decode(md5('5'), 'hex')],
             ARRAY['completed', 'failed']) FROM queen.log_partitions p",
    )
    .await;
    assert_eq!(v["unresolvedHashes"].as_array().unwrap().len(), 1);
    assert_eq!(v["staleHashes"].as_array().unwrap().len(), 1);
    eprintln!("deep partition: ack with a below-cursor probe read {n2} sidecar rows");
    assert!(n2 <= 10_001 + 40, "the below probe read {n2} rows");
}

/// A lease-less ack reads its span in two parts (near: the lease span or 1024 offsets; far:
/// the rest of the log, only for hashes not found nearer). The split must not change a single
/// answer: MIN resolution across the boundary, both far strategies, and unknown hashes.
#[tokio::test]
async fn a_lease_less_ack_far_beyond_the_cursor_resolves_exactly() {
    let t = TestBroker::start().await;
    configure(&t, "q", json!({"dedupWindowSeconds": 0})).await;
    let ids: Vec<String> = (0..1200)
        .map(|k| match k {
            1060 | 1070 => "twin".to_string(),
            10 | 1100 => "twin2".to_string(),
            k => format!("x{k}"),
        })
        .collect();
    let items: Vec<(&str, &str)> = ids.iter().map(|x| ("p", x.as_str())).collect();
    t.http.push("q", &items).await;
    let pid = pop(&t, "q", "batch=5&consumerGroup=g6").await.pid;
    let group_ack = |group: &'static str, items: Vec<(String, &'static str)>| {
        let (t, pid) = (&t, pid.clone());
        async move {
            let acks: Vec<Value> = items
                .iter()
                .map(|(x, s)| json!({"transactionId": x, "partitionId": pid, "status": s}))
                .collect();
            let r = t
                .http
                .post(
                    "/api/v1/ack/batch",
                    json!({"consumerGroup": group, "acknowledgments": acks}),
                )
                .await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text);
            r.json.as_array().unwrap().clone()
        }
    };
    // more than 16 far hashes (the far rows are exploded), MIN across the far twins
    let mut many: Vec<(String, &str)> = (1101..1121)
        .map(|k| (format!("x{k}"), "completed"))
        .collect();
    many.push(("twin".into(), "retry"));
    let r = group_ack("g1", many).await;
    assert!(r.iter().all(ok), "{r:?}");
    assert_eq!(cursor(&t, &pid, "g1").await.committed, 1059);
    // a few far hashes (position() picks the rows)
    let r = group_ack(
        "g2",
        vec![("twin".into(), "retry"), ("x1080".into(), "completed")],
    )
    .await;
    assert!(r.iter().all(ok), "{r:?}");
    assert_eq!(cursor(&t, &pid, "g2").await.committed, 1059);
    // near beats far for one transactionId present in both
    group_ack(
        "g3",
        vec![("twin2".into(), "failed"), ("x1150".into(), "completed")],
    )
    .await;
    let c = cursor(&t, &pid, "g3").await;
    assert_eq!((c.committed, c.retry), (9, 1));
    // the log end, and an unknown hash
    let r = group_ack(
        "g4",
        vec![("x1199".into(), "completed"), ("nope".into(), "completed")],
    )
    .await;
    assert!(ok(&r[0]) && err(&r[1]) == "unresolvable", "{r:?}");
    assert_eq!(cursor(&t, &pid, "g4").await.committed, 1199);
    // an expired lease's span is the near part; beyond it the far part still resolves
    expire_leases(&t).await;
    let r = group_ack("g6", vec![("x1150".into(), "completed")]).await;
    assert!(ok(&r[0]) && r[0]["leaseReleased"] == json!(true), "{r:?}");
    assert_eq!(cursor(&t, &pid, "g6").await.committed, 1150);
}
