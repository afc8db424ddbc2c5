//! The ack path under concurrency: workers racing on one partition, a stale worker acking after
//! its batch was reassigned, and many concurrent acks on one consumer row and across rows. No
//! deadlock, no lost and no double-counted offset: at the end the cursor covers every pushed
//! message exactly once (`total_consumed == committed + 1`, the broker's acked counter agrees)
//! and every pushed message was delivered.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{metric, txns, Http, Rng, TestBroker, QM};
use hyper::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

fn ack_body(pid: &str, lease: &str, items: &[(&str, &str)]) -> Value {
    let acks: Vec<Value> = items
        .iter()
        .map(|(x, s)| {
            let mut v = json!({"transactionId": x, "partitionId": pid, "status": s});
            if !lease.is_empty() {
                v["leaseId"] = json!(lease);
            }
            v
        })
        .collect();
    json!({ "acknowledgments": acks })
}

async fn ack(http: &Http, pid: &str, lease: &str, items: &[(&str, &str)]) -> Vec<Value> {
    let r = http
        .post("/api/v1/ack/batch", ack_body(pid, lease, items))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.json.as_array().unwrap().clone()
}

/// (committed, batch_end, total_consumed) of a consumer row.
async fn cursor(t: &TestBroker, pid: &str) -> (i64, Option<i64>, i64) {
    let r = t
        .sql()
        .await
        .query_one(
            "SELECT committed, batch_end, total_consumed FROM queen.log_consumers \
             WHERE partition_id = $1 AND consumer_group = $2",
            &[&Uuid::parse_str(pid).unwrap(), &QM],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_race_on_one_partition_without_losing_or_double_counting() {
    const PUSHES: usize = 30;
    const PER_PUSH: usize = 8;
    const N: usize = PUSHES * PER_PUSH;
    let t = TestBroker::start().await;
    let done = Arc::new(AtomicBool::new(false));
    let delivered: Arc<Mutex<HashSet<String>>> = Arc::default();
    let pid: Arc<Mutex<Option<String>>> = Arc::default();

    let producer = {
        let http = t.http.clone();
        tokio::spawn(async move {
            for p in 0..PUSHES {
                let ids: Vec<String> = (0..PER_PUSH).map(|k| format!("m{p}-{k}")).collect();
                let items: Vec<(&str, &str)> = ids.iter().map(|x| ("p", x.as_str())).collect();
                http.push("q", &items).await;
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        })
    };
    let mut workers = Vec::new();
    for w in 0..3u64 {
        let (http, done, delivered, pid) =
            (t.http.clone(), done.clone(), delivered.clone(), pid.clone());
        workers.push(tokio::spawn(async move {
            let mut rng = Rng(0x5eed + w * 7919);
            let mut pops = 0;
            while !done.load(Ordering::Relaxed) {
                let batch = 1 + rng.below(6);
                let r = http.pop("q", "p", &format!("batch={batch}")).await;
                if r.status == StatusCode::NO_CONTENT {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                }
                assert_eq!(r.status, StatusCode::OK, "{}", r.text);
                pops += 1;
                let got = txns(&r);
                let lease = r.json["leaseId"].as_str().unwrap().to_string();
                let p = r.json["partitionId"].as_str().unwrap().to_string();
                *pid.lock().unwrap() = Some(p.clone());
                delivered.lock().unwrap().extend(got.iter().cloned());
                let all: Vec<(&str, &str)> =
                    got.iter().map(|x| (x.as_str(), "completed")).collect();
                let answers = match rng.below(10) {
                    0 => {
                        // a budget-free retry of the head: the batch redelivers
                        let mut items = all.clone();
                        items[0].1 = "retry";
                        ack(&http, &p, &lease, &items).await
                    }
                    1 if all.len() > 1 => {
                        // a prefix under the lease, the rest lease-less
                        let k = 1 + rng.below(all.len() as u64 - 1) as usize;
                        let mut a = ack(&http, &p, &lease, &all[..k]).await;
                        a.extend(ack(&http, &p, "", &all[k..]).await);
                        a
                    }
                    _ => ack(&http, &p, &lease, &all).await,
                };
                for a in &answers {
                    assert_eq!(a["success"], json!(true), "{answers:?}");
                }
            }
            pops
        }));
    }
    let monitor = {
        let done = done.clone();
        let pid = pid.clone();
        let url = t.db_url.clone();
        tokio::spawn(async move {
            let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let Some(p) = pid.lock().unwrap().clone() else {
                    continue;
                };
                let c: i64 = db
                    .query_one(
                        "SELECT committed FROM queen.log_consumers \
                         WHERE partition_id = $1 AND consumer_group = $2",
                        &[&Uuid::parse_str(&p).unwrap(), &QM],
                    )
                    .await
                    .unwrap()
                    .get(0);
                if c == N as i64 - 1 {
                    done.store(true, Ordering::Relaxed);
                    return;
                }
            }
        })
    };
    let finish = async {
        producer.await.unwrap();
        monitor.await.unwrap();
        let mut pops = 0;
        for w in workers {
            pops += w.await.unwrap();
        }
        pops
    };
    let pops = tokio::time::timeout(Duration::from_secs(60), finish)
        .await
        .expect("no deadlock: the race drains within 60 s");
    assert!(pops > 10);
    let p = pid.lock().unwrap().clone().unwrap();
    let (committed, batch_end, total) = cursor(&t, &p).await;
    assert_eq!((committed, batch_end), (N as i64 - 1, None));
    assert_eq!(total, committed + 1, "every offset counted exactly once");
    assert_eq!(
        metric(&t.http, "queen_messages_acked_total").await,
        N as f64
    );
    let all: HashSet<String> = (0..PUSHES)
        .flat_map(|p| (0..PER_PUSH).map(move |k| format!("m{p}-{k}")))
        .collect();
    assert_eq!(
        *delivered.lock().unwrap(),
        all,
        "every pushed message was delivered"
    );
    let dlq: i64 = t
        .sql()
        .await
        .query_one("SELECT count(*) FROM queen.log_dlq", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(dlq, 0);
    t.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stale_worker_acking_after_reassignment_is_refused() {
    let t = TestBroker::start().await;
    let ids: Vec<String> = (0..50).map(|k| format!("s{k}")).collect();
    let items: Vec<(&str, &str)> = ids.iter().map(|x| ("p", x.as_str())).collect();
    t.http.push("q", &items).await;
    let expire = "UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1s' \
                  WHERE batch_end IS NOT NULL";
    let db = t.sql().await;
    for round in 0..10 {
        let a = t.http.pop("q", "p", "batch=5").await;
        db.execute(expire, &[]).await.unwrap();
        let b = t.http.pop("q", "p", "batch=5").await;
        assert_eq!(b.status, StatusCode::OK, "{}", b.text);
        assert_eq!(txns(&a), txns(&b), "the expired batch is reassigned whole");
        assert_eq!(b.json["messages"][0]["deliveryAttempt"], 2);
        let pid = b.json["partitionId"].as_str().unwrap().to_string();
        let batch = txns(&b);
        let all: Vec<(&str, &str)> = batch.iter().map(|x| (x.as_str(), "completed")).collect();
        let (la, lb) = (
            a.json["leaseId"].as_str().unwrap(),
            b.json["leaseId"].as_str().unwrap(),
        );
        // the stale holder and the new holder ack at the same time (the stale one with a
        // failed, which must not be charged)
        let mut stale_items = all.clone();
        stale_items[0].1 = "failed";
        let (sa, sb) = tokio::join!(
            ack(&t.http, &pid, la, &stale_items),
            ack(&t.http, &pid, lb, &all)
        );
        assert!(
            sa.iter()
                .all(|x| x["error"] == json!("invalid or expired lease")),
            "{sa:?}"
        );
        assert!(sb.iter().all(|x| x["success"] == json!(true)), "{sb:?}");
        let (committed, batch_end, total) = cursor(&t, &pid).await;
        assert_eq!(committed, 5 * round + 4);
        assert_eq!(batch_end, None);
        assert_eq!(total, committed + 1);
        // and after the fact the stale holder is still refused, changing nothing
        let late = ack(&t.http, &pid, la, &all).await;
        assert!(late.iter().all(|x| x["success"] == json!(false)));
        let retry: i32 = db
            .query_one("SELECT batch_retry_count FROM queen.log_consumers", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(retry, 0);
    }
    t.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_acks_on_one_consumer_row_and_across_rows() {
    let t = TestBroker::start().await;
    // one row, many concurrent acks of overlapping subsets, leased and lease-less
    let ids: Vec<String> = (0..100).map(|k| format!("c{k}")).collect();
    let items: Vec<(&str, &str)> = ids.iter().map(|x| ("p", x.as_str())).collect();
    t.http.push("q", &items).await;
    let b = t.http.pop("q", "p", "batch=100").await;
    let pid = b.json["partitionId"].as_str().unwrap().to_string();
    let lease = b.json["leaseId"].as_str().unwrap().to_string();
    let mut tasks = Vec::new();
    for k in 0..40u64 {
        let (http, pid, lease, ids) = (t.http.clone(), pid.clone(), lease.clone(), ids.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(0xabcd + k * 31);
            let mut pick: Vec<&str> = (0..5)
                .map(|_| ids[rng.below(100) as usize].as_str())
                .collect();
            if k == 39 {
                pick.push("c99");
            }
            let items: Vec<(&str, &str)> = pick.iter().map(|x| (*x, "completed")).collect();
            let lease = if k % 4 == 0 { String::new() } else { lease };
            let answers = ack(&http, &pid, &lease, &items).await;
            (lease.is_empty(), answers)
        }));
    }
    for task in tasks {
        let (lease_less, answers) = tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("no deadlock")
            .unwrap();
        for a in answers {
            // a leased ack may only be refused once the lease was released by reaching its end
            if a["success"] != json!(true) {
                assert!(!lease_less, "{a}");
                assert_eq!(a["error"], json!("invalid or expired lease"));
            }
        }
    }
    let (committed, batch_end, total) = cursor(&t, &pid).await;
    assert_eq!((committed, batch_end, total), (99, None, 100));

    // across rows: batches touching four partitions in opposite orders, concurrently
    let parts = ["w", "x", "y", "z"];
    let mut leases = Vec::new();
    for p in parts {
        let ids: Vec<String> = (0..20).map(|k| format!("{p}{k}")).collect();
        let items: Vec<(&str, &str)> = ids.iter().map(|x| (p, x.as_str())).collect();
        t.http.push("q", &items).await;
        let r = t.http.pop("q", p, "batch=20").await;
        leases.push((
            r.json["partitionId"].as_str().unwrap().to_string(),
            r.json["leaseId"].as_str().unwrap().to_string(),
            p,
        ));
    }
    let mut tasks = Vec::new();
    for k in 0..24usize {
        let http = t.http.clone();
        let mut order = leases.clone();
        if k % 2 == 1 {
            order.reverse();
        }
        tasks.push(tokio::spawn(async move {
            let acks: Vec<Value> = order
                .iter()
                .flat_map(|(pid, lease, p)| {
                    let upto = k % 20;
                    (0..=upto).map(move |i| {
                        json!({"transactionId": format!("{p}{i}"), "partitionId": pid,
                               "status": "completed", "leaseId": if k % 3 == 0 { "" } else { lease.as_str() }})
                    })
                })
                .collect();
            let r = http
                .post("/api/v1/ack/batch", json!({ "acknowledgments": acks }))
                .await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("no deadlock across rows")
            .unwrap();
    }
    for (pid, _, p) in &leases {
        let all: Vec<String> = (0..20).map(|k| format!("{p}{k}")).collect();
        let items: Vec<(&str, &str)> = all.iter().map(|x| (x.as_str(), "completed")).collect();
        ack(&t.http, pid, "", &items).await;
        let (committed, batch_end, total) = cursor(&t, pid).await;
        assert_eq!((committed, batch_end, total), (19, None, 20));
    }
    assert_eq!(metric(&t.http, "queen_messages_acked_total").await, 180.0);
    t.broker.shutdown().await;
}
