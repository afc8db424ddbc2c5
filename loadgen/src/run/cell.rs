//! One cell in one round: a fresh database and broker, prefill, warm-up, the measured window
//! (snapshots at its edges, a sample every second), the drain, and the audit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use ackbench_reports::results::{Audit, RoundResults, SecondSample};
use ackbench_reports::stats::encode_histogram;
use ackbench_wire::{txn_hash, QUEUE_MODE_GROUP};

use super::Env;
use crate::client::BrokerClient;
use crate::measure::broker_metrics::{self, Exposition, Scrape};
use crate::measure::figures::{derive, WindowDeltas};
use crate::measure::pg_counters::{live_sample, PgSnapshot};
use crate::progress::Progress;
use crate::scenario::{AckMode, Partitioning, PopRoute};
use crate::scenario::{Cell, Scenario};
use crate::target::broker::{process_cpu_seconds, BrokerProcess};
use crate::target::postgres::connect;
use crate::workload::consumer::{self, ConsumerPlan};
use crate::workload::ledger::TxnSet;
use crate::workload::producer::{self, ProducerPlan, Pusher};
use crate::workload::{CellContext, CounterValues, Phase};

/// Identifies a cell round in names and output.
pub struct CellRound<'a> {
    pub scenario: &'a Scenario,
    pub cell: Cell,
    /// The cell's name in results (the cell's own name, or its A/A twin's).
    pub name: String,
    pub round: u32,
    pub rounds: u32,
    pub seed: u64,
}

impl CellRound<'_> {
    pub(crate) fn tag(&self) -> String {
        let slug: String = self
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        format!("{slug}_r{}", self.round)
    }

    pub(crate) fn label(&self) -> String {
        format!(
            "[{}] {} r{}/{}",
            self.scenario.name, self.name, self.round, self.rounds
        )
    }

    pub(crate) fn queue(&self) -> String {
        format!("{}-{}", self.scenario.queue.name, self.tag())
    }
}

/// Where the cell's broker and database are.
pub(crate) struct Target {
    pub(crate) client: BrokerClient,
    pub(crate) process: Option<BrokerProcess>,
    /// The benchmark database's name and an admin connection to read its counters.
    pub(crate) database: Option<(String, tokio_postgres::Client)>,
}

/// Runs one cell round. `Err` only for set-up failures; an interrupted cell returns what it has.
pub async fn run(
    env: &Env,
    cr: &CellRound<'_>,
    cancel: &watch::Receiver<bool>,
    progress: &mut Progress,
) -> Result<RoundResults, String> {
    let target = start_target(env, cr).await?;
    let result = measure(cr, &target, cancel, progress).await;
    release_target(env, target, &cr.label(), progress).await;
    result
}

/// Stops the target's broker and drops its database (unless `--keep-databases`).
pub(crate) async fn release_target(
    env: &Env,
    target: Target,
    label: &str,
    progress: &mut Progress,
) {
    if let Some(p) = target.process {
        p.stop().await;
    }
    if let (Some(pg), Some((name, _))) = (&env.postgres, &target.database) {
        if env.keep_databases {
            progress.say(&format!("{label}: kept database {name}"));
        } else {
            pg.drop_database(name).await;
        }
    }
}

async fn start_target(env: &Env, cr: &CellRound<'_>) -> Result<Target, String> {
    start_target_tagged(env, cr, &cr.tag()).await
}

/// A fresh database `ackbench_{tag}` and a broker with the cell's toggles (log
/// `broker-{tag}.log`), or the external ones.
pub(crate) async fn start_target_tagged(
    env: &Env,
    cr: &CellRound<'_>,
    tag: &str,
) -> Result<Target, String> {
    let db_name = format!("ackbench_{tag}");
    let database_url = match &env.postgres {
        Some(pg) if env.broker_url.is_none() || env.external_database => {
            Some(pg.fresh_database(&db_name).await?)
        }
        _ => None,
    };
    let (client, process) = match (&env.broker_url, &env.broker_bin) {
        (Some(url), _) => (BrokerClient::new(url), None),
        (None, Some(bin)) => {
            let url = database_url
                .as_deref()
                .ok_or("an embedded broker needs a database")?;
            let log = env.out_dir.join(format!("broker-{tag}.log"));
            let p = BrokerProcess::start(bin, url, &broker_env(cr), log).await?;
            (BrokerClient::new(&p.url), Some(p))
        }
        (None, None) => return Err("no broker: neither --broker-url nor a broker binary".into()),
    };
    let database = match database_url {
        Some(url) => Some((db_name, connect(&url).await?)),
        None => None,
    };
    Ok(Target {
        client,
        process,
        database,
    })
}

/// The broker's environment for this cell: the toggles, then the scenario's `[broker]`.
fn broker_env(cr: &CellRound<'_>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = cr
        .cell
        .broker_env()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Some(n) = cr.scenario.broker.pool_size {
        env.push(("DB_POOL_SIZE".into(), n.to_string()));
    }
    env.extend(
        cr.scenario
            .broker
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    env
}

async fn measure(
    cr: &CellRound<'_>,
    target: &Target,
    cancel: &watch::Receiver<bool>,
    progress: &mut Progress,
) -> Result<RoundResults, String> {
    let s = cr.scenario;
    let queue = cr.queue();
    configure_queue(s, &target.client, &queue).await?;
    let groups = s.consumers.group_names();
    let ctx = Arc::new(CellContext::new(target.client.clone(), groups.len()));
    prefill(cr, &queue, &ctx, progress).await?;

    let workers = spawn_workers(cr, &queue, &ctx);
    let mut window = Window::default();
    let interrupted = warmup(cr, &ctx, cancel, progress).await
        || window.run(cr, target, &ctx, cancel, progress).await?;
    ctx.set_phase(Phase::Drain);
    let drained = !interrupted && drain(cr, &ctx, cancel, progress).await;
    ctx.set_phase(Phase::Stop);
    stop_workers(workers).await;
    let audit = audit(&target.client, &queue, &groups, &ctx, drained).await;
    progress.finish();
    Ok(window.results(cr, &ctx, audit, !interrupted))
}

/// Configures `queue` with the scenario's queue options.
pub(crate) async fn configure_queue(
    s: &Scenario,
    client: &BrokerClient,
    queue: &str,
) -> Result<(), String> {
    let mut options = serde_json::to_value(s.queue.options.to_wire()).map_err(|e| e.to_string())?;
    options["leaseTime"] = json!(s.queue.options.lease_time);
    client
        .configure(&json!({"queue": queue, "options": options}))
        .await
        .map(|_| ())
        .map_err(|e| format!("configure {queue}: {e}"))
}

/// Pushes the scenario's backlog before anything is measured.
pub(crate) async fn prefill(
    cr: &CellRound<'_>,
    queue: &str,
    ctx: &Arc<CellContext>,
    progress: &mut Progress,
) -> Result<(), String> {
    let p = &cr.scenario.prefill;
    let partitions = cr.scenario.queue.partitions.max(1);
    let names: std::sync::Arc<[String]> = cr.scenario.partition_names().into();
    if p.messages_per_partition == 0 {
        return Ok(());
    }
    let total = p.messages_per_partition * partitions as u64;
    let requests_per_partition = p.messages_per_partition.div_ceil(p.batch as u64);
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..p.concurrency.max(1) {
        let (ctx, next) = (ctx.clone(), next.clone());
        let plan = ProducerPlan {
            id: w,
            queue: queue.to_string(),
            partitions: names.clone(),
            batch: p.batch,
            payload_bytes: p.payload_bytes,
            rate: None,
            random_partitions: false,
            tag: format!("{}-pre", cr.tag()),
            seed: cr.seed ^ 0x9e37,
        };
        tasks.push(tokio::spawn(async move {
            let mut pusher = Pusher::new(&plan, &ctx);
            loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if k >= requests_per_partition * partitions as u64 {
                    return Ok::<(), String>(());
                }
                let partition = (k % partitions as u64) as u32;
                // Backlog, not offered load: no send time, so end-to-end latency (push to
                // ack of what the producers offer) is not inflated by how long the backlog waits.
                pusher.writer.write(k, partition, None);
                pusher
                    .push(&ctx)
                    .await
                    .map_err(|e| format!("prefill: {e}"))?;
            }
        }));
    }
    let started = Instant::now();
    while tasks.iter().any(|t| !t.is_finished()) {
        let done = ctx.ledger.pushed_count();
        progress.update(&format!(
            "{} prefill {done}/{total} ({:.0}/s)",
            cr.label(),
            done as f64 / started.elapsed().as_secs_f64().max(0.001)
        ));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    progress.update(&format!(
        "{} prefill {total}/{total} done in {:.1}s",
        cr.label(),
        started.elapsed().as_secs_f64()
    ));
    progress.finish();
    Ok(())
}

/// Starts the cell's producers and consumers on the workload's own runtime.
pub(crate) fn spawn_workers(
    cr: &CellRound<'_>,
    queue: &str,
    ctx: &Arc<CellContext>,
) -> Vec<JoinHandle<()>> {
    let s = cr.scenario;
    let names: std::sync::Arc<[String]> = s.partition_names().into();
    let load = crate::workload::runtime();
    let mut tasks = Vec::new();
    let rate = s
        .producers
        .open_rate()
        .map(|r| r / s.producers.count.max(1) as f64);
    for id in 0..s.producers.count {
        let plan = ProducerPlan {
            id,
            queue: queue.to_string(),
            partitions: names.clone(),
            batch: s.producers.batch,
            payload_bytes: s.producers.payload_bytes,
            rate,
            random_partitions: matches!(s.producers.partitioning, Partitioning::Random),
            tag: cr.tag(),
            seed: cr.seed.wrapping_add(id as u64),
        };
        tasks.push(load.spawn(producer::run(plan, ctx.clone())));
    }
    let c = &s.consumers;
    let lease = Duration::from_secs(c.lease_seconds.unwrap_or(s.queue.options.lease_time) as u64);
    let mut id = 0;
    for (group_index, group) in c.group_names().into_iter().enumerate() {
        for _ in 0..c.count {
            let plan = ConsumerPlan {
                id,
                group_index,
                group: group.clone().filter(|g| g != QUEUE_MODE_GROUP),
                queue: queue.to_string(),
                partitions: names.clone(),
                named_partition: c.pop_route == PopRoute::Partition,
                pop_batch: c.pop_batch,
                partitions_per_pop: c.partitions_per_pop,
                long_poll: c.long_poll,
                long_poll_timeout_ms: c.long_poll_timeout_ms,
                lease_seconds: c.lease_seconds,
                effective_lease: lease,
                processing_ms: c.processing_ms,
                empty_backoff_ms: c.empty_backoff_ms,
                per_message_acks: c.ack_mode == AckMode::PerMessage,
                lease_less: c.lease_less,
                stall: c.stall,
                stall_extra_ms: c.stall_extra_ms,
                outcome_shares: c.outcomes.shares(),
                seed: cr.seed.wrapping_mul(31).wrapping_add(1000 + id as u64),
            };
            tasks.push(load.spawn(consumer::run(plan, ctx.clone())));
            id += 1;
        }
    }
    tasks
}

pub(crate) async fn stop_workers(workers: Vec<JoinHandle<()>>) {
    // Workers see Phase::Stop before their next request; a parked long-poll may take up to its
    // timeout, so give them a bounded grace and abort the rest.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    for w in workers {
        let abort = w.abort_handle();
        if tokio::time::timeout_at(deadline, w).await.is_err() {
            abort.abort();
        }
    }
}

/// Runs the cell round's warm-up; true when interrupted.
async fn warmup(
    cr: &CellRound<'_>,
    ctx: &CellContext,
    cancel: &watch::Receiver<bool>,
    progress: &mut Progress,
) -> bool {
    warm_up(
        &cr.label(),
        cr.scenario.run.warmup_secs,
        ctx,
        cancel,
        progress,
    )
    .await
}

/// A warm-up of `secs` with a progress line each second (nothing is recorded); true when
/// interrupted. Shared by `run` and `capacity`.
pub(crate) async fn warm_up(
    label: &str,
    secs: f64,
    ctx: &CellContext,
    cancel: &watch::Receiver<bool>,
    progress: &mut Progress,
) -> bool {
    let started = tokio::time::Instant::now();
    let total = Duration::from_secs_f64(secs);
    let mut last = ctx.counters.values();
    while started.elapsed() < total {
        let step = Duration::from_secs(1).min(total - started.elapsed());
        tokio::time::sleep(step).await;
        if *cancel.borrow() {
            return true;
        }
        let now = ctx.counters.values();
        let dt = step.as_secs_f64().max(1e-3);
        progress.update(&format!(
            "{label} warm-up {:>3.0}/{secs:.0}s  push {:>7.0}/s  ack {:>7.0}/s  backlog {:>7}  errors {}",
            started.elapsed().as_secs_f64(),
            (now.pushed_messages - last.pushed_messages) / dt,
            (now.acked_messages - last.acked_messages) / dt,
            ctx.ledger.backlog(),
            now.errors
        ));
        last = now;
    }
    *cancel.borrow()
}

/// The measured window: its edge snapshots and per-second samples.
#[derive(Default)]
struct Window {
    secs: f64,
    pg: Option<PgSnapshot>,
    broker: Scrape,
    counters: CounterValues,
    loadgen_cpu: f64,
    broker_cpu: f64,
    series: Vec<SecondSample>,
}

/// Counters at one edge of the window.
pub(crate) struct Edge {
    pub(crate) at: Instant,
    pub(crate) pg: Option<PgSnapshot>,
    pub(crate) broker: Exposition,
    pub(crate) counters: CounterValues,
    pub(crate) loadgen_cpu: f64,
    pub(crate) broker_cpu: f64,
}

pub(crate) async fn edge(target: &Target, ctx: &CellContext) -> Edge {
    let pg = match &target.database {
        Some((name, client)) => PgSnapshot::take(client, name).await.ok(),
        None => None,
    };
    let broker = target
        .client
        .metrics_text()
        .await
        .map(|t| broker_metrics::parse(&t))
        .unwrap_or_default();
    Edge {
        at: Instant::now(),
        pg,
        broker,
        counters: ctx.counters.values(),
        loadgen_cpu: process_cpu_seconds(std::process::id()).unwrap_or(f64::NAN),
        broker_cpu: target
            .process
            .as_ref()
            .and_then(|p| p.cpu_seconds())
            .unwrap_or(f64::NAN),
    }
}

impl Window {
    /// Runs the measured window; true when interrupted.
    async fn run(
        &mut self,
        cr: &CellRound<'_>,
        target: &Target,
        ctx: &CellContext,
        cancel: &watch::Receiver<bool>,
        progress: &mut Progress,
    ) -> Result<bool, String> {
        let duration = cr.scenario.run.duration_secs;
        let start = edge(target, ctx).await;
        ctx.set_phase(Phase::Measure);
        let mut last = (start.at, live(target).await, start.counters);
        let mut interrupted = false;
        let mut second = 1u32;
        while (second as f64) <= duration.ceil() {
            let due = start.at + Duration::from_secs_f64((second as f64).min(duration));
            tokio::time::sleep_until(due.into()).await;
            if *cancel.borrow() {
                interrupted = true;
                break;
            }
            let now = (Instant::now(), live(target).await, ctx.counters.values());
            let sample = sample(&start, &last, &now, ctx);
            progress.update(&format!(
                "{} measure {:>3.0}/{duration:.0}s  push {:>7.0}/s  ack {:>7.0}/s  commits {:>6.0}/s  ack p99 {:>7.2}ms  backlog {:>7}  errors {}",
                cr.label(),
                sample.t,
                sample.pushed,
                sample.acked,
                sample.commits,
                sample.ack_p99_ms,
                sample.backlog,
                ctx.counters.values().errors
            ));
            self.series.push(sample);
            last = now;
            second += 1;
        }
        let end = edge(target, ctx).await;
        self.secs = (end.at - start.at).as_secs_f64();
        self.pg = match (&start.pg, &end.pg) {
            (Some(a), Some(b)) => Some(b.since(a)),
            _ => None,
        };
        self.broker = broker_metrics::delta(&start.broker, &end.broker);
        self.counters = end.counters.since(&start.counters);
        self.loadgen_cpu = end.loadgen_cpu - start.loadgen_cpu;
        self.broker_cpu = end.broker_cpu - start.broker_cpu;
        Ok(interrupted)
    }

    fn results(
        &self,
        cr: &CellRound<'_>,
        ctx: &CellContext,
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
        });
        RoundResults {
            round: cr.round,
            complete,
            window_secs: self.secs,
            figures,
            broker_metrics: self
                .broker
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect::<BTreeMap<_, _>>(),
            audit,
            series: self.series.clone(),
            histograms: histograms
                .iter()
                .map(|(k, h)| (k.clone(), encode_histogram(h)))
                .collect(),
        }
    }
}

/// The lag-free live counters (writing transactions, ack procedure calls); NaN without a
/// database.
pub(crate) async fn live(target: &Target) -> (f64, f64) {
    match &target.database {
        Some((name, client)) => live_sample(client, name)
            .await
            .unwrap_or((f64::NAN, f64::NAN)),
        None => (f64::NAN, f64::NAN),
    }
}

type Tick = (Instant, (f64, f64), CounterValues);

fn sample(start: &Edge, last: &Tick, now: &Tick, ctx: &CellContext) -> SecondSample {
    let dt = (now.0 - last.0).as_secs_f64().max(1e-3);
    SecondSample {
        t: (now.0 - start.at).as_secs_f64(),
        commits: (now.1 .0 - last.1 .0) / dt,
        ack_commits: (now.1 .1 - last.1 .1) / dt,
        pushed: (now.2.pushed_messages - last.2.pushed_messages) / dt,
        acked: (now.2.acked_messages - last.2.acked_messages) / dt,
        ack_p99_ms: ctx.latency.p99_ms("ack"),
        backlog: ctx.ledger.backlog() as f64,
        errors: now.2.errors - last.2.errors,
    }
}

/// Lets consumers finish the backlog; true when every obligation was resolved in time.
async fn drain(
    cr: &CellRound<'_>,
    ctx: &CellContext,
    cancel: &watch::Receiver<bool>,
    progress: &mut Progress,
) -> bool {
    let limit = Duration::from_secs_f64(cr.scenario.run.drain_timeout_secs);
    let started = Instant::now();
    loop {
        let backlog = ctx.ledger.backlog();
        progress.update(&format!(
            "{} drain {:.0}s  backlog {backlog}",
            cr.label(),
            started.elapsed().as_secs_f64()
        ));
        if backlog == 0 {
            return true;
        }
        if *cancel.borrow() || started.elapsed() > limit {
            progress.say(&format!(
                "{} drain stopped with {backlog} messages unresolved",
                cr.label()
            ));
            return false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Reconciles the ledger with the broker's DLQ listing.
async fn audit(
    client: &BrokerClient,
    queue: &str,
    groups: &[Option<String>],
    ctx: &CellContext,
    drained: bool,
) -> Audit {
    let mut dlq: Vec<TxnSet> = vec![TxnSet::default(); groups.len()];
    let mut offset = 0u64;
    loop {
        let page = match client.dlq_page(queue, 1000, offset).await {
            Ok(p) => p,
            Err(e) => {
                ctx.error(format!("audit: DLQ listing failed: {e}"));
                break;
            }
        };
        for m in &page.messages {
            let g = groups
                .iter()
                .position(|g| g.as_deref() == m.consumer_group.as_deref());
            if let Some(g) = g {
                dlq[g].insert(txn_hash(&m.transaction_id));
            }
        }
        offset += page.messages.len() as u64;
        if page.messages.is_empty() || offset >= page.total as u64 {
            break;
        }
    }
    ctx.ledger.audit(&dlq, drained)
}
