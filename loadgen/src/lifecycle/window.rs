//! The measured window: snapshots of every counter at its two edges (`Edge`: PostgreSQL, each
//! of the cell's brokers, the client, CPU), and a sampler
//! that wakes once a second in between and hands each `Tick` to the caller (`run` turns ticks
//! into the per-second series, `capacity` into its progress line).

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::driver::system::Installed;
use crate::measure::broker_metrics::Exposition;
use crate::measure::host_cpu::HostCpu;
use crate::measure::pg_counters::{live_sample, LiveCounters, PgSnapshot};
use crate::target::broker::process_cpu_seconds;
use crate::workload::{CellContext, CounterValues, Phase};

/// Every counter at one edge of the window.
pub struct Edge {
    pub at: Instant,
    pub pg: Option<PgSnapshot>,
    /// Each broker's `/metrics`, in the site's order (empty in a peer cell).
    pub brokers: Vec<Exposition>,
    pub counters: CounterValues,
    /// The ledger's outstanding (message, group) obligations.
    pub backlog: u64,
    /// Messages the ledger has seen pushed.
    pub pushed: u64,
    pub loadgen_cpu: f64,
    /// CPU seconds of each broker process this run started (none for an external broker).
    pub broker_cpus: Vec<f64>,
    /// The machine's CPU accounting (its steal), where the kernel has it.
    pub host: Option<HostCpu>,
}

impl Edge {
    /// Snapshots PostgreSQL, every broker's `/metrics`, the client counters and CPU time.
    pub async fn take(system: &dyn Installed, ctx: &CellContext) -> Edge {
        let site = system.site();
        let pg = match &site.database {
            Some((name, client)) => PgSnapshot::take(client, name).await.ok(),
            None => None,
        };
        let brokers = system.figures().await;
        Edge {
            at: Instant::now(),
            pg,
            brokers,
            counters: ctx.counters.values(),
            backlog: ctx.ledger.backlog(),
            pushed: ctx.ledger.pushed_count(),
            loadgen_cpu: process_cpu_seconds(std::process::id()).unwrap_or(f64::NAN),
            broker_cpus: site
                .processes
                .iter()
                .map(|p| p.cpu_seconds().unwrap_or(f64::NAN))
                .collect(),
            host: HostCpu::read(),
        }
    }

    /// CPU seconds of every broker process together (NaN without one).
    pub fn broker_cpu(&self) -> f64 {
        match self.broker_cpus.is_empty() {
            true => f64::NAN,
            false => self.broker_cpus.iter().sum(),
        }
    }
}

/// One per-second reading inside the window.
#[derive(Clone, Copy)]
pub struct Tick {
    pub at: Instant,
    pub live: LiveCounters,
    pub counters: CounterValues,
}

impl Tick {
    /// Reads the live counters now.
    async fn take(system: &dyn Installed, ctx: &CellContext) -> Tick {
        Tick {
            at: Instant::now(),
            live: live_counters(system).await,
            counters: ctx.counters.values(),
        }
    }

    /// Seconds since `earlier` (at least a millisecond, so rates stay finite).
    pub fn secs_since(&self, earlier: &Tick) -> f64 {
        (self.at - earlier.at).as_secs_f64().max(1e-3)
    }
}

/// What the sampler saw: the window's two edges, and whether it was cut short.
pub struct Window {
    pub start: Edge,
    pub end: Edge,
    pub interrupted: bool,
}

impl Window {
    /// The window's length in seconds.
    pub fn secs(&self) -> f64 {
        (self.end.at - self.start.at).as_secs_f64()
    }

    /// PostgreSQL's counters over the window, when both edges were read.
    pub fn pg_delta(&self) -> Option<PgSnapshot> {
        match (&self.start.pg, &self.end.pg) {
            (Some(a), Some(b)) => Some(b.since(a)),
            _ => None,
        }
    }

    /// The share of the machine's CPU time the host took over the window (NaN unless both
    /// edges read it).
    pub fn host_steal_share(&self) -> f64 {
        HostCpu::steal_share_since(self.end.host, self.start.host)
    }
}

/// Measures for `duration_secs`: takes the start edge, switches the workload to
/// `Phase::Measure`, calls `on_tick(start, previous, now)` once a second while `beside(start)`
/// runs alongside (the fault injector), and takes the end edge once both are done (the ticks
/// end early when `cancel` flips).
pub async fn sample<T, F: Future<Output = T>>(
    system: &dyn Installed,
    ctx: &CellContext,
    duration_secs: f64,
    cancel: &watch::Receiver<bool>,
    on_tick: impl FnMut(&Edge, &Tick, &Tick),
    beside: impl FnOnce(Instant) -> F,
) -> (Window, T) {
    let start = Edge::take(system, ctx).await;
    ctx.set_phase(Phase::Measure);
    let ticks = tick_every_second(system, ctx, &start, duration_secs, cancel, on_tick);
    let (interrupted, alongside) = tokio::join!(ticks, beside(start.at));
    let end = Edge::take(system, ctx).await;
    let window = Window {
        start,
        end,
        interrupted,
    };
    (window, alongside)
}

/// Calls `on_tick` once a second of the window; true when `cancel` cut it short.
async fn tick_every_second(
    system: &dyn Installed,
    ctx: &CellContext,
    start: &Edge,
    duration_secs: f64,
    cancel: &watch::Receiver<bool>,
    mut on_tick: impl FnMut(&Edge, &Tick, &Tick),
) -> bool {
    let mut last = Tick {
        at: start.at,
        live: live_counters(system).await,
        counters: start.counters,
    };
    let mut interrupted = false;
    let mut second = 1u32;
    while (second as f64) <= duration_secs.ceil() {
        let due = start.at + Duration::from_secs_f64((second as f64).min(duration_secs));
        tokio::time::sleep_until(due.into()).await;
        if *cancel.borrow() {
            interrupted = true;
            break;
        }
        let now = Tick::take(system, ctx).await;
        on_tick(start, &last, &now);
        last = now;
        second += 1;
    }
    interrupted
}

/// The lag-free live counters; unknown without a database.
async fn live_counters(system: &dyn Installed) -> LiveCounters {
    match &system.site().database {
        Some((name, client)) => live_sample(client, name)
            .await
            .unwrap_or(LiveCounters::UNKNOWN),
        None => LiveCounters::UNKNOWN,
    }
}
