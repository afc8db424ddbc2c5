//! The pop side of Queen's queue options and subscription parameters (issue 16): a queue's
//! `delayedProcessing` and `windowBuffer` hold messages back on every pop route (named,
//! wildcard, discovery, long-poll, auto ack) and in PostgreSQL itself; discovery prefers
//! `priority`; `subscriptionMode` takes Queen's aliases and `subscriptionFrom` places a new
//! group's cursors. Delays are 1-2 s; assertions are about what is delivered, never how fast.

use std::time::{Duration, Instant};

use crate::common::{txns, Http, Reply, TestBroker};
use hyper::StatusCode;
use serde_json::{json, Value};

async fn configure(http: &Http, queue: &str, namespace: &str, options: Value) {
    let r = http
        .post(
            "/api/v1/configure",
            json!({"queue": queue, "namespace": namespace, "task": "t", "options": options}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

async fn wildcard(http: &Http, queue: &str, query: &str) -> Reply {
    http.get(&format!("/api/v1/pop/queue/{queue}?{query}"))
        .await
}

async fn discover(http: &Http, namespace: &str, query: &str) -> Reply {
    http.get(&format!("/api/v1/pop?namespace={namespace}&{query}"))
        .await
}

/// The same message popped by each route, each with its own consumer group.
async fn pop_every_route(http: &Http, queue: &str, namespace: &str, suffix: &str) -> Vec<Reply> {
    vec![
        http.pop(queue, "p", &format!("consumerGroup=named{suffix}"))
            .await,
        wildcard(http, queue, &format!("consumerGroup=wild{suffix}")).await,
        discover(http, namespace, &format!("consumerGroup=disc{suffix}")).await,
        http.pop(
            queue,
            "p",
            &format!("consumerGroup=auto{suffix}&autoAck=true"),
        )
        .await,
    ]
}

#[tokio::test]
async fn a_delayed_message_is_delivered_by_no_route_before_its_delay_and_by_all_after() {
    let t = TestBroker::start().await;
    configure(&t.http, "late", "delay-ns", json!({"delayedProcessing": 2})).await;
    t.http.push("late", &[("p", "m")]).await;
    for r in pop_every_route(&t.http, "late", "delay-ns", "").await {
        assert_eq!(r.status, StatusCode::NO_CONTENT, "too early: {}", r.text);
    }
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    for r in pop_every_route(&t.http, "late", "delay-ns", "").await {
        assert_eq!(txns(&r), ["m"], "after the delay: {}", r.text);
    }
    t.broker.shutdown().await;
}

#[tokio::test]
async fn a_span_stops_at_the_first_segment_still_delayed() {
    let t = TestBroker::start().await;
    configure(&t.http, "spans", "span-ns", json!({"delayedProcessing": 2})).await;
    t.http.push("spans", &[("p", "a0"), ("p", "a1")]).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    t.http.push("spans", &[("p", "b0")]).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let r = t.http.pop("spans", "p", "batch=10&autoAck=true").await;
    assert_eq!(txns(&r), ["a0", "a1"], "b0 is still delayed: {}", r.text);
    let r = wildcard(&t.http, "spans", "batch=10&consumerGroup=g").await;
    assert_eq!(txns(&r), ["a0", "a1"], "the wildcard stops there too");
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let r = t.http.pop("spans", "p", "batch=10&autoAck=true").await;
    assert_eq!(txns(&r), ["b0"]);
    t.broker.shutdown().await;
}

/// A long-poll woken by the push of a delayed message finds nothing, parks again, and still
/// delivers once the delay has passed (the re-check), on every route.
#[tokio::test]
async fn long_polls_deliver_a_delayed_message_once_its_delay_has_passed() {
    let t = TestBroker::start().await;
    configure(&t.http, "waits", "wait-ns", json!({"delayedProcessing": 1})).await;
    let queries = [
        "/api/v1/pop/queue/waits/partition/p?consumerGroup=named",
        "/api/v1/pop/queue/waits?consumerGroup=wild",
        "/api/v1/pop/queue/waits",
        "/api/v1/pop?namespace=wait-ns&consumerGroup=disc",
    ];
    let started = Instant::now();
    let parked: Vec<_> = queries
        .iter()
        .map(|q| {
            let (http, q) = (t.http.clone(), format!("{q}{}", sep(q)));
            tokio::spawn(async move { http.get(&format!("{q}wait=true&timeout=8000")).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pushed_at = Instant::now();
    t.http.push("waits", &[("p", "m")]).await;
    for (q, task) in queries.iter().zip(parked) {
        let r = task.await.unwrap();
        assert_eq!(txns(&r), ["m"], "{q}: {}", r.text);
        assert!(
            pushed_at.elapsed() >= Duration::from_millis(950),
            "{q} delivered before the delay"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(8), "none timed out");
    t.broker.shutdown().await;
}

/// A long-poll that parks after a delayed message was pushed through another broker (no push
/// wakes it, its hotlist never heard of the partition) still gets it once ready.
#[tokio::test]
async fn a_long_poll_gets_a_delayed_message_pushed_through_another_broker() {
    let t = TestBroker::start().await;
    configure(&t.http, "twin", "twin-ns", json!({"delayedProcessing": 1})).await;
    let (other, other_http) = t.twin().await;
    let pushed_at = Instant::now();
    other_http.push("twin", &[("p", "m")]).await;
    let (a, b) = tokio::join!(
        wildcard(&t.http, "twin", "consumerGroup=g&wait=true&timeout=8000"),
        discover(&t.http, "twin-ns", "consumerGroup=h&wait=true&timeout=8000"),
    );
    assert_eq!(txns(&a), ["m"], "{}", a.text);
    assert_eq!(txns(&b), ["m"], "{}", b.text);
    assert!(pushed_at.elapsed() >= Duration::from_millis(950));
    other.shutdown().await;
    t.broker.shutdown().await;
}

fn sep(query: &str) -> &'static str {
    if query.contains('?') {
        "&"
    } else {
        "?"
    }
}

#[tokio::test]
async fn a_window_buffer_holds_a_partition_back_until_its_newest_push_is_old_enough() {
    let t = TestBroker::start().await;
    configure(&t.http, "burst", "win-ns", json!({"windowBuffer": 2})).await;
    t.http.push("burst", &[("p", "a")]).await;
    assert_eq!(
        t.http.pop("burst", "p", "").await.status,
        StatusCode::NO_CONTENT
    );
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    t.http.push("burst", &[("p", "b")]).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    // `a` is older than the window, but the partition's newest push is not.
    for r in [
        t.http.pop("burst", "p", "batch=10").await,
        wildcard(&t.http, "burst", "batch=10&consumerGroup=g").await,
        discover(&t.http, "win-ns", "batch=10&consumerGroup=h").await,
    ] {
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    }
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    for r in [
        t.http.pop("burst", "p", "batch=10").await,
        wildcard(&t.http, "burst", "batch=10&consumerGroup=g").await,
        discover(&t.http, "win-ns", "batch=10&consumerGroup=h").await,
    ] {
        assert_eq!(txns(&r), ["a", "b"], "the burst together: {}", r.text);
    }
    t.broker.shutdown().await;
}

#[tokio::test]
async fn a_window_buffer_holds_back_only_the_partitions_with_a_recent_push() {
    let t = TestBroker::start().await;
    configure(&t.http, "parts", "parts-ns", json!({"windowBuffer": 1})).await;
    t.http.push("parts", &[("calm", "c"), ("busy", "b0")]).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    t.http.push("parts", &[("busy", "b1")]).await;
    let r = wildcard(&t.http, "parts", "batch=10&partitions=2&autoAck=true").await;
    assert_eq!(txns(&r), ["c"], "{}", r.text);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let r = wildcard(&t.http, "parts", "batch=10&partitions=2&autoAck=true").await;
    assert_eq!(txns(&r), ["b0", "b1"], "{}", r.text);
    t.broker.shutdown().await;
}

/// PostgreSQL is the authority: a claim naming a held-back partition directly (as a stale hint
/// of any broker would) gets nothing.
#[tokio::test]
async fn postgres_refuses_a_held_back_partition_whatever_the_broker_names() {
    use ackbench_broker::storage::procs::pop::{pop_multi_once, PopJob};

    let t = TestBroker::start().await;
    configure(&t.http, "held", "held-ns", json!({"delayedProcessing": 60})).await;
    configure(&t.http, "framed", "held-ns", json!({"windowBuffer": 60})).await;
    t.http.push("held", &[("p", "h")]).await;
    t.http.push("framed", &[("p", "f")]).await;
    let sql = t.sql().await;
    let pids: Vec<uuid::Uuid> = sql
        .query(
            "SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id \
             WHERE q.name IN ('held', 'framed')",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(pids.len(), 2);
    let job = |auto_ack| PopJob {
        group: ackbench_wire::QUEUE_MODE_GROUP.into(),
        lease_id: "w".into(),
        batch: 10,
        max_partitions: 2,
        lease_seconds: Some(30),
        auto_ack,
        candidates: pids.clone(),
        cached: Vec::new(),
    };
    let pool = ackbench_broker::storage::pool(&t.db_url.parse().unwrap(), 1).unwrap();
    let db = pool.get().await.unwrap();
    let (leased, acked) = (job(false), job(true));
    let rows = pop_multi_once(&db, &[&leased, &acked]).await.unwrap();
    assert!(rows.iter().all(|r| r.is_empty()), "nothing claimed");
    let cursors: i64 = sql
        .query_one("SELECT count(*) FROM queen.log_consumers", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(cursors, 0, "and nothing written");
    t.broker.shutdown().await;
}

#[tokio::test]
async fn discovery_pops_prefer_queues_of_higher_priority() {
    let t = TestBroker::start().await;
    for (queue, priority) in [("low", 1), ("high", 9), ("mid", 5), ("plain", 0)] {
        configure(&t.http, queue, "prio", json!({"priority": priority})).await;
        t.http.push(queue, &[("p", queue)]).await;
    }
    let mut order = Vec::new();
    for _ in 0..4 {
        let r = discover(&t.http, "prio", "batch=1&autoAck=true").await;
        order.extend(txns(&r));
    }
    assert_eq!(order, ["high", "mid", "low", "plain"]);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn queen_subscription_aliases_are_new_and_all() {
    let t = TestBroker::start().await;
    t.http.push("alias", &[("p", "old")]).await;
    let r = t
        .http
        .pop("alias", "p", "consumerGroup=n&subscriptionMode=new-only")
        .await;
    assert_eq!(
        r.status,
        StatusCode::NO_CONTENT,
        "new-only skips the backlog"
    );
    let r = wildcard(
        &t.http,
        "alias",
        "consumerGroup=w&subscriptionMode=new-only",
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "on the wildcard too");
    let r = t
        .http
        .pop(
            "alias",
            "p",
            "consumerGroup=b&subscriptionMode=from_beginning",
        )
        .await;
    assert_eq!(txns(&r), ["old"], "from_beginning gets it");
    t.http.push("alias", &[("p", "later")]).await;
    let r = t
        .http
        .pop("alias", "p", "consumerGroup=n&subscriptionMode=new-only")
        .await;
    assert_eq!(txns(&r), ["later"]);
    let r = wildcard(
        &t.http,
        "alias",
        "consumerGroup=w&subscriptionMode=new-only",
    )
    .await;
    assert_eq!(txns(&r), ["later"]);
    let r = t.http.pop("alias", "p", "subscriptionMode=latest").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.json["error"]
        .as_str()
        .unwrap()
        .contains("subscriptionMode"));
    t.broker.shutdown().await;
}

#[tokio::test]
async fn subscription_from_now_starts_at_the_tail_and_overrides_the_mode() {
    let t = TestBroker::start().await;
    t.http.push("now", &[("p", "old")]).await;
    let q = "consumerGroup=g&subscriptionMode=all&subscriptionFrom=now";
    assert_eq!(
        t.http.pop("now", "p", q).await.status,
        StatusCode::NO_CONTENT
    );
    let d = "consumerGroup=d&subscriptionFrom=now";
    assert_eq!(
        wildcard(&t.http, "now", d).await.status,
        StatusCode::NO_CONTENT
    );
    t.http.push("now", &[("p", "new")]).await;
    assert_eq!(txns(&t.http.pop("now", "p", q).await), ["new"]);
    assert_eq!(txns(&wildcard(&t.http, "now", d).await), ["new"]);
    t.broker.shutdown().await;
}

/// PostgreSQL's clock as an ISO-8601 UTC time (segments are stamped by it).
async fn db_now(t: &TestBroker) -> String {
    t.sql()
        .await
        .query_one(
            "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', \
             'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn subscription_from_a_time_starts_at_the_first_segment_created_then_once_per_group() {
    let t = TestBroker::start_with(|c| c.push_fusion = false).await;
    t.http
        .push("since", &[("p", "before"), ("q", "q-before")])
        .await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let at = db_now(&t).await;
    t.http
        .push("since", &[("p", "after"), ("q", "q-after")])
        .await;
    let from = format!("subscriptionFrom={at}&batch=10");
    let r = t
        .http
        .pop(
            "since",
            "p",
            &format!("consumerGroup=g&autoAck=true&{from}"),
        )
        .await;
    assert_eq!(txns(&r), ["after"], "{}", r.text);
    let r = wildcard(
        &t.http,
        "since",
        &format!("consumerGroup=w&partitions=2&{from}"),
    )
    .await;
    let mut got = txns(&r);
    got.sort();
    assert_eq!(got, ["after", "q-after"], "{}", r.text);

    // Only a group's first pop places its cursors: an earlier time later does not rewind.
    let early = "subscriptionFrom=2000-01-01T00:00:00Z&batch=10&autoAck=true";
    let r = t
        .http
        .pop("since", "p", &format!("consumerGroup=g&{early}"))
        .await;
    assert_eq!(
        r.status,
        StatusCode::NO_CONTENT,
        "g's cursor stays past `after`"
    );
    let r = t
        .http
        .pop("since", "p", &format!("consumerGroup=e&{early}"))
        .await;
    assert_eq!(txns(&r), ["before", "after"], "a new group from long ago");
    t.broker.shutdown().await;
}

#[tokio::test]
async fn subscription_from_in_discovery_pops() {
    let t = TestBroker::start_with(|c| c.push_fusion = false).await;
    configure(&t.http, "d1", "since-ns", json!({})).await;
    t.http.push("d1", &[("p", "old")]).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let at = db_now(&t).await;
    t.http.push("d1", &[("p", "new")]).await;
    let r = discover(
        &t.http,
        "since-ns",
        &format!("consumerGroup=g&batch=10&subscriptionFrom={at}"),
    )
    .await;
    assert_eq!(txns(&r), ["new"], "{}", r.text);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn a_malformed_subscription_from_is_400_naming_it_and_changes_nothing() {
    let t = TestBroker::start().await;
    t.http.push("bad", &[("p", "m")]).await;
    for raw in [
        "yesterday",
        "2026-02-30T00:00:00Z",
        "12345",
        "2026-01-01T00:00:00%2B9",
    ] {
        for path in [
            "/api/v1/pop/queue/bad/partition/p?consumerGroup=g&subscriptionFrom=",
            "/api/v1/pop/queue/bad?consumerGroup=g&subscriptionFrom=",
            "/api/v1/pop?namespace=x&consumerGroup=g&subscriptionFrom=",
        ] {
            let r = t.http.get(&format!("{path}{raw}")).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}{raw}");
            assert!(
                r.json["error"]
                    .as_str()
                    .unwrap()
                    .contains("subscriptionFrom"),
                "{}",
                r.text
            );
        }
    }
    let sql = t.sql().await;
    let written: i64 = sql
        .query_one(
            "SELECT (SELECT count(*) FROM queen.log_groups) \
                  + (SELECT count(*) FROM queen.log_consumers)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(written, 0);
    t.broker.shutdown().await;
}

#[tokio::test]
async fn the_replaced_pop_procedures_are_gone() {
    let t = TestBroker::start().await;
    let sql = t.sql().await;
    let names = vec![
        "log_pop_multi_v1",
        "log_pop_candidates_v2",
        "log_pop_wildcard_v2",
        "log_pop_scope_v1",
        "log_subscribe_new_v1",
    ];
    let left: i64 = sql
        .query_one(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = 'queen' AND p.proname = ANY ($1)",
            &[&names],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    t.broker.shutdown().await;
}
