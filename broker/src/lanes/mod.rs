//! Commit lanes: the engine that flushes ack fusion's rows and pop fusion's jobs. Its clients
//! only enqueue (`Lanes::send`); everything else is decided here.
//!
//! One task owns the lanes. Work is keyed by a hash of its partition into slots (`core.rs`), the
//! folding and ordering domains; a flush takes the ready work of every idle slot, so the lanes'
//! work shares a transaction unless the engine runs several flushes at once. Flushing is
//! fire-on-idle: an arrival at an idle engine flushes at once (or after a linger), arrivals
//! during a flush go in the next one. How many flushes run at once and how long an idle lane
//! lingers are decided at run time from what the engine measures (`control.rs`); the
//! variables `QUEEN_ACK_FUSION_SHARDS`, `QUEEN_POP_FUSION_SHARDS` and `QUEEN_FUSION_LINGER_MS`
//! fix them instead.
//!
//! The lanes serve ack fusion, pop fusion, or, with both on and `QUEEN_FUSION_JOINT` (on by
//! default), both: acks and pops that wait together then commit together, in one transaction
//! and one fsync. With pops of one message each delivered message costs a pop and an ack;
//! joined, their commits halve, and a pop can claim the partition an ack of the same flush just
//! released.
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

pub mod control;
pub mod core;
mod rate;
#[cfg(test)]
mod sim;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use deadpool_postgres::{Object, Pool};
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Client;

use crate::ack::fusion::{self as ack_fusion, FusedAck, FusionStats, Verdict};
use crate::demand::Demand;
use crate::pop::claim::{claim_jobs, claim_prepared, prepare_claim, ClaimRow, PopJob};
use crate::pop::fusion::{PopFusionStats, MAX_JOBS};
use control::{Concurrency, ConcurrencyMode, Linger};
use core::{Batch, Core, CoreSettings, Kind, Step};

/// What a pop's flush answers: its rows, or why the flush failed.
pub type PopAnswer = Result<Vec<ClaimRow>, String>;

/// One piece of work waiting for a flush.
pub enum Work {
    Ack(FusedAck, oneshot::Sender<Verdict>),
    Pop(PopJob, oneshot::Sender<PopAnswer>),
}

/// What the lanes flush and the counters they keep.
pub struct LaneSettings {
    /// How many flushes may run at once: adaptive (the default) or fixed by the operator.
    pub concurrency: ConcurrencyMode,
    /// How long an idle lane waits after a first arrival (adaptive up to a hold bound, or
    /// fixed).
    pub linger: Linger,
    /// Folded ack rows one flush carries at most (unbounded normally; 1 for the gates' tests).
    pub max_ack_rows: usize,
    /// Whether consumers wait for messages: an adaptive linger applies only then.
    pub demand: Arc<Demand>,
    pub ack_stats: Arc<FusionStats>,
    pub pop_stats: Arc<PopFusionStats>,
}

/// The lanes' engine as the metrics see it.
#[derive(Default)]
pub struct LaneGauges {
    /// Flushes allowed in flight now.
    pub limit: AtomicU64,
    /// Probes of one more flush in flight, and those kept.
    pub probes: AtomicU64,
    pub probes_kept: AtomicU64,
    /// Lingers started, and the total they were set to hold, microseconds (a linger that a
    /// full inbox ends early counts whole).
    pub lingers: AtomicU64,
    pub linger_us: AtomicU64,
}

/// The lanes' inbox: every client enqueues here, keyed by partition.
pub struct Lanes {
    inbox: mpsc::UnboundedSender<(u64, Work)>,
    pub gauges: Arc<LaneGauges>,
}

impl Lanes {
    /// Starts the lanes' engine task, flushing through `pool`.
    pub fn start(pool: Pool, settings: LaneSettings) -> Arc<Lanes> {
        let (tx, rx) = mpsc::unbounded_channel();
        let gauges = Arc::new(LaneGauges::default());
        tokio::spawn(engine(rx, pool, Arc::new(settings), gauges.clone()));
        Arc::new(Lanes { inbox: tx, gauges })
    }

    /// Flushes allowed in flight now.
    pub fn concurrency(&self) -> usize {
        self.gauges.limit.load(Relaxed).max(1) as usize
    }

    /// Enqueues `work` in the slot `key` (a hash of its partition) selects; false when the
    /// lanes are shut down.
    pub fn send(&self, key: u64, work: Work) -> bool {
        self.inbox.send((key, work)).is_ok()
    }
}

type AckWaiter = (FusedAck, oneshot::Sender<Verdict>);
type PopWaiter = (PopJob, oneshot::Sender<PopAnswer>);

fn core_settings(s: &LaneSettings) -> CoreSettings {
    CoreSettings {
        concurrency: s.concurrency,
        linger: s.linger,
        max_acks: s.max_ack_rows.max(1),
        max_pops: MAX_JOBS,
    }
}

/// The engine: one task that decides, runs its flushes as futures of its own (no task per
/// flush, no wake-up across threads), and reports what they did back to its `Core`.
async fn engine(
    mut inbox: mpsc::UnboundedReceiver<(u64, Work)>,
    pool: Pool,
    s: Arc<LaneSettings>,
    gauges: Arc<LaneGauges>,
) {
    let mut core: Core<Work> = Core::new(core_settings(&s), Instant::now());
    let mut flushes = FuturesUnordered::new();
    let mut open = true;
    loop {
        let wait = loop {
            match core.step(Instant::now()) {
                Step::Flush(batch) => {
                    let (pool, s) = (pool.clone(), s.clone());
                    flushes.push(async move {
                        let (slots, items) = (batch.slots.clone(), batch.items());
                        flush(&pool, &s, batch).await;
                        (slots, items)
                    });
                }
                Step::WaitUntil(until) => break Some(until),
                Step::Idle => break None,
            }
        };
        publish(&gauges, &core);
        if !open && flushes.is_empty() && core.pending() == 0 {
            return;
        }
        // Above one flush, look again each epoch even when nothing happens, so that a probe or
        // a limit that idle capacity should lower is judged without waiting for the next
        // arrival.
        let tick = (core.limit() > 1).then(|| Instant::now() + Concurrency::EPOCH);
        let wait = [wait, tick].into_iter().flatten().min();
        tokio::select! {
            biased;
            Some((slots, items)) = flushes.next(), if !flushes.is_empty() => {
                core.completed(Instant::now(), &slots, items);
            }
            w = inbox.recv(), if open => match w {
                Some((key, work)) => {
                    let now = Instant::now();
                    let waits = s.demand.consumers_wait();
                    arrive(&mut core, (now, waits), key, work);
                    while let Ok((key, work)) = inbox.try_recv() {
                        arrive(&mut core, (now, waits), key, work);
                    }
                }
                None => open = false,
            },
            _ = tokio::time::sleep_until(wait.unwrap_or_else(Instant::now).into()), if wait.is_some() => {}
        }
    }
}

/// Hands `work` to the core; `at` is when it arrived and whether consumers waited for
/// messages then.
fn arrive(core: &mut Core<Work>, at: (Instant, bool), key: u64, work: Work) {
    let (now, consumers_wait) = at;
    let kind = match &work {
        Work::Ack(a, _) => Kind::Ack {
            fold: ack_fusion::fold_key(a),
        },
        Work::Pop(..) => Kind::Pop,
    };
    core.arrive(now, consumers_wait, key, kind, work);
}

fn publish(gauges: &LaneGauges, core: &Core<Work>) {
    gauges.limit.store(core.limit() as u64, Relaxed);
    gauges.probes.store(core.control().probes, Relaxed);
    gauges
        .probes_kept
        .store(core.control().probes_kept, Relaxed);
    let (lingers, lingered) = core.lingers();
    gauges.lingers.store(lingers, Relaxed);
    gauges.linger_us.store(lingered.as_micros() as u64, Relaxed);
}

/// A batch's acks and pops with their waiters.
fn split(batch: Batch<Work>) -> (Vec<AckWaiter>, Vec<PopWaiter>) {
    let (mut acks, mut pops) = (Vec::new(), Vec::new());
    for w in batch.acks.into_iter().chain(batch.pops) {
        match w {
            Work::Ack(a, tx) => acks.push((a, tx)),
            Work::Pop(j, tx) => pops.push((j, tx)),
        }
    }
    (acks, pops)
}

/// The outcome of one flush: the acks' verdicts and the pops' rows, each `None` when the flush
/// carried none.
type Outcome = (
    Option<Result<Vec<Verdict>, String>>,
    Option<Result<Vec<Vec<ClaimRow>>, String>>,
);

async fn flush(pool: &Pool, s: &LaneSettings, batch: Batch<Work>) {
    let (acks, pops) = split(batch);
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
