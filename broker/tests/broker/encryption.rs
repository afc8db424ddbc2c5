//! `encryptionEnabled`: an encrypted queue's payloads are stored sealed (AES-256-GCM) in the
//! segment frames and in DLQ rows, never in clear, yet every pop (push-through cache or decoded
//! from PostgreSQL by another broker), the DLQ listing and a DLQ replay give back the exact
//! bytes pushed. A broker with another key answers the pop 500 naming the cause, and the
//! messages stay for a broker with the right key.

use hyper::StatusCode;
use serde_json::json;

use crate::common::TestBroker;
use ackbench_broker::config::Config;

const KEY: [u8; 32] = [0x42; 32];
const MARKER: &str = "plain-marker-7f3a";
/// Key order, big number digits, trailing zeros and an escape, as the client sent them.
const PAYLOAD: &str = r#"{"z":1,"secret":"plain-marker-7f3a","big":123456789012345678901234567890,"f":1.50,"e":"\u00e9"}"#;

fn with_key(key: [u8; 32]) -> impl FnOnce(&mut Config) {
    move |c| c.encryption_key = Some(key)
}

async fn configure(t: &TestBroker, queue: &str, encrypted: bool) {
    let body = json!({"queue": queue, "options": {"encryptionEnabled": encrypted}});
    let r = t.http.post("/api/v1/configure", body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

async fn push_raw(t: &TestBroker, queue: &str, txn: &str) {
    let body = format!(
        r#"{{"items":[{{"queue":"{queue}","partition":"p","transactionId":"{txn}","payload":{PAYLOAD}}}]}}"#
    );
    let r = t.http.post_raw("/api/v1/push", body.as_bytes()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
}

/// Whether the marker appears in the decompressed segments of `queue`.
async fn marker_stored_in_clear(t: &TestBroker, queue: &str) -> bool {
    let rows = t
        .sql()
        .await
        .query(
            "SELECT s.blob FROM queen.log_segments s \
             JOIN queen.log_partitions p ON p.id = s.partition_id \
             JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1",
            &[&queue],
        )
        .await
        .unwrap();
    assert!(!rows.is_empty(), "segments of {queue}");
    rows.iter().any(|r| {
        let raw = ackbench_broker::segment::decompress(r.get(0)).unwrap();
        raw.windows(MARKER.len()).any(|w| w == MARKER.as_bytes())
    })
}

async fn encrypted_payloads_round_trip(fusion: bool) {
    let t = TestBroker::start_with(|c| {
        c.push_fusion = fusion;
        c.encryption_key = Some(KEY);
    })
    .await;
    configure(&t, "sealed", true).await;
    configure(&t, "clear", false).await;
    push_raw(&t, "sealed", "s1").await;
    push_raw(&t, "clear", "c1").await;
    assert!(
        !marker_stored_in_clear(&t, "sealed").await,
        "ciphertext only"
    );
    assert!(
        marker_stored_in_clear(&t, "clear").await,
        "the check can see clear text"
    );

    // This broker (write-through cache when on) and a twin decoding from PostgreSQL.
    let r = t.http.pop("sealed", "p", "batch=10&consumerGroup=g1").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(
        r.text.contains(&format!(r#""data":{PAYLOAD}"#)),
        "{}",
        r.text
    );
    let mut config = Config::for_database(t.db_url.parse().unwrap());
    config.encryption_key = Some(KEY);
    config.segment_cache_mb = 0;
    let twin = ackbench_broker::Broker::start(config).await.unwrap();
    let http = crate::common::Http::new(twin.url());
    let r = http.pop("sealed", "p", "batch=10&consumerGroup=g2").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(
        r.text.contains(&format!(r#""data":{PAYLOAD}"#)),
        "{}",
        r.text
    );
    twin.shutdown().await;
    t.broker.shutdown().await;
}

on_both_push_paths!(encrypted_payloads_round_trip);

#[tokio::test]
async fn dead_letters_stay_sealed_and_replay_exactly() {
    let t = TestBroker::start_with(with_key(KEY)).await;
    configure(&t, "sealed", true).await;
    push_raw(&t, "sealed", "d1").await;
    let r = t.http.pop("sealed", "p", "batch=1").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let m = &r.json["messages"][0];
    let ack = json!({"transactionId": "d1", "partitionId": m["partitionId"],
                     "leaseId": m["leaseId"], "status": "dlq", "error": "poison"});
    let a = t.http.post("/api/v1/ack", ack).await;
    assert_eq!(a.json[0]["success"], json!(true), "{}", a.text);

    let row = t
        .sql()
        .await
        .query_one("SELECT payload::text, sealed FROM queen.log_dlq", &[])
        .await
        .unwrap();
    let (stored, sealed): (String, bool) = (row.get(0), row.get(1));
    assert!(sealed && !stored.contains(MARKER), "{stored}");

    let list = t.http.get("/api/v1/dlq?queue=sealed").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.text);
    assert!(
        list.text.contains(&format!(r#""data":{PAYLOAD}"#)),
        "{}",
        list.text
    );
    assert_eq!(list.json["messages"][0]["errorMessage"], json!("poison"));

    let pid = m["partitionId"].as_str().unwrap();
    let retry = t
        .http
        .post(&format!("/api/v1/messages/{pid}/d1/retry"), json!({}))
        .await;
    assert_eq!(retry.status, StatusCode::OK, "{}", retry.text);
    assert!(
        !marker_stored_in_clear(&t, "sealed").await,
        "the replay is sealed too"
    );
    let again = t.http.pop("sealed", "p", "batch=10").await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert!(
        again.text.contains(&format!(r#""data":{PAYLOAD}"#)),
        "{}",
        again.text
    );
    t.broker.shutdown().await;
}

#[tokio::test]
async fn another_key_is_a_clear_error_and_loses_nothing() {
    let t = TestBroker::start_with(with_key(KEY)).await;
    configure(&t, "sealed", true).await;
    push_raw(&t, "sealed", "k1").await;

    let mut config = Config::for_database(t.db_url.parse().unwrap());
    config.encryption_key = Some([0x17; 32]);
    config.segment_cache_mb = 0;
    let wrong = ackbench_broker::Broker::start(config).await.unwrap();
    let http = crate::common::Http::new(wrong.url());
    let r = http.pop("sealed", "p", "batch=10&leaseSeconds=1").await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", r.text);
    let error = r.json["error"].as_str().unwrap();
    assert!(error.contains("cannot be decrypted"), "{error}");
    // A push to the encrypted queue through a broker without a key is refused, never stored
    // in clear.
    let mut config = Config::for_database(t.db_url.parse().unwrap());
    config.encryption_key = None;
    let keyless = ackbench_broker::Broker::start(config).await.unwrap();
    let body = format!(r#"{{"items":[{{"queue":"sealed","payload":{PAYLOAD}}}]}}"#);
    let r = crate::common::Http::new(keyless.url())
        .post_raw("/api/v1/push", body.as_bytes())
        .await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", r.text);
    assert!(r.text.contains("QUEEN_ENCRYPTION_KEY"), "{}", r.text);
    keyless.shutdown().await;
    wrong.shutdown().await;

    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let r = t.http.pop("sealed", "p", "batch=10").await;
    assert_eq!(
        r.status,
        StatusCode::OK,
        "the message is still there: {}",
        r.text
    );
    assert!(
        r.text.contains(&format!(r#""data":{PAYLOAD}"#)),
        "{}",
        r.text
    );
    t.broker.shutdown().await;
}

#[tokio::test]
async fn transaction_pushes_to_an_encrypted_queue_are_sealed() {
    let t = TestBroker::start_with(with_key(KEY)).await;
    configure(&t, "sealed", true).await;
    let body = format!(
        r#"{{"operations":[{{"type":"push","items":[{{"queue":"sealed","partition":"p","transactionId":"x1","payload":{PAYLOAD}}}]}}]}}"#
    );
    let r = t
        .http
        .post_raw("/api/v1/transaction", body.as_bytes())
        .await;
    assert_eq!(r.json["success"], json!(true), "{}", r.text);
    assert!(
        !marker_stored_in_clear(&t, "sealed").await,
        "ciphertext only"
    );
    let popped = t.http.pop("sealed", "p", "batch=10").await;
    assert_eq!(popped.status, StatusCode::OK, "{}", popped.text);
    assert!(
        popped.text.contains(&format!(r#""data":{PAYLOAD}"#)),
        "{}",
        popped.text
    );
    t.broker.shutdown().await;
}
