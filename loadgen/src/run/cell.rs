//! One cell in one round of `ackbench run`: drives the cell's lifecycle (its system installed, the
//! workload's warm-up, the measured window, the drain and the audit) and turns what the window
//! saw into the round's results (figures, per-second series, histograms; with several brokers,
//! the totals over them and each broker's own figures). A shard's round also leaves its ledger
//! file for `ackbench merge`.

use tokio::sync::watch;

use ackbench_reports::results::{
    Audit, BrokerFigures, FaultEvent, MinuteSample, RoundResults, SecondSample, MINUTES_AFTER_SECS,
};
use ackbench_reports::stats::encode_histogram;

use crate::driver::{self, system::Installed, system::Site};
use crate::history;
use crate::lifecycle::env::Env;
use crate::lifecycle::faults::{with_audit, with_recovery, Injector};
use crate::lifecycle::phases::Workload;
use crate::lifecycle::settle::Settlement;
use crate::lifecycle::window::{self, Edge, Tick, Window};
use crate::lifecycle::CellRound;
use crate::live;
use crate::measure::broker_metrics::{self, Scrape};
use crate::measure::figures::{derive, per_broker, BrokerWindow, WindowDeltas};
use crate::measure::minutes::{self, MinuteClock, Reading, MINUTE_SECS};
use crate::measure::pg_counters::PgSnapshot;
use crate::progress::Progress;
use crate::workload::{CellContext, CounterValues};

/// Runs one cell round on its system, settled as `settlement` says. `Err` only for set-up
/// failures; an interrupted cell returns what it has.
pub async fn run(
    env: &Env,
    cr: &CellRound<'_>,
    settlement: &dyn Settlement,
    cancel: &watch::Receiver<bool>,
    progress: &mut Progress,
) -> Result<RoundResults, String> {
    let system = driver::for_cell(env, cr);
    let installed = system.install(env, cr, &cr.tag()).await?;
    let result = measure(env, cr, installed.as_ref(), settlement, cancel, progress).await;
    if let Some(note) = installed.into_site().release(env).await {
        progress.say(&format!("{}: {note}", cr.label()));
    }
    result
}

/// Warm-up, window, drain, stop and audit on a fresh workload.
async fn measure(
    env: &Env,
    cr: &CellRound<'_>,
    system: &dyn Installed,
    settlement: &dyn Settlement,
    cancel: &watch::Receiver<bool>,
    progress: &mut Progress,
) -> Result<RoundResults, String> {
    let run = &cr.scenario.run;
    let label = cr.label();
    let mut workload = Workload::start(cr, system, settlement, progress).await?;
    let lease_ms = cr.scenario.queue.options.lease_time.saturating_mul(1000);
    // A history exported whole is judged whole at the end; otherwise it is judged as it goes.
    let roller = env
        .history
        .is_none()
        .then(|| history::rolling::Roller::start(workload.ctx().clone(), lease_ms));
    live::cell_started(cr, workload.ctx());
    let window = if workload
        .warm_up(&label, run.warmup_secs, cancel, progress)
        .await
    {
        None
    } else {
        let injector = Injector {
            faults: &cr.scenario.faults,
            target: system.site(),
            postgres: env.postgres.as_ref(),
            ctx: workload.ctx(),
        };
        let (window, seen) = measured_window(cr, system, &injector, cancel, progress).await;
        live::window_closed(&window);
        Some((window, seen))
    };
    let interrupted = window.as_ref().is_none_or(|(w, _)| w.interrupted);
    let drained = !interrupted
        && workload
            .drain(&label, run.drain_timeout_secs, cancel, progress)
            .await;
    workload.stop().await;
    drop(roller);
    let mut audit = workload.audit(drained, &cr.tag()).await?;
    let ctx = workload.ctx();
    history::judge(
        &ctx.history,
        &ctx.ledger,
        &mut audit,
        system.promises(),
        lease_ms,
    );
    live::cell_finished(&audit);
    if let Some(path) = &env.history {
        history::export::append(path, &cr.name, cr.round, &ctx.history, &ctx.ledger)?;
    }
    progress.finish();
    if let Some(line) = errors_line(&label, workload.ctx()) {
        progress.say(&line);
    }
    let (measured, seen) = match window {
        Some((w, seen)) => (Measured::of(&w, &broker_urls(system.site())), seen),
        None => (Measured::default(), Seen::default()),
    };
    Ok(measured.results(cr, workload.ctx(), seen, audit, !interrupted))
}

/// How many requests failed in the cell round and the last failure's words, if any failed:
/// what a user needs to tell a broken target from a slow one.
fn errors_line(label: &str, ctx: &CellContext) -> Option<String> {
    let errors = ctx.counters.values().errors;
    let last = ctx.last_error.lock().expect("error lock").clone()?;
    Some(format!("{label} {errors:.0} errors; the last: {last}"))
}

/// The addresses of the cell's brokers, in the site's order.
fn broker_urls(site: &Site) -> Vec<String> {
    site.brokers.iter().map(|b| b.base().to_string()).collect()
}

/// What the window saw besides its edges: the per-second series and the faults injected.
#[derive(Default)]
struct Seen {
    series: Vec<SecondSample>,
    faults: Vec<FaultEvent>,
    /// Per minute, for a window longer than `MINUTES_AFTER_SECS` (none for a shorter one).
    minutes: Vec<MinuteSample>,
}

/// The measured window with a progress line and a `SecondSample` per second, the injector
/// firing the scenario's faults beside it.
async fn measured_window(
    cr: &CellRound<'_>,
    system: &dyn Installed,
    injector: &Injector<'_>,
    cancel: &watch::Receiver<bool>,
    progress: &mut Progress,
) -> (Window, Seen) {
    let duration = cr.scenario.run.duration_secs;
    let label = cr.label();
    let ctx = injector.ctx;
    let mut series = Vec::new();
    let long = duration > MINUTES_AFTER_SECS;
    let mut clock: Option<MinuteClock> = None;
    let on_tick = |start: &Edge, last: &Tick, now: &Tick| {
        let sample = second_sample(start, last, now, ctx);
        live::pg_sampled(now.live);
        let rss = long.then(minutes::resident_mib);
        progress.update(&format!(
            "{label} measure {:>2.0}/{duration:.0}s push {:>5.0}/s ack {:>5.0}/s commits {:>5.0}/s p99 {:>6.1}ms backlog {:>5} errors {}{}",
            sample.t,
            sample.pushed,
            sample.acked,
            sample.commits,
            sample.ack_p99_ms,
            sample.backlog,
            ctx.counters.values().errors,
            rss.map_or(String::new(), |mib| format!(" rss {mib:.0}MiB")),
        ));
        if let Some(rss_mib) = rss {
            let clock = clock.get_or_insert_with(|| MinuteClock::new(MINUTE_SECS, start.counters));
            if clock.due(sample.t) {
                let line = close_minute(clock, ctx, sample.t, now.counters, rss_mib);
                progress.say(&format!("{label} {line}"));
            }
        }
        series.push(sample);
    };
    let faults = |start| injector.run(start, duration, cancel);
    let (window, events) = window::sample(system, ctx, duration, cancel, on_tick, faults).await;
    for e in &events {
        progress.say(&format!(
            "{label} fault {} at {:.1}s, ended {:.1}s{}",
            e.kind,
            e.at_secs,
            e.ended_secs,
            if e.note.is_empty() {
                String::new()
            } else {
                format!(" ({})", e.note)
            }
        ));
    }
    let faults = with_recovery(events, &series);
    let minutes = match clock {
        Some(clock) => ctx.latency.read(|histograms| {
            clock.finish(&Reading {
                t: window.secs(),
                counters: window.end.counters,
                histograms,
                backlog: window.end.backlog,
                rss_mib: minutes::resident_mib(),
            })
        }),
        None => Vec::new(),
    };
    let seen = Seen {
        series,
        faults,
        minutes,
    };
    (window, seen)
}

/// Closes the clock's minute at `t` seconds; returns its line for the terminal.
fn close_minute(
    clock: &mut MinuteClock,
    ctx: &CellContext,
    t: f64,
    counters: CounterValues,
    rss_mib: f64,
) -> String {
    ctx.latency.read(|histograms| {
        let m = clock.close(&Reading {
            t,
            counters,
            histograms,
            backlog: ctx.ledger.backlog(),
            rss_mib,
        });
        let p99 = |op: &str| m.latency.get(op).map_or(f64::NAN, |l| l.p99_ms);
        // What the load generator holds, so a soak's memory can be read against it.
        let (deliveries, _) = ctx.history.held_and_dropped();
        format!(
            "minute {} push {:.0}/s ack {:.0}/s ack p99 {:.1}ms e2e p99 {:.1}ms backlog {:.0} rss {:.0}MiB (holding {deliveries} deliveries; ledger {} pairs, {} retired pieces)",
            m.minute,
            m.pushed,
            m.acked,
            p99("ack"),
            p99("e2e"),
            m.backlog,
            m.rss_mib,
            ctx.ledger.live_entries(),
            ctx.ledger.retired_pieces(),
        )
    })
}

/// The rates between two ticks, for the per-second series.
fn second_sample(start: &Edge, last: &Tick, now: &Tick, ctx: &CellContext) -> SecondSample {
    let dt = now.secs_since(last);
    SecondSample {
        t: (now.at - start.at).as_secs_f64(),
        commits: (now.live.write_commits - last.live.write_commits) / dt,
        ack_commits: (now.live.ack_calls - last.live.ack_calls) / dt,
        ack_exec_ms: (now.live.ack_exec_ms - last.live.ack_exec_ms) / dt,
        pushed: (now.counters.pushed_messages - last.counters.pushed_messages) / dt,
        acked: (now.counters.acked_messages - last.counters.acked_messages) / dt,
        ack_p99_ms: ctx.latency.p99_ms("ack"),
        backlog: ctx.ledger.backlog() as f64,
        errors: now.counters.errors - last.counters.errors,
    }
}

/// What the window measured, as deltas between its edges (all zero when the cell was
/// interrupted before its window began).
#[derive(Default)]
struct Measured {
    secs: f64,
    pg: Option<PgSnapshot>,
    /// The brokers' `/metrics` deltas added up (`broker_metrics::total`).
    broker: Scrape,
    /// Each broker's own figures, when the cell ran several.
    brokers: Vec<BrokerFigures>,
    counters: CounterValues,
    loadgen_cpu: f64,
    broker_cpu: f64,
    host_steal_share: f64,
}

impl Measured {
    fn of(w: &Window, urls: &[String]) -> Measured {
        let deltas = broker_metrics::deltas(&w.start.brokers, &w.end.brokers);
        let cpu = |i: usize| {
            let at = |e: &Edge| e.broker_cpus.get(i).copied().unwrap_or(f64::NAN);
            at(&w.end) - at(&w.start)
        };
        let brokers = match deltas.len() {
            0 | 1 => Vec::new(),
            _ => (deltas.iter().zip(urls).enumerate())
                .map(|(i, (broker, url))| {
                    per_broker(&BrokerWindow {
                        url,
                        broker,
                        cpu_secs: cpu(i),
                    })
                })
                .collect(),
        };
        Measured {
            secs: w.secs(),
            pg: w.pg_delta(),
            broker: broker_metrics::total(&w.end.brokers, &deltas),
            brokers,
            counters: w.end.counters.since(&w.start.counters),
            loadgen_cpu: w.end.loadgen_cpu - w.start.loadgen_cpu,
            broker_cpu: w.end.broker_cpu() - w.start.broker_cpu(),
            host_steal_share: w.host_steal_share(),
        }
    }

    fn results(
        &self,
        cr: &CellRound<'_>,
        ctx: &CellContext,
        seen: Seen,
        audit: Audit,
        complete: bool,
    ) -> RoundResults {
        let histograms = ctx.latency.snapshot();
        let no_pg = PgSnapshot::nan();
        let figures = derive(&WindowDeltas {
            window_secs: self.secs,
            counters: self.counters,
            pg: self.pg.as_ref().unwrap_or(&no_pg),
            broker: &self.broker,
            histograms: &histograms,
            loadgen_cpu_secs: self.loadgen_cpu,
            broker_cpu_secs: self.broker_cpu,
            host_steal_share: self.host_steal_share,
        });
        RoundResults {
            round: cr.round,
            complete,
            window_secs: self.secs,
            figures,
            broker_metrics: self.broker.clone(),
            brokers: self.brokers.clone(),
            faults: with_audit(seen.faults, &audit),
            audit,
            series: seen.series,
            wire_variants: ctx.variants.snapshot(),
            minutes: seen.minutes,
            histograms: histograms
                .iter()
                .map(|(k, h)| (k.clone(), encode_histogram(h)))
                .collect(),
        }
    }
}
