//! Start-up: migrations applied once under concurrency, bad configuration refused by name,
//! retention purging the sidecar on its own clock.

use std::process::Command;

use crate::common::{fresh_database, TestBroker};
use ackbench_broker::{Broker, Config};
use serde_json::json;

#[tokio::test]
async fn two_brokers_started_at_once_end_with_one_schema() {
    let (_url, database) = fresh_database("migrate");
    let (a, b) = tokio::join!(
        Broker::start(Config::for_database(database.clone())),
        Broker::start(Config::for_database(database.clone()))
    );
    let (a, b) = (a.expect("first broker"), b.expect("second broker"));
    let again = Broker::start(Config::for_database(database.clone()))
        .await
        .expect("third start");
    let (client, conn) = database.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let rows = client
        .query(
            "SELECT version FROM queen.schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap();
    let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    let expected: Vec<i32> = ackbench_broker::storage::migrations::SCHEMA_MIGRATIONS
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(versions, expected);
    for b in [a, b, again] {
        b.shutdown().await;
    }
}

#[test]
fn a_bad_variable_stops_the_binary_naming_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_ackbench-broker"))
        .env("QUEEN_ACK_FUSION_SHARDS", "many")
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("QUEEN_ACK_FUSION_SHARDS"), "{err}");
}

#[tokio::test]
async fn retention_purges_old_sidecar_rows_and_advances_txns_start() {
    let t = TestBroker::start_with(|c| {
        c.txns_min_retention_seconds = 0;
        c.retention_interval_ms = 3_600_000;
    })
    .await;
    t.http
        .post(
            "/api/v1/configure",
            json!({"queue": "r", "options": {"dedupWindowSeconds": 1}}),
        )
        .await;
    t.http.push("r", &[("p", "a"), ("p", "b")]).await;
    t.http.push("r", &[("p", "c")]).await;
    let db = t.sql().await;
    db.execute(
        "UPDATE queen.log_txns SET created_at = now() - interval '1 hour' WHERE base_offset = 0",
        &[],
    )
    .await
    .unwrap();
    ackbench_broker::retention::pass(t.broker.app())
        .await
        .unwrap();
    let row = db
        .query_one(
            "SELECT txns_start, log_start FROM queen.log_partitions",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        row.get::<_, i64>(0),
        2,
        "txns_start moves past the purged row"
    );
    assert_eq!(
        row.get::<_, i64>(1),
        0,
        "segments are kept (no retention configured)"
    );
    let left: i64 = db
        .query_one("SELECT count(*) FROM queen.log_txns", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 1);
    // the purge floor keeps rows younger than it
    let t2 = TestBroker::start_with(|c| c.retention_interval_ms = 3_600_000).await;
    t2.http
        .post(
            "/api/v1/configure",
            json!({"queue": "r", "options": {"dedupWindowSeconds": 0}}),
        )
        .await;
    t2.http.push("r", &[("p", "a")]).await;
    let db2 = t2.sql().await;
    db2.execute(
        "UPDATE queen.log_txns SET created_at = now() - interval '10 minutes'",
        &[],
    )
    .await
    .unwrap();
    ackbench_broker::retention::pass(t2.broker.app())
        .await
        .unwrap();
    let left: i64 = db2
        .query_one("SELECT count(*) FROM queen.log_txns", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 1, "the 900 s floor still holds a 10-minute-old row");
    t.broker.shutdown().await;
    t2.broker.shutdown().await;
}

#[tokio::test]
async fn segment_retention_drops_old_and_consumed_segments() {
    let t = TestBroker::start_with(|c| c.retention_interval_ms = 3_600_000).await;
    t.http
        .post(
            "/api/v1/configure",
            json!({"queue": "s", "options": {"completedRetentionSeconds": 1}}),
        )
        .await;
    t.http.push("s", &[("p", "a")]).await;
    t.http.push("s", &[("p", "b")]).await;
    t.http.pop("s", "p", "batch=1&autoAck=true").await; // consumes offset 0 only
    let db = t.sql().await;
    db.execute(
        "UPDATE queen.log_segments SET created_at = now() - interval '1 hour'",
        &[],
    )
    .await
    .unwrap();
    ackbench_broker::retention::pass(t.broker.app())
        .await
        .unwrap();
    let rows = db
        .query("SELECT base_offset FROM queen.log_segments ORDER BY 1", &[])
        .await
        .unwrap();
    let left: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(
        left,
        [1],
        "the consumed segment goes, the unconsumed one stays"
    );
    let log_start: i64 = db
        .query_one("SELECT log_start FROM queen.log_partitions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(log_start, 1);
    let p = t.http.pop("s", "p", "autoAck=true").await;
    assert_eq!(crate::common::txns(&p), ["b"]);
    t.broker.shutdown().await;
}
