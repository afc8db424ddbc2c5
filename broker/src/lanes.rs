//! Commit lanes: the shard loops that flush ack fusion's rows and pop fusion's jobs.
//!
//! Each lane is one task with one inbox, flushing fire-on-idle: an arrival at an idle lane
//! flushes at once, arrivals during a flush go in the next one. A lane serves ack fusion, pop
//! fusion, or, with both on and `QUEEN_FUSION_JOINT` (on by default), both: acks and pops that
//! wait together then commit together, in one transaction and one fsync. With pops of one
//! message each delivered message costs a pop and an ack; joined, their commits halve, and a pop
//! can claim the partition an ack of the same flush just released.
//!
//! A joint flush runs the acks first (`log_ack_multi_v1`, which may wait for consumer rows, taken
//! in (partition, group) order) and then the pops (`log_pop_multi_v3`, which never waits: it
//! skips locked rows), so the transaction only ever waits while it holds ordered ack locks and
//! cannot deadlock with the other batched procedures. Its four statements (BEGIN, acks, pops,
//! COMMIT) are pipelined. If one part fails the whole transaction rolls back and the other part
//! runs again on its own, so a failure of one kind never costs the other its commit.
//!
//! Waiters hold no pooled connection; only the flush takes one, for its statements. A waiter's
//! answer resolves only after its flush committed.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::{Object, Pool};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Client;

use crate::ack::fusion::{self as ack_fusion, FusedAck, FusionStats, Verdict};
use crate::pop::claim::{claim_jobs, claim_prepared, prepare_claim, ClaimRow, PopJob};
use crate::pop::fusion::{PopFusionStats, MAX_JOBS};

/// What a pop's flush answers: its rows, or why the flush failed.
pub type PopAnswer = Result<Vec<ClaimRow>, String>;

/// One piece of work waiting for a flush.
pub enum Work {
    Ack(FusedAck, oneshot::Sender<Verdict>),
    Pop(PopJob, oneshot::Sender<PopAnswer>),
}

/// What a lane flushes and the counters it keeps.
pub struct LaneSettings {
    pub shards: usize,
    /// How long an idle lane sleeps between looks at its inbox (a liveness backstop).
    pub hold: Duration,
    /// How long an idle lane waits after a first arrival before it flushes, so that work
    /// arriving close together at light load shares a commit (zero: flush at once). A busy lane
    /// never waits: what arrived during a flush goes in the next one at once.
    pub linger: Duration,
    /// The arrival rate (work items per second, smoothed) below which an idle lane does not
    /// linger (zero: it always does). At light load a linger collects little and every round
    /// trip pays for it; above this rate it fills commits.
    pub linger_min_rate: u64,
    /// Folded ack rows one flush carries at most.
    pub max_ack_rows: usize,
    pub ack_stats: Arc<FusionStats>,
    pub pop_stats: Arc<PopFusionStats>,
}

/// The lanes' inboxes.
pub struct Lanes {
    shards: Vec<mpsc::UnboundedSender<Work>>,
}

impl Lanes {
    /// Starts `settings.shards` lane tasks flushing through `pool`.
    pub fn start(pool: Pool, settings: LaneSettings) -> Arc<Lanes> {
        let settings = Arc::new(settings);
        let shards = (0..settings.shards.max(1))
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(lane_loop(rx, pool.clone(), settings.clone()));
                tx
            })
            .collect();
        Arc::new(Lanes { shards })
    }

    /// How many lanes flush.
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Enqueues `work` on the lane `key` selects; false when the lanes are shut down.
    pub fn send(&self, key: u64, work: Work) -> bool {
        let shard = (key % self.shards.len() as u64) as usize;
        self.shards[shard].send(work).is_ok()
    }
}

type AckWaiter = (FusedAck, oneshot::Sender<Verdict>);
type PopWaiter = (PopJob, oneshot::Sender<PopAnswer>);

async fn lane_loop(mut inbox: mpsc::UnboundedReceiver<Work>, pool: Pool, s: Arc<LaneSettings>) {
    let (mut acks, mut pops): (Vec<AckWaiter>, Vec<PopWaiter>) = (Vec::new(), Vec::new());
    let mut arrivals = ArrivalRate::new(Instant::now());
    loop {
        if acks.is_empty() && pops.is_empty() {
            match tokio::time::timeout(s.hold, inbox.recv()).await {
                Ok(Some(w)) => {
                    arrivals.record(1, Instant::now());
                    sort(w, &mut acks, &mut pops);
                    if !s.linger.is_zero() && arrivals.per_second() >= s.linger_min_rate as f64 {
                        tokio::time::sleep(s.linger).await;
                    }
                }
                Ok(None) => return,
                Err(_) => continue, // the backstop tick: look again
            }
        }
        let mut more = 0;
        while let Ok(w) = inbox.try_recv() {
            sort(w, &mut acks, &mut pops);
            more += 1;
        }
        arrivals.record(more, Instant::now());
        let ack_batch = ack_fusion::take_batch(&mut acks, s.max_ack_rows);
        let pop_batch: Vec<PopWaiter> = pops.drain(..pops.len().min(MAX_JOBS)).collect();
        flush(&pool, &s, ack_batch, pop_batch).await;
    }
}

/// A lane's smoothed arrival rate: work items counted at each look at the inbox, over the time
/// since the previous update, averaged with a half-life of 50 ms of elapsed time so that a
/// burst or a lull changes it within a few flushes. Looks closer together than 100 µs are
/// pooled into the next update.
struct ArrivalRate {
    last: Instant,
    pending: usize,
    per_second: f64,
}

impl ArrivalRate {
    const HALF_LIFE_SECS: f64 = 0.05;
    const MIN_INTERVAL_SECS: f64 = 0.0001;

    fn new(now: Instant) -> ArrivalRate {
        ArrivalRate {
            last: now,
            pending: 0,
            per_second: 0.0,
        }
    }

    fn record(&mut self, items: usize, now: Instant) {
        self.pending += items;
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        if elapsed < Self::MIN_INTERVAL_SECS {
            return;
        }
        let keep = 0.5f64.powf(elapsed / Self::HALF_LIFE_SECS);
        let recent = self.pending as f64 / elapsed;
        self.per_second = keep * self.per_second + (1.0 - keep) * recent;
        (self.last, self.pending) = (now, 0);
    }

    fn per_second(&self) -> f64 {
        self.per_second
    }
}

fn sort(w: Work, acks: &mut Vec<AckWaiter>, pops: &mut Vec<PopWaiter>) {
    match w {
        Work::Ack(a, tx) => acks.push((a, tx)),
        Work::Pop(j, tx) => pops.push((j, tx)),
    }
}

/// The outcome of one flush: the acks' verdicts and the pops' rows, each `None` when the flush
/// carried none.
type Outcome = (
    Option<Result<Vec<Verdict>, String>>,
    Option<Result<Vec<Vec<ClaimRow>>, String>>,
);

async fn flush(pool: &Pool, s: &LaneSettings, acks: Vec<AckWaiter>, pops: Vec<PopWaiter>) {
    let rows = ack_fusion::fold(acks);
    let (jobs, pop_waiters): (Vec<PopJob>, Vec<oneshot::Sender<PopAnswer>>) =
        pops.into_iter().unzip();
    count_flush(s, rows.len(), jobs.len());
    let started = Instant::now();
    let (acked, claimed) = run(pool, &rows, &jobs).await;
    let spent = started.elapsed().as_micros() as u64;
    if let Some(result) = acked {
        s.ack_stats.flush_us.fetch_add(spent, Relaxed);
        ack_fusion::deliver(&s.ack_stats, rows, result);
    }
    if let Some(result) = claimed {
        s.pop_stats.flush_us.fetch_add(spent, Relaxed);
        deliver_pops(&s.pop_stats, jobs.len(), pop_waiters, result);
    }
}

/// Counts a flush as it starts: an ack flush, a pop flush, or both (a joint one).
fn count_flush(s: &LaneSettings, rows: usize, jobs: usize) {
    if rows > 0 {
        s.ack_stats.flushes.fetch_add(1, Relaxed);
        s.ack_stats.rows.fetch_add(rows as u64, Relaxed);
    }
    if jobs > 0 {
        s.pop_stats.flushes.fetch_add(1, Relaxed);
        s.pop_stats.jobs.fetch_add(jobs as u64, Relaxed);
    }
    if rows > 0 && jobs > 0 {
        s.pop_stats.joint_flushes.fetch_add(1, Relaxed);
    }
}

/// Runs the flush's statements: each kind alone, or both in one transaction.
async fn run(pool: &Pool, rows: &[ack_fusion::Row], jobs: &[PopJob]) -> Outcome {
    let some_acks = !rows.is_empty();
    let some_pops = !jobs.is_empty();
    let db = match pool.get().await {
        Ok(db) => db,
        Err(e) => {
            let e = format!("no database connection: {e}");
            return (
                some_acks.then(|| Err(e.clone())),
                some_pops.then_some(Err(e)),
            );
        }
    };
    match (some_acks, some_pops) {
        (true, false) => (Some(ack_fusion::call_multi(&db, rows).await), None),
        (false, true) => (None, Some(claim(&db, jobs).await)),
        (true, true) => joint(&db, rows, jobs).await,
        (false, false) => (None, None),
    }
}

async fn claim(db: &Object, jobs: &[PopJob]) -> Result<Vec<Vec<ClaimRow>>, String> {
    let refs: Vec<&PopJob> = jobs.iter().collect();
    claim_jobs(db, &refs).await.map_err(|e| e.to_string())
}

/// Acks, then pops, in one transaction whose four statements are pipelined (one round trip
/// besides the commit's fsync). If either part fails the transaction rolls back, and the other
/// part runs again on its own, so one kind's failure never costs the other its commit.
async fn joint(db: &Object, rows: &[ack_fusion::Row], jobs: &[PopJob]) -> Outcome {
    let prepared = tokio::try_join!(ack_fusion::prepare_multi(db), async {
        prepare_claim(db).await.map_err(|e| e.to_string())
    },);
    let (ack_stmt, pop_stmt) = match prepared {
        Ok(stmts) => stmts,
        Err(e) => return (Some(Err(e.clone())), Some(Err(e))),
    };
    let refs: Vec<&PopJob> = jobs.iter().collect();
    let client: &Client = db;
    // `biased`: polled in this order, so the requests go out in this order.
    let (begun, acked, claimed, committed) = tokio::join!(
        biased;
        client.batch_execute("BEGIN"),
        ack_fusion::query_multi(client, &ack_stmt, rows),
        claim_prepared(client, &pop_stmt, &refs),
        client.batch_execute("COMMIT"),
    );
    if let Err(e) = begun.and(committed) {
        let e = format!("joint flush: {e}");
        return (Some(Err(e.clone())), Some(Err(e)));
    }
    match (acked, claimed) {
        (Ok(verdicts), Ok(claimed)) => (Some(Ok(verdicts)), Some(Ok(claimed))),
        (Err(e), _) => (Some(Err(e)), Some(claim(db, jobs).await)),
        (Ok(_), Err(e)) => (
            Some(ack_fusion::call_multi(db, rows).await),
            Some(Err(e.to_string())),
        ),
    }
}

/// Hands every pop its own rows, or the flush's failure (logged once, with its context).
fn deliver_pops(
    stats: &PopFusionStats,
    jobs: usize,
    waiters: Vec<oneshot::Sender<PopAnswer>>,
    result: Result<Vec<Vec<ClaimRow>>, String>,
) {
    match result {
        Ok(rows) => {
            for (w, rows) in waiters.into_iter().zip(rows) {
                let _ = w.send(Ok(rows));
            }
        }
        Err(e) => {
            stats.flush_errors.fetch_add(1, Relaxed);
            tracing::error!(target: "pop-fusion", jobs, error = %e, "pop flush failed; its pops retry or answer an error");
            for w in waiters {
                let _ = w.send(Err(e.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ArrivalRate;
    use std::time::{Duration, Instant};

    /// Feeds `items` every `gap` for `secs` seconds and returns the smoothed rate.
    fn steady(rate: &mut ArrivalRate, start: Instant, gap: Duration, items: usize, secs: f64) {
        let steps = (secs / gap.as_secs_f64()) as u32;
        for k in 1..=steps {
            rate.record(items, start + gap * k);
        }
    }

    #[test]
    fn a_steady_stream_converges_to_its_rate() {
        let start = Instant::now();
        let mut rate = ArrivalRate::new(start);
        steady(&mut rate, start, Duration::from_millis(2), 3, 1.0);
        assert!(
            (rate.per_second() - 1500.0).abs() < 15.0,
            "{}",
            rate.per_second()
        );
    }

    #[test]
    fn a_lull_brings_it_down_and_a_burst_up_within_a_few_half_lives() {
        let start = Instant::now();
        let mut rate = ArrivalRate::new(start);
        steady(&mut rate, start, Duration::from_micros(500), 4, 1.0); // 8 000/s
        assert!(rate.per_second() > 7_500.0);
        let later = start + Duration::from_secs(1);
        steady(&mut rate, later, Duration::from_millis(10), 1, 0.3); // 100/s
        assert!(rate.per_second() < 300.0, "{}", rate.per_second());
    }
}
