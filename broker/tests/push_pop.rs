//! Push and pop through the real HTTP server against real PostgreSQL.

mod common;

use common::{txns, TestBroker};
use hyper::StatusCode;
use serde_json::json;

#[tokio::test]
async fn push_then_pop_in_order() {
    let t = TestBroker::start().await;
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
    assert_eq!(p.json["messages"][0]["data"], json!({"t": "a"}));
    assert_eq!(p.json["messages"][0]["deliveryAttempt"], 1);
    assert_eq!(p.json["messages"][0]["id"], r[0]["message_id"]);
    // leased: a second pop finds nothing
    let again = t.http.pop("orders", "p1", "batch=10").await;
    assert_eq!(again.status, StatusCode::NO_CONTENT);
    t.broker.shutdown().await;
}
