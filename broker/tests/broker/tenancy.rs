//! Tenancy (`wire.md`, "Tenancy") through the real HTTP server against real PostgreSQL: with
//! `QUEEN_TENANCY_HEADER` on, `x-queen-tenant` selects the tenant; queues, dedup and consumer
//! groups are per tenant, and every route addressed by partitionId or leaseId acts only inside
//! the caller's tenant (a foreign partition or lease is answered exactly like an unknown one).
//! With the flag off the header is ignored.

use crate::common::{txns, Reply, TestBroker, DEFAULT_TENANT, TENANT_A, TENANT_B};
use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// helpers

async fn tenancy_broker() -> TestBroker {
    TestBroker::start_with(|c| c.tenancy_header = true).await
}

async fn post(t: &TestBroker, tenant: &str, path: &str, body: Value) -> Reply {
    t.send_as(Some(tenant), Method::POST, path, Some(body))
        .await
}

async fn get(t: &TestBroker, tenant: &str, path: &str) -> Reply {
    t.send_as(Some(tenant), Method::GET, path, None).await
}

/// Pushes one message per transactionId to `queue`/`p`, payload naming the tenant; the answer.
async fn push(t: &TestBroker, tenant: &str, queue: &str, ids: &[&str]) -> Vec<Value> {
    let items: Vec<Value> = ids
        .iter()
        .map(|x| json!({"queue": queue, "partition": "p", "transactionId": x, "payload": {"tenant": tenant, "t": x}}))
        .collect();
    let r = post(t, tenant, "/api/v1/push", json!({ "items": items })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    r.json.as_array().unwrap().clone()
}

/// Pops `queue`/`p` as `tenant` (asserting 200): (answer, partitionId, leaseId).
async fn pop(t: &TestBroker, tenant: &str, queue: &str, query: &str) -> (Reply, String, String) {
    let r = get(
        t,
        tenant,
        &format!("/api/v1/pop/queue/{queue}/partition/p?{query}"),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let pid = r.json["partitionId"].as_str().unwrap().to_string();
    let lease = r.json["leaseId"].as_str().unwrap().to_string();
    (r, pid, lease)
}

/// (committed, worker_id, lease_expires_at as text) of a consumer row.
async fn consumer(t: &TestBroker, pid: &str, group: &str) -> (i64, Option<String>, Option<String>) {
    let db = t.sql().await;
    let r = db
        .query_one(
            "SELECT committed, worker_id, lease_expires_at::text FROM queen.log_consumers \
             WHERE partition_id = $1 AND consumer_group = $2",
            &[&Uuid::parse_str(pid).unwrap(), &group],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

/// Tenants of the queues named `name`, sorted.
async fn queue_tenants(t: &TestBroker, name: &str) -> Vec<String> {
    let db = t.sql().await;
    db.query(
        "SELECT tenant_id::text FROM queen.queues WHERE name = $1 ORDER BY tenant_id",
        &[&name],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

async fn count(t: &TestBroker, table: &str) -> i64 {
    let db = t.sql().await;
    db.query_one(&format!("SELECT count(*) FROM queen.{table}"), &[])
        .await
        .unwrap()
        .get(0)
}

// ---------------------------------------------------------------------------------------------
// per-tenant queues, dedup and consumer groups

#[tokio::test]
async fn queues_and_dedup_are_per_tenant() {
    let t = tenancy_broker().await;
    let a = push(&t, TENANT_A, "orders", &["t1"]).await;
    let b = push(&t, TENANT_B, "orders", &["t1"]).await;
    assert_eq!(a[0]["status"], json!("queued"));
    assert_eq!(
        b[0]["status"],
        json!("queued"),
        "same transactionId, other tenant"
    );
    assert_ne!(a[0]["message_id"], b[0]["message_id"]);
    // Within one tenant it is a duplicate.
    let again = push(&t, TENANT_A, "orders", &["t1"]).await;
    assert_eq!(again[0]["status"], json!("duplicate"));
    assert_eq!(again[0]["message_id"], a[0]["message_id"]);
    assert_eq!(queue_tenants(&t, "orders").await, [TENANT_A, TENANT_B]);

    // Each tenant sees only its own queue.
    let (ra, pid_a, _) = pop(&t, TENANT_A, "orders", "batch=10").await;
    let (rb, pid_b, _) = pop(&t, TENANT_B, "orders", "batch=10").await;
    assert_ne!(pid_a, pid_b);
    assert_eq!(ra.json["messages"].as_array().unwrap().len(), 1);
    assert_eq!(ra.json["messages"][0]["data"]["tenant"], json!(TENANT_A));
    assert_eq!(rb.json["messages"].as_array().unwrap().len(), 1);
    assert_eq!(rb.json["messages"][0]["data"]["tenant"], json!(TENANT_B));
    // A tenant that never pushed has nothing (and the default tenant is a tenant too).
    let none = get(
        &t,
        "0c0c0c0c-0000-4000-8000-00000000000c",
        "/api/v1/pop/queue/orders/partition/p",
    )
    .await;
    assert_eq!(none.status, StatusCode::NO_CONTENT, "{}", none.text);
    let none = t.http.get("/api/v1/pop/queue/orders/partition/p").await;
    assert_eq!(none.status, StatusCode::NO_CONTENT, "{}", none.text);
}

#[tokio::test]
async fn consumer_groups_are_per_tenant() {
    let t = tenancy_broker().await;
    push(&t, TENANT_A, "orders", &["a1"]).await;
    push(&t, TENANT_B, "orders", &["b1"]).await;

    // Tenant A's group g consumes its message...
    let (ra, pid_a, lease_a) = pop(&t, TENANT_A, "orders", "batch=10&consumerGroup=g").await;
    assert_eq!(txns(&ra), ["a1"]);
    let r = post(
        &t,
        TENANT_A,
        "/api/v1/ack",
        json!({"transactionId": "a1", "partitionId": pid_a, "status": "completed",
               "consumerGroup": "g", "leaseId": lease_a}),
    )
    .await;
    assert_eq!(r.json[0]["success"], json!(true), "{}", r.text);
    let empty = get(
        &t,
        TENANT_A,
        "/api/v1/pop/queue/orders/partition/p?consumerGroup=g",
    )
    .await;
    assert_eq!(empty.status, StatusCode::NO_CONTENT);

    // ... and tenant B's group of the same name is untouched.
    let (rb, pid_b, _) = pop(&t, TENANT_B, "orders", "batch=10&consumerGroup=g").await;
    assert_eq!(txns(&rb), ["b1"]);
    assert_eq!(consumer(&t, &pid_a, "g").await.0, 0);
    assert_eq!(consumer(&t, &pid_b, "g").await.0, -1);
}

// ---------------------------------------------------------------------------------------------
// partitionId- and leaseId-addressed routes act only inside the caller's tenant

#[tokio::test]
async fn ack_of_a_foreign_partition_is_answered_like_an_unknown_one() {
    let t = tenancy_broker().await;
    push(&t, TENANT_B, "orders", &["b1", "b2"]).await;
    let (_, pid_b, lease_b) = pop(&t, TENANT_B, "orders", "batch=10").await;
    let before = consumer(&t, &pid_b, "__QUEUE_MODE__").await;
    let unknown_pid = Uuid::new_v4().to_string();

    for lease in [None, Some(lease_b.as_str())] {
        for status in ["completed", "failed", "dlq"] {
            let body = |pid: &str| {
                let mut b = json!({"transactionId": "b1", "partitionId": pid, "status": status});
                if let Some(l) = lease {
                    b["leaseId"] = json!(l);
                }
                b
            };
            let foreign = post(&t, TENANT_A, "/api/v1/ack", body(&pid_b)).await;
            let unknown = post(&t, TENANT_A, "/api/v1/ack", body(&unknown_pid)).await;
            assert_eq!(foreign.status, StatusCode::OK, "{}", foreign.text);
            assert_eq!(foreign.json, unknown.json, "lease {lease:?}, {status}");
            assert_eq!(foreign.json[0]["success"], json!(false));

            let batch = |pid: &str| json!({"acknowledgments": [body(pid)]});
            let foreign = post(&t, TENANT_A, "/api/v1/ack/batch", batch(&pid_b)).await;
            let unknown = post(&t, TENANT_A, "/api/v1/ack/batch", batch(&unknown_pid)).await;
            assert_eq!(
                foreign.json, unknown.json,
                "batch, lease {lease:?}, {status}"
            );
        }
    }
    assert_eq!(consumer(&t, &pid_b, "__QUEUE_MODE__").await, before);
    assert_eq!(count(&t, "log_dlq").await, 0);

    // The owner acks as usual.
    let r = post(
        &t,
        TENANT_B,
        "/api/v1/ack",
        json!({"transactionId": "b2", "partitionId": pid_b, "status": "completed", "leaseId": lease_b}),
    )
    .await;
    assert_eq!(r.json[0]["success"], json!(true), "{}", r.text);
    assert_eq!(consumer(&t, &pid_b, "__QUEUE_MODE__").await.0, 1);
}

#[tokio::test]
async fn lease_extend_of_a_foreign_lease_is_answered_like_an_unknown_one() {
    let t = tenancy_broker().await;
    push(&t, TENANT_B, "orders", &["b1"]).await;
    let (_, pid_b, lease_b) = pop(&t, TENANT_B, "orders", "batch=10&leaseSeconds=30").await;
    let before = consumer(&t, &pid_b, "__QUEUE_MODE__").await;
    let unknown = Uuid::now_v7().to_string();

    let body = json!({"seconds": 3600});
    let foreign = post(
        &t,
        TENANT_A,
        &format!("/api/v1/lease/{lease_b}/extend"),
        body.clone(),
    )
    .await;
    let unknown_r = post(
        &t,
        TENANT_A,
        &format!("/api/v1/lease/{unknown}/extend"),
        body.clone(),
    )
    .await;
    assert_eq!(foreign.status, StatusCode::OK, "{}", foreign.text);
    assert_eq!(foreign.status, unknown_r.status);
    let mut expected = unknown_r.json.clone();
    expected["leaseId"] = json!(lease_b);
    assert_eq!(foreign.json, expected);
    assert_eq!(foreign.json["success"], json!(false));
    assert_eq!(foreign.json["renewed"], json!(0));
    assert_eq!(foreign.json["expiresAt"], Value::Null);
    assert_eq!(
        consumer(&t, &pid_b, "__QUEUE_MODE__").await,
        before,
        "not renewed"
    );

    // The owner renews.
    let own = post(
        &t,
        TENANT_B,
        &format!("/api/v1/lease/{lease_b}/extend"),
        body,
    )
    .await;
    assert_eq!(own.json["success"], json!(true), "{}", own.text);
    assert_eq!(own.json["renewed"], json!(1));
}

#[tokio::test]
async fn transaction_acks_of_a_foreign_partition_roll_back_as_unresolvable() {
    let t = tenancy_broker().await;
    push(&t, TENANT_B, "orders", &["b1"]).await;
    let (_, pid_b, lease_b) = pop(&t, TENANT_B, "orders", "batch=10").await;
    let before = consumer(&t, &pid_b, "__QUEUE_MODE__").await;
    let unknown = Uuid::new_v4().to_string();

    let body = |pid: &str, lease: Option<&str>, status: &str| {
        let mut ack =
            json!({"type": "ack", "transactionId": "b1", "partitionId": pid, "status": status});
        if let Some(l) = lease {
            ack["leaseId"] = json!(l);
        }
        json!({"operations": [
            {"type": "push", "items": [{"queue": "out", "payload": 1, "transactionId": "o1"}]},
            ack,
        ]})
    };
    for lease in [None, Some(lease_b.as_str())] {
        for status in ["completed", "dlq"] {
            let foreign = post(
                &t,
                TENANT_A,
                "/api/v1/transaction",
                body(&pid_b, lease, status),
            )
            .await;
            let unknown = post(
                &t,
                TENANT_A,
                "/api/v1/transaction",
                body(&unknown, lease, status),
            )
            .await;
            assert_eq!(foreign.status, StatusCode::OK, "{}", foreign.text);
            assert_eq!(foreign.json["success"], json!(false), "{}", foreign.text);
            let error = foreign.json["error"].as_str().unwrap();
            assert!(error.contains("unresolvable"), "{error}");
            assert!(error.contains("operations[1]"), "{error}");
            assert_eq!(foreign.json, unknown.json);
        }
    }
    // A's push was rolled back with it; B's row is untouched.
    assert!(
        queue_tenants(&t, "out").await.is_empty(),
        "not even provisioned"
    );
    assert_eq!(
        count(&t, "log_segments").await,
        1,
        "only B's push is stored"
    );
    assert_eq!(consumer(&t, &pid_b, "__QUEUE_MODE__").await, before);

    // B's lease is not a lease A holds.
    let r = post(
        &t,
        TENANT_A,
        "/api/v1/transaction",
        json!({"operations": [{"type": "push", "items": [{"queue": "out", "payload": 1}]}],
               "requiredLeases": [lease_b]}),
    )
    .await;
    assert_eq!(r.json["success"], json!(false), "{}", r.text);
    assert!(r.json["error"]
        .as_str()
        .unwrap()
        .contains("requiredLeases[0]"));
    assert_eq!(count(&t, "log_segments").await, 1);

    // B itself commits the same ack.
    let r = post(
        &t,
        TENANT_B,
        "/api/v1/transaction",
        json!({"operations": [{"type": "ack", "transactionId": "b1", "partitionId": pid_b,
                                "status": "completed", "leaseId": lease_b}],
               "requiredLeases": [lease_b]}),
    )
    .await;
    assert_eq!(r.json["success"], json!(true), "{}", r.text);
    assert_eq!(consumer(&t, &pid_b, "__QUEUE_MODE__").await.0, 0);
}

#[tokio::test]
async fn dead_letters_of_another_tenant_are_invisible() {
    let t = tenancy_broker().await;
    push(&t, TENANT_B, "orders", &["b1", "b2"]).await;
    let (_, pid_b, lease_b) = pop(&t, TENANT_B, "orders", "batch=10").await;
    let r = post(
        &t,
        TENANT_B,
        "/api/v1/ack",
        json!({"transactionId": "b1", "partitionId": pid_b, "status": "dlq", "leaseId": lease_b,
               "error": "poison"}),
    )
    .await;
    assert_eq!(r.json[0]["dlq"], json!(true), "{}", r.text);

    let own = get(&t, TENANT_B, "/api/v1/dlq").await;
    assert_eq!(own.json["pagination"]["total"], json!(1), "{}", own.text);
    for path in ["/api/v1/dlq", "/api/v1/dlq?queue=orders"] {
        let foreign = get(&t, TENANT_A, path).await;
        assert_eq!(foreign.status, StatusCode::OK, "{}", foreign.text);
        assert_eq!(
            foreign.json,
            json!({"messages": [], "pagination": {"total": 0, "limit": 100, "offset": 0},
                   "total": 0})
        );
    }

    let unknown = Uuid::new_v4().to_string();
    for (method, suffix) in [(Method::POST, "/retry"), (Method::DELETE, "")] {
        let foreign = t
            .send_as(
                Some(TENANT_A),
                method.clone(),
                &format!("/api/v1/messages/{pid_b}/b1{suffix}"),
                None,
            )
            .await;
        let unknown_r = t
            .send_as(
                Some(TENANT_A),
                method.clone(),
                &format!("/api/v1/messages/{unknown}/b1{suffix}"),
                None,
            )
            .await;
        assert_eq!(
            foreign.status,
            StatusCode::NOT_FOUND,
            "{method}: {}",
            foreign.text
        );
        assert_eq!(unknown_r.status, StatusCode::NOT_FOUND);
        let unknown_error = unknown_r.json["error"]
            .as_str()
            .unwrap()
            .replace(&unknown, &pid_b);
        assert_eq!(foreign.json["error"], json!(unknown_error), "{method}");
    }
    // Still there for its owner, who can delete it.
    assert_eq!(count(&t, "log_dlq").await, 1);
    let del = t
        .send_as(
            Some(TENANT_B),
            Method::DELETE,
            &format!("/api/v1/messages/{pid_b}/b1"),
            None,
        )
        .await;
    assert_eq!(del.status, StatusCode::OK, "{}", del.text);
    assert_eq!(count(&t, "log_dlq").await, 0);
}

// ---------------------------------------------------------------------------------------------
// the header itself

#[tokio::test]
async fn with_the_flag_off_the_header_is_ignored() {
    let t = TestBroker::start().await;
    let a = push(&t, TENANT_A, "orders", &["t1"]).await;
    assert_eq!(a[0]["status"], json!("queued"));
    // Another tenant's header, no header, and even a malformed one: all the default tenant.
    let b = push(&t, TENANT_B, "orders", &["t1"]).await;
    assert_eq!(b[0]["status"], json!("duplicate"));
    let none = t.http.push("orders", &[("p", "t1")]).await;
    assert_eq!(none[0]["status"], json!("duplicate"));
    let r = t.send_as(Some("not-a-uuid"), Method::POST, "/api/v1/push", Some(json!({"items": [{"queue": "orders", "partition": "p", "payload": 1, "transactionId": "t2"}]})))
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(queue_tenants(&t, "orders").await, [DEFAULT_TENANT]);

    // Partition-addressed routes see everything of the default tenant, header or not.
    let (_, pid, lease) = pop(&t, TENANT_A, "orders", "batch=10").await;
    let r = post(
        &t,
        TENANT_B,
        "/api/v1/transaction",
        json!({"operations": [
            {"type": "ack", "transactionId": "t1", "partitionId": pid, "status": "completed", "leaseId": lease},
            {"type": "ack", "transactionId": "t2", "partitionId": pid, "status": "completed", "leaseId": lease},
        ], "requiredLeases": [lease]}),
    )
    .await;
    assert_eq!(r.json["success"], json!(true), "{}", r.text);
    assert_eq!(consumer(&t, &pid, "__QUEUE_MODE__").await.0, 1);
}

#[tokio::test]
async fn a_malformed_tenant_header_is_400() {
    let t = tenancy_broker().await;
    let pid = Uuid::new_v4().to_string();
    let requests: Vec<(Method, String, Option<Value>)> = vec![
        (
            Method::POST,
            "/api/v1/push".into(),
            Some(json!({"items": [{"queue": "orders", "payload": 1}]})),
        ),
        (Method::GET, "/api/v1/pop/queue/orders".into(), None),
        (
            Method::POST,
            "/api/v1/ack".into(),
            Some(json!({"transactionId": "x", "partitionId": pid, "status": "completed"})),
        ),
        (
            Method::POST,
            "/api/v1/transaction".into(),
            Some(
                json!({"operations": [{"type": "push", "items": [{"queue": "orders", "payload": 1}]}]}),
            ),
        ),
        (Method::GET, "/api/v1/dlq".into(), None),
        (
            Method::POST,
            "/api/v1/configure".into(),
            Some(json!({"queue": "orders"})),
        ),
    ];
    for bad in ["not-a-uuid", "", "0a0a0a0a-0000-4000-8000"] {
        for (method, path, body) in &requests {
            let r = t
                .send_as(Some(bad), method.clone(), path, body.clone())
                .await;
            assert_eq!(
                r.status,
                StatusCode::BAD_REQUEST,
                "{method} {path} `{bad}`: {}",
                r.text
            );
            let error = r.json["error"].as_str().unwrap_or_default();
            assert!(error.contains("x-queen-tenant"), "{error}");
        }
    }
    assert_eq!(count(&t, "queues").await, 0, "nothing was written");
}
