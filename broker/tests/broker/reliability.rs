//! Issue 15, the broker half: whatever a push accepts can be dead-lettered (the partition moves
//! on), payloads come back byte for byte (pop, DLQ listing, replay), and strings the database
//! cannot hold (U+0000, over-long names) are refused at the edge with a 400 naming the field.

use crate::common::{Rng, TestBroker};
use ackbench_wire::MessageRef;
use hyper::{Method, StatusCode};
use serde_json::{json, Value};

/// A payload exercising what a `Value` round trip would change: a number beyond f64, key order,
/// whitespace, unicode escapes, an escaped NUL.
const AWKWARD: &str = r#"{ "z" : 123456789012345678901234567890, "a": [1.50, -0, 1E+2],
  "s": "a\u0000b \u00e9 \ud83d\ude00 é", "m": {"y": null, "b": true} }"#;

/// `n` random characters from a wide range of code points (no NUL): incompressible.
fn random_text(rng: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| char::from_u32(0x20 + rng.below(0xD000) as u32).unwrap_or('x'))
        .collect()
}

/// Pushes the raw items JSON array to q/p and asserts 201.
async fn push_raw(t: &TestBroker, items: &str) {
    let body = format!(r#"{{"items": {items}}}"#);
    let r = t.http.post_raw("/api/v1/push", body.as_bytes()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
}

/// Pops one message of q/p: (raw payload text, transactionId, partitionId, leaseId).
async fn pop_one(t: &TestBroker) -> Option<(String, String, String, String)> {
    let r = t.http.pop("q", "p", "batch=1").await;
    if r.status == StatusCode::NO_CONTENT {
        return None;
    }
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow)]
        messages: Vec<MessageRef<'a>>,
    }
    let a: Answer = serde_json::from_str(&r.text).expect("a pop answer");
    let m = a.messages.first()?;
    Some((
        m.data.get().to_string(),
        m.transaction_id.to_string(),
        m.partition_id.to_string(),
        m.lease_id.to_string(),
    ))
}

/// Dead-letters a popped message with `error` and asserts the ack succeeded.
async fn dead_letter(t: &TestBroker, txn: &str, pid: &str, lease: &str, error: &str) {
    let ack = json!({"transactionId": txn, "partitionId": pid, "status": "dlq",
                     "leaseId": lease, "error": error});
    let r = t.http.post("/api/v1/ack", ack).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json[0]["success"], json!(true), "{}", r.text);
}

/// The DLQ listing's messages as raw text: (transactionId, payload text, error).
async fn dlq_listing(t: &TestBroker) -> Vec<(String, String, String)> {
    let r = t.http.get("/api/v1/dlq?queue=q").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let page: ackbench_wire::DlqPage = serde_json::from_str(&r.text).expect("a DLQ page");
    page.messages
        .iter()
        .map(|m| {
            let error = m.error_message.clone().unwrap_or_default();
            (m.transaction_id.clone(), m.data.get().to_string(), error)
        })
        .collect()
}

/// Pushes `poison` (raw item JSON, transactionId `txn`) then a plain `next`, pops and
/// dead-letters the poison with `error`; the DLQ row must be filed with the payload as sent and
/// the partition must move on to `next`.
async fn poison_is_filed_and_the_partition_moves_on(payload: &str, txn: &str, error: &str) {
    let t = TestBroker::start().await;
    let poison = json!({"queue": "q", "partition": "p", "transactionId": txn}).to_string();
    let poison = format!(r#"{},"payload":{payload}}}"#, &poison[..poison.len() - 1]);
    push_raw(
        &t,
        &format!(
            r#"[{poison}, {{"queue":"q","partition":"p","transactionId":"next","payload":1}}]"#
        ),
    )
    .await;
    let (data, got_txn, pid, lease) = pop_one(&t).await.expect("the poison is delivered");
    assert_eq!((data.as_str(), got_txn.as_str()), (payload, txn));
    dead_letter(&t, txn, &pid, &lease, error).await;
    let listed = dlq_listing(&t).await;
    assert_eq!(listed.len(), 1, "one DLQ row");
    assert_eq!((listed[0].0.as_str(), listed[0].1.as_str()), (txn, payload));
    assert!(error.starts_with(&listed[0].2) && !listed[0].2.is_empty());
    let (_, behind, _, _) = pop_one(&t).await.expect("the partition moves on");
    assert_eq!(behind, "next");
    t.broker.shutdown().await;
}

#[tokio::test]
async fn a_nul_inside_a_payload_string_is_dead_lettered() {
    poison_is_filed_and_the_partition_moves_on(r#"{"s":"a\u0000b"}"#, "nul-1", "boom").await;
}

#[tokio::test]
async fn a_long_incompressible_transaction_id_is_dead_lettered() {
    let txn = random_text(&mut Rng(0x15_0001), 10_000);
    poison_is_filed_and_the_partition_moves_on("7", &txn, "boom").await;
}

#[tokio::test]
async fn a_long_incompressible_error_reason_is_filed_cut() {
    let error = random_text(&mut Rng(0x15_0002), 10_000);
    poison_is_filed_and_the_partition_moves_on("7", "long-error", &error).await;
}

/// The failure reason is diagnostic text: a NUL in it is replaced, not refused, so that a client
/// whose error text carries one can still dead-letter its poison message.
#[tokio::test]
async fn a_nul_in_an_error_reason_dead_letters_and_the_partition_moves_on() {
    let t = TestBroker::start().await;
    push_raw(
        &t,
        r#"[{"queue":"q","partition":"p","transactionId":"t","payload":1},
            {"queue":"q","partition":"p","transactionId":"next","payload":2}]"#,
    )
    .await;
    let (_, txn, pid, lease) = pop_one(&t).await.expect("delivered");
    assert_eq!(txn, "t");
    dead_letter(&t, &txn, &pid, &lease, "bad\u{0}bytes").await;
    let listed = dlq_listing(&t).await;
    assert_eq!(listed.len(), 1, "one DLQ row");
    assert_eq!(
        listed[0].2, "bad\u{FFFD}bytes",
        "the NUL is replaced, the rest kept"
    );
    let (_, behind, _, _) = pop_one(&t).await.expect("the partition moves on");
    assert_eq!(behind, "next");
    t.broker.shutdown().await;
}

#[tokio::test]
async fn payloads_are_delivered_listed_and_replayed_byte_exact() {
    let t = TestBroker::start().await;
    push_raw(
        &t,
        &format!(r#"[{{"queue":"q","partition":"p","transactionId":"x","payload": {AWKWARD} }}]"#),
    )
    .await;
    let (data, txn, pid, lease) = pop_one(&t).await.expect("delivered");
    assert_eq!(data, AWKWARD, "pop");
    dead_letter(&t, &txn, &pid, &lease, "boom").await;
    assert_eq!(dlq_listing(&t).await[0].1, AWKWARD, "DLQ listing");
    let r = t
        .http
        .post(&format!("/api/v1/messages/{pid}/x/retry"), json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let (replayed, _, _, _) = pop_one(&t).await.expect("the replay is delivered");
    assert_eq!(replayed, AWKWARD, "replay");
    t.broker.shutdown().await;
}

/// Every string field and parameter that reaches the database, with U+0000 and over-long.
fn bad_names(bad: &str) -> Vec<(Method, String, Option<Value>, &'static str)> {
    let enc = percent_encoding::utf8_percent_encode(bad, percent_encoding::NON_ALPHANUMERIC);
    let pid = "0a0a0a0a-0000-4000-8000-00000000000a";
    let ack = |k: &str| {
        let mut a = json!({"type": "ack", "transactionId": "t", "partitionId": pid,
                           "status": "completed"});
        if k != "status" {
            a[k] = json!(bad);
        }
        a
    };
    vec![
        (
            Method::POST,
            "/api/v1/configure".into(),
            Some(json!({"queue": bad})),
            "queue",
        ),
        (
            Method::POST,
            "/api/v1/configure".into(),
            Some(json!({"queue": "q", "namespace": bad})),
            "namespace",
        ),
        (
            Method::POST,
            "/api/v1/configure".into(),
            Some(json!({"queue": "q", "task": bad})),
            "task",
        ),
        (
            Method::POST,
            "/api/v1/push".into(),
            Some(json!({"items": [{"queue": bad, "payload": 1}]})),
            "items[0].queue",
        ),
        (
            Method::POST,
            "/api/v1/push".into(),
            Some(json!({"items": [{"queue": "q", "partition": bad, "payload": 1}]})),
            "items[0].partition",
        ),
        (
            Method::GET,
            format!("/api/v1/pop/queue/{enc}/partition/p"),
            None,
            "queue",
        ),
        (
            Method::GET,
            format!("/api/v1/pop/queue/q/partition/{enc}"),
            None,
            "partition",
        ),
        (
            Method::GET,
            format!("/api/v1/pop/queue/{enc}"),
            None,
            "queue",
        ),
        (
            Method::GET,
            format!("/api/v1/pop/queue/q?consumerGroup={enc}"),
            None,
            "consumerGroup",
        ),
        (
            Method::GET,
            format!("/api/v1/pop?namespace={enc}"),
            None,
            "namespace",
        ),
        (Method::GET, format!("/api/v1/pop?task={enc}"), None, "task"),
        (
            Method::POST,
            "/api/v1/ack".into(),
            Some(ack("consumerGroup")),
            "consumerGroup",
        ),
        (
            Method::POST,
            "/api/v1/ack".into(),
            Some(ack("leaseId")),
            "leaseId",
        ),
        (
            Method::POST,
            "/api/v1/ack/batch".into(),
            Some(json!({"consumerGroup": bad, "acknowledgments": []})),
            "consumerGroup",
        ),
        (
            Method::POST,
            "/api/v1/ack/batch".into(),
            Some(json!({"acknowledgments": [ack("leaseId")]})),
            "acknowledgments[0].leaseId",
        ),
        (
            Method::POST,
            format!("/api/v1/lease/{enc}/extend"),
            Some(json!({})),
            "leaseId",
        ),
        (
            Method::GET,
            format!("/api/v1/dlq?queue={enc}"),
            None,
            "queue",
        ),
        (
            Method::GET,
            format!("/api/v1/dlq?consumerGroup={enc}"),
            None,
            "consumerGroup",
        ),
        (
            Method::POST,
            format!("/api/v1/messages/{pid}/t/retry?consumerGroup={enc}"),
            Some(json!({})),
            "consumerGroup",
        ),
        (
            Method::DELETE,
            format!("/api/v1/messages/{pid}/t?consumerGroup={enc}"),
            None,
            "consumerGroup",
        ),
        (
            Method::POST,
            "/api/v1/transaction".into(),
            Some(json!({"operations": [ack("status")], "requiredLeases": [bad]})),
            "requiredLeases[0]",
        ),
        (
            Method::POST,
            "/api/v1/transaction".into(),
            Some(
                json!({"operations": [{"type": "ack", "transactionId": "t", "partitionId": pid, "status": "completed", "leaseId": bad}]}),
            ),
            "leaseId",
        ),
    ]
}

/// The number of queues, partitions and segments: a refused request must change none.
async fn footprint(t: &TestBroker) -> Vec<i64> {
    let db = t.sql().await;
    let mut counts = Vec::new();
    for table in [
        "queen.queues",
        "queen.log_partitions",
        "queen.log_segments",
        "queen.log_dlq",
    ] {
        let row = db
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap();
        counts.push(row.get(0));
    }
    counts
}

#[tokio::test]
async fn nul_and_over_long_names_are_400_naming_the_field_on_every_route() {
    let t = TestBroker::start().await;
    let before = footprint(&t).await;
    let long = random_text(&mut Rng(0x15_0003), 10_000);
    for bad in ["a\u{0}b", long.as_str(), &"a".repeat(70_000)] {
        // A URI is at most 64 kB (the http crate's bound): such names only fit in bodies.
        let cases = bad_names(bad).into_iter().filter(|c| c.1.len() < 60_000);
        for (method, path, body, field) in cases {
            let body = body.map(|b| serde_json::to_vec(&b).unwrap());
            let r = t.http.send(method.clone(), &path, body, &[]).await;
            let what = format!(
                "{method} {} ({field}, {} bytes)",
                &path[..path.len().min(60)],
                bad.len()
            );
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{what}: {}", r.text);
            let err = r.json["error"].as_str().unwrap_or_default();
            assert!(err.contains(field), "{what}: `{err}` should name {field}");
        }
    }
    assert_eq!(footprint(&t).await, before, "refusals change nothing");
    t.broker.shutdown().await;
}

#[tokio::test]
async fn a_nul_in_a_transaction_id_is_a_400() {
    let t = TestBroker::start().await;
    let body = json!({"items": [{"queue": "q", "transactionId": "a\u{0}", "payload": 1}]});
    let r = t.http.post("/api/v1/push", body).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.json["error"]
        .as_str()
        .unwrap()
        .contains("items[0].transactionId"));
    let pid = "0a0a0a0a-0000-4000-8000-00000000000a";
    let ack = json!({"transactionId": "a\u{0}", "partitionId": pid, "status": "completed"});
    let r = t.http.post("/api/v1/ack", ack).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(footprint(&t).await, vec![0, 0, 0, 0]);
    t.broker.shutdown().await;
}
