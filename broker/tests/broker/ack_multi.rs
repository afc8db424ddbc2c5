//! `queen.log_ack_multi_v1` against its contract: row i gets the verdict of `log_ack_at_v1`
//! run over the rows in (partition, group, ordinal) order, and leaves the consumer rows as those
//! calls would. A flush whose rows are all leased and on distinct (partition, group)
//! is judged by one set statement; anything else runs the per-row loop. This suite draws seeded
//! random consumer states and ack rows (live, expired and foreign leases, no lease, clamps,
//! stale counts, duplicates, missing rows), runs both in rolled-back transactions from the same
//! state, and requires identical verdicts and identical rows.

use crate::common::{consumer_rows, Rng, TestBroker, QM};
use ackbench_broker::storage::procs;
use deadpool_postgres::Object;
use tokio_postgres::Client;
use uuid::Uuid;

/// A verdict row as both sides give it: (ordinal, ok, error, acked, committed, released).
type VerdictRow = (i32, bool, Option<String>, i64, Option<i64>, bool);

/// One ack row of a trial.
#[derive(Clone, Debug)]
struct AckRow {
    pid: Uuid,
    lease_id: String,
    end: i64,
    count: i32,
}

const LEASES: [&str; 3] = ["wa", "wb", ""];

/// A drawn consumer row: its cursor and lease (batch end, lease_id, live), or no row at all.
#[derive(Clone, Copy, Debug)]
struct Drawn {
    committed: i64,
    lease: Option<(i64, &'static str, bool)>,
}

/// A random state per partition: one in five has no consumer row; the rest a cursor and no
/// lease, a live lease of `wa` or `wb`, or an expired one.
fn draw_state(pids: &[Uuid], rng: &mut Rng) -> Vec<Option<Drawn>> {
    pids.iter()
        .map(|_| {
            if rng.chance(20) {
                return None;
            }
            let committed = rng.below(4) as i64;
            let end = committed + 1 + rng.below(3) as i64;
            let lease = match rng.below(5) {
                0 => None,
                1 => Some((end, "wb", true)),
                2 => Some((end, "wa", false)),
                _ => Some((end, "wa", true)),
            };
            Some(Drawn { committed, lease })
        })
        .collect()
}

/// Writes `state` in place of every consumer row.
async fn apply_state(db: &Client, pids: &[Uuid], state: &[Option<Drawn>]) {
    db.execute("DELETE FROM queen.log_consumers", &[])
        .await
        .unwrap();
    for (pid, drawn) in pids.iter().zip(state) {
        let Some(d) = drawn else { continue };
        let batch_end = d.lease.map(|l| l.0);
        let lease_id = d.lease.map(|l| l.1);
        let lease = d.lease.map(|l| if l.2 { "1 minute" } else { "-1 minute" });
        db.execute(
            "INSERT INTO queen.log_consumers (partition_id, consumer_group, committed, batch_end, \
             worker_id, lease_expires_at, attempt_count, attempt_from, total_consumed) \
             VALUES ($1, $2, $3, $4, $5, now() + $6::text::interval, 1, $3::bigint + 1, 7)",
            &[pid, &QM, &d.committed, &batch_end, &lease_id, &lease],
        )
        .await
        .unwrap();
    }
}

/// Random ack rows for `state`: half of them the ack a holder of the lease would send (its
/// batch, counted from the cursor), the rest any lease_id, end and count; now and then a second
/// row on a partition already in the call.
fn draw_rows(pids: &[Uuid], state: &[Option<Drawn>], rng: &mut Rng) -> Vec<AckRow> {
    let mut order: Vec<usize> = (0..pids.len()).collect();
    rng.shuffle(&mut order);
    let n = 1 + rng.index(order.len());
    let mut rows: Vec<AckRow> = order[..n]
        .iter()
        .map(|&k| match state[k] {
            Some(Drawn {
                committed,
                lease: Some((end, lease_id, _)),
            }) if rng.chance(50) => AckRow {
                pid: pids[k],
                lease_id: lease_id.to_string(),
                end,
                count: (end - committed) as i32,
            },
            _ => AckRow {
                pid: pids[k],
                lease_id: LEASES[rng.index(3)].to_string(),
                end: rng.below(7) as i64,
                count: rng.below(4) as i32,
            },
        })
        .collect();
    if rng.chance(15) {
        let mut twin = rows[rng.index(rows.len())].clone();
        twin.lease_id = LEASES[rng.index(2)].to_string();
        twin.end += 1;
        rows.push(twin);
    }
    rows
}

fn verdict(r: &tokio_postgres::Row) -> VerdictRow {
    (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5))
}

/// The call under test, from the current state, its verdicts put in input order (the contract
/// tags each with its input ordinal; the rows may come in execution order).
async fn multi(db: &Client, rows: &[AckRow]) -> Vec<VerdictRow> {
    let pids: Vec<Uuid> = rows.iter().map(|r| r.pid).collect();
    let groups: Vec<&str> = rows.iter().map(|_| QM).collect();
    let ends: Vec<i64> = rows.iter().map(|r| r.end).collect();
    let lease_ids: Vec<&str> = rows.iter().map(|r| r.lease_id.as_str()).collect();
    let counts: Vec<i32> = rows.iter().map(|r| r.count).collect();
    let mut verdicts = db
        .query(
            "SELECT ordinal, ok, error, acked, committed, lease_released \
         FROM queen.log_ack_multi_v1($1, $2, $3, $4, $5)",
            &[&pids, &groups, &ends, &lease_ids, &counts],
        )
        .await
        .unwrap()
        .iter()
        .map(verdict)
        .collect::<Vec<_>>();
    verdicts.sort_by_key(|v| v.0);
    verdicts
}

/// The contract's reference: log_ack_at_v1, through the broker's binding, per row in
/// (partition, group, ordinal) order, answered by input ordinal.
async fn one_by_one(db: &Object, rows: &[AckRow]) -> Vec<VerdictRow> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| (rows[i].pid, i));
    let mut out = Vec::new();
    for i in order {
        let r = &rows[i];
        let at = procs::ack::AckAt {
            partition_id: r.pid,
            group: QM,
            lease_id: &r.lease_id,
            upto: r.end,
            ok: true,
            count: r.count,
        };
        let v = procs::ack::ack_at(db, &at).await.unwrap();
        out.push((
            i as i32 + 1,
            v["ok"].as_bool().expect("ok is a boolean"),
            v["error"].as_str().map(str::to_string),
            v["acked"].as_i64().unwrap_or(0),
            v["committed"].as_i64(),
            v["lease_released"].as_bool().unwrap_or(false),
        ));
    }
    out.sort_by_key(|v| v.0);
    out
}

/// Whether a call takes `log_ack_multi_v1`'s set statement: every row leased, no (partition, group) twice.
fn set_shaped(rows: &[AckRow]) -> bool {
    let mut pids: Vec<Uuid> = rows.iter().map(|r| r.pid).collect();
    pids.sort();
    pids.dedup();
    pids.len() == rows.len() && rows.iter().all(|r| !r.lease_id.is_empty())
}

#[tokio::test]
async fn ack_multi_answers_and_writes_as_log_ack_at_row_by_row() {
    let t = TestBroker::start().await;
    let items: Vec<(String, String)> = (0..6)
        .flat_map(|p| (0..8).map(move |m| (format!("p{p}"), format!("t{p}-{m}"))))
        .collect();
    let refs: Vec<(&str, &str)> = items
        .iter()
        .map(|(p, m)| (p.as_str(), m.as_str()))
        .collect();
    t.http.push("am", &refs).await;
    // One pooled connection, so the reference calls the broker's binding inside the trial's
    // transaction.
    let pool = ackbench_broker::storage::pool(&t.db_url.parse().unwrap(), 1).unwrap();
    let db = pool.get().await.unwrap();
    let pids: Vec<Uuid> = db
        .query(
            "SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id \
             WHERE q.name = 'am' ORDER BY p.id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(pids.len(), 6);

    let mut rng = Rng(0x5eed_ac4a);
    // Per path (set statement, loop): calls, accepted rows, refused rows.
    let mut seen = [[0usize; 3]; 2];
    for trial in 0..300 {
        let state = draw_state(&pids, &mut rng);
        let rows = draw_rows(&pids, &state, &mut rng);
        let mut sides = Vec::new();
        for side in 0..2 {
            db.batch_execute("BEGIN").await.unwrap();
            apply_state(&db, &pids, &state).await;
            let verdicts = if side == 0 {
                multi(&db, &rows).await
            } else {
                one_by_one(&db, &rows).await
            };
            sides.push((verdicts, consumer_rows(&db).await));
            db.batch_execute("ROLLBACK").await.unwrap();
        }
        assert_eq!(sides[0], sides[1], "trial {trial}: rows {rows:?}");
        let path = &mut seen[usize::from(!set_shaped(&rows))];
        path[0] += 1;
        path[1] += sides[0].0.iter().filter(|v| v.1).count();
        path[2] += sides[0].0.iter().filter(|v| !v.1).count();
    }
    // Both paths ran often, each accepting and refusing many rows.
    for path in seen {
        assert!(
            path.iter().all(|&n| n >= 40),
            "[calls, ok, refused] per path: {seen:?}"
        );
    }
}
