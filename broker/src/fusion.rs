//! Fusion: ack fusion and pop fusion on the commit lanes (`lanes/`). This module builds the
//! lanes each configuration asks for and owns what a flush does; the lanes decide when.
//!
//! - Ack fusion and pop fusion each on lanes of their own, or, both on with `QUEEN_FUSION_JOINT`,
//!   sharing one set of lanes so acks and pops waiting together commit together (the lanes then
//!   follow ack fusion's settings).
//! - A joint flush runs the acks first (`log_ack_multi_v1`, which may wait for consumer rows,
//!   taken in (partition, group) order) and then the pops (`log_pop_multi_v3`, which never waits:
//!   it skips locked rows), so the transaction only ever waits while it holds ordered ack locks
//!   and cannot deadlock with the other batched procedures. Its four statements (BEGIN, acks,
//!   pops, COMMIT) are pipelined. If one part fails the whole transaction rolls back and the
//!   other part runs again on its own, so a failure of one kind never costs the other its commit.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use deadpool_postgres::{Object, Pool};
use tokio_postgres::Client;

use crate::ack::fusion::{self as ack_fusion, AckFusion, AckWaiter, FusionStats, Verdict};
use crate::config::Config;
use crate::demand::Demand;
use crate::lanes::control::{ConcurrencyMode, Linger};
use crate::lanes::{Flusher, LaneSettings, Lanes};
use crate::pop::fusion::{self as pop_fusion, PopFusion, PopFusionStats, PopWaiter, MAX_JOBS};
use crate::storage::procs::pop::{pop_multi, pop_multi_once, prepare_pop_multi, ClaimRow, PopJob};

/// Ack fusion and pop fusion as `config` asks for them.
pub fn start(
    config: &Config,
    pool: &Pool,
    demand: &Arc<Demand>,
) -> (Option<AckFusion>, Option<PopFusion>) {
    let ack_concurrency = Config::lane_concurrency(config.ack_fusion_shards);
    let ack_linger = config.lane_linger(config.ack_fusion_hold_ms);
    if config.ack_fusion && config.pop_fusion && config.fusion_joint {
        let settings = LaneSettings {
            concurrency: ack_concurrency,
            linger: ack_linger,
            max_ack_rows: config.ack_fusion_max_rows,
            max_pops: MAX_JOBS,
            demand: Arc::clone(demand),
        };
        let (acks, pops) = shared(pool.clone(), settings);
        return (Some(acks), Some(pops));
    }
    let acks = config.ack_fusion.then(|| {
        ack_only(
            pool.clone(),
            ack_concurrency,
            ack_linger,
            config.ack_fusion_max_rows,
            Arc::clone(demand),
        )
    });
    let pops = config.pop_fusion.then(|| {
        pop_only(
            pool.clone(),
            Config::lane_concurrency(config.pop_fusion_shards),
            config.lane_linger(config.pop_fusion_hold_ms),
            Arc::clone(demand),
        )
    });
    (acks, pops)
}

/// Ack fusion and pop fusion sharing one set of lanes flushing through `pool`.
pub fn shared(pool: Pool, settings: LaneSettings) -> (AckFusion, PopFusion) {
    let flush = Flush::new(pool);
    let (ack_stats, pop_stats) = (flush.ack_stats.clone(), flush.pop_stats.clone());
    let lanes = Lanes::start(flush, settings);
    (
        AckFusion::on(lanes.acks(), ack_stats).sharing_lanes_with_pops(),
        PopFusion::on(lanes.pops(), pop_stats),
    )
}

/// Ack fusion on lanes of its own flushing through `pool`. `max_rows` caps the ack requests of
/// one flush (unbounded normally; 1 turns fusion into one commit per ack, for gate tests).
pub fn ack_only(
    pool: Pool,
    concurrency: ConcurrencyMode,
    linger: Linger,
    max_rows: usize,
    demand: Arc<Demand>,
) -> AckFusion {
    let flush = Flush::new(pool);
    let stats = flush.ack_stats.clone();
    let settings = LaneSettings {
        concurrency,
        linger,
        max_ack_rows: max_rows.max(1),
        max_pops: MAX_JOBS,
        demand,
    };
    AckFusion::on(Lanes::start(flush, settings).acks(), stats)
}

/// Pop fusion on lanes of its own flushing through `pool`.
pub fn pop_only(
    pool: Pool,
    concurrency: ConcurrencyMode,
    linger: Linger,
    demand: Arc<Demand>,
) -> PopFusion {
    let flush = Flush::new(pool);
    let stats = flush.pop_stats.clone();
    let settings = LaneSettings {
        concurrency,
        linger,
        max_ack_rows: 1,
        max_pops: MAX_JOBS,
        demand,
    };
    PopFusion::on(Lanes::start(flush, settings).pops(), stats)
}

/// What a flush of the lanes does: fold the acks, claim the pops, answer every waiter, and
/// count it.
pub struct Flush {
    pool: Pool,
    pub ack_stats: Arc<FusionStats>,
    pub pop_stats: Arc<PopFusionStats>,
}

impl Flush {
    pub fn new(pool: Pool) -> Flush {
        Flush {
            pool,
            ack_stats: Arc::default(),
            pop_stats: Arc::default(),
        }
    }

    /// Counts a flush as it starts: an ack flush, a pop flush, or both (a joint one).
    fn count(&self, rows: usize, jobs: usize) {
        if rows > 0 {
            self.ack_stats.flushes.fetch_add(1, Relaxed);
            self.ack_stats.rows.fetch_add(rows as u64, Relaxed);
        }
        if jobs > 0 {
            self.pop_stats.flushes.fetch_add(1, Relaxed);
            self.pop_stats.jobs.fetch_add(jobs as u64, Relaxed);
        }
        if rows > 0 && jobs > 0 {
            self.pop_stats.joint_flushes.fetch_add(1, Relaxed);
        }
    }
}

impl Flusher for Flush {
    type Ack = AckWaiter;
    type Pop = PopWaiter;

    fn fold_key(ack: &AckWaiter) -> u64 {
        ack_fusion::fold_key(&ack.0)
    }

    async fn flush(&self, acks: Vec<AckWaiter>, pops: Vec<PopWaiter>) {
        let rows = ack_fusion::fold(acks);
        let (jobs, pop_waiters): (Vec<PopJob>, Vec<_>) = pops.into_iter().unzip();
        self.count(rows.len(), jobs.len());
        let started = Instant::now();
        let (acked, claimed) = run(&self.pool, &rows, &jobs).await;
        let spent = started.elapsed().as_micros() as u64;
        if let Some(result) = acked {
            self.ack_stats.flush_us.fetch_add(spent, Relaxed);
            ack_fusion::deliver(&self.ack_stats, rows, result);
        }
        if let Some(result) = claimed {
            self.pop_stats.flush_us.fetch_add(spent, Relaxed);
            pop_fusion::deliver(&self.pop_stats, jobs.len(), pop_waiters, result);
        }
    }
}

/// The outcome of one flush: the acks' verdicts and the pops' rows, each `None` when the flush
/// carried none.
type Outcome = (
    Option<Result<Vec<Verdict>, String>>,
    Option<Result<Vec<Vec<ClaimRow>>, String>>,
);

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
        (true, true) => joint_flush(&db, rows, jobs).await,
        (false, false) => (None, None),
    }
}

async fn claim(db: &Object, jobs: &[PopJob]) -> Result<Vec<Vec<ClaimRow>>, String> {
    let refs: Vec<&PopJob> = jobs.iter().collect();
    pop_multi_once(db, &refs).await.map_err(|e| e.to_string())
}

/// Acks, then pops, in one transaction whose four statements are pipelined (one round trip
/// besides the commit's fsync). If either part fails the transaction rolls back, and the other
/// part runs again on its own, so one kind's failure never costs the other its commit.
async fn joint_flush(db: &Object, rows: &[ack_fusion::Row], jobs: &[PopJob]) -> Outcome {
    let prepared = tokio::try_join!(ack_fusion::prepare_multi(db), async {
        prepare_pop_multi(db).await.map_err(|e| e.to_string())
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
        pop_multi(client, &pop_stmt, &refs),
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
