//! One capacity step: a workload on a fresh queue at the step's offered rate, its warm-up and
//! measured window (through the shared cell lifecycle), and the step's figures from the window's
//! edges. The step is neither drained nor audited.

use tokio::sync::watch;

use crate::driver::system::Installed;
use crate::lifecycle::phases::Workload;
use crate::lifecycle::settle::Whole;
use crate::lifecycle::window::{self, Edge, Tick, Window};
use crate::lifecycle::CellRound;
use crate::measure::process_tree::tree_cpu_seconds;
use crate::progress::Progress;
use crate::target::broker::process_cpu_seconds;
use crate::workload::CellContext;

use super::model::{Plan, Step};

/// One step on a fresh queue: prefill, workers, warm-up, the window, workers aborted.
/// `Ok(None)` when interrupted.
pub(super) async fn measure(
    cr: &CellRound<'_>,
    system: &dyn Installed,
    plan: &Plan,
    label: &str,
    postmaster: Option<u32>,
    cancel: &watch::Receiver<bool>,
    progress: &mut Progress,
) -> Result<Option<Step>, String> {
    let mut workload = Workload::start(cr, system, &Whole, progress).await?;
    let ctx = workload.ctx().clone();
    let window = if workload
        .warm_up(label, plan.warmup_secs, cancel, progress)
        .await
    {
        None
    } else {
        let on_tick = |start: &_, last: &_, now: &_| {
            progress.update(&progress_line(
                label,
                plan.step_secs,
                start,
                last,
                now,
                &ctx,
            ));
        };
        let no_faults = |_| async {};
        let pg_cpu = PgCpu::start(postmaster);
        let (window, ()) =
            window::sample(system, &ctx, plan.step_secs, cancel, on_tick, no_faults).await;
        Some((window, pg_cpu.cores()))
    };
    // Stopping ends latency recording, so the histograms read below cover the window alone.
    // Nothing after the window is judged: the workers are aborted rather than given a
    // long-poll's timeout to notice.
    workload.abort().await;
    progress.finish();
    Ok(window.filter(|(w, _)| !w.interrupted).map(|(w, pg_cpu)| {
        let mut step = figures(cr, &w, &ctx);
        step.pg_cpu_cores = pg_cpu;
        step
    }))
}

/// PostgreSQL's CPU over a window: its whole process tree, read at both ends (the reads
/// bracket the window's edges by the few milliseconds the edges take).
struct PgCpu {
    postmaster: Option<u32>,
    at: std::time::Instant,
    seconds: Option<f64>,
}

impl PgCpu {
    fn start(postmaster: Option<u32>) -> PgCpu {
        PgCpu {
            postmaster,
            at: std::time::Instant::now(),
            seconds: postmaster.and_then(tree_cpu_seconds),
        }
    }

    /// Cores used since `start`; NaN when PostgreSQL is not a local process of ours.
    fn cores(&self) -> f64 {
        let now = self.postmaster.and_then(tree_cpu_seconds);
        match (self.seconds, now) {
            (Some(a), Some(b)) => (b - a) / self.at.elapsed().as_secs_f64().max(1e-3),
            _ => f64::NAN,
        }
    }
}

/// The live line of a step's window: rates since the last tick, backlog, tail latencies and
/// the load generator's CPU since the window began.
fn progress_line(
    label: &str,
    duration: f64,
    start: &Edge,
    last: &Tick,
    now: &Tick,
    ctx: &CellContext,
) -> String {
    let dt = now.secs_since(last);
    let elapsed = (now.at - start.at).as_secs_f64();
    let cpu = process_cpu_seconds(std::process::id()).unwrap_or(f64::NAN) - start.loadgen_cpu;
    format!(
        "{label} measure {elapsed:>3.0}/{duration:.0}s  push {:>7.0}/s  ack {:>7.0}/s  commits {:>6.0}/s  backlog {:>7}  ack p99 {:>7.2}ms  lag p99 {:>6.2}ms  cpu {:.2}  errors {}",
        (now.counters.pushed_messages - last.counters.pushed_messages) / dt,
        (now.counters.acked_messages - last.counters.acked_messages) / dt,
        (now.live.write_commits - last.live.write_commits) / dt,
        ctx.ledger.backlog(),
        ctx.latency.p99_ms("ack"),
        ctx.latency.p99_ms("schedule_lag"),
        cpu / elapsed.max(1e-3),
        now.counters.errors
    )
}

/// The step's figures (not yet judged) from the window's edges and the latency histograms.
fn figures(cr: &CellRound<'_>, w: &Window, ctx: &CellContext) -> Step {
    let histograms = ctx.latency.snapshot();
    let p = |op: &str, q: f64| {
        histograms
            .get(op)
            .filter(|h| !h.is_empty())
            .map(|h| h.value_at_quantile(q) as f64 / 1000.0)
            .unwrap_or(f64::NAN)
    };
    let (start, end) = (&w.start, &w.end);
    let secs = w.secs().max(1e-3);
    let d = end.counters.since(&start.counters);
    let pg = w.pg_delta();
    let producers = &cr.scenario.producers;
    let groups = cr.scenario.consumers.group_names().len() as u32;
    let rate = producers.rate.unwrap_or(f64::NAN);
    let backlog_growth = end.backlog as f64 - start.backlog as f64;
    let answered = groups as f64 * (end.pushed as f64 - start.pushed as f64) - backlog_growth;
    let batch = producers.batch.max(1) as f64;
    let producer_count = producers.count.max(1) as f64;
    Step {
        index: cr.round,
        offered_rate: rate,
        window_secs: secs,
        consumer_groups: groups,
        offered_messages: rate * secs,
        pushed_messages: d.pushed_messages,
        achieved_push_rate: d.pushed_messages / secs,
        acked_rate: d.acked_messages / secs,
        answered_rate: answered / secs,
        backlog_start: start.backlog as f64,
        backlog_end: end.backlog as f64,
        backlog_growth,
        push_p99_ms: p("push", 0.99),
        push_uncorrected_p99_ms: p("push_uncorrected", 0.99),
        ack_p50_ms: p("ack", 0.50),
        ack_p99_ms: p("ack", 0.99),
        e2e_p50_ms: p("e2e", 0.50),
        e2e_p99_ms: p("e2e", 0.99),
        e2e_first_p99_ms: p("e2e_first", 0.99),
        commits_per_sec: pg
            .as_ref()
            .map(|g| g.xact_commit / secs)
            .unwrap_or(f64::NAN),
        write_commits_per_sec: pg.as_ref().map(|g| g.xmax / secs).unwrap_or(f64::NAN),
        loadgen_cpu_cores: (end.loadgen_cpu - start.loadgen_cpu) / secs,
        broker_cpu_cores: (end.broker_cpu() - start.broker_cpu()) / secs,
        schedule_lag_p99_ms: p("schedule_lag", 0.99),
        producer_interval_ms: batch * producer_count / rate * 1000.0,
        errors: d.errors,
        pg_exec_ms_per_sec: pg
            .as_ref()
            .map(|g| g.statements.values().map(|s| s.total_exec_ms).sum::<f64>() / secs)
            .unwrap_or(f64::NAN),
        wal_syncs_per_sec: pg.as_ref().map(|g| g.wal_syncs / secs).unwrap_or(f64::NAN),
        wal_bytes_per_sec: pg.as_ref().map(|g| g.wal_bytes / secs).unwrap_or(f64::NAN),
        host_steal_share: w.host_steal_share(),
        ..Default::default()
    }
}
