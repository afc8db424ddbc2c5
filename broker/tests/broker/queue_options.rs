//! Queen's whole queue option set: accepted as Queen's clients send it (defaults included),
//! stored, echoed, and checked by type and range; unknown options ignored and named.

use hyper::StatusCode;
use serde_json::json;

use crate::common::TestBroker;

/// The option object Queen's clients send on every `create()` (defaults included).
fn client_defaults() -> serde_json::Value {
    json!({
        "leaseTime": 300, "maxSize": 0, "ttl": 3600, "retryLimit": 3, "retryDelay": 1000,
        "deadLetterQueue": false, "dlqAfterMaxRetries": false, "priority": 0,
        "delayedProcessing": 0, "windowBuffer": 0, "retentionSeconds": 0,
        "completedRetentionSeconds": 0, "retentionEnabled": false, "encryptionEnabled": false,
        "maxWaitTimeSeconds": 0
    })
}

#[tokio::test]
async fn queen_clients_default_options_are_accepted_and_echoed() {
    let t = TestBroker::start().await;
    let r = t
        .http
        .post(
            "/api/v1/configure",
            json!({"queue": "orders", "namespace": null, "task": null, "options": client_defaults()}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let options = &r.json["options"];
    for (name, value) in client_defaults().as_object().unwrap() {
        assert_eq!(&options[name], value, "option {name} echoed");
    }
    assert_eq!(options["dedupWindowSeconds"], 3600);
    assert!(
        r.json.get("ignored").is_none(),
        "nothing ignored: {}",
        r.json
    );
    t.broker.shutdown().await;
}

#[tokio::test]
async fn options_are_stored_and_kept_until_changed() {
    let t = TestBroker::start().await;
    let set = json!({"delayedProcessing": 5, "windowBuffer": 2, "maxSize": 1000,
                     "priority": 7, "retentionEnabled": true, "ttl": 60, "retryDelay": 250,
                     "maxWaitTimeSeconds": 9});
    let r = t
        .http
        .post(
            "/api/v1/configure",
            json!({"queue": "kept", "options": set}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let again = t
        .http
        .post(
            "/api/v1/configure",
            json!({"queue": "kept", "options": {"leaseTime": 30}}),
        )
        .await;
    for (name, value) in set.as_object().unwrap() {
        assert_eq!(&again.json["options"][name], value, "option {name} kept");
    }
    assert_eq!(again.json["options"]["leaseTime"], 30);
    let row = t
        .sql()
        .await
        .query_one(
            "SELECT delayed_processing, window_buffer, max_size, priority FROM queen.queues \
             WHERE name = 'kept'",
            &[],
        )
        .await
        .unwrap();
    let stored: (i32, i32, i64, i32) = (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(stored, (5, 2, 1000, 7));
    t.broker.shutdown().await;
}

#[tokio::test]
async fn unknown_options_are_ignored_and_named() {
    let t = TestBroker::start().await;
    let r = t
        .http
        .post(
            "/api/v1/configure",
            json!({"queue": "odd", "options": {"leaseTime": 60, "compression": "zstd",
                                               "shards": 4}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json["options"]["leaseTime"], 60);
    assert_eq!(r.json["ignored"], json!(["compression", "shards"]));
    t.broker.shutdown().await;
}

#[tokio::test]
async fn encryption_without_a_key_is_refused_and_changes_nothing() {
    let t = TestBroker::start().await;
    let r = t
        .http
        .post(
            "/api/v1/configure",
            json!({"queue": "secret", "options": {"encryptionEnabled": true}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json["invalid"], "encryptionEnabled");
    assert!(r.json["error"]
        .as_str()
        .unwrap()
        .contains("QUEEN_ENCRYPTION_KEY"));
    let queues = t
        .sql()
        .await
        .query_one(
            "SELECT count(*) FROM queen.queues WHERE name = 'secret'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(queues.get::<_, i64>(0), 0);
    t.broker.shutdown().await;

    let keyed = TestBroker::start_with(|c| c.encryption_key = Some([7; 32])).await;
    let r = keyed
        .http
        .post(
            "/api/v1/configure",
            json!({"queue": "secret", "options": {"encryptionEnabled": true}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json["options"]["encryptionEnabled"], true);
    keyed.broker.shutdown().await;
}

#[tokio::test]
async fn an_empty_queue_name_configures_as_in_queen_but_a_missing_one_is_refused() {
    let t = TestBroker::start().await;
    let r = t
        .http
        .post(
            "/api/v1/configure",
            json!({"queue": "", "options": {"leaseTime": 30}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json["queue"], "");
    for body in [json!({"options": {}}), json!({"queue": 5})] {
        let r = t.http.post("/api/v1/configure", body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}");
        assert!(r.json["error"].as_str().unwrap().contains("queue"));
    }
    let r = t
        .http
        .post(
            "/api/v1/push",
            json!({"items": [{"queue": "", "payload": 1}]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "push still needs a name");
    t.broker.shutdown().await;
}
