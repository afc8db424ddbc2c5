//! Every malformed request of the push/pop/configure slice is a 4xx naming what is wrong, and
//! writes nothing.

use crate::common::TestBroker;
use hyper::{Method, StatusCode};
use serde_json::json;

async fn nothing_written(t: &TestBroker) {
    let db = t.sql().await;
    for table in [
        "queen.queues",
        "queen.log_partitions",
        "queen.log_segments",
        "queen.log_txns",
        "queen.log_consumers",
    ] {
        let n: i64 = db
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table} must stay empty");
    }
}

#[tokio::test]
async fn malformed_pushes_are_400_naming_the_field() {
    let t = TestBroker::start().await;
    let long = "x".repeat(65536);
    let cases = [
        (json!({}), "items"),
        (json!({"items": {}}), "items"),
        (json!({"items": [7]}), "items[0]"),
        (json!({"items": [{"payload": 1}]}), "items[0].queue"),
        (
            json!({"items": [{"queue": "", "payload": 1}]}),
            "items[0].queue",
        ),
        (
            json!({"items": [{"queue": 5, "payload": 1}]}),
            "items[0].queue",
        ),
        (
            json!({"items": [{"queue": "q", "payload": 1}, {"queue": "q", "partition": "", "payload": 1}]}),
            "items[1].partition",
        ),
        (
            json!({"items": [{"queue": "q", "payload": 1, "transactionId": 12}]}),
            "items[0].transactionId",
        ),
        (
            json!({"items": [{"queue": "q", "payload": 1, "transactionId": long}]}),
            "items[0].transactionId",
        ),
        (json!({"items": [{"queue": "q"}]}), "items[0].payload"),
    ];
    for (body, field) in cases {
        let r = t.http.post("/api/v1/push", body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}");
        let err = r.json["error"].as_str().unwrap_or_default();
        assert!(err.contains(field), "error `{err}` should name {field}");
    }
    for raw in [&b"not json"[..], b"[1,2]", b""] {
        let r = t.http.post_raw("/api/v1/push", raw).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(r.json["error"].is_string());
    }
    nothing_written(&t).await;
    t.broker.shutdown().await;
}

#[tokio::test]
async fn one_bad_item_rejects_the_whole_request() {
    let t = TestBroker::start().await;
    let r = t
        .http
        .post("/api/v1/push", json!({"items": [{"queue": "q", "payload": 1}, {"queue": "q", "payload": 2, "partition": 9}]}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.json["error"].as_str().unwrap().contains("items[1]"));
    nothing_written(&t).await;
    t.broker.shutdown().await;
}

#[tokio::test]
async fn body_over_the_limit_is_413() {
    let t = TestBroker::start_with(|c| c.max_body_bytes = 2048).await;
    let big = json!({"items": [{"queue": "q", "payload": "y".repeat(4096)}]});
    let r = t.http.post("/api/v1/push", big).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(r.json["error"].as_str().unwrap().contains("2048"));
    nothing_written(&t).await;
    t.broker.shutdown().await;
}

#[tokio::test]
async fn unknown_routes_404_wrong_methods_405() {
    let t = TestBroker::start().await;
    assert_eq!(
        t.http.get("/api/v1/nothing").await.status,
        StatusCode::NOT_FOUND
    );
    let r = t.http.get("/api/v1/push").await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(r.json["error"].is_string());
    let r = t.http.send(Method::PUT, "/api/v1/ack", None, &[]).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn malformed_pops_are_400_naming_the_parameter() {
    let t = TestBroker::start().await;
    for (query, param) in [
        ("batch=0", "batch"),
        ("batch=10001", "batch"),
        ("batch=ten", "batch"),
        ("wait=perhaps", "wait"),
        ("timeout=-1", "timeout"),
        ("autoAck=2", "autoAck"),
        ("subscriptionMode=some", "subscriptionMode"),
        ("leaseSeconds=0", "leaseSeconds"),
        ("consumerGroup=", "consumerGroup"),
    ] {
        let r = t.http.pop("q", "p", query).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}");
        assert!(
            r.json["error"].as_str().unwrap().contains(param),
            "{query}: {}",
            r.text
        );
    }
    let r = t.http.get("/api/v1/pop/queue/q?partitions=0").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.json["error"].as_str().unwrap().contains("partitions"));
    let r = t.http.get("/api/v1/pop?namespace=&task=").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    nothing_written(&t).await;
    t.broker.shutdown().await;
}

#[tokio::test]
async fn bad_configure_names_the_option() {
    let t = TestBroker::start().await;
    for (options, name) in [
        (json!({"priority": "high"}), "priority"),
        (json!({"maxSize": -1}), "maxSize"),
        (json!({"encryptionEnabled": "yes"}), "encryptionEnabled"),
        (json!({"leaseTime": "long"}), "leaseTime"),
        (json!({"leaseTime": 0}), "leaseTime"),
        (json!({"retryLimit": -1}), "retryLimit"),
        (json!({"deadLetterQueue": 1}), "deadLetterQueue"),
        (json!({"dedupWindowSeconds": 1.5}), "dedupWindowSeconds"),
    ] {
        let r = t
            .http
            .post(
                "/api/v1/configure",
                json!({"queue": "c", "options": options}),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{options}");
        assert_eq!(r.json["invalid"], name);
        assert!(r.json["error"].as_str().unwrap().contains(name));
    }
    let r = t
        .http
        .post("/api/v1/configure", json!({"options": {}}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.json["error"].as_str().unwrap().contains("queue"));
    nothing_written(&t).await;

    let ok = t
        .http
        .post(
            "/api/v1/configure",
            json!({"queue": "shop.c", "options": {"retryLimit": 5, "deadLetterQueue": false}}),
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(ok.json["configured"], true);
    assert_eq!(ok.json["namespace"], "shop");
    assert_eq!(ok.json["task"], "c");
    assert_eq!(ok.json["options"]["retryLimit"], 5);
    assert_eq!(ok.json["options"]["deadLetterQueue"], false);
    assert_eq!(ok.json["options"]["leaseTime"], 300);
    assert_eq!(ok.json["options"]["dedupWindowSeconds"], 3600);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn malformed_tenant_header_is_400() {
    let t = TestBroker::start_with(|c| c.tenancy_header = true).await;
    let r = t
        .http
        .send(
            Method::POST,
            "/api/v1/push",
            Some(br#"{"items":[]}"#.to_vec()),
            &[("x-queen-tenant", "acme")],
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.json["error"].as_str().unwrap().contains("x-queen-tenant"));
    t.broker.shutdown().await;
}

/// Bodies are read into the wire's request types; an array where an object belongs is refused
/// by name, never read positionally into the type's fields.
#[tokio::test]
async fn arrays_in_place_of_objects_are_400_naming_the_element() {
    let t = TestBroker::start().await;
    let cases = [
        (
            "/api/v1/push",
            json!({"items": [["q", "p", "t", 1]]}),
            "items[0]",
        ),
        (
            "/api/v1/push",
            json!([{"queue": "q", "payload": 1}]),
            "JSON object",
        ),
        (
            "/api/v1/ack/batch",
            json!({"acknowledgments": [["t", "p", "completed"]]}),
            "acknowledgments[0]",
        ),
        (
            "/api/v1/transaction",
            json!({"operations": [["push", [{"queue": "q", "payload": 1}]]]}),
            "operations[0]",
        ),
    ];
    for (path, body, named) in cases {
        let r = t.http.post(path, body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.text);
        let error = r.json["error"].as_str().unwrap();
        assert!(error.contains(named), "{path}: {error}");
    }
    nothing_written(&t).await;
    t.broker.shutdown().await;
}
