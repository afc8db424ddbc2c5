//! Peer notifications (`QUEEN_PEER_NOTIFY`): two real brokers on one database. A push or a
//! release through one wakes a long-poll parked on the other at once; switched off, only the
//! long-poll's re-check (and the hotlist's reseed) finds it. A notification from outside the
//! deployment is dropped and counted when malformed, and when well formed can only wake: the
//! pop still goes through PostgreSQL. A listener whose connection drops reconnects.

use std::time::{Duration, Instant};

use crate::common::{metric, txns, Http, Reply, TestBroker};
use hyper::StatusCode;
use serde_json::{json, Value};

const CHANNEL: &str = ackbench_broker::peers::outbox::CHANNEL;
const PARKED: &str = "queen_long_poll_parked_total";

async fn pop_wildcard(http: &Http, queue: &str, query: &str) -> Reply {
    http.get(&format!("/api/v1/pop/queue/{queue}?{query}"))
        .await
}

/// Waits (up to 10 s) until `name` on `http` reaches `at_least`.
async fn await_metric(http: &Http, name: &str, at_least: f64) -> f64 {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let v = metric(http, name).await;
        if v >= at_least || Instant::now() > until {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Parks a wildcard long-poll on `consumer`, pushes one message through `producer` 150 ms later
/// into a partition of its own (well before the long-poll's own re-check, 500 ms after it parked), and returns what the
/// long-poll got and how long after the push's answer it got it.
async fn wake_across(
    producer: &Http,
    consumer: &Http,
    queue: &str,
    txn: &str,
) -> (Reply, Duration) {
    let http = consumer.clone();
    let q = queue.to_string();
    let parked = tokio::spawn(async move {
        let r = pop_wildcard(&http, &q, "batch=1&wait=true&timeout=5000").await;
        (r, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    producer.push(queue, &[(txn, txn)]).await;
    let pushed = Instant::now();
    let (r, arrived) = parked.await.unwrap();
    (r, arrived.saturating_duration_since(pushed))
}

/// Acks every message of a pop answer as completed, in one request.
async fn ack_all(http: &Http, reply: &Reply) {
    http.ack_completed(reply, None).await;
}

#[tokio::test]
async fn a_push_on_one_broker_wakes_a_long_poll_parked_on_another_within_50_ms() {
    let a = TestBroker::start().await;
    let (b, b_http) = a.twin().await;
    await_metric(&b_http, "queen_peer_listener_connects_total", 1.0).await;
    assert_eq!(
        pop_wildcard(&b_http, "peers", "batch=1").await.status,
        StatusCode::NO_CONTENT
    );
    // A first round warms both brokers' connections up.
    let (r, _) = wake_across(&a.http, &b_http, "peers", "warm").await;
    assert_eq!(txns(&r), ["warm"]);
    let mut waits = Vec::new();
    for round in 0..5 {
        let txn = format!("m-{round}");
        let (r, waited) = wake_across(&a.http, &b_http, "peers", &txn).await;
        assert_eq!(txns(&r), [txn.as_str()]);
        assert!(
            waited < Duration::from_millis(300),
            "round {round}: woken by the notification, not the 500 ms re-check: {waited:?}"
        );
        waits.push(waited);
    }
    waits.sort();
    eprintln!("wake-ups across brokers: {waits:?}");
    assert!(
        waits[2] < Duration::from_millis(50),
        "the median wake-up across brokers is within 50 ms: {waits:?}"
    );
    assert!(metric(&a.http, "queen_peer_notifications_sent_total").await >= 6.0);
    assert!(metric(&b_http, "queen_peer_events_applied_total").await >= 6.0);
    assert_eq!(
        metric(&b_http, "queen_peer_notifications_dropped_total").await,
        0.0
    );
    b.shutdown().await;
}

/// Round robin put a parked pop on every broker, and each push woke one on each: the pushing
/// broker's own pop claimed it, and the others' claims found it taken (two wasted claims per
/// push with three brokers). The push's notification now travels with that pop's lease.
#[tokio::test]
async fn a_push_the_pushing_brokers_own_pop_claims_sends_no_other_brokers_pop_to_claim() {
    // A hold a loaded machine's pop cannot outlast (5 ms by default): the test is of the
    // hold's effect, not of how quickly a debug build claims.
    let patient = |c: &mut ackbench_broker::Config| c.peer_hold_ms = 2_000;
    let a = TestBroker::start_with(patient).await;
    let (b, b_http) = a.twin_with(patient).await;
    await_metric(&b_http, "queen_peer_listener_connects_total", 1.0).await;
    // Both brokers' pop paths warm up first (a first claim prepares its statements).
    for (producer, consumer, txn) in [(&a.http, &b_http, "warm-b"), (&b_http, &a.http, "warm-a")] {
        let (r, _) = wake_across(producer, consumer, "shared", txn).await;
        assert_eq!(txns(&r), [txn]);
        ack_all(consumer, &r).await;
    }
    let stale = metric(&b_http, "queen_pop_stale_candidates_total").await;
    for round in 0..3 {
        let applied = metric(&b_http, "queen_peer_events_applied_total").await;
        let parked_b = metric(&b_http, PARKED).await;
        let elsewhere = {
            let http = b_http.clone();
            tokio::spawn(async move {
                pop_wildcard(&http, "shared", "batch=1&wait=true&timeout=400").await
            })
        };
        // Both pops parked before the push (a loaded machine can take longer than a fixed
        // pause to park them): the push wakes the pushing broker's own.
        await_metric(&b_http, PARKED, parked_b + 1.0).await;
        let parked_a = metric(&a.http, PARKED).await;
        let local = {
            let http = a.http.clone();
            tokio::spawn(async move {
                pop_wildcard(&http, "shared", "batch=1&wait=true&timeout=5000").await
            })
        };
        await_metric(&a.http, PARKED, parked_a + 1.0).await;
        let txn = format!("local-{round}");
        a.http.push("shared", &[(&txn, &txn)]).await;
        let r = local.await.unwrap();
        assert_eq!(txns(&r), [txn.as_str()], "the pushing broker's pop");
        assert_eq!(
            elsewhere.await.unwrap().status,
            StatusCode::NO_CONTENT,
            "round {round}"
        );
        assert!(
            metric(&b_http, "queen_peer_events_applied_total").await >= applied + 2.0,
            "round {round}: the push and its lease reached the other broker"
        );
        ack_all(&a.http, &r).await;
    }
    assert_eq!(
        metric(&b_http, "queen_pop_stale_candidates_total").await,
        stale,
        "the other broker's parked pop never claimed a partition it was told was taken"
    );
    b.shutdown().await;
}

#[tokio::test]
async fn with_peer_notify_off_the_same_pop_waits_for_the_re_check() {
    let quiet = |c: &mut ackbench_broker::Config| {
        c.peer_notify = false;
        c.hotlist_reseed_ms = 300;
    };
    let a = TestBroker::start_with(quiet).await;
    let (b, b_http) = a.twin_with(quiet).await;
    assert_eq!(
        pop_wildcard(&b_http, "quiet", "batch=1").await.status,
        StatusCode::NO_CONTENT
    );
    for round in 0..2 {
        let txn = format!("q-{round}");
        let (r, waited) = wake_across(&a.http, &b_http, "quiet", &txn).await;
        assert_eq!(txns(&r), [txn.as_str()]);
        // Parked 150 ms before the push, the long-poll looks again 500 ms after parking
        // (reseeding its list, stale past the 300 ms reseed period): about 350 ms after the push.
        assert!(
            waited >= Duration::from_millis(200),
            "round {round}: nothing woke it before the re-check: {waited:?}"
        );
        assert!(waited < Duration::from_secs(3), "round {round}: {waited:?}");
    }
    assert_eq!(
        metric(&a.http, "queen_peer_notifications_sent_total").await,
        0.0
    );
    assert_eq!(
        metric(&b_http, "queen_peer_notifications_received_total").await,
        0.0
    );
    b.shutdown().await;
}

#[tokio::test]
async fn an_ack_through_one_broker_wakes_a_pop_parked_on_the_lease_holder() {
    let a = TestBroker::start().await;
    let (b, b_http) = a.twin().await;
    await_metric(&b_http, "queen_peer_listener_connects_total", 1.0).await;
    a.http
        .push("held", &[("p", "first"), ("p", "second")])
        .await;
    let first = pop_wildcard(&b_http, "held", "batch=1").await;
    assert_eq!(txns(&first), ["first"]);
    // B leased the partition: a second pop of the group parks, nothing being listed.
    let http = b_http.clone();
    let parked = tokio::spawn(async move {
        let r = pop_wildcard(&http, "held", "batch=1&wait=true&timeout=5000").await;
        (r, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    ack_all(&a.http, &first).await;
    let acked = Instant::now();
    let (r, arrived) = parked.await.unwrap();
    assert_eq!(txns(&r), ["second"]);
    let waited = arrived.saturating_duration_since(acked);
    assert!(
        waited < Duration::from_millis(300),
        "woken by the release A told B of, not the re-check: {waited:?}"
    );
    b.shutdown().await;
}

#[tokio::test]
async fn a_notification_from_outside_can_neither_poison_nor_grant() {
    let a = TestBroker::start().await;
    await_metric(&a.http, "queen_peer_listener_connects_total", 1.0).await;
    a.http.push("guarded", &[("p", "real")]).await;
    let r = pop_wildcard(&a.http, "guarded", "batch=1").await;
    assert_eq!(txns(&r), ["real"]);
    ack_all(&a.http, &r).await;
    let applied = metric(&a.http, "queen_peer_events_applied_total").await;
    let woken = metric(&a.http, "queen_long_poll_woken_total").await;
    let sql = a.sql().await;
    let stranger = uuid_like(7);
    let tenant = ackbench_wire::DEFAULT_TENANT;
    let garbage = [
        "garbage".to_string(),
        "{\"v\":1}".to_string(),
        format!("{{\"v\":2,\"from\":\"{stranger}\",\"events\":[{{\"kind\":\"queue_deleted\",\"tenant\":\"{tenant}\",\"queue\":\"guarded\"}}]}}"),
        format!("{{\"v\":1,\"from\":\"{stranger}\",\"events\":[{{\"kind\":\"grant\",\"pid\":\"{stranger}\"}}]}}"),
    ];
    for payload in &garbage {
        sql.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, payload])
            .await
            .unwrap();
    }
    let dropped = await_metric(&a.http, "queen_peer_notifications_dropped_total", 4.0).await;
    assert_eq!(dropped, 4.0, "every malformed notification is counted");
    assert_eq!(
        metric(&a.http, "queen_peer_events_applied_total").await,
        applied
    );
    assert_eq!(metric(&a.http, "queen_long_poll_woken_total").await, woken);
    assert_eq!(
        pop_wildcard(&a.http, "guarded", "batch=1").await.status,
        StatusCode::NO_CONTENT,
        "nothing changed"
    );
    // A well-formed but forged push of the acked partition (and of one that does not exist)
    // wakes, and the pop it wakes finds nothing in PostgreSQL.
    let pid = r.json["messages"][0]["partitionId"]
        .as_str()
        .unwrap()
        .to_string();
    let http = a.http.clone();
    let parked = tokio::spawn(async move {
        pop_wildcard(&http, "guarded", "batch=1&wait=true&timeout=1500").await
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let forged = format!(
        "{{\"v\":1,\"from\":\"{stranger}\",\"events\":[\
         {{\"kind\":\"pushed\",\"tenant\":\"{tenant}\",\"queue\":\"guarded\",\"partition\":\"p\",\"pid\":\"{pid}\",\"end\":99,\"messages\":5}},\
         {{\"kind\":\"pushed\",\"tenant\":\"{tenant}\",\"queue\":\"guarded\",\"partition\":\"x\",\"pid\":\"{}\",\"end\":9,\"messages\":1}}]}}",
        uuid_like(8)
    );
    sql.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &forged])
        .await
        .unwrap();
    let r = parked.await.unwrap();
    assert_eq!(
        r.status,
        StatusCode::NO_CONTENT,
        "granted nothing: {}",
        r.text
    );
    assert_eq!(
        metric(&a.http, "queen_peer_events_applied_total").await,
        applied + 2.0
    );
    assert!(metric(&a.http, "queen_long_poll_woken_total").await > woken);
}

/// A forged lease can keep a partition off the list only until PostgreSQL is asked again: the
/// long-poll's re-check reseeds the empty list, and the seed overrides what peers said.
#[tokio::test]
async fn a_forged_lease_hides_a_partition_no_longer_than_the_re_check() {
    let a = TestBroker::start().await;
    await_metric(&a.http, "queen_peer_listener_connects_total", 1.0).await;
    a.http.push("hidden", &[("p", "first")]).await;
    let r = pop_wildcard(&a.http, "hidden", "batch=1").await;
    assert_eq!(txns(&r), ["first"]);
    ack_all(&a.http, &r).await;
    let pid = r.json["messages"][0]["partitionId"]
        .as_str()
        .unwrap()
        .to_string();
    let (stranger, tenant) = (uuid_like(9), ackbench_wire::DEFAULT_TENANT);
    let group = r.json["messages"][0]["consumerGroup"]
        .as_str()
        .unwrap_or("__QUEUE_MODE__")
        .to_string();
    let applied = metric(&a.http, "queen_peer_events_applied_total").await;
    let http = a.http.clone();
    let parked = tokio::spawn(async move {
        pop_wildcard(&http, "hidden", "batch=1&wait=true&timeout=4000").await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let forged = format!(
        "{{\"v\":1,\"from\":\"{stranger}\",\"events\":[{{\"kind\":\"leased\",\"tenant\":\"{tenant}\",\
         \"queue\":\"hidden\",\"pid\":\"{pid}\",\"group\":\"{group}\",\"lease\":\"{stranger}\",\
         \"end\":999,\"lease_ms\":3600000}}]}}"
    );
    a.sql()
        .await
        .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &forged])
        .await
        .unwrap();
    await_metric(&a.http, "queen_peer_events_applied_total", applied + 1.0).await;
    a.http.push("hidden", &[("p", "second")]).await;
    let pushed = Instant::now();
    let r = parked.await.unwrap();
    assert_eq!(txns(&r), ["second"], "{}", r.text);
    assert!(
        pushed.elapsed() < Duration::from_millis(1500),
        "found by the 500 ms re-check's seed, not the hint's end: {:?}",
        pushed.elapsed()
    );
}

#[tokio::test]
async fn a_listener_whose_connection_drops_reconnects_and_keeps_waking() {
    let a = TestBroker::start().await;
    let (b, b_http) = a.twin().await;
    await_metric(&b_http, "queen_peer_listener_connects_total", 1.0).await;
    assert_eq!(
        pop_wildcard(&b_http, "dropped", "batch=1").await.status,
        StatusCode::NO_CONTENT
    );
    let sql = a.sql().await;
    let killed = sql
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = $1",
            &[&ackbench_broker::peers::listener::LISTENER_NAME],
        )
        .await
        .unwrap();
    assert_eq!(killed.len(), 2, "both brokers' listeners");
    let connects = await_metric(&b_http, "queen_peer_listener_connects_total", 2.0).await;
    assert_eq!(connects, 2.0, "reconnected once");
    let (r, waited) = wake_across(&a.http, &b_http, "dropped", "after").await;
    assert_eq!(txns(&r), ["after"]);
    assert!(waited < Duration::from_millis(300), "{waited:?}");
    b.shutdown().await;
}

/// A fixed, valid UUID text (not a broker's).
fn uuid_like(n: u8) -> String {
    format!("00000000-0000-4000-8000-0000000000{n:02x}")
}

#[tokio::test]
async fn a_queue_deleted_through_one_broker_answers_the_long_poll_parked_on_another() {
    let a = TestBroker::start().await;
    let (b, b_http) = a.twin().await;
    await_metric(&b_http, "queen_peer_listener_connects_total", 1.0).await;
    a.http.push("doomed", &[("p", "only")]).await;
    let r = pop_wildcard(&b_http, "doomed", "batch=1").await;
    assert_eq!(txns(&r), ["only"]);
    let http = b_http.clone();
    let parked = tokio::spawn(async move {
        let r = pop_wildcard(&http, "doomed", "batch=1&wait=true&timeout=5000").await;
        (r, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let gone = a.http.delete("/api/v1/resources/queues/doomed").await;
    assert!(gone.status.is_success(), "{}", gone.text);
    let deleted = Instant::now();
    let (r, arrived) = parked.await.unwrap();
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let waited = arrived.saturating_duration_since(deleted);
    assert!(
        waited < Duration::from_millis(300),
        "answered when B heard of the deletion, not at its re-check: {waited:?}"
    );
    b.shutdown().await;
}

#[tokio::test]
async fn a_restarted_broker_rejoins_the_notifications() {
    let a = TestBroker::start().await;
    let (b, _) = a.twin().await;
    b.shutdown().await;
    let (b, b_http) = a.twin().await;
    await_metric(&b_http, "queen_peer_listener_connects_total", 1.0).await;
    assert_eq!(
        pop_wildcard(&b_http, "rejoined", "batch=1").await.status,
        StatusCode::NO_CONTENT
    );
    let (r, waited) = wake_across(&a.http, &b_http, "rejoined", "back").await;
    assert_eq!(txns(&r), ["back"]);
    assert!(waited < Duration::from_millis(300), "{waited:?}");
    b.shutdown().await;
}

#[tokio::test]
async fn a_broker_alone_sends_its_heartbeat_and_no_events() {
    let a = TestBroker::start().await;
    let http = a.http.clone();
    await_metric(&http, "queen_peer_listener_connects_total", 1.0).await;
    for i in 0..20 {
        let t = format!("alone-{i}");
        http.push("alone", &[(t.as_str(), t.as_str())]).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(metric(&http, "queen_peer_events_alone_total").await >= 20.0);
    let sent = metric(&http, "queen_peer_events_sent_total").await;
    assert!(
        sent <= 3.0,
        "only heartbeats, about one a second ({sent} events sent)"
    );
    // A second broker joins: the first hears it and sends its events again.
    let (_b, b_http) = a.twin().await;
    await_metric(&b_http, "queen_peer_notifications_received_total", 1.0).await;
    let before = metric(&http, "queen_peer_events_alone_total").await;
    http.push("alone", &[("joined", "joined")]).await;
    assert_eq!(metric(&http, "queen_peer_events_alone_total").await, before);
}

/// Acks `txns` of a pop answer as completed, in one request; the answers.
async fn ack_some(http: &Http, reply: &Reply, txns: &[&str]) -> Vec<Value> {
    http.ack_completed(reply, Some(txns)).await
}

/// Round robin sends a batch's ack to another broker than the pop's: that broker's registry now
/// knows the batch from the lessor's sealed delivery, so the ack commits positionally there
/// (a registry hit, fused) instead of resolving hashes in PostgreSQL.
#[tokio::test]
async fn an_ack_through_another_broker_than_the_pops_is_a_registry_hit_there() {
    let a = TestBroker::start().await;
    let (b, b_http) = a.twin().await;
    // Each broker has heard the other (a heartbeat): deliveries are sent only then.
    await_metric(&a.http, "queen_peer_notifications_received_total", 1.0).await;
    await_metric(&b_http, "queen_peer_notifications_received_total", 1.0).await;
    let hits = metric(&b_http, "queen_ack_registry_hits_total").await;
    for round in 0..3 {
        let ids: Vec<String> = (0..3).map(|i| format!("r{round}-{i}")).collect();
        let items: Vec<(&str, &str)> = ids.iter().map(|t| ("p", t.as_str())).collect();
        a.http.push("spread", &items).await;
        let r = pop_wildcard(&a.http, "spread", "batch=3").await;
        assert_eq!(txns(&r).len(), 3, "round {round}: {}", r.text);
        let all: Vec<&str> = ids.iter().map(String::as_str).collect();
        for answer in ack_some(&b_http, &r, &all).await {
            assert_eq!(answer["success"], json!(true), "round {round}: {answer}");
            assert_eq!(answer["noop"], json!(false), "round {round}: {answer}");
        }
    }
    assert_eq!(
        metric(&b_http, "queen_ack_registry_hits_total").await,
        hits + 3.0,
        "every ack through the other broker hit its registry"
    );
    assert!(metric(&a.http, "queen_peer_deliveries_sent_total").await >= 3.0);
    assert!(metric(&b_http, "queen_peer_deliveries_adopted_total").await >= 3.0);
    assert_eq!(
        metric(&b_http, "queen_peer_deliveries_refused_total").await,
        0.0
    );
    assert_eq!(
        pop_wildcard(&b_http, "spread", "batch=10").await.status,
        StatusCode::NO_CONTENT,
        "every message is committed"
    );
    b.shutdown().await;
}

/// A delivery is trusted beyond a hint (a registry hit commits the batch the delivery names), so
/// one from outside the deployment must not be taken: here a forged one would make the ack of
/// one message of three commit all three. Its seal does not verify, it is dropped and counted,
/// and the ack commits only what it names.
#[tokio::test]
async fn a_forged_delivery_is_refused_and_commits_nothing_it_names() {
    let a = TestBroker::start().await;
    await_metric(&a.http, "queen_peer_listener_connects_total", 1.0).await;
    a.http
        .push("sealed", &[("p", "s-1"), ("p", "s-2"), ("p", "s-3")])
        .await;
    let r = pop_wildcard(&a.http, "sealed", "batch=3").await;
    assert_eq!(txns(&r), ["s-1", "s-2", "s-3"]);
    let m = &r.json["messages"][2];
    let (pid, lease, group) = (
        m["partitionId"].as_str().unwrap(),
        m["leaseId"].as_str().unwrap(),
        m["consumerGroup"].as_str().unwrap_or("__QUEUE_MODE__"),
    );
    let sql = a.sql().await;
    let end: i64 = sql
        .query_one(
            "SELECT last_offset FROM queen.log_partitions WHERE id = $1::text::uuid",
            &[&pid],
        )
        .await
        .unwrap()
        .get(0);
    let first = ackbench_wire::hash_hex(&ackbench_wire::txn_hash("s-1"));
    let tenant = ackbench_wire::DEFAULT_TENANT;
    let forged = format!(
        "{{\"v\":1,\"from\":\"{}\",\"events\":[{{\"kind\":\"delivered\",\"tenant\":\"{tenant}\",\
         \"queue\":\"sealed\",\"partition\":\"p\",\"pid\":\"{pid}\",\"group\":\"{group}\",\
         \"lease\":\"{lease}\",\"end\":{end},\"lease_ms\":30000,\"frames\":[[\"{first}\",{end}]],\
         \"seal\":\"{}\"}}]}}",
        uuid_like(9),
        "0".repeat(32)
    );
    sql.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &forged])
        .await
        .unwrap();
    let refused = await_metric(&a.http, "queen_peer_deliveries_refused_total", 1.0).await;
    assert_eq!(refused, 1.0, "the forged delivery is counted");
    let hits = metric(&a.http, "queen_ack_registry_hits_total").await;
    for answer in ack_some(&a.http, &r, &["s-1"]).await {
        assert_eq!(answer["success"], json!(true), "{answer}");
    }
    assert_eq!(
        metric(&a.http, "queen_ack_registry_hits_total").await,
        hits,
        "a part of the batch is no registry hit"
    );
    for answer in ack_some(&a.http, &r, &["s-2", "s-3"]).await {
        assert_eq!(answer["success"], json!(true), "{answer}");
        assert_eq!(
            answer["noop"],
            json!(false),
            "not committed before: {answer}"
        );
    }
    assert_eq!(
        metric(&a.http, "queen_peer_deliveries_adopted_total").await,
        0.0
    );
}
