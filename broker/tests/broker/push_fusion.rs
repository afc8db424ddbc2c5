//! Push fusion and the indexed dedup probe, through the real HTTP server against real
//! PostgreSQL: exactly-once and dense offsets under concurrency (fusion on and off), duplicate
//! resolution across concurrent requests, a bundle whose one segment holds duplicates, and
//! the probe's plan.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::common::{txns, TestBroker};
use hyper::StatusCode;
use serde_json::{json, Value};

async fn many_concurrent_pushes_land_exactly_once_with_dense_offsets(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    const PARTITIONS: usize = 24;
    const CLIENTS: usize = 12;
    const ROUNDS: usize = 6;
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let http = t.http.clone();
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for r in 0..ROUNDS {
                // each request spreads over three partitions
                let items: Vec<Value> = (0..3)
                    .map(|i| {
                        let p = format!("p{}", (c + r + i * 7) % PARTITIONS);
                        json!({"queue": "many", "partition": p, "transactionId": format!("{c}-{r}-{i}"), "payload": i})
                    })
                    .collect();
                let reply = http.post("/api/v1/push", json!({ "items": items })).await;
                assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
                for x in reply.json.as_array().unwrap() {
                    assert_eq!(x["status"], "queued");
                    ids.push(x["message_id"].as_str().unwrap().to_string());
                }
            }
            ids
        }));
    }
    let mut ids = HashSet::new();
    for task in tasks {
        for id in task.await.unwrap() {
            assert!(ids.insert(id), "a message id answered twice");
        }
    }
    assert_eq!(ids.len(), CLIENTS * ROUNDS * 3);

    let db = t.sql().await;
    let rows = db
        .query(
            "SELECT p.id, p.last_offset, s.base_offset, s.end_offset, \
                    (SELECT count(*) FROM queen.log_txns x WHERE x.partition_id = s.partition_id \
                       AND x.base_offset = s.base_offset AND x.end_offset = s.end_offset) \
             FROM queen.log_partitions p JOIN queen.log_segments s ON s.partition_id = p.id \
             ORDER BY p.id, s.base_offset",
            &[],
        )
        .await
        .unwrap();
    let mut next: HashMap<uuid::Uuid, (i64, i64)> = HashMap::new();
    for r in &rows {
        let (pid, last, base, end, sidecar): (uuid::Uuid, i64, i64, i64, i64) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
        let expected = next.get(&pid).map_or(0, |(e, _)| *e);
        assert_eq!(base, expected, "offsets are dense");
        assert_eq!(sidecar, 1, "one sidecar row mirrors each segment");
        next.insert(pid, (end + 1, last));
    }
    let total: i64 = next.values().map(|(e, _)| *e).sum();
    assert_eq!(total as usize, CLIENTS * ROUNDS * 3);
    assert!(next.values().all(|(e, last)| *e == last + 1));

    // every message pops exactly once, with its answered id
    let mut popped = HashSet::new();
    for p in 0..PARTITIONS {
        let reply = t
            .http
            .pop("many", &format!("p{p}"), "batch=1000&autoAck=true")
            .await;
        for m in reply.json["messages"].as_array().into_iter().flatten() {
            assert!(popped.insert(m["id"].as_str().unwrap().to_string()));
        }
    }
    assert_eq!(popped, ids);
    t.broker.shutdown().await;
}

async fn concurrent_duplicates_resolve_to_the_original(fusion: bool) {
    let t = TestBroker::start_with(|c| c.push_fusion = fusion).await;
    let mut tasks = Vec::new();
    for c in 0..16 {
        let http = t.http.clone();
        tasks.push(tokio::spawn(async move {
            // the shared id twice in one request, around a unique one
            http.push(
                "dups",
                &[("p", "same"), ("p", &format!("own-{c}")), ("p", "same")],
            )
            .await
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    let queued: Vec<&Value> = answers
        .iter()
        .map(|a| &a[0])
        .filter(|x| x["status"] == "queued")
        .collect();
    assert_eq!(queued.len(), 1, "exactly one copy of `same` is written");
    let original = queued[0]["message_id"].clone();
    for a in &answers {
        assert_eq!(a[1]["status"], "queued");
        assert_eq!(a[2]["status"], "duplicate");
        assert_eq!(a[0]["message_id"], original);
        assert_eq!(a[2]["message_id"], original);
    }
    let p = t.http.pop("dups", "p", "batch=100").await;
    let got = txns(&p);
    assert_eq!(got.iter().filter(|x| *x == "same").count(), 1);
    assert_eq!(got.len(), 17);
    assert_eq!(p.json["messages"][0]["id"], original);
    t.broker.shutdown().await;
}

on_both_push_paths!(
    many_concurrent_pushes_land_exactly_once_with_dense_offsets,
    concurrent_duplicates_resolve_to_the_original,
);

#[tokio::test]
async fn a_bundle_writes_its_other_segments_when_one_holds_duplicates() {
    // One shard, one flush in flight: while a flush of `a` waits on its partition lock
    // (held below), pushes to `b` and `c` become ready and go out together in the next flush.
    let t = TestBroker::start_with(|c| {
        c.push_fusion = true;
        c.push_fusion_shards = 1;
        c.push_fusion_max_inflight = 1;
    })
    .await;
    let first_b = t.http.push("bq", &[("a", "a0"), ("b", "x")]).await;
    let stats = &t.broker.app().push_fusion.as_ref().unwrap().stats;
    let (flushes0, segments0) = (stats.flushes.load(Relaxed), stats.segments.load(Relaxed));

    let mut blocker = t.sql().await;
    let tx = blocker.transaction().await.unwrap();
    tx.execute(
        "SELECT 1 FROM queen.log_partitions WHERE name = 'a' FOR UPDATE",
        &[],
    )
    .await
    .unwrap();
    let http = t.http.clone();
    let push_a = tokio::spawn(async move { http.push("bq", &[("a", "a1")]).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let http = t.http.clone();
    let push_b = tokio::spawn(async move { http.push("bq", &[("b", "x"), ("b", "y")]).await });
    let http = t.http.clone();
    let push_c = tokio::spawn(async move { http.push("bq", &[("c", "z")]).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    tx.rollback().await.unwrap();

    let (a, b, c) = (
        push_a.await.unwrap(),
        push_b.await.unwrap(),
        push_c.await.unwrap(),
    );
    assert_eq!(a[0]["status"], "queued");
    assert_eq!(b[0]["status"], "duplicate");
    assert_eq!(b[0]["message_id"], first_b[1]["message_id"]);
    assert_eq!(b[1]["status"], "queued");
    assert_eq!(c[0]["status"], "queued");
    // a; then b (duplicates, not written) + c (written) in one call; then b's survivor
    assert_eq!(stats.flushes.load(Relaxed) - flushes0, 3);
    assert_eq!(stats.segments.load(Relaxed) - segments0, 4);
    let p = t.http.pop("bq", "b", "batch=10").await;
    assert_eq!(txns(&p), ["x", "y"]);
    let p = t.http.pop("bq", "c", "batch=10").await;
    assert_eq!(txns(&p), ["z"]);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn fused_segments_carry_many_requests() {
    let t = TestBroker::start_with(|c| {
        c.push_fusion = true;
        c.push_fusion_shards = 1;
    })
    .await;
    let mut tasks = Vec::new();
    for i in 0..64 {
        let http = t.http.clone();
        tasks.push(tokio::spawn(async move {
            http.push("hot", &[("p", &format!("m{i}"))]).await
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap()[0]["status"], "queued");
    }
    let stats = &t.broker.app().push_fusion.as_ref().unwrap().stats;
    assert_eq!(stats.frames_written.load(Relaxed), 64);
    assert!(
        stats.flushes.load(Relaxed) < 64,
        "64 concurrent pushes to one partition took {} commits",
        stats.flushes.load(Relaxed)
    );
    let p = t.http.pop("hot", "p", "batch=100").await;
    assert_eq!(txns(&p).len(), 64);
    t.broker.shutdown().await;
}

/// With the broker's defaults, push fusion starts at one call in flight: concurrent pushes to
/// as many partitions wait for the call in flight and share the next ones (up to 16 partitions
/// a call), instead of each paying a commit, and the metrics say so. (Queen's 8 shards of 8
/// calls each gave every push a call of its own.)
#[tokio::test]
async fn by_default_pushes_to_many_partitions_share_calls() {
    let t = TestBroker::start().await;
    let stats = &t.broker.app().push_fusion.as_ref().unwrap().stats;
    let mut tasks = Vec::new();
    for i in 0..64 {
        let http = t.http.clone();
        tasks.push(tokio::spawn(async move {
            http.push("spread", &[(&format!("p{i}"), &format!("m{i}"))])
                .await
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap()[0]["status"], "queued");
    }
    assert_eq!(stats.frames_written.load(Relaxed), 64);
    let (flushes, segments) = (stats.flushes.load(Relaxed), stats.segments.load(Relaxed));
    assert_eq!(segments, 64, "one segment per partition");
    assert!(
        flushes <= 16,
        "64 concurrent pushes to 64 partitions took {flushes} calls"
    );
    let text = t.http.get("/metrics").await.text;
    // One call at first; a probe may have tried a second while the 64 waited.
    let limit = crate::common::metric(&t.http, "queen_push_fusion_flush_limit").await;
    assert!((1.0..=8.0).contains(&limit), "flush limit {limit}");
    assert!(
        text.contains(&format!("\nqueen_push_fusion_flushes_total {flushes}\n")),
        "{text}"
    );
    assert!(
        text.contains("queen_engine_setting{name=\"QUEEN_PUSH_FUSION_MAX_INFLIGHT\"} 0"),
        "{text}"
    );
    t.broker.shutdown().await;
}

/// A connection to the test broker's database whose notices (auto_explain's plans of every
/// nested statement) come back on the receiver, and the id of partition `p` of queue `queue`
/// after one push to it.
async fn explained_probe_session(
    t: &TestBroker,
    queue: &str,
) -> (
    tokio_postgres::Client,
    tokio::sync::mpsc::UnboundedReceiver<String>,
    uuid::Uuid,
) {
    t.http.push(queue, &[("p", "seed")]).await;
    let (client, mut conn) = tokio_postgres::connect(&t.db_url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let (notices_tx, notices) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(m)) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
            if let tokio_postgres::AsyncMessage::Notice(n) = m {
                let _ = notices_tx.send(n.message().to_string());
            }
        }
    });
    let pid: uuid::Uuid = client
        .query_one(
            "SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id \
             WHERE q.name = $1 AND p.name = 'p'",
            &[&queue],
        )
        .await
        .unwrap()
        .get(0);
    client
        .batch_execute(
            "LOAD 'auto_explain'; \
             SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; \
             SET auto_explain.log_level = notice; SET client_min_messages = notice",
        )
        .await
        .unwrap();
    (client, notices, pid)
}

/// Runs the probe on `hashes_sql` (an SQL bytea expression) for partition `pid` with a window
/// of an hour; returns its three answers (empty when it found no duplicate) and the plans of
/// the statements it ran.
async fn probe(
    client: &tokio_postgres::Client,
    notices: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    pid: uuid::Uuid,
    hashes_sql: &str,
) -> ((Vec<i32>, Vec<i64>, Vec<i32>), Vec<String>) {
    while notices.try_recv().is_ok() {}
    let row = client
        .query_one(
            &format!(
                "SELECT dup_index, dup_offset, dup_first \
                 FROM queen.log_dedup_probe_v1($1, 0, 3600, {hashes_sql})"
            ),
            &[&pid],
        )
        .await
        .unwrap();
    let answers = (
        row.get::<_, Option<Vec<i32>>>(0).unwrap_or_default(),
        row.get::<_, Option<Vec<i64>>>(1).unwrap_or_default(),
        row.get::<_, Option<Vec<i32>>>(2).unwrap_or_default(),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut plans = Vec::new();
    while let Ok(n) = notices.try_recv() {
        plans.push(n);
    }
    (answers, plans)
}

/// The probe must find hashes through the GIN index, never by scanning the partition's
/// sidecar rows inside the window (the cost that grew with the window): every statement of
/// the probe that reads the sidecar goes through the index, in both plan modes.
#[tokio::test]
async fn dedup_probe_uses_the_hash_index() {
    let t = TestBroker::start().await;
    let (client, mut notices, pid) = explained_probe_session(&t, "ix").await;
    // 20 000 one-frame sidecar rows inside the window
    client
        .execute(
            "INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, hashes) \
             SELECT $1, g, g, decode(md5('h' || g), 'hex') FROM generate_series(1, 20000) g",
            &[&pid],
        )
        .await
        .unwrap();
    client
        .batch_execute("ANALYZE queen.log_txns")
        .await
        .unwrap();
    for mode in ["force_custom_plan", "force_generic_plan"] {
        client
            .batch_execute(&format!("SET plan_cache_mode = {mode}"))
            .await
            .unwrap();
        let hashes = "decode(md5('h12345') || md5('new') || md5('new'), 'hex')";
        let (answers, plans) = probe(&client, &mut notices, pid, hashes).await;
        assert_eq!(answers, (vec![0, 2], vec![12345, -1], vec![-1, 1]));
        let reads: Vec<&String> = plans.iter().filter(|p| p.contains("log_txns")).collect();
        assert!(
            !reads.is_empty(),
            "{mode}: no plan of the probe's queries in {plans:?}"
        );
        for plan in reads {
            assert!(
                plan.contains("log_txns_dedup_idx"),
                "{mode}: the probe does not use the hash index:\n{plan}"
            );
            assert!(
                !plan.contains("Seq Scan on log_txns") && !plan.contains("log_txns_age_idx"),
                "{mode}: the probe scans the window:\n{plan}"
            );
        }
    }
    t.broker.shutdown().await;
}

/// The probe's shortcut: a push none of whose keys is stored, and whose keys are distinct,
/// is judged by the index lookup alone (the exact comparison is not run). A stored hash that
/// shares only its key with an incoming one (the first 8 bytes), or two incoming hashes that
/// share a key, take the exact comparison, which finds no duplicate in either.
#[tokio::test]
async fn the_probe_judges_a_fresh_push_by_the_index_alone_and_a_shared_key_exactly() {
    let t = TestBroker::start().await;
    let (client, mut notices, pid) = explained_probe_session(&t, "shortcut").await;
    // A stored frame whose hash is 8 bytes of 0x11 and 8 of 0x22.
    client
        .execute(
            "INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, hashes) \
             VALUES ($1, 100, 100, decode(repeat('11', 8) || repeat('22', 8), 'hex'))",
            &[&pid],
        )
        .await
        .unwrap();
    let exact_ran = |plans: &[String]| plans.iter().any(|p| p.contains("generate_series"));

    let fresh = "decode(md5('fresh-1') || md5('fresh-2'), 'hex')";
    let (answers, plans) = probe(&client, &mut notices, pid, fresh).await;
    assert_eq!(
        answers,
        Default::default(),
        "a fresh push holds no duplicate"
    );
    assert!(
        !exact_ran(&plans),
        "a fresh push ran the exact comparison: {plans:?}"
    );

    let same_key = "decode(repeat('11', 8) || repeat('33', 8), 'hex')";
    let (answers, plans) = probe(&client, &mut notices, pid, same_key).await;
    assert_eq!(
        answers,
        Default::default(),
        "a shared key is not a duplicate"
    );
    assert!(
        exact_ran(&plans),
        "a shared stored key skipped the exact comparison"
    );

    let twins_by_key = "decode(repeat('44', 8) || repeat('55', 8) || repeat('44', 8) \
                        || repeat('66', 8), 'hex')";
    let (answers, plans) = probe(&client, &mut notices, pid, twins_by_key).await;
    assert_eq!(
        answers,
        Default::default(),
        "two hashes sharing a key are distinct"
    );
    assert!(
        exact_ran(&plans),
        "a key shared within the push skipped the exact comparison"
    );

    let stored = "decode(md5('fresh-3') || repeat('11', 8) || repeat('22', 8), 'hex')";
    let (answers, _) = probe(&client, &mut notices, pid, stored).await;
    assert_eq!(
        answers,
        (vec![1], vec![100], vec![-1]),
        "the stored hash is found"
    );
    t.broker.shutdown().await;
}
