//! The storage edge: procedures' refusals travel as JSON in the exception's DETAIL and read
//! back through `DbError::detail`; the procedures retired in `sql/procedures/dropped.sql` are
//! gone and the helpers exist; a broker pointed at a database it can never use stops at once,
//! saying which, in plain text.

use std::process::Command;
use std::time::{Duration, Instant};

use ackbench_broker::storage::startup::{classify, ConnectFailure};
use ackbench_broker::storage::DbError;
use serde_json::{json, Value};

use crate::common::{fresh_database, TestBroker};

/// Calls `log_transaction_wire_v2` with `payload` and returns its failure as a `DbError`.
async fn refused(t: &TestBroker, payload: Value) -> DbError {
    let db = t.sql().await;
    let e = db
        .query_one("SELECT queen.log_transaction_wire_v2($1)", &[&payload])
        .await
        .expect_err("the procedure refuses");
    DbError::from_pg("log_transaction_wire_v2", e)
}

fn tenant() -> Value {
    json!(ackbench_wire::DEFAULT_TENANT)
}

#[tokio::test]
async fn a_required_lease_refusal_round_trips_through_detail() {
    let t = TestBroker::start().await;
    let e = refused(
        &t,
        json!({"tenant": tenant(), "required_leases": ["held-by-nobody"], "acks": []}),
    )
    .await;
    assert_eq!(e.message, "transaction refused", "a fixed message: {e}");
    assert_eq!(e.code.as_deref(), Some("P0001"));
    let detail = Value::Object(e.detail().expect("a structured refusal"));
    assert_eq!(
        detail,
        json!({"refusal": "required_lease", "index": 0, "lease": "held-by-nobody"})
    );
}

#[tokio::test]
async fn an_ack_refusal_names_its_ordinal_reason_and_hash() {
    let t = TestBroker::start().await;
    let unknown = uuid::Uuid::new_v4();
    let hash = "00112233445566778899aabbccddeeff";
    let ack = json!({"ordinal": 3, "partition_id": unknown, "group": "g", "worker": "",
                     "mode": "hash", "hashes": [hash], "statuses": ["completed"]});
    let e = refused(&t, json!({"tenant": tenant(), "acks": [ack]})).await;
    let detail = Value::Object(e.detail().expect("a structured refusal"));
    assert_eq!(
        detail,
        json!({"refusal": "ack", "ordinal": 3, "reason": "unresolvable", "hash": hash})
    );
}

#[tokio::test]
async fn a_duplicate_push_refusal_is_a_unique_violation_with_detail() {
    let t = TestBroker::start().await;
    let r = t
        .http
        .post(
            "/api/v1/transaction",
            json!({"operations": [{"type": "push", "items": [
                {"queue": "q", "transactionId": "same", "payload": 1},
                {"queue": "q", "transactionId": "same", "payload": 2}]}]}),
        )
        .await;
    assert_eq!(r.json["success"], json!(false), "{}", r.text);
    let error = r.json["error"].as_str().unwrap();
    assert!(
        error.contains("operations[0].items[1]") && error.contains("operations[0].items[0]"),
        "the answer names both items: {error}"
    );
}

#[tokio::test]
async fn other_failures_carry_no_refusal() {
    let t = TestBroker::start().await;
    let db = t.sql().await;
    let e = db
        .query_one("SELECT 1 / 0", &[])
        .await
        .expect_err("division by zero");
    let e = DbError::from_pg("probe", e);
    assert!(e.detail().is_none());
    assert_eq!(e.code.as_deref(), Some("22012"));
    assert!(!e.message.contains("22012"), "no SQLSTATE in the message");
}

#[tokio::test]
async fn superseded_pop_procedures_are_dropped_and_the_helpers_exist() {
    let t = TestBroker::start().await;
    let db = t.sql().await;
    let count = |names: Vec<&'static str>| {
        let db = &db;
        async move {
            let row = db
                .query_one(
                    "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
                     WHERE n.nspname = 'queen' AND p.proname = ANY($1)",
                    &[&names],
                )
                .await
                .unwrap();
            row.get::<_, i64>(0)
        }
    };
    let dropped = vec![
        "log_pop_v1",
        "log_pop_wildcard_v1",
        "log_pop_discover_v1",
        "log_pop_claim_v1",
        "log_pop_candidates_v1",
        "log_lease_span_v1",
    ];
    assert_eq!(count(dropped).await, 0);
    assert_eq!(
        count(vec!["lease_live_v1", "log_cursor_advance_v1"]).await,
        2
    );
    // PL/pgSQL (sql/procedures/ack.sql): an SQL function's UPDATE was re-planned on every ack.
    let language: String = db
        .query_one(
            "SELECT l.lanname::text FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang \
             WHERE p.proname = 'log_cursor_advance_v1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(language, "plpgsql");
}

/// The batched hot procedures plan their statements once per session (the `SET
/// plan_cache_mode` of their definitions in `sql/procedures/`): the plan cache kept choosing
/// custom plans for them, a full planning (up to 1.6 ms) on many calls.
#[tokio::test]
async fn batched_procedures_keep_a_generic_plan() {
    let t = TestBroker::start().await;
    let db = t.sql().await;
    let rows = db
        .query(
            "SELECT p.proname::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = 'queen' \
               AND 'plan_cache_mode=force_generic_plan' = ANY (p.proconfig) ORDER BY 1",
            &[],
        )
        .await
        .unwrap();
    let names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(
        names,
        [
            "log_ack_multi_v1",
            "log_cursor_advances_v1",
            "log_dedup_probe_v1",
            "log_pop_multi_v2",
            "log_pop_multi_v3",
            "log_push_multi_v2"
        ]
    );
}

#[tokio::test]
async fn a_refused_socket_is_transient() {
    let config: tokio_postgres::Config = "postgres://nobody@127.0.0.1:1/none".parse().unwrap();
    let Err(e) = config.connect(tokio_postgres::NoTls).await else {
        panic!("nothing listens on port 1");
    };
    assert!(matches!(
        classify(&config, &e),
        ConnectFailure::Transient(_)
    ));
}

/// Runs the broker binary against `url`; (exit success, stderr, how long it ran).
fn run_broker(url: &str) -> (bool, String, Duration) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_ackbench-broker"))
        .env("DATABASE_URL", url)
        .env("QUEEN_LISTEN", "127.0.0.1:0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), err, started.elapsed())
}

#[test]
fn a_missing_database_stops_the_binary_at_once_naming_it() {
    let (url, _) = fresh_database("exists");
    let missing = format!("{}_missing", url);
    let name = missing.rsplit('/').next().unwrap().to_string();
    let (ok, err, took) = run_broker(&missing);
    assert!(!ok, "non-zero exit");
    assert!(
        err.contains(&format!("database \"{name}\" does not exist")),
        "{err}"
    );
    assert!(
        took < Duration::from_secs(10),
        "stopped at once, not after retries: {took:?}"
    );
    assert!(
        !err.contains('\u{1b}'),
        "no ANSI codes when stderr is a pipe: {err}"
    );
}

#[test]
fn a_refused_login_stops_the_binary_at_once_naming_the_database() {
    let (url, _) = fresh_database("login");
    let name = url.rsplit('/').next().unwrap().to_string();
    let host = url.split('@').nth(1).unwrap();
    let (ok, err, took) = run_broker(&format!("postgres://no_such_role@{host}"));
    assert!(!ok, "non-zero exit");
    assert!(err.contains(&format!("database \"{name}\"")), "{err}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}
