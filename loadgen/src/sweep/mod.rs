//! `ackbench sweep`: the capacity knee search at every point of a scenario's `[sweep]` grid,
//! repeated, with the knee's interval, the costs per message at it and the cost model's
//! prediction; and `ackbench plan`, which answers a target rate from the sweep's document.
//!
//! Per point the sweep applies the point's PostgreSQL settings (`pg_settings`), confines
//! PostgreSQL and the broker to the point's cores (`crate::target::affinity`), and runs
//! `crate::capacity` on the point's scenario, each step judged as capacity judges it (p99 within
//! the target, at least 95% of the offered rate achieved and answered, the backlog bounded),
//! with windows that lengthen after rejections near the knee. Repeats run the whole grid again,
//! so a repeat's searches are spread over the sweep's time, odd repeats backwards, each search
//! starting from the knee of the search before it in its own repeat. Before every search it
//! probes the idle machine's fsync rate and CPU speed (`probe`), so a machine whose speed moved
//! during the sweep is named; the cost model takes the machine's cores and the median of those
//! fsync rates (or `--fsync-per-sec`). `collect` turns the searches into the points of `sweep.json`;
//! `plan` answers from that document; `remodel` collects a finished sweep's searches again under
//! this build's cost model.

pub mod collect;
pub mod options;
pub mod pg_settings;
pub mod plan;
pub mod probe;
pub mod remodel;

use std::collections::BTreeMap;
use std::path::Path;

use tokio::sync::watch;

use ackbench_reports::capacity::{amount, CapacityResults, Criteria, Plan};
use ackbench_reports::model::format_number;
use ackbench_reports::results::RunMeta;
use ackbench_reports::sweep::cost_model::{model_error, Offer};
use ackbench_reports::sweep::{
    durable, machine_drift, MachineOffer, SearchProbe, SweepResults, SWEEP_KIND,
    SWEEP_SCHEMA_VERSION,
};

use crate::capacity;
use crate::lifecycle::env::Env;
use crate::run::now_iso;
use crate::scenario::sweep::{
    check_axis, parse_cli_value, scenario_text_at, value_text, AxisKind, Point,
};
use crate::scenario::{DatabaseSide, Scenario};
use crate::target::affinity;
use options::{PlanOptions, RemodelOptions, SweepOptions};
use pg_settings::PgSettings;

/// By default, after each rejection near the knee, later windows of the search lengthen by half
/// a window (`--window-growth`).
pub const WINDOW_GROWTH: f64 = 0.5;
/// The most repeats a sweep takes.
pub const MAX_REPEATS: u32 = 20;

/// `ackbench sweep`: exit 0 when every point was searched, 2 when the sweep broke or its input
/// was refused, 130 when interrupted.
pub async fn sweep_command(opts: SweepOptions) -> u8 {
    match sweep(&opts).await {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

/// A sweep.json document, its path named in any error.
pub fn read_sweep(path: &Path) -> Result<SweepResults, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    SweepResults::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `ackbench plan`: exit 0 with the answer, 2 for a bad document or question.
pub fn plan_command(opts: &PlanOptions) -> u8 {
    let sweep = match read_sweep(&opts.sweep) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let q = plan::Question {
        target_rate: opts.target_rate,
        slo_p99_ms: opts.slo_p99_ms,
        cores: opts.cores,
        fsync_per_sec: opts.fsync_per_sec,
    };
    if let Err(e) = plan::check(&sweep, &q) {
        return fail(&e);
    }
    print!("{}", plan::render(&sweep, &q, &plan::answer(&sweep, &q)));
    0
}

/// `ackbench remodel`: exit 0 with the sweep written again, 2 when it cannot be read.
pub fn remodel_command(opts: &RemodelOptions) -> u8 {
    let written = remodel::remodel(&opts.sweep_dir).and_then(|sweep| {
        std::fs::create_dir_all(&opts.out)
            .map_err(|e| format!("--out {}: {e}", opts.out.display()))?;
        write_outputs(&sweep, &opts.out)?;
        print!("{}", summary(&sweep));
        Ok(())
    });
    match written {
        Ok(()) => 0,
        Err(e) => fail(&e),
    }
}

fn fail(message: &str) -> u8 {
    eprintln!("ackbench: {message}");
    2
}

/// The scenario as a sweep runs it: `--sweep` axes added, the flags applied, no gates, no
/// prefill, no faults, one topology.
fn prepare_scenario(opts: &SweepOptions) -> Result<Scenario, String> {
    let path = crate::scenario::find_scenario(&opts.scenario)?;
    let mut s = Scenario::load(&path).map_err(|e| e.to_string())?;
    let base = scenario_text_at(&s.source_text, &Vec::new())?;
    for spec in &opts.axes {
        let (key, values) = spec
            .split_once('=')
            .ok_or_else(|| format!("--sweep {spec}: expected KEY=V1,V2,..."))?;
        let values: Vec<toml::Value> = values.split(',').map(parse_cli_value).collect();
        let axis = check_axis(&base, key.trim(), &values).map_err(|e| format!("--sweep: {e}"))?;
        s.sweep
            .set_axis(axis)
            .map_err(|e| format!("--sweep: {e}"))?;
    }
    refuse_unsweepable(&s)?;
    finish_point_scenario(&mut s, opts)?;
    Ok(s)
}

fn refuse_unsweepable(s: &Scenario) -> Result<(), String> {
    if let Some(f) = s.faults.first() {
        return Err(format!(
            "{}: the {} fault (line {}): a sweep's searches are neither drained nor audited, so faults are judged by `ackbench run` only",
            s.source_name,
            f.kind.name(),
            f.line
        ));
    }
    if s.broker.names_topologies() {
        return Err(format!(
            "{}: broker.topologies lists several topologies; a sweep searches one: give broker.instances and broker.routing instead",
            s.source_name
        ));
    }
    Ok(())
}

/// What every point's scenario gets, as `capacity` does: the flags, no gates, no prefill.
fn finish_point_scenario(s: &mut Scenario, opts: &SweepOptions) -> Result<(), String> {
    s.apply_overrides(&opts.overrides())
        .map_err(|e| e.to_string().replace("--duration", "--step-secs"))?;
    s.gates.clear();
    s.prefill.messages_per_partition = 0;
    Ok(())
}

/// Refuses what the target cannot do: PostgreSQL settings on a server of the user's without
/// `--allow-pg-settings`, cores for processes this run does not start.
fn check_target(opts: &SweepOptions, s: &Scenario) -> Result<(), String> {
    let t = &opts.target;
    let swept = |key: &str| s.sweep.axes.iter().any(|a| a.key == key);
    if t.database_url.is_some() && s.sweep.has_postgres() && !opts.allow_pg_settings {
        return Err("the sweep sets PostgreSQL settings (pg.* keys) and --database-url names a server of yours: add --allow-pg-settings to let it change them with ALTER SYSTEM (reset at the end), or leave out --database-url to sweep a throwaway cluster".into());
    }
    if t.database_url.is_some() && (swept("host.pg_cores") || opts.pg_cores.is_some()) {
        return Err("host.pg_cores / --pg-cores confine the throwaway cluster this run starts: leave out --database-url".into());
    }
    if t.broker_url.is_some() && (swept("host.broker_cores") || opts.broker_cores.is_some()) {
        return Err("host.broker_cores / --broker-cores confine the broker this run starts: leave out --broker-url".into());
    }
    if !(opts.window_growth.is_finite() && (0.0..=2.0).contains(&opts.window_growth)) {
        return Err(format!(
            "--window-growth must be a share of the window from 0 to 2, got {}",
            opts.window_growth
        ));
    }
    if !(1..=MAX_REPEATS).contains(&opts.repeats) {
        return Err(format!(
            "--repeats must be between 1 and {MAX_REPEATS}, got {}",
            opts.repeats
        ));
    }
    for (flag, n) in [
        ("--pg-cores", opts.pg_cores),
        ("--broker-cores", opts.broker_cores),
    ] {
        if let Some(n) = n {
            affinity::cpu_list(n as usize, false).map_err(|e| format!("{flag}: {e}"))?;
        }
    }
    for a in s.sweep.axes.iter().filter(|a| a.kind == AxisKind::Host) {
        for v in &a.values {
            let n = v.as_integer().unwrap_or(0) as usize;
            affinity::cpu_list(n, false).map_err(|e| format!("{}: {e}", a.key))?;
        }
    }
    Ok(())
}

/// What the whole sweep shares.
struct Sweeper<'a> {
    opts: &'a SweepOptions,
    scenario: &'a Scenario,
    plan: Plan,
    criteria: Criteria,
    seed: u64,
    machine: MachineOffer,
    pg_settings: Option<PgSettings>,
    cancel: watch::Receiver<bool>,
}

async fn sweep(opts: &SweepOptions) -> Result<u8, String> {
    let scenario = prepare_scenario(opts)?;
    check_target(opts, &scenario)?;
    let mut plan = capacity::plan(&scenario, opts.search())?;
    plan.window_growth = opts.window_growth;
    let slo = opts
        .slo_p99_ms
        .or(scenario.capacity.slo_p99_ms)
        .unwrap_or(capacity::DEFAULT_SLO_P99_MS);
    let criteria = capacity::criteria(slo)?;
    if let Some(f) = opts.fsync_per_sec.filter(|f| !(f.is_finite() && *f > 0.0)) {
        return Err(format!("--fsync-per-sec must be a positive rate, got {f}"));
    }
    std::fs::create_dir_all(&opts.out).map_err(|e| format!("--out {}: {e}", opts.out.display()))?;
    let side = DatabaseSide {
        relay: false,
        ..scenario.database_side()
    };
    let mut env = Env::prepare(&opts.target.settings(), side, opts.out.clone()).await?;
    env.check_peers(&scenario.run.cells).await?;
    let pg_settings = check_pg_settings(&env, &scenario).await?;
    let machine = machine_offer(&env, opts.fsync_per_sec);
    let mut sweeper = Sweeper {
        opts,
        scenario: &scenario,
        plan,
        criteria,
        seed: scenario.run.seed.unwrap_or_else(|| fastrand::u64(..)),
        machine,
        pg_settings,
        cancel: crate::cli::cancel_on_ctrl_c("sweep"),
    };
    let started_at = now_iso();
    let mut probes = Vec::new();
    let (runs, complete, error) = sweeper.run_grid(&mut env, &mut probes).await;
    if opts.fsync_per_sec.is_none() {
        sweeper.machine.fsync_per_sec = median_fsync(&probes);
    }
    let restored = sweeper.restore(&env).await;
    let mut results = sweeper.results(&env, &runs, complete && error.is_none(), started_at);
    results.warnings.extend(machine_drift(&probes));
    results.probes = probes;
    // The flags as given, after the subcommand and the scenario.
    results.meta.scenario.overrides = std::env::args().skip(3).collect();
    drop(env);
    write_outputs(&results, &opts.out)?;
    print!("{}", summary(&results));
    println!("report: {}", opts.out.join("sweep.html").display());
    match error.or(restored.err()) {
        Some(e) => Ok(fail(&e)),
        None if !results.complete => Ok(130),
        None => Ok(0),
    }
}

/// Every PostgreSQL setting the sweep varies, checked on the server.
async fn check_pg_settings(env: &Env, s: &Scenario) -> Result<Option<PgSettings>, String> {
    if !s.sweep.has_postgres() {
        return Ok(None);
    }
    let pg = env.postgres.as_ref().ok_or(
        "pg.* sweep keys need the PostgreSQL measured: give --database-url with --broker-url",
    )?;
    let settings: Vec<(String, Vec<String>)> = s
        .sweep
        .axes
        .iter()
        .filter(|a| a.kind == AxisKind::Postgres)
        .map(|a| {
            let name = a.key.trim_start_matches("pg.").to_string();
            (name, a.values.iter().map(value_text).collect())
        })
        .collect();
    let restartable = pg.embedded_cluster().is_some();
    Ok(Some(PgSettings::check(pg, &settings, restartable).await?))
}

/// The machine's cores and fsync rate: given, or the median of the probes before each search
/// (`median_fsync`, set once the searches ran; NaN until then).
fn machine_offer(env: &Env, given: Option<f64>) -> MachineOffer {
    let (fsync_per_sec, fsync_source) = match (given, env.postgres.as_ref()) {
        (Some(f), _) => (f, "--fsync-per-sec".to_string()),
        (None, Some(_)) => (
            f64::NAN,
            format!(
                "probe: the median of the probes before each search, each {} single-row INSERTs committed one by one with synchronous_commit on, one session",
                probe::PROBE_COMMITS
            ),
        ),
        (None, None) => (f64::NAN, "unknown: no PostgreSQL measured".to_string()),
    };
    MachineOffer {
        cores: affinity::available_cores() as f64,
        fsync_per_sec,
        fsync_source,
    }
}

/// The median fsync rate of the probes that measured one (NaN when none did).
fn median_fsync(probes: &[SearchProbe]) -> f64 {
    let rates: Vec<f64> = probes
        .iter()
        .map(|p| p.fsync_per_sec)
        .filter(|f| f.is_finite())
        .collect();
    crate::trend::stats::median(&rates)
}

/// The searches of one point, in the order run.
type Runs = Vec<Vec<CapacityResults>>;
/// The grid's searches, whether the sweep ran to its end, and what broke it.
type Ran = (Runs, bool, Option<String>);

/// The machine probed just before a search (NaN figures, with a warning, when the probe
/// failed; none when no PostgreSQL of this run's is measured).
async fn probe_before_search(env: &Env, point: usize, repeat: u32) -> Option<SearchProbe> {
    let pg = env.postgres.as_ref()?;
    let probed = probe::machine(pg).await;
    let (fsync_per_sec, cpu_ms) = match probed {
        Ok(m) => {
            eprintln!(
                "ackbench: machine probe: PostgreSQL's CPU probe {:.1} ms, fsync {} commits/s",
                m.cpu_ms,
                format_number(m.fsync_per_sec)
            );
            (m.fsync_per_sec, m.cpu_ms)
        }
        Err(e) => {
            eprintln!("ackbench: WARNING: machine probe before point {point} repeat {repeat}: {e}");
            (f64::NAN, f64::NAN)
        }
    };
    Some(SearchProbe {
        point,
        repeat,
        fsync_per_sec,
        cpu_ms,
    })
}

impl Sweeper<'_> {
    /// Every point, `repeats` times over (the whole grid per repeat).
    async fn run_grid(&self, env: &mut Env, probes: &mut Vec<SearchProbe>) -> Ran {
        let points = self.scenario.sweep.points();
        let mut runs: Runs = vec![Vec::new(); points.len()];
        if let Some(first) = points.first() {
            if let Err(e) = self.warm_up(env, first).await {
                return (runs, true, Some(e));
            }
        }
        for repeat in 0..self.opts.repeats {
            // The search before in this repeat's walk: where the next one starts.
            let mut before: Option<usize> = None;
            for i in walk(points.len(), repeat) {
                let point = &points[i];
                if *self.cancel.borrow() {
                    return (runs, false, None);
                }
                eprintln!(
                    "ackbench: sweep point {}/{} repeat {}/{}: {}",
                    i + 1,
                    points.len(),
                    repeat + 1,
                    self.opts.repeats,
                    point_words(point)
                );
                let seed = self.seed.wrapping_add((repeat as u64) << 32 | i as u64);
                let starts = knee_starts(before.and_then(|b| runs[b].last()));
                before = Some(i);
                let (s, base) = match self.prepare_point(env, point).await {
                    Ok(prepared) => prepared,
                    Err(e) => return (runs, true, Some(e)),
                };
                probes.extend(probe_before_search(env, i + 1, repeat + 1).await);
                let (results, error) = self.run_point(env, &s, base, seed, starts).await;
                let dir = self
                    .opts
                    .out
                    .join(format!("point-{}-repeat-{}", i + 1, repeat + 1));
                if let Err(e) = std::fs::create_dir_all(&dir)
                    .map_err(|e| e.to_string())
                    .and_then(|()| capacity::write_outputs(&results, &dir))
                {
                    eprintln!("ackbench: WARNING: {e}");
                }
                let complete = results.complete;
                runs[i].push(results);
                if error.is_some() || !complete {
                    return (runs, complete, error);
                }
            }
        }
        (runs, true, None)
    }

    /// One search of a prepared point (`prepare_point`), each cell starting at its rate in
    /// `starts` (if any).
    async fn run_point(
        &self,
        env: &mut Env,
        s: &Scenario,
        base: Plan,
        seed: u64,
        starts: BTreeMap<String, f64>,
    ) -> (CapacityResults, Option<String>) {
        let cell_starts = starts
            .into_iter()
            .map(|(cell, rate)| (cell, rate.clamp(base.min_rate, base.max_rate)))
            .collect();
        let plan = Plan {
            window_growth: self.opts.window_growth,
            cell_starts,
            ..base
        };
        capacity::run(s, env, &plan, &self.criteria, seed, self.cancel.clone()).await
    }

    /// One unmeasured step of the first cell at the first point's start rate, before the first
    /// search: the first search after the cluster started ran on cold caches (tiny-batches,
    /// registry+fusion: end-to-end p99 211 ms at 3 000 msg/s, where every later search measured
    /// 78-92 ms at that rate).
    async fn warm_up(&self, env: &mut Env, point: &Point) -> Result<(), String> {
        let (mut s, base) = self.prepare_point(env, point).await?;
        s.run.cells.truncate(1);
        // One rate only: the search ends after its first step, held or not.
        let plan = Plan {
            min_rate: base.start_rate,
            max_rate: base.start_rate,
            ..base
        };
        eprintln!("ackbench: sweep warm-up: one unmeasured step before the first search");
        let (_, error) = capacity::run(
            &s,
            env,
            &plan,
            &self.criteria,
            self.seed,
            self.cancel.clone(),
        )
        .await;
        error.map_or(Ok(()), |e| Err(format!("sweep warm-up: {e}")))
    }

    /// The scenario and search plan of `point`, with its PostgreSQL settings applied and its
    /// cores confined. The plan is the point's own: its producers and consumers may differ from
    /// the base scenario's.
    async fn prepare_point(
        &self,
        env: &mut Env,
        point: &Point,
    ) -> Result<(Scenario, Plan), String> {
        let mut s = self.scenario.at_point(point)?;
        finish_point_scenario(&mut s, self.opts)?;
        if let (Some(settings), Some(pg)) = (&self.pg_settings, env.postgres.as_ref()) {
            settings.apply(pg, &pg_values(point)).await?;
        }
        confine(env, &self.offer_at(point))?;
        let plan = capacity::plan(&s, self.opts.search())?;
        Ok((s, plan))
    }

    /// What the machine offers at `point`: its cores, those given to PostgreSQL and the broker.
    fn offer_at(&self, point: &Point) -> Offer {
        let swept = |key: &str| {
            point
                .iter()
                .find(|(k, _)| k == key)
                .and_then(|(_, v)| v.as_integer())
                .map(|n| n as f64)
        };
        Offer {
            cores: self.machine.cores,
            pg_cores: swept("host.pg_cores").or(self.opts.pg_cores.map(f64::from)),
            broker_cores: swept("host.broker_cores").or(self.opts.broker_cores.map(f64::from)),
            fsync_per_sec: self.machine.fsync_per_sec,
        }
    }

    /// Resets the PostgreSQL settings the sweep varied on a server of the user's (a throwaway
    /// cluster is dropped as it is).
    async fn restore(&self, env: &Env) -> Result<(), String> {
        match (&self.pg_settings, env.postgres.as_ref()) {
            (Some(settings), Some(pg)) if pg.embedded_cluster().is_none() => {
                settings.reset(pg).await.map(drop)
            }
            _ => Ok(()),
        }
    }

    fn results(&self, env: &Env, runs: &Runs, complete: bool, started_at: String) -> SweepResults {
        let server = env
            .postgres
            .as_ref()
            .map(|p| p.settings.clone())
            .unwrap_or_default();
        let points: Vec<_> = self
            .scenario
            .sweep
            .points()
            .iter()
            .zip(runs)
            .filter(|(_, r)| !r.is_empty())
            .map(|(p, r)| {
                let settings: BTreeMap<String, String> =
                    p.iter().map(|(k, v)| (k.clone(), value_text(v))).collect();
                let durable = durable(&settings, &server);
                let slo = self.criteria.slo_p99_ms;
                collect::point(settings, durable, self.offer_at(p), slo, r)
            })
            .collect();
        let mut warnings: Vec<String> = runs
            .iter()
            .flatten()
            .flat_map(|r| r.warnings.iter().cloned())
            .collect();
        warnings.dedup();
        let base = crate::meta::run_meta(self.scenario, env);
        let mut doc = SweepResults {
            kind: SWEEP_KIND.into(),
            schema_version: SWEEP_SCHEMA_VERSION,
            complete: complete && points.len() == runs.len(),
            meta: RunMeta {
                started_at,
                finished_at: now_iso(),
                seed: self.seed,
                rounds: self.opts.repeats,
                warmup_secs: self.plan.warmup_secs,
                duration_secs: self.plan.step_secs,
                notes: notes(),
                ..base
            },
            criteria: self.criteria,
            plan: self.plan.clone(),
            repeats: self.opts.repeats,
            machine: self.machine.clone(),
            keys: self
                .scenario
                .sweep
                .axes
                .iter()
                .map(|a| a.key.clone())
                .collect(),
            points,
            model_error: None,
            warnings,
            probes: Vec::new(),
        };
        doc.model_error = model_error(&doc.predicted_measured());
        doc
    }
}

/// Confines PostgreSQL and the broker as `offer` says (every core when it says nothing).
fn confine(env: &mut Env, offer: &Offer) -> Result<(), String> {
    let all = affinity::available_cores();
    let cpus = |n: Option<f64>, from_end: bool| match n {
        Some(n) => affinity::cpu_list(n as usize, from_end),
        None => affinity::cpu_list(all, false),
    };
    if let Some(pid) = env
        .postgres
        .as_ref()
        .and_then(|p| p.embedded_cluster())
        .and_then(|e| e.postmaster_pid())
    {
        affinity::confine(pid, &cpus(offer.pg_cores, false)?, true)?;
    }
    env.broker_cpus = match offer.broker_cores {
        Some(n) => Some(affinity::cpu_list(n as usize, true)?),
        None => None,
    };
    Ok(())
}

/// The PostgreSQL settings of `point`, named as the server names them.
fn pg_values(point: &Point) -> Vec<(String, String)> {
    point
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("pg.")?.to_string(), value_text(v))))
        .collect()
}

/// The order repeat `repeat` visits `points` points in: forwards on even repeats, backwards on
/// odd ones. A search starts at the knee the search before it in its own repeat found, so no
/// repeat starts at another repeat's knee for the same point: the repeats' knees at a point
/// come from different starts, and their spread is the search's own, not one search's anchor.
fn walk(points: usize, repeat: u32) -> Vec<usize> {
    match repeat % 2 {
        0 => (0..points).collect(),
        _ => (0..points).rev().collect(),
    }
}

/// Where each cell's search starts: at the knee the search `before` found for that cell (the
/// point before in this repeat's walk), so a search spends its steps near its knee rather than
/// on the way there; none (the plan's start rate) for a repeat's first search.
fn knee_starts(before: Option<&CapacityResults>) -> BTreeMap<String, f64> {
    before
        .map(|r| {
            r.cells
                .iter()
                .filter_map(|c| Some((c.name.clone(), c.sustained_rate?)))
                .collect()
        })
        .unwrap_or_default()
}

fn point_words(point: &Point) -> String {
    match point.is_empty() {
        true => "the scenario as written".into(),
        false => point
            .iter()
            .map(|(k, v)| format!("{k}={}", value_text(v)))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

fn notes() -> Vec<String> {
    vec![
        "each point runs the capacity knee search (see capacity.json beside it) on the point's scenario, with its PostgreSQL settings applied by ALTER SYSTEM and a reload, or a restart where a setting needs one".into(),
        "a knee is the median of the repeats' sustained rates, with the lowest and highest; repeats run the whole grid again, each from its own start".into(),
        "one unmeasured step of the first cell warms the cluster before the first search; each repeat's first search starts every cell at the start rate, every later one at the knee the cell's search before in the same repeat found, galloping from it (moves of 1 + 2 × precision, squared at each move the same way, up to the step factor); odd repeats walk the grid backwards, so no repeat starts at another repeat's knee for the same point".into(),
        "costs per message are measured on the highest sustained step (below the knee), per answered message per consumer group; PostgreSQL CPU is its whole process tree read from /proc".into(),
        "the cost model's cap is the lowest of: cores / CPU per message for each confined process, for the unconfined ones together, and for the machine; fsyncs per second / WAL syncs per message".into(),
        "the cost model's knee is where p99 meets the target if p99 grows as p99 at no load / (1 − rate / cap): cap × (1 − p99 at no load / target); p99 at no load is the median over every sustained step of its p99 × (1 − its rate / cap)".into(),
        "host.pg_cores confines PostgreSQL to the first cores, host.broker_cores the broker to the last ones (taskset); the load generator is never confined".into(),
        "before each search the idle machine is probed (probes): the fsync probe and PostgreSQL's CPU probe, the fastest of five runs hashing 200 000 numbers; the sweep warns when the slowest CPU probe is over 10 % above the fastest".into(),
    ]
}

/// Writes `sweep.json` and `sweep.html` into `out_dir`.
pub fn write_outputs(results: &SweepResults, out_dir: &Path) -> Result<(), String> {
    let path = out_dir.join("sweep.json");
    std::fs::write(&path, results.to_json()?).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("ackbench: wrote {}", path.display());
    let html = ackbench_reports::sweep::render_sweep(results)?;
    let report = out_dir.join("sweep.html");
    ackbench_reports::write_report(&report, &html)?;
    eprintln!("ackbench: wrote {}", report.display());
    Ok(())
}

/// The text summary: a line per point and cell, and the model's error.
pub fn summary(r: &SweepResults) -> String {
    let mut out = format!(
        "\n{:<48} {:<16} {:>22} {:>8} {:>10}  limited by\n",
        "settings", "cell", "knee [low-high] msg/s", "p99 ms", "model"
    );
    let opt = |v: Option<f64>| v.map(amount).unwrap_or_else(|| "—".into());
    for p in &r.points {
        for c in &p.cells {
            out += &format!(
                "{:<48} {:<16} {:>22} {:>8} {:>10}  {}\n",
                SweepResults::point_label(p),
                c.name,
                format!(
                    "{}{} [{}-{}]",
                    if c.bracketed { "" } else { ">=" },
                    opt(c.knee.sustained),
                    opt(c.knee.low),
                    opt(c.knee.high)
                ),
                format_number(c.p99_ms),
                opt(c.predicted_knee),
                c.limited_by.as_deref().unwrap_or("")
            );
        }
    }
    out += &match &r.model_error {
        Some(e) => format!(
            "\ncost model: {}% off on average, {}% at worst, over {} knees\n",
            amount(e.mean_abs * 100.0),
            amount(e.max_abs * 100.0),
            e.pairs
        ),
        None => "\ncost model: no knee to compare with\n".into(),
    };
    if !r.complete {
        out += "INCOMPLETE: the sweep was interrupted or broke; points are missing\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{median_fsync, walk};
    use ackbench_reports::sweep::SearchProbe;

    #[test]
    fn the_machine_fsync_rate_is_the_median_of_the_probes_that_measured_one() {
        let probe = |fsync_per_sec| SearchProbe {
            point: 1,
            repeat: 1,
            fsync_per_sec,
            cpu_ms: 30.0,
        };
        let rates = |r: &[f64]| r.iter().map(|&f| probe(f)).collect::<Vec<_>>();
        assert_eq!(
            median_fsync(&rates(&[900.0, f64::NAN, 300.0, 600.0])),
            600.0
        );
        assert_eq!(median_fsync(&rates(&[800.0, 400.0])), 600.0);
        assert!(median_fsync(&rates(&[f64::NAN])).is_nan());
        assert!(median_fsync(&[]).is_nan());
    }

    #[test]
    fn repeats_walk_the_grid_forwards_then_backwards() {
        assert_eq!(walk(4, 0), [0, 1, 2, 3]);
        assert_eq!(walk(4, 1), [3, 2, 1, 0]);
        assert_eq!(walk(4, 2), [0, 1, 2, 3]);
        assert_eq!(walk(1, 1), [0]);
    }
}
