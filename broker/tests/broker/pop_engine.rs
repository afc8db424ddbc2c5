//! The pop engine against a real PostgreSQL: the pending gate parks without SQL, empty pops
//! write nothing, fused pops deliver each message once, a pop of one message reads its segment
//! once, and every broker-side hint yields to PostgreSQL (pushes through another broker, stale
//! candidates, subscription `new`).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::common::{metric, txns, Http, TestBroker};
use hyper::StatusCode;

async fn pop_wildcard(http: &Http, queue: &str, query: &str) -> crate::common::Reply {
    http.get(&format!("/api/v1/pop/queue/{queue}?{query}"))
        .await
}

/// Acks every message of a pop answer as completed, in one request.
async fn ack_all(http: &Http, reply: &crate::common::Reply) {
    http.ack_completed(reply, None).await;
}

#[tokio::test]
async fn a_long_poll_with_nothing_listed_parks_without_sql_until_a_push_wakes_it() {
    let t = TestBroker::start_with(|c| {
        c.hotlist = true;
        c.pop_pending_gate = true;
    })
    .await;
    t.http.push("gate", &[("p0", "first")]).await;
    let r = pop_wildcard(&t.http, "gate", "batch=1").await;
    assert_eq!(txns(&r), ["first"]);
    ack_all(&t.http, &r).await;

    let http = t.http.clone();
    let parked = tokio::spawn(async move {
        let started = Instant::now();
        let r = pop_wildcard(&http, "gate", "batch=1&wait=true&timeout=5000").await;
        (r, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(metric(&t.http, "queen_pop_sql_wildcards_total").await, 0.0);
    assert!(metric(&t.http, "queen_pop_gate_parks_total").await >= 1.0);
    t.http.push("gate", &[("p1", "second")]).await;
    let (r, waited) = parked.await.unwrap();
    assert_eq!(txns(&r), ["second"]);
    assert!(
        waited < Duration::from_secs(2),
        "woken by the push, not the deadline: {waited:?}"
    );
    assert_eq!(
        metric(&t.http, "queen_pop_sql_wildcards_total").await,
        0.0,
        "no SQL wildcard ran for the long-poll"
    );
}

#[tokio::test]
async fn an_empty_pop_writes_nothing() {
    let t = TestBroker::start().await;
    t.http.push("quiet", &[("p", "a"), ("p", "b")]).await;
    let r = t.http.pop("quiet", "p", "batch=2").await;
    ack_all(&t.http, &r).await;
    let db = t.sql().await;
    let row_state = "SELECT xmin::text, xmax::text, ctid::text FROM queen.log_consumers";
    let before: Vec<(String, String, String)> = db
        .query(row_state, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(before.len(), 1);

    for path in [
        "quiet/partition/p?batch=1",
        "quiet?batch=1",
        "quiet/partition/missing?batch=1&consumerGroup=fresh",
        "unknown?batch=1&consumerGroup=fresh",
    ] {
        let r = t.http.get(&format!("/api/v1/pop/queue/{path}")).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{path}");
    }
    let after: Vec<(String, String, String)> = db
        .query(row_state, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        after, before,
        "the cursor row was neither locked nor rewritten"
    );
}

#[tokio::test]
async fn concurrent_pops_of_one_fuse_and_deliver_each_message_once() {
    let t = TestBroker::start_with(|c| {
        c.hotlist = true;
        c.pop_pending_gate = true;
        c.pop_fusion = true;
        c.pop_fusion_shards = 1;
    })
    .await;
    let mut pushed = HashSet::new();
    for p in 0..32 {
        let part = format!("p{p}");
        let ids: Vec<String> = (0..5).map(|k| format!("{part}-{k}")).collect();
        let items: Vec<(&str, &str)> = ids.iter().map(|i| (part.as_str(), i.as_str())).collect();
        t.http.push("fused", &items).await;
        pushed.extend(ids);
    }
    let mut workers = Vec::new();
    for _ in 0..24 {
        let http = t.http.clone();
        workers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            let mut empty = 0;
            while empty < 3 {
                let r = pop_wildcard(&http, "fused", "batch=1&wait=true&timeout=300").await;
                if r.status == StatusCode::NO_CONTENT {
                    empty += 1;
                    continue;
                }
                assert_eq!(r.status, StatusCode::OK, "{}", r.text);
                got.extend(txns(&r));
                ack_all(&http, &r).await;
            }
            got
        }));
    }
    let mut delivered = Vec::new();
    for w in workers {
        delivered.extend(w.await.unwrap());
    }
    let unique: HashSet<String> = delivered.iter().cloned().collect();
    assert_eq!(unique.len(), delivered.len(), "no message delivered twice");
    assert_eq!(unique, pushed, "every message delivered");
    let flushes = metric(&t.http, "queen_pop_fusion_flushes_total").await;
    let jobs = metric(&t.http, "queen_pop_fusion_jobs_total").await;
    assert!(
        jobs >= 160.0,
        "every delivering pop went through fusion: {jobs}"
    );
    assert!(
        flushes < jobs,
        "concurrent pops shared flushes: {flushes} for {jobs}"
    );
}

#[tokio::test]
async fn a_pop_of_one_message_reads_its_segment_once() {
    let t = TestBroker::start_with(|c| c.segment_cache_mb = 64).await;
    let ids: Vec<String> = (0..200).map(|k| format!("m-{k}")).collect();
    let items: Vec<(&str, &str)> = ids.iter().map(|i| ("p", i.as_str())).collect();
    t.http.push("big", &items).await;
    let mut got = Vec::new();
    for _ in 0..200 {
        let r = t.http.pop("big", "p", "batch=1").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        got.extend(txns(&r));
        ack_all(&t.http, &r).await;
    }
    assert_eq!(got, ids, "in order, each once");
    let shipped = metric(&t.http, "queen_pop_segments_shipped_total").await;
    let cached = metric(&t.http, "queen_pop_segments_cached_total").await;
    assert!(
        shipped <= 1.0,
        "the blob was shipped at most once: {shipped}"
    );
    assert!(
        cached >= 199.0,
        "the other pops were served decoded: {cached}"
    );
}

#[tokio::test]
async fn a_push_through_another_broker_reaches_a_parked_long_poll() {
    let t = TestBroker::start().await;
    let (other, other_http) = t.twin().await;
    let r = pop_wildcard(&t.http, "shared", "batch=1").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let http = t.http.clone();
    let parked = tokio::spawn(async move {
        let started = Instant::now();
        let r = pop_wildcard(&http, "shared", "batch=1&wait=true&timeout=5000").await;
        (r, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    other_http.push("shared", &[("elsewhere", "x-1")]).await;
    let (r, waited) = parked.await.unwrap();
    assert_eq!(txns(&r), ["x-1"]);
    assert!(
        waited < Duration::from_secs(3),
        "found by the re-check: {waited:?}"
    );
    other.shutdown().await;
}

#[tokio::test]
async fn a_stale_candidate_never_grants_what_postgres_refuses() {
    let t = TestBroker::start().await;
    let (other, other_http) = t.twin().await;
    // This broker learns of the partition from its own push...
    assert_eq!(
        pop_wildcard(&t.http, "stale", "batch=1").await.status,
        StatusCode::NO_CONTENT
    );
    t.http.push("stale", &[("p", "only")]).await;
    // ...but the other broker delivers and acks the message first.
    let r = other_http.pop("stale", "p", "batch=1").await;
    assert_eq!(txns(&r), ["only"]);
    ack_all(&other_http, &r).await;
    let r = pop_wildcard(&t.http, "stale", "batch=1").await;
    assert_eq!(
        r.status,
        StatusCode::NO_CONTENT,
        "nothing is left: {}",
        r.text
    );
    // A live lease held through the other broker is refused too.
    other_http.push("stale", &[("p", "next")]).await;
    let r = other_http.pop("stale", "p", "batch=1").await;
    assert_eq!(txns(&r), ["next"]);
    t.http.push("stale", &[("q", "unrelated")]).await;
    let r = pop_wildcard(&t.http, "stale", "batch=5&partitions=5").await;
    assert_eq!(
        txns(&r),
        ["unrelated"],
        "the leased partition is not handed out again"
    );
    other.shutdown().await;
}

#[tokio::test]
async fn subscription_new_starts_at_the_tail_once_and_new_partitions_from_their_start() {
    let t = TestBroker::start().await;
    t.http.push("subs", &[("p1", "old")]).await;
    let r = pop_wildcard(&t.http, "subs", "consumerGroup=g&subscriptionMode=new").await;
    assert_eq!(
        r.status,
        StatusCode::NO_CONTENT,
        "the backlog is not new: {}",
        r.text
    );
    t.http
        .push("subs", &[("p1", "after"), ("p2", "fresh")])
        .await;
    let mut got = Vec::new();
    for _ in 0..2 {
        let r = pop_wildcard(
            &t.http,
            "subs",
            "consumerGroup=g&subscriptionMode=new&batch=10",
        )
        .await;
        got.extend(txns(&r));
    }
    got.sort();
    assert_eq!(got, ["after", "fresh"]);
    let r = pop_wildcard(&t.http, "subs", "consumerGroup=h&batch=10&partitions=2").await;
    let mut all = txns(&r);
    all.sort();
    assert_eq!(
        all,
        ["after", "fresh", "old"],
        "subscription `all` gets the backlog"
    );
}

/// In one fused transaction PostgreSQL withholds the blob of any segment some job listed as
/// held, so a job can be handed a segment only another job listed; it must still be served.
#[tokio::test]
async fn a_fused_job_is_served_a_segment_another_job_listed_as_held() {
    use ackbench_broker::segment_cache::DecodedSegment;
    use ackbench_broker::storage::procs::pop::{pop_multi_once, PopJob, Stored};
    use std::sync::Arc;

    let t = TestBroker::start().await;
    t.http.push("held", &[("a", "a-0"), ("b", "b-0")]).await;
    let sql = t.sql().await;
    let pid = |name: &'static str| {
        let sql = &sql;
        async move {
            let row = sql
                .query_one(
                    "SELECT p.id FROM queen.log_partitions p JOIN queen.queues q \
                     ON q.id = p.queue_id WHERE q.name = 'held' AND p.name = $1",
                    &[&name],
                )
                .await
                .unwrap();
            row.get::<_, uuid::Uuid>(0)
        }
    };
    let (a, b) = (pid("a").await, pid("b").await);
    let blob: Vec<u8> = sql
        .query_one(
            "SELECT blob FROM queen.log_segments WHERE partition_id = $1",
            &[&b],
        )
        .await
        .unwrap()
        .get(0);
    let held = DecodedSegment::decode(0, std::time::SystemTime::now(), &blob, None).unwrap();
    let job = |candidate, cached: Vec<(uuid::Uuid, Arc<DecodedSegment>)>| PopJob {
        group: ackbench_wire::QUEUE_MODE_GROUP.into(),
        lease_id: "w".into(),
        batch: 1,
        max_partitions: 1,
        lease_seconds: Some(30),
        auto_ack: false,
        candidates: vec![candidate],
        cached,
    };
    // The first job claims `a` but lists `b`'s segment; the second claims `b` listing nothing.
    let first = job(a, vec![(b, Arc::new(held))]);
    let second = job(b, Vec::new());
    let pool = ackbench_broker::storage::pool(&t.db_url.parse().unwrap(), 1).unwrap();
    let db = pool.get().await.unwrap();
    let rows = pop_multi_once(&db, &[&first, &second]).await.unwrap();
    assert_eq!(rows[1].len(), 1, "the second job claimed b");
    assert_eq!(rows[1][0].partition_id, b);
    assert!(
        matches!(rows[1][0].segment, Stored::Held(ref s) if s.frame_at(0).unwrap().transaction_id == "b-0"),
        "b's blob was withheld and the first job's copy serves it"
    );
}

#[tokio::test]
async fn a_named_pop_finds_a_partition_whose_queue_was_deleted_and_created_again_in_sql() {
    let t = TestBroker::start().await;
    t.http.push("reborn", &[("p", "old")]).await;
    let r = t.http.get("/api/v1/pop/queue/reborn/partition/p").await;
    assert_eq!(txns(&r), ["old"], "the broker now holds the partition's id");
    ack_all(&t.http, &r).await;

    // Another broker, or an operator, deletes the queue and it is created again: its partition
    // gets a new id, and the id this broker cached no longer names anything.
    t.sql()
        .await
        .execute("DELETE FROM queen.queues WHERE name = 'reborn'", &[])
        .await
        .unwrap();
    t.http.push("reborn", &[("p", "new")]).await;
    let r = t.http.get("/api/v1/pop/queue/reborn/partition/p").await;
    assert_eq!(
        txns(&r),
        ["new"],
        "a stale id falls back to PostgreSQL: {}",
        r.text
    );
    t.broker.shutdown().await;
}

/// Ack fusion and pop fusion sharing one lane on the test broker's database, lingering
/// `linger` while the lane's arrival rate is at least `linger_min_rate` a second.
fn joint_lanes(
    t: &TestBroker,
    linger: Duration,
    linger_min_rate: u64,
) -> (
    ackbench_broker::ack::fusion::AckFusion,
    ackbench_broker::pop::fusion::PopFusion,
) {
    use ackbench_broker::lanes::control::{ConcurrencyMode, Linger};
    use ackbench_broker::lanes::LaneSettings;
    use std::sync::Arc;
    let pool = ackbench_broker::storage::pool(&t.db_url.parse().unwrap(), 2).unwrap();
    let settings = LaneSettings {
        concurrency: ConcurrencyMode::Fixed(1),
        linger: Linger::Fixed {
            linger,
            min_rate: linger_min_rate,
        },
        max_ack_rows: usize::MAX,
        max_pops: ackbench_broker::pop::fusion::MAX_JOBS,
        demand: Arc::default(),
    };
    ackbench_broker::fusion::shared(pool, settings)
}

/// Pushes two messages to partition `a` of `queue` and pops the first: the ack that completes
/// it, and the pop job that would claim the second.
async fn head_leased(
    t: &TestBroker,
    queue: &str,
) -> (
    ackbench_broker::ack::fusion::FusedAck,
    ackbench_broker::storage::procs::pop::PopJob,
) {
    t.http.push(queue, &[("a", "a-0"), ("a", "a-1")]).await;
    let r = t
        .http
        .get(&format!("/api/v1/pop/queue/{queue}/partition/a?batch=1"))
        .await;
    assert_eq!(txns(&r), ["a-0"]);
    let m = &r.json["messages"][0];
    let pid: uuid::Uuid = m["partitionId"].as_str().unwrap().parse().unwrap();
    let ack = ackbench_broker::ack::fusion::FusedAck {
        partition: pid,
        group: ackbench_wire::QUEUE_MODE_GROUP.into(),
        lease_id: m["leaseId"].as_str().unwrap().to_string(),
        batch_end: 0,
        count: 1,
    };
    let job = ackbench_broker::storage::procs::pop::PopJob {
        group: ackbench_wire::QUEUE_MODE_GROUP.into(),
        lease_id: "next".into(),
        batch: 1,
        max_partitions: 1,
        lease_seconds: Some(30),
        auto_ack: false,
        candidates: vec![pid],
        cached: Vec::new(),
    };
    (ack, job)
}

/// The verdict of an ack of the one leased message: the cursor moved and the lease ended.
const ACKED_ONE_AND_RELEASED: ackbench_broker::ack::fusion::Verdict =
    ackbench_broker::ack::fusion::Verdict::Committed {
        acked: 1,
        lease_released: true,
    };

/// The queue-mode consumer row of partition `pid`: its committed offset and lease holder.
async fn cursor_and_lease(t: &TestBroker, pid: uuid::Uuid) -> (i64, Option<String>) {
    let row = t
        .sql()
        .await
        .query_one(
            "SELECT committed, worker_id FROM queen.log_consumers WHERE partition_id = $1",
            &[&pid],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// With ack fusion and pop fusion sharing lanes, an ack and a pop waiting together commit in
/// one transaction, acks first: the pop claims what the ack just released.
#[tokio::test]
async fn a_joint_flush_commits_an_ack_and_a_pop_that_claims_what_it_released() {
    use std::sync::atomic::Ordering::Relaxed;

    let t = TestBroker::start().await;
    let (ack, job) = head_leased(&t, "joint").await;
    let pid = ack.partition;
    let (acks, pops) = joint_lanes(&t, Duration::ZERO, 0);
    // Both are enqueued before the lane task first runs (one-threaded test runtime).
    let (verdict, claimed) = tokio::join!(acks.submit(ack), pops.submit(job));
    assert_eq!(verdict, ACKED_ONE_AND_RELEASED);
    let rows = claimed.expect("the pop part committed");
    assert_eq!(
        rows.len(),
        1,
        "the pop claimed the partition the ack released"
    );
    assert_eq!((rows[0].span_start, rows[0].span_end), (1, 1));
    assert_eq!(pops.stats.joint_flushes.load(Relaxed), 1);
    assert_eq!(acks.stats.flushes.load(Relaxed), 1);
    let (committed, worker) = cursor_and_lease(&t, pid).await;
    assert_eq!((committed, worker.as_deref()), (0, Some("next")));
}

/// A consumer group PostgreSQL cannot take as text (a NUL byte): the statement carrying it
/// fails when its parameters are bound, which aborts the joint transaction.
const UNBINDABLE_GROUP: &str = "bad\0group";

/// A joint flush whose pop part fails rolls back, and its acks commit again on their own: the
/// pop's failure never costs the ack its commit.
#[tokio::test]
async fn a_joint_flush_whose_pops_fail_still_commits_its_acks() {
    use std::sync::atomic::Ordering::Relaxed;

    let t = TestBroker::start().await;
    let (ack, mut job) = head_leased(&t, "joint-pop-fails").await;
    let pid = ack.partition;
    job.group = UNBINDABLE_GROUP.into();
    let (acks, pops) = joint_lanes(&t, Duration::ZERO, 0);
    let (verdict, claimed) = tokio::join!(acks.submit(ack), pops.submit(job));
    assert_eq!(verdict, ACKED_ONE_AND_RELEASED);
    assert!(
        claimed.is_err(),
        "the pop part failed: {:?}",
        claimed.map(|r| r.len())
    );
    assert_eq!(pops.stats.joint_flushes.load(Relaxed), 1);
    let (committed, worker) = cursor_and_lease(&t, pid).await;
    assert_eq!((committed, worker), (0, None), "the ack committed alone");
}

/// A joint flush whose ack part fails rolls back, and its pops claim again on their own.
#[tokio::test]
async fn a_joint_flush_whose_acks_fail_still_claims_its_pops() {
    use ackbench_broker::ack::fusion::Verdict;
    use std::sync::atomic::Ordering::Relaxed;

    let t = TestBroker::start().await;
    let (mut ack, mut job) = head_leased(&t, "joint-ack-fails").await;
    ack.group = UNBINDABLE_GROUP.into();
    t.http.push("joint-ack-fails", &[("b", "b-0")]).await;
    let other: uuid::Uuid = t
        .sql()
        .await
        .query_one(
            "SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id \
             WHERE q.name = 'joint-ack-fails' AND p.name = 'b'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    job.candidates = vec![other];
    let (acks, pops) = joint_lanes(&t, Duration::ZERO, 0);
    let (verdict, claimed) = tokio::join!(acks.submit(ack), pops.submit(job));
    assert!(matches!(verdict, Verdict::FlushErr(_)), "{verdict:?}");
    assert_eq!(pops.stats.joint_flushes.load(Relaxed), 1);
    let rows = claimed.expect("the pops claimed on their own");
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].partition_id, rows[0].span_start), (other, 0));
}

/// On a joint lane with a 300 ms linger applied at `linger_min_rate` arrivals a second and
/// above: an ack of a leased head, and 20 ms later a pop of the next message. Both must
/// succeed; answers (ack flushes, pop flushes, joint flushes).
async fn ack_then_pop_20_ms_later(name: &str, linger_min_rate: u64) -> (u64, u64, u64) {
    use ackbench_broker::ack::fusion::Verdict;
    use std::sync::atomic::Ordering::Relaxed;

    let t = TestBroker::start().await;
    let (ack, job) = head_leased(&t, name).await;
    let (acks, pops) = joint_lanes(&t, Duration::from_millis(300), linger_min_rate);
    let pop = async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        pops.submit(job).await
    };
    let (verdict, claimed) = tokio::join!(acks.submit(ack), pop);
    assert!(matches!(verdict, Verdict::Committed { .. }));
    assert_eq!(claimed.expect("claimed").len(), 1);
    let flushes = |c: &std::sync::atomic::AtomicU64| c.load(Relaxed);
    (
        flushes(&acks.stats.flushes),
        flushes(&pops.stats.flushes),
        flushes(&pops.stats.joint_flushes),
    )
}

/// An idle joint lane lingers after a first arrival: an ack and a pop arriving 20 ms apart,
/// inside a 300 ms linger, share one flush.
#[tokio::test]
async fn a_lingering_lane_puts_an_ack_and_a_later_pop_in_one_flush() {
    assert_eq!(ack_then_pop_20_ms_later("linger", 0).await, (1, 1, 1));
}

/// A lone arrival is far below a million a second: the linger does not apply, so the ack's
/// flush has started (or finished) before the pop arrives and each commits alone.
#[tokio::test]
async fn a_lane_below_its_linger_rate_flushes_a_lone_ack_at_once() {
    assert_eq!(
        ack_then_pop_20_ms_later("no-linger", 1_000_000).await,
        (1, 1, 0)
    );
}

/// A pop of one message over up to two partitions takes two candidates and gives back the one
/// it did not examine. A long-poll that parked meanwhile (it found both taken) is woken by that
/// give-back and claims the partition at once, without waiting for its re-check.
#[tokio::test]
async fn candidates_given_back_wake_a_long_poll_parked_meanwhile() {
    let t = TestBroker::start_with(|c| {
        c.hotlist = true;
        c.pop_pending_gate = true;
        c.pop_fusion = true;
        c.fusion_linger_ms = 200;
        c.fusion_linger_min_rate = 0;
    })
    .await;
    t.http.push("giveback", &[("p0", "a"), ("p1", "b")]).await;
    let http = t.http.clone();
    let first =
        tokio::spawn(async move { pop_wildcard(&http, "giveback", "batch=1&partitions=2").await });
    // The first pop seeds the list and sits in the lane's 200 ms linger holding both partitions.
    tokio::time::sleep(Duration::from_millis(40)).await;
    let seeds = metric(&t.http, "queen_pop_hotlist_seeds_total").await;
    assert_eq!(seeds, 1.0, "the first pop seeded the list");
    let parked = pop_wildcard(&t.http, "giveback", "batch=1&wait=true&timeout=5000").await;
    let first = first.await.unwrap();
    let mut got: Vec<String> = txns(&first).into_iter().chain(txns(&parked)).collect();
    got.sort();
    assert_eq!(got, ["a", "b"], "each pop delivered one message");
    assert_eq!(
        metric(&t.http, "queen_long_poll_woken_total").await,
        1.0,
        "the give-back woke the parked pop (its re-check would have found the partition too, later)"
    );
    assert_eq!(
        metric(&t.http, "queen_pop_hotlist_seeds_total").await,
        seeds,
        "no reseed"
    );
}

/// Two messages on one partition; the first popped and leased, a long-poll parked behind the
/// lease; then the first is acked (whole batch) on a joint lane lingering 200 ms. Answers the
/// parked pop's messages and how many (pop flushes, joint flushes, hand-offs) that took.
async fn ack_with_a_pop_parked_behind_it(handoff: bool) -> (Vec<String>, [f64; 3]) {
    let t = TestBroker::start_with(|c| {
        c.hotlist = true;
        c.pop_pending_gate = true;
        c.pop_fusion = true;
        c.ack_registry = true;
        c.ack_fusion = true;
        c.fusion_joint = true;
        c.ack_handoff = handoff;
        c.fusion_linger_ms = 200;
        c.fusion_linger_min_rate = 0;
    })
    .await;
    t.http.push("handoff", &[("p", "a"), ("p", "b")]).await;
    let first = pop_wildcard(&t.http, "handoff", "batch=1").await;
    assert_eq!(txns(&first), ["a"]);
    let http = t.http.clone();
    let parked = tokio::spawn(async move {
        pop_wildcard(&http, "handoff", "batch=1&wait=true&timeout=5000").await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(metric(&t.http, "queen_long_poll_parked_total").await, 1.0);
    let counts = [
        "queen_pop_fusion_flushes_total",
        "queen_pop_fusion_joint_flushes_total",
        "queen_ack_handoffs_total",
    ];
    let mut before = [0.0; 3];
    for (b, name) in before.iter_mut().zip(counts) {
        *b = metric(&t.http, name).await;
    }
    ack_all(&t.http, &first).await;
    let second = parked.await.unwrap();
    let mut spent = [0.0; 3];
    for ((s, b), name) in spent.iter_mut().zip(before).zip(counts) {
        *s = metric(&t.http, name).await - b;
    }
    (txns(&second), spent)
}

/// The hand-off: the ack lists its partition as it enters the lane and wakes the parked pop,
/// whose claim joins the ack's flush (after the ack, in its transaction) and gets the next
/// message there: one flush for both. Without it the pop waits for the ack's commit and then
/// for a flush of its own.
#[tokio::test]
async fn an_ack_hands_its_partition_to_a_parked_pop_in_its_own_flush() {
    let (got, [pop_flushes, joint, handoffs]) = ack_with_a_pop_parked_behind_it(true).await;
    assert_eq!(got, ["b"]);
    assert_eq!(handoffs, 1.0);
    assert_eq!(
        (pop_flushes, joint),
        (1.0, 1.0),
        "the parked pop claimed in the ack's flush"
    );

    let (got, [pop_flushes, joint, handoffs]) = ack_with_a_pop_parked_behind_it(false).await;
    assert_eq!(got, ["b"], "switched off, the release still wakes the pop");
    assert_eq!(handoffs, 0.0);
    assert_eq!(
        (pop_flushes, joint),
        (1.0, 0.0),
        "switched off, the pop claims in a flush after the ack's"
    );
}
