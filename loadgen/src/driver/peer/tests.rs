//! The peer drivers against a real PostgreSQL (a throwaway cluster): install, produce, consume,
//! answer, and what each answer does to the queue.

use super::*;

struct Db {
    _cluster: throwaway_pg::Cluster,
    url: String,
    client: Client,
}

async fn fresh(name: &str) -> Db {
    let cluster = tokio::task::spawn_blocking(throwaway_pg::Cluster::start)
        .await
        .unwrap()
        .expect("a throwaway cluster starts");
    let url = cluster.create_database(name).expect("database created");
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(conn);
    Db {
        _cluster: cluster,
        url,
        client,
    }
}

fn driver(peer: &'static dyn Peer) -> PeerQueue {
    PeerQueue {
        peer,
        queue: "work".into(),
        consumer: "c".into(),
        visibility_secs: 30,
        retry_budget: 2,
        worker_id: None,
    }
}

/// A fresh database with `peer` installed from its package (a package this machine lacks fails
/// the test: `.ci/run` installs every peer) and its driver: pops of `batch`, a retry budget of
/// 2, leases of 30 s.
async fn installed(name: &str, peer: &'static dyn Peer, batch: u32) -> (Db, PeerQueue) {
    let db = fresh(name).await;
    if let Err(missing) = peer.check_parts(&db.client).await {
        panic!(
            "this machine lacks {} ({missing}); .ci/run installs it",
            peer.name()
        );
    }
    let d = driver(peer);
    let setup = Setup {
        queue: &d.queue,
        consumers: std::slice::from_ref(&d.consumer),
        batch,
        retry_limit: 1,
        lease_secs: 30,
    };
    if let Err(e) = peer.install(&db.url, &db.client, &setup).await {
        panic!("{} installs from its package: {e}", peer.name());
    }
    (db, d)
}

async fn produce(d: &PeerQueue, c: &Client, n: usize) -> Vec<String> {
    let ids: Vec<String> = (0..n).map(|i| format!("t-{i}")).collect();
    let payloads: Vec<String> = (0..n).map(|i| format!(r#"{{"i":{i}}}"#)).collect();
    let batch: Vec<Produced> = ids
        .iter()
        .zip(&payloads)
        .map(|(t, p)| Produced {
            transaction_id: t,
            payload_json: p,
            partition: "p0",
        })
        .collect();
    d.produce(c, &batch).await.expect("produced");
    ids
}

#[tokio::test]
async fn pgmq_deletes_completed_redelivers_retries_and_archives_dead_letters() {
    let db = fresh("peer_pgmq").await;
    let d = driver(&pgmq::Pgmq);
    let setup = Setup {
        queue: &d.queue,
        consumers: std::slice::from_ref(&d.consumer),
        batch: 4,
        retry_limit: 1,
        lease_secs: 30,
    };
    pgmq::Pgmq
        .install(&db.url, &db.client, &setup)
        .await
        .expect("pgmq installs from the crate's embedded SQL");
    let ids = produce(&d, &db.client, 4).await;
    let got = d.consume(&db.client, 4).await.unwrap();
    let txns: Vec<&str> = got
        .deliveries
        .iter()
        .map(|m| m.transaction_id.as_str())
        .collect();
    assert_eq!(txns, ids.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(got.deliveries[0].payload_json, r#"{"i": 0}"#);
    assert!(got.deliveries.iter().all(|m| m.attempt == 1));
    let answers = [
        Answer::Completed,
        Answer::Retry,
        Answer::Dlq,
        Answer::Failed,
    ];
    let done = d.answer(&db.client, &got, &answers).await.unwrap();
    assert_eq!(done.completed, vec!["t-0"]);
    assert_eq!(done.redelivering, vec!["t-1", "t-3"]);
    assert_eq!(done.dead_lettered, vec!["t-2"]);
    assert_eq!(
        d.backlog(&db.client).await.unwrap(),
        2,
        "t-1 and t-3 remain"
    );
    // Redelivered at once; `failed` on the second delivery spends the budget of 2.
    let again = d.consume(&db.client, 4).await.unwrap();
    assert_eq!(again.deliveries.len(), 2);
    assert!(again.deliveries.iter().all(|m| m.attempt == 2));
    let done = d
        .answer(&db.client, &again, &[Answer::Failed, Answer::Completed])
        .await
        .unwrap();
    assert_eq!(done.dead_lettered, vec!["t-1"]);
    assert_eq!(done.completed, vec!["t-3"]);
    assert_eq!(d.backlog(&db.client).await.unwrap(), 0);
    let archived: i64 = db
        .client
        .query_one("SELECT count(*) FROM pgmq.a_work", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(archived, 2, "both dead letters are in PGMQ's archive");
}

#[tokio::test]
async fn pgq_hands_out_ticked_batches_and_retries_what_asks() {
    let (db, d) = installed("peer_pgq", &pgq::Pgq, 3).await;
    let ids = produce(&d, &db.client, 3).await;
    assert!(
        d.consume(&db.client, 3)
            .await
            .unwrap()
            .deliveries
            .is_empty(),
        "not ticked yet"
    );
    // A tick comes once `batch` events are counted or the lag passes (100 ms).
    let got = next_batch(&d, &db.client).await;
    let txns: Vec<String> = got
        .deliveries
        .iter()
        .map(|m| m.transaction_id.clone())
        .collect();
    assert_eq!(txns, ids);
    let answers = [Answer::Completed, Answer::Retry, Answer::Completed];
    let done = d.answer(&db.client, &got, &answers).await.unwrap();
    assert_eq!(done.completed, vec!["t-0", "t-2"]);
    assert_eq!(done.redelivering, vec!["t-1"]);
    // The retried event comes back after maintenance and a tick.
    let redelivered = next_batch(&d, &db.client).await;
    assert_eq!(redelivered.deliveries.len(), 1);
    assert_eq!(redelivered.deliveries[0].transaction_id, "t-1");
    assert_eq!(redelivered.deliveries[0].attempt, 2);
    d.answer(&db.client, &redelivered, &[Answer::Completed])
        .await
        .unwrap();
    assert_eq!(d.backlog(&db.client).await.unwrap(), 0);
}

#[tokio::test]
async fn procrastinate_hands_out_one_job_per_lock_in_order_and_retries_then_fails() {
    let (db, mut d) = installed("peer_procrastinate", &procrastinate::Procrastinate, 4).await;
    procrastinate::Procrastinate
        .open_consumer(&db.client, &mut d)
        .await
        .expect("a worker registers");
    assert!(d.worker_id.is_some());
    // t-0..t-2 share the lock `p0` (see `produce`): one at a time, in order.
    let ids = produce(&d, &db.client, 3).await;
    let got = d.consume(&db.client, 4).await.unwrap();
    assert_eq!(got.deliveries.len(), 1, "one `doing` job per lock");
    assert_eq!(got.deliveries[0].transaction_id, ids[0]);
    assert_eq!(got.deliveries[0].partition.as_deref(), Some("p0"));
    assert_eq!(got.deliveries[0].payload_json, r#"{"i": 0}"#);
    assert_eq!(got.deliveries[0].attempt, 1);
    assert!(
        d.consume(&db.client, 4)
            .await
            .unwrap()
            .deliveries
            .is_empty(),
        "the lock is held while t-0 is `doing`"
    );
    assert_eq!(
        unfinished(&d, &db.client).await,
        ["t-0", "t-1", "t-2"],
        "taken (`doing`) and waiting (`todo`) jobs are still queued"
    );
    let done = d.answer(&db.client, &got, &[Answer::Failed]).await.unwrap();
    assert_eq!(
        done.redelivering,
        vec!["t-0"],
        "a failure within the budget retries"
    );
    // The retried job keeps its place at the head of its lock.
    let again = d.consume(&db.client, 4).await.unwrap();
    assert_eq!(again.deliveries[0].transaction_id, "t-0");
    assert_eq!(again.deliveries[0].attempt, 2);
    let done = d
        .answer(&db.client, &again, &[Answer::Failed])
        .await
        .unwrap();
    assert_eq!(
        done.dead_lettered,
        vec!["t-0"],
        "the budget of 2 is spent: `failed`"
    );
    for want in ["t-1", "t-2"] {
        let got = d.consume(&db.client, 4).await.unwrap();
        assert_eq!(got.deliveries.len(), 1);
        assert_eq!(got.deliveries[0].transaction_id, want);
        let done = d
            .answer(&db.client, &got, &[Answer::Completed])
            .await
            .unwrap();
        assert_eq!(done.completed, vec![want]);
    }
    assert_eq!(d.backlog(&db.client).await.unwrap(), 0);
    assert_eq!(d.dead_lettered(&db.client).await.unwrap(), vec!["t-0"]);
    assert!(unfinished(&d, &db.client).await.is_empty());
}

/// The transactionIds the peer lists as still queued, sorted.
async fn unfinished(d: &PeerQueue, client: &Client) -> Vec<String> {
    let mut ids = d
        .still_queued(client)
        .await
        .unwrap()
        .expect("the peer lists what it still holds");
    ids.sort();
    ids
}

#[tokio::test]
async fn procrastinate_missing_names_what_to_install() {
    // An interpreter that runs but has no such package, and one that is not there.
    for python in ["/bin/false", "/nonexistent/python3"] {
        let missing = procrastinate::schema_path_with(python).await.unwrap_err();
        assert!(missing.contains("pip install procrastinate"), "{missing}");
        assert!(missing.contains(python), "{missing}");
    }
}

#[tokio::test]
async fn pgboss_completes_fails_into_retries_then_its_dead_letter_queue() {
    let (db, d) = installed("peer_pgboss", &pgboss::PgBoss, 4).await;
    let ids = produce(&d, &db.client, 3).await;
    let mut got = d.consume(&db.client, 4).await.unwrap();
    // Its fetch returns the claimed rows in no promised order.
    got.deliveries
        .sort_by(|a, b| a.transaction_id.cmp(&b.transaction_id));
    let txns: Vec<&str> = got
        .deliveries
        .iter()
        .map(|m| m.transaction_id.as_str())
        .collect();
    assert_eq!(txns, ids.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(got.deliveries[0].payload_json, r#"{"i":0}"#);
    assert!(got.deliveries.iter().all(|m| m.attempt == 1));
    let answers = [Answer::Completed, Answer::Failed, Answer::Retry];
    let done = d.answer(&db.client, &got, &answers).await.unwrap();
    assert_eq!(done.completed, vec!["t-0"]);
    assert_eq!(done.redelivering, vec!["t-1", "t-2"]);
    assert_eq!(d.backlog(&db.client).await.unwrap(), 2);
    assert_eq!(unfinished(&d, &db.client).await, ["t-1", "t-2"]);
    let again = d.consume(&db.client, 4).await.unwrap();
    assert_eq!(again.deliveries.len(), 2);
    assert!(again.deliveries.iter().all(|m| m.attempt == 2));
    let done = d
        .answer(&db.client, &again, &[Answer::Failed, Answer::Completed])
        .await
        .unwrap();
    assert_eq!(done.dead_lettered.len(), 1, "the budget of 2 is spent");
    assert_eq!(d.backlog(&db.client).await.unwrap(), 0);
    assert_eq!(
        d.dead_lettered(&db.client).await.unwrap(),
        done.dead_lettered,
        "pg-boss copied it into the dead-letter queue"
    );
}

#[tokio::test]
async fn pgboss_missing_names_what_to_install() {
    let missing = pgboss::load_plans("/nonexistent/npm").await.unwrap_err();
    assert!(
        missing.contains("npm install --prefix /nonexistent/npm pg-boss"),
        "{missing}"
    );
}

/// Ticks and consumes until a batch with events comes (finishing empty ones), for 10 s at most.
async fn next_batch(d: &PeerQueue, client: &Client) -> Consumed {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        d.tick(client, true).await.unwrap();
        let got = d.consume(client, 3).await.unwrap();
        if !got.deliveries.is_empty() || std::time::Instant::now() > deadline {
            return got;
        }
        if got.open_batch.is_some() {
            d.answer(client, &got, &[]).await.unwrap();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[test]
fn each_peer_refuses_what_it_cannot_do() {
    let groups = Asks {
        consumer_groups: 2,
        ..Asks::default()
    };
    assert!(pgmq::Pgmq
        .refusal(&groups)
        .unwrap()
        .contains("consumer groups"));
    let stalls = Asks {
        lease_stalls: true,
        ..Asks::default()
    };
    assert!(
        pgmq::Pgmq.refusal(&stalls).is_none(),
        "a visibility timeout is a lease"
    );
    assert!(pgq::Pgq.refusal(&stalls).unwrap().contains("leases"));
    let dlq = Asks {
        dead_letters: true,
        ..Asks::default()
    };
    assert!(pgq::Pgq.refusal(&dlq).unwrap().contains("dead-letter"));
    assert!(pgmq::Pgmq.refusal(&dlq).is_none());
    for job_table in [
        &procrastinate::Procrastinate as &dyn Peer,
        &pgboss::PgBoss as &dyn Peer,
    ] {
        assert!(job_table.refusal(&dlq).unwrap().contains("dlq"));
        assert!(job_table.refusal(&stalls).is_some());
        assert!(job_table
            .refusal(&groups)
            .unwrap()
            .contains("consumer groups"));
        let failures = Asks {
            failures: true,
            ..Asks::default()
        };
        assert!(job_table.refusal(&failures).is_none(), "retries are mapped");
    }
    assert_eq!(named("pgq").map(|p| p.name()), Ok("pgq"));
    assert!(named("kafka")
        .unwrap_err()
        .contains("pgmq, pgq, procrastinate and pgboss"));
}

#[test]
fn every_peer_cell_has_its_registered_peer_and_every_peer_a_cell() {
    use crate::scenario::Cell;
    for cell in Cell::peers() {
        let peer = cell.peer().expect("a peer cell names a registered peer");
        assert_eq!(peer.name(), cell.name());
    }
    for peer in PEERS {
        let cell: Cell = peer.name().parse().expect("a registered peer is a cell");
        assert!(cell.peer().is_some_and(|p| p == peer));
    }
    assert!(Cell::ALL.iter().all(|c| c.peer().is_none()));
}

#[test]
fn an_answer_reads_back_from_its_ack_status() {
    for a in [
        Answer::Completed,
        Answer::Failed,
        Answer::Retry,
        Answer::Dlq,
    ] {
        assert_eq!(Answer::of(a.status()), a);
    }
}

/// Produces `per_lock` jobs on each of `locks` partitions in batches of 100 (one partition per
/// batch, as the workload's producers write), returning every transactionId.
async fn produce_backlog(d: &PeerQueue, c: &Client, locks: usize, per_lock: usize) -> Vec<String> {
    let mut all = Vec::new();
    for round in 0..per_lock.div_ceil(100) {
        for lock in 0..locks {
            let n = (per_lock - round * 100).min(100);
            let ids: Vec<String> = (0..n)
                .map(|i| format!("p{lock}-{}", round * 100 + i))
                .collect();
            let partition = format!("p{lock}");
            let batch: Vec<Produced> = ids
                .iter()
                .map(|t| Produced {
                    transaction_id: t,
                    payload_json: r#"{"pad":"x"}"#,
                    partition: &partition,
                })
                .collect();
            d.produce(c, &batch).await.expect("produced");
            all.extend(ids);
        }
    }
    all
}

/// Pops of `batch` on `client`, each answered `completed` whole, until the peer's backlog is 0
/// (`limit` at most): every transactionId delivered, in delivery order.
async fn drain_all(d: &PeerQueue, client: &Client, batch: u32, limit: Duration) -> Vec<Delivery> {
    let deadline = std::time::Instant::now() + limit;
    let mut seen = Vec::new();
    while d.backlog(client).await.unwrap() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the backlog did not drain in {limit:?}: {} left",
            d.backlog(client).await.unwrap()
        );
        let got = tokio::time::timeout(Duration::from_secs(30), d.consume(client, batch))
            .await
            .expect("a pop returns (it does not hang)")
            .unwrap();
        let answers = vec![Answer::Completed; got.deliveries.len()];
        let done = d.answer(client, &got, &answers).await.unwrap();
        assert_eq!(done.completed.len(), got.deliveries.len());
        seen.extend(got.deliveries);
    }
    seen
}

/// Every produced transactionId was delivered exactly once.
fn each_once(produced: &[String], seen: &[Delivery]) {
    let mut txns: Vec<&str> = seen.iter().map(|d| d.transaction_id.as_str()).collect();
    txns.sort_unstable();
    let mut want: Vec<&str> = produced.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(txns.len(), want.len(), "deliveries: one per job");
    assert_eq!(txns, want, "every job delivered once");
}

use std::time::Duration;

#[tokio::test]
async fn procrastinate_works_off_a_standing_backlog_once_each_in_lock_order() {
    let p = &procrastinate::Procrastinate;
    let (db, mut d) = installed("peer_procrastinate_backlog", p, 100).await;
    let produced = produce_backlog(&d, &db.client, 16, 150).await;
    p.settle(&db.client, &d)
        .await
        .expect("the table is analyzed");
    let analyzed: i64 = db
        .client
        .query_one(
            "SELECT count(*) FROM pg_stat_user_tables \
             WHERE relname = 'procrastinate_jobs' AND last_analyze IS NOT NULL",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(analyzed, 1, "settle analyzed procrastinate_jobs");
    // A consumer on its own connection, as the workers have.
    let consumer = super::worker::connect(&db.url).await.unwrap();
    p.open_consumer(&consumer, &mut d).await.unwrap();
    let first = d.consume(&consumer, 100).await.unwrap();
    assert_eq!(
        first.deliveries.len(),
        16,
        "a pop of 100 holds one job per lock"
    );
    d.answer(&consumer, &first, &[Answer::Completed; 16])
        .await
        .unwrap();
    let mut seen = first.deliveries;
    seen.extend(drain_all(&d, &consumer, 100, Duration::from_secs(120)).await);
    each_once(&produced, &seen);
    for lock in 0..16 {
        let order: Vec<&str> = seen
            .iter()
            .filter(|s| s.partition.as_deref() == Some(&format!("p{lock}")))
            .map(|s| s.transaction_id.as_str())
            .collect();
        let want: Vec<String> = (0..150).map(|i| format!("p{lock}-{i}")).collect();
        assert_eq!(order, want, "lock p{lock} is handed out in order");
    }
    assert_eq!(d.backlog(&db.client).await.unwrap(), 0);
}

#[tokio::test]
async fn pgboss_works_off_a_standing_backlog_once_each_from_cold_connections() {
    let p = &pgboss::PgBoss;
    let (db, mut d) = installed("peer_pgboss_backlog", p, 100).await;
    let produced = produce_backlog(&d, &db.client, 16, 500).await;
    p.settle(&db.client, &d)
        .await
        .expect("the table is analyzed");
    // Each consumer is a fresh connection whose first pop returns a hundred rows carrying
    // pg-boss's own enum: it must return (a cold client once waited forever on the type).
    let mut seen = Vec::new();
    for _ in 0..2 {
        let consumer = super::worker::connect(&db.url).await.unwrap();
        p.open_consumer(&consumer, &mut d).await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(30), d.consume(&consumer, 100))
            .await
            .expect("a cold consumer's first pop of 100 returns")
            .unwrap();
        assert_eq!(got.deliveries.len(), 100);
        d.answer(&consumer, &got, &[Answer::Completed; 100])
            .await
            .unwrap();
        seen.extend(got.deliveries);
    }
    let consumer = super::worker::connect(&db.url).await.unwrap();
    p.open_consumer(&consumer, &mut d).await.unwrap();
    seen.extend(drain_all(&d, &consumer, p.drain_batch(), Duration::from_secs(120)).await);
    each_once(&produced, &seen);
    assert_eq!(d.backlog(&db.client).await.unwrap(), 0);
}
