//! `queen.log_pop_multi_v3` against its contract: the rows and writes of `log_pop_multi_v2`.
//! A flush of one-candidate jobs on distinct (partition, group) is claimed by a direct
//! statement, first contacts and delayed or windowed queues are handed to `log_pop_multi_v2`, and
//! any other shape goes to it whole. This suite draws seeded random consumer states (missing
//! rows, cursors before, inside and past the log, live, foreign and expired leases, repeated
//! attempts), queue options and jobs (groups, batches, lease times, auto-acks, zero budgets,
//! cached segments, and now and then a call of another shape), runs both procedures in
//! rolled-back transactions from the same state and requires identical rows and writes.

use crate::common::{consumer_rows, Rng, TestBroker, QM};
use tokio_postgres::types::ToSql;
use tokio_postgres::Client;
use uuid::Uuid;

const GROUPS: [&str; 2] = [QM, "g"];

/// A partition of the suite: its id and its segments' base offsets.
struct Part {
    id: Uuid,
    bases: Vec<i64>,
}

/// One pop job of a trial and its candidates.
#[derive(Debug, Clone)]
struct Job {
    group: &'static str,
    worker: String,
    batch: i32,
    max_partitions: i32,
    lease_seconds: Option<i32>,
    auto_ack: bool,
    candidates: Vec<Uuid>,
}

/// A call's arguments: the jobs and the (partition, base) pairs the caller holds.
struct Call {
    jobs: Vec<Job>,
    cached: Vec<(Uuid, i64)>,
}

/// Pushes two segments of 3 messages to each of 4 partitions of `plain` and 2 of `held`.
async fn fill(t: &TestBroker) -> Vec<Part> {
    for round in 0..2 {
        for (queue, parts) in [("plain", 4), ("held", 2)] {
            let items: Vec<(String, String)> = (0..parts)
                .flat_map(|p| {
                    (0..3).map(move |m| (format!("p{p}"), format!("{queue}{p}-{round}-{m}")))
                })
                .collect();
            let refs: Vec<(&str, &str)> = items
                .iter()
                .map(|(p, m)| (p.as_str(), m.as_str()))
                .collect();
            t.http.push(queue, &refs).await;
        }
    }
    let db = t.sql().await;
    let rows = db
        .query(
            "SELECT p.id, array_agg(g.base_offset ORDER BY g.base_offset) \
             FROM queen.log_partitions p JOIN queen.log_segments g ON g.partition_id = p.id \
             GROUP BY p.id ORDER BY p.id",
            &[],
        )
        .await
        .unwrap();
    rows.iter()
        .map(|r| Part {
            id: r.get(0),
            bases: r.get(1),
        })
        .collect()
}

/// Writes a random state: queue options of `held`, the segments' ages, then per (partition,
/// group) no row (one in four) or a cursor and a lease drawn from the cases that matter to a
/// claim.
async fn draw_state(db: &Client, parts: &[Part], rng: &mut Rng) {
    let (delay, window) = match rng.below(4) {
        0 => (3600, 0),
        1 => (0, 3600),
        _ => (0, 0),
    };
    db.execute(
        "UPDATE queen.queues SET delayed_processing = $1, window_buffer = $2 WHERE name = 'held'",
        &[&delay, &window],
    )
    .await
    .unwrap();
    for part in parts {
        // Segments written now, two hours ago, or the first then and the second now: what a
        // delay or window of an hour holds back.
        let (first, second) = match rng.below(3) {
            0 => ("0", "0"),
            1 => ("2 hours", "2 hours"),
            _ => ("2 hours", "0"),
        };
        db.execute(
            "UPDATE queen.log_segments SET created_at = now() - CASE WHEN base_offset = $2 \
             THEN $3::text::interval ELSE $4::text::interval END WHERE partition_id = $1",
            &[&part.id, &part.bases[0], &first, &second],
        )
        .await
        .unwrap();
    }
    db.execute("DELETE FROM queen.log_consumers", &[])
        .await
        .unwrap();
    for part in parts {
        for group in GROUPS {
            if rng.chance(25) {
                continue;
            }
            let committed = rng.below(8) as i64 - 1;
            let (batch_end, worker, lease) = match rng.below(4) {
                0 => (Some(committed + 2), Some("other"), "1 minute"),
                1 => (Some(committed + 2), Some("gone"), "-1 minute"),
                _ => (None, None, "0"),
            };
            let attempt_from = if rng.chance(50) { committed + 1 } else { -5 };
            db.execute(
                "INSERT INTO queen.log_consumers (partition_id, consumer_group, committed, \
                 batch_end, worker_id, lease_expires_at, attempt_count, attempt_from, \
                 total_consumed) VALUES ($1, $2, $3, $4, $5, \
                 CASE WHEN $4::bigint IS NULL THEN NULL ELSE now() + $6::text::interval END, \
                 2, $7, 9)",
                &[
                    &part.id,
                    &group,
                    &committed,
                    &batch_end,
                    &worker,
                    &lease,
                    &attempt_from,
                ],
            )
            .await
            .unwrap();
        }
    }
}

/// Random jobs, one candidate each on distinct (partition, group) pairs; about one call in five
/// of another shape (a job with two candidates, or a pair asked twice).
fn draw_call(parts: &[Part], rng: &mut Rng) -> Call {
    let mut pairs: Vec<(Uuid, &'static str)> = parts
        .iter()
        .flat_map(|p| GROUPS.map(|g| (p.id, g)))
        .collect();
    rng.shuffle(&mut pairs);
    let n = 1 + rng.index(6);
    let mut jobs: Vec<Job> = pairs[..n]
        .iter()
        .enumerate()
        .map(|(i, (pid, group))| Job {
            group,
            worker: format!("w{i}"),
            batch: 1 + rng.below(4) as i32,
            max_partitions: if rng.chance(5) { 0 } else { 1 },
            lease_seconds: rng.chance(30).then_some(45),
            auto_ack: rng.chance(20),
            candidates: vec![*pid],
        })
        .collect();
    if rng.chance(10) {
        let extra = pairs[n].0;
        jobs[0].candidates.push(extra);
        jobs[0].max_partitions = 2;
    } else if rng.chance(10) {
        let mut twin = jobs[0].clone();
        twin.worker = "twin".into();
        jobs.push(twin);
    }
    let cached = parts
        .iter()
        .flat_map(|p| p.bases.iter().map(|b| (p.id, *b)))
        .filter(|_| rng.chance(50))
        .collect();
    Call { jobs, cached }
}

/// `procedure`'s rows for `call`, each as text with its lease relative to now(), sorted by
/// (job, segment base).
async fn claim(db: &Client, procedure: &str, call: &Call) -> Vec<String> {
    let jobs = &call.jobs;
    let groups: Vec<&str> = jobs.iter().map(|j| j.group).collect();
    let workers: Vec<&str> = jobs.iter().map(|j| j.worker.as_str()).collect();
    let batches: Vec<i32> = jobs.iter().map(|j| j.batch).collect();
    let max_parts: Vec<i32> = jobs.iter().map(|j| j.max_partitions).collect();
    let leases: Vec<Option<i32>> = jobs.iter().map(|j| j.lease_seconds).collect();
    let auto_acks: Vec<bool> = jobs.iter().map(|j| j.auto_ack).collect();
    let (mut cand_jobs, mut cand_pids) = (Vec::new(), Vec::new());
    for (i, job) in jobs.iter().enumerate() {
        for pid in &job.candidates {
            cand_jobs.push(i as i32 + 1);
            cand_pids.push(*pid);
        }
    }
    let cached_pids: Vec<Uuid> = call.cached.iter().map(|c| c.0).collect();
    let cached_bases: Vec<i64> = call.cached.iter().map(|c| c.1).collect();
    let args: [&(dyn ToSql + Sync); 10] = [
        &groups,
        &workers,
        &batches,
        &max_parts,
        &leases,
        &auto_acks,
        &cand_jobs,
        &cand_pids,
        &cached_pids,
        &cached_bases,
    ];
    let sql = format!(
        "SELECT format('%s %s %s %s %s-%s a%s %s last %s seg %s-%s %s', ordinal, partition_id, \
         queue_name, partition_name, span_start, span_end, attempt, lease_expires_at - now(), \
         last_offset, seg_base, seg_end, md5(blob)) \
         FROM queen.{procedure}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
         ORDER BY ordinal, seg_base"
    );
    db.query(&sql, &args)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Whether v3 claims `call` itself (one candidate per job, no pair twice).
fn direct_shape(call: &Call) -> bool {
    let mut pairs: Vec<(Uuid, &str)> = call
        .jobs
        .iter()
        .flat_map(|j| j.candidates.iter().map(move |c| (*c, j.group)))
        .collect();
    let one_each = call.jobs.iter().all(|j| j.candidates.len() == 1);
    pairs.sort();
    pairs.dedup();
    one_each && pairs.len() == call.jobs.len()
}

#[tokio::test]
async fn pop_multi_v3_claims_and_writes_as_pop_multi_v2() {
    let t = TestBroker::start().await;
    let parts = fill(&t).await;
    assert_eq!(parts.len(), 6);
    assert!(
        parts.iter().all(|p| p.bases.len() == 2),
        "two segments each"
    );
    let db = t.sql().await;
    let mut rng = Rng(0x90b_c1a1);
    // [direct-shaped calls, their delivered rows, other calls, their delivered rows]
    let mut seen = [0usize; 4];
    for trial in 0..300 {
        let state_seed = rng.next() | 1;
        let call = draw_call(&parts, &mut rng);
        let mut sides = Vec::new();
        for procedure in ["log_pop_multi_v3", "log_pop_multi_v2"] {
            db.batch_execute("BEGIN").await.unwrap();
            draw_state(&db, &parts, &mut Rng(state_seed)).await;
            let rows = claim(&db, procedure, &call).await;
            sides.push((rows, consumer_rows(&db).await));
            db.batch_execute("ROLLBACK").await.unwrap();
        }
        assert_eq!(sides[0], sides[1], "trial {trial}: {:?}", call.jobs);
        let at = if direct_shape(&call) { 0 } else { 2 };
        seen[at] += 1;
        seen[at + 1] += sides[0].0.len();
    }
    assert!(
        seen[0] >= 150 && seen[1] >= 150 && seen[2] >= 20 && seen[3] >= 10,
        "[direct calls, rows, other calls, rows]: {seen:?}"
    );
}
