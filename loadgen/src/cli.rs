//! What each subcommand does, behind the argument parsing of `main.rs`; each returns the
//! process exit code.
//!
//! Exit codes of `run`: 0 everything held; 1 the audit lost a message (or, once gates are
//! evaluated, a gate failed); 2 the run itself broke (bad scenario, set-up failure); 130
//! interrupted by Ctrl-C (what was measured is still written, marked incomplete).

use std::path::{Path, PathBuf};

use tokio::sync::watch;

use ackbench_reports::results::Results;

use crate::capacity;
use crate::gates::{self, baseline::Baseline, export};
use crate::lifecycle::env::Env;
use crate::lifecycle::faults::refuse_unavailable;
use crate::lifecycle::settle::{OneShard, Settlement, Whole};
use crate::options::{CapacityOptions, RunOptions};
use crate::run::{self, audit_words, figure_text};
use crate::scenario::{find_scenario, Cell, DatabaseSide, Overrides, Scenario};
use crate::shard::{self, Shard};
use crate::target::external_cells::{self, ExternalSpec};

/// The run's `--external` cells, refused beside `--broker-url`, `--aa` and `--shard` (each of
/// which makes the run's cells something else).
fn externals_of(opts: &RunOptions, scenario: &Scenario) -> Result<Vec<ExternalSpec>, String> {
    if opts.external.is_empty() {
        return Ok(Vec::new());
    }
    for (flag, given) in [
        ("--broker-url", opts.target.broker_url.is_some()),
        ("--aa", opts.aa.is_some()),
        ("--shard", opts.shard.is_some()),
    ] {
        if given {
            return Err(format!("--external cannot be combined with {flag}"));
        }
    }
    let taken: Vec<String> = scenario
        .run
        .cells
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    external_cells::parse_all(&opts.external, &taken)
}

/// `ackbench run`: runs the scenario's cells round by round, writes results.json and
/// report.html, prints the summary and the gate table.
pub async fn run(opts: RunOptions) -> u8 {
    let overrides = opts.overrides();
    let mut scenario = match find_scenario(&opts.scenario).and_then(|p| load_scenario(&p)) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    if let Err(e) = scenario.apply_overrides(&overrides) {
        return fail(&e.to_string());
    }
    let aa = match opts.aa.as_deref().map(str::parse::<Cell>).transpose() {
        Ok(aa) => aa,
        Err(e) => return fail(&format!("--aa: {e}")),
    };
    let shard = match check_sharding(&opts) {
        Ok(shard) => shard,
        Err(e) => return fail(&e),
    };
    let mut settings = opts.target.settings();
    settings.externals = match externals_of(&opts, &scenario) {
        Ok(specs) => specs,
        Err(e) => return fail(&e),
    };
    if let Err(e) = refuse_unavailable(&scenario.faults, &settings) {
        return fail(&e);
    }
    let seed = scenario.run.seed.unwrap_or_else(|| match &opts.run_id {
        Some(id) => shard::seed_of_run(id),
        None => fastrand::u64(..),
    });
    let out_dir = opts
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&scenario.name));
    if let Some(addr) = &opts.metrics_listen {
        let run_id = opts.run_id.clone().unwrap_or_else(|| run_id_of(&out_dir));
        if let Err(e) = serve_live_metrics(addr, &run_id) {
            return fail(&e);
        }
    }
    let metrics_push = match opts.metrics_push.as_deref() {
        Some(url) => {
            let run_id = opts.run_id.clone().unwrap_or_else(|| run_id_of(&out_dir));
            match push_live_metrics(url, opts.metrics_push_interval, &run_id) {
                Ok(pushing) => Some(pushing),
                Err(e) => return fail(&e),
            }
        }
        None => None,
    };
    let _out_guard = match RunDir::create(&out_dir) {
        Ok(guard) => guard,
        Err(e) => return fail(&e),
    };
    if let Some(path) = &opts.history {
        if let Err(e) = std::fs::File::create(path) {
            return fail(&format!("--history {}: {e}", path.display()));
        }
    }
    let env = match Env::prepare(&settings, scenario.database_side(), out_dir.clone()).await {
        Ok(env) => Env {
            history: opts.history.clone(),
            ..env.with_run_id(opts.run_id.as_deref())
        },
        Err(e) => return fail(&e),
    };
    let target = env.external_broker().then(|| env.profile.cell_name());
    let mut cells = run::cell_list(&scenario, aa, target.as_deref());
    cells.extend(run::external_cells(&env));
    if let Some(name) = &target {
        eprintln!(
            "ackbench: against an external broker the scenario's cells ({}) become one cell, {name}; \
             ratio gates between them are not applicable",
            scenario.run.cells.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
        );
    }
    let planned: Vec<Cell> = cells.iter().map(|c| c.cell).collect();
    if let Err(e) = env.check_peers(&planned).await {
        return fail(&e);
    }
    let cancel = cancel_on_ctrl_c("cell");
    eprintln!(
        "ackbench: {} — cells {}, {} round(s), warm-up {}s, window {}s, seed {seed}; output in {}",
        scenario.name,
        cells
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        scenario.run.rounds,
        scenario.run.warmup_secs,
        scenario.run.duration_secs,
        out_dir.display()
    );
    let settlement = settlement_of(shard, &out_dir);
    let outcome = run::run(
        &scenario,
        &cells,
        &env,
        settlement.as_ref(),
        seed,
        cancel.clone(),
    )
    .await;
    let mut results = match outcome {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    results.meta.scenario.overrides = describe_overrides(&overrides);
    mark_shard(&mut results, shard, opts.run_id.as_deref());
    // In A/A mode the scenario's gates name cells that did not run: only audits are judged,
    // and the twins' ratios show what noise a gate has to sit beyond. A shard's figures are a
    // slice: its gates are judged on the merge.
    let judged_gates = if aa.is_some() || shard.is_sharded() {
        &[][..]
    } else {
        &scenario.gates[..]
    };
    let confirmation = run::confirm::Confirmation {
        scenario: &scenario,
        cells: &cells,
        env: &env,
        settlement: settlement.as_ref(),
        seed,
        gates: judged_gates,
        max_rounds: if results.complete {
            scenario.run.confirm
        } else {
            0
        },
    };
    let eval = match run::confirm::confirm(&confirmation, &mut results, &cancel).await {
        Ok(eval) => eval,
        Err(e) => return fail(&e),
    };
    drop(env);
    let push_tally = match metrics_push {
        Some(pushing) => Some(pushing.finish().await),
        None => None,
    };
    results.gates = eval.verdicts.clone();
    if let Err(e) = write_outputs(&results, &out_dir) {
        return fail(&e);
    }
    print_summary(&results);
    if let Some(tally) = push_tally {
        println!("{tally}");
    }
    println!("\n{}", gates::table(&eval));
    if let Some(line) = eval.inconclusive_line(opts.strict) {
        println!("{line}");
    }
    if let (Some(_), [cell, twin]) = (aa, cells.as_slice()) {
        println!(
            "{}",
            gates::aa_noise(&results, &scenario.gates, &cell.name, &twin.name)
        );
    }
    let code = match shard.is_sharded() {
        true => shard_exit_code(&results),
        false => run_exit_code(&results, &eval, opts.strict),
    };
    println!("report: {}", out_dir.join("report.html").display());
    code
}

/// Binds `--metrics-listen ADDR` and serves the run's live metrics there, labelled `run_id`.
fn serve_live_metrics(addr: &str, run_id: &str) -> Result<(), String> {
    let listener = crate::live::server::bind(addr)?;
    let board = crate::live::Board::install(run_id);
    let local = crate::live::server::serve(listener, board)?;
    eprintln!("ackbench: live metrics at http://{local}/metrics (run_id {run_id})");
    Ok(())
}

/// Starts pushing the run's live metrics to the remote-write endpoint `url` every
/// `interval_secs`, labelled `run_id`; a bad URL or interval is an error naming it.
fn push_live_metrics(
    url: &str,
    interval_secs: f64,
    run_id: &str,
) -> Result<crate::live::remote_write::Pushing, String> {
    use crate::live::remote_write;
    let endpoint = remote_write::Endpoint::parse(url)?;
    if !(interval_secs.is_finite() && interval_secs >= 0.1) {
        return Err(format!(
            "--metrics-push-interval {interval_secs}: give seconds, at least 0.1"
        ));
    }
    let interval = std::time::Duration::from_secs_f64(interval_secs);
    let board = crate::live::Board::install(run_id);
    let source = Box::new(move || board.samples());
    eprintln!("ackbench: live metrics pushed to {url} every {interval_secs} s (run_id {run_id})");
    Ok(remote_write::start(endpoint, interval, source))
}

/// The run id live metrics carry without `--run-id`: the output directory's name.
fn run_id_of(out_dir: &Path) -> String {
    out_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| out_dir.display().to_string())
}

/// A scenario file read and validated; the error in words.
fn load_scenario(path: &Path) -> Result<Scenario, String> {
    Scenario::load(path).map_err(|e| e.to_string())
}

/// A run's output directory while the run lasts: created if missing, and removed again when
/// the run ends without writing anything there (a failed start leaves no empty directory). One
/// that holds only logs is kept and named, since the logs say why the run failed.
struct RunDir {
    path: PathBuf,
    created: bool,
}

impl RunDir {
    fn create(path: &Path) -> Result<RunDir, String> {
        let created = !path.exists();
        std::fs::create_dir_all(path).map_err(|e| format!("--out {}: {e}", path.display()))?;
        Ok(RunDir {
            path: path.to_path_buf(),
            created,
        })
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let entries = std::fs::read_dir(&self.path)
            .map(|d| d.count())
            .unwrap_or(1);
        let written = ["results.json", "capacity.json"]
            .iter()
            .any(|f| self.path.join(f).exists());
        if self.created && entries == 0 {
            let _ = std::fs::remove_dir(&self.path);
        } else if !written && entries > 0 {
            eprintln!(
                "ackbench: no results were written; the logs of what ran are in {}",
                self.path.display()
            );
        }
    }
}

/// How this process settles its rounds: as the whole run, or as the shard `shard` (its ledger
/// files beside its results in `out_dir`).
fn settlement_of(shard: Shard, out_dir: &Path) -> Box<dyn Settlement> {
    match shard.is_sharded() {
        true => Box::new(OneShard {
            shard,
            out_dir: out_dir.to_path_buf(),
        }),
        false => Box::new(Whole),
    }
}

/// `--shard` and `--run-id`, checked together: a shard needs the broker every shard drives and
/// the run id they share, and is not an A/A run.
fn check_sharding(opts: &RunOptions) -> Result<Shard, String> {
    let shard = opts.shard.unwrap_or(Shard::WHOLE);
    if let Some(id) = &opts.run_id {
        shard::check_run_id(id)?;
    }
    let external = opts.target.broker_url.is_some();
    match (shard.is_sharded(), external, &opts.run_id, &opts.aa) {
        (true, false, _, _) => Err(format!(
            "--shard {shard} needs --broker-url: the shards of a run drive one broker started beforehand"
        )),
        (true, _, None, _) => Err(format!(
            "--shard {shard} needs --run-id: give every shard of the run the same, so they share its queues"
        )),
        (true, _, _, Some(_)) => Err("--aa cannot be sharded: run the A/A pair in one process".into()),
        (false, false, Some(_), _) => {
            Err("--run-id needs --broker-url: it names the run's queues on an external broker".into())
        }
        _ => Ok(shard),
    }
}

/// Records which shard of which run `results` are, and what its audit cannot say alone.
fn mark_shard(results: &mut Results, shard: Shard, run_id: Option<&str>) {
    let Some(run_id) = run_id.filter(|_| shard.is_sharded()) else {
        return;
    };
    // A shard offers its share of the rate, not the scenario's: its pace is judged on the merge.
    results.meta.offered_rate = None;
    results.meta.shards = Some(ackbench_reports::results::ShardsMeta {
        run_id: run_id.to_string(),
        count: shard.count,
        index: Some(shard.index),
    });
    results.meta.notes.push(format!(
        "shard {shard} of run {run_id}: its figures are its slice of the load, and its audit counts what it          could not resolve alone as undrained (another shard may have acked it): `ackbench merge` reconciles          the shards' ledgers"
    ));
}

/// A shard's exit code: 0 when its rounds finished and the queue was drained, 1 when the drain
/// did not finish, 130 when interrupted. Loss is judged by `ackbench merge`.
fn shard_exit_code(results: &Results) -> u8 {
    if !results.complete {
        return 130;
    }
    match results.cells.iter().all(|c| c.summary.audit.drained) {
        true => 0,
        false => {
            eprintln!(
                "ackbench: FAILED: the queue was not drained by the end of this shard's drain"
            );
            1
        }
    }
}

/// `ackbench capacity`: per cell, steps the offered rate up and finds the highest sustained
/// one; writes capacity.json and capacity.html. Exit 0 when every planned cell was measured
/// (whatever it sustains), 2 when the run broke, 130 when interrupted.
pub async fn capacity(opts: CapacityOptions) -> u8 {
    let mut scenario = match find_scenario(&opts.scenario).and_then(|p| load_scenario(&p)) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    // Capacity judges no gates, so they must not veto a --cells list; and it measures the steady
    // state of the offered load, so a scenario's prefill (a backlog to chew through, which would
    // saturate the consumers whatever the rate) is skipped.
    scenario.gates.clear();
    scenario.prefill.messages_per_partition = 0;
    if let Some(f) = scenario.faults.first() {
        return fail(&format!(
            "{}: the {} fault (line {}): capacity steps are neither drained nor audited, so faults are judged by `ackbench run` only",
            scenario.source_name,
            f.kind.name(),
            f.line
        ));
    }
    if scenario.broker.names_topologies() {
        return fail(&format!(
            "{}: broker.topologies lists {} topologies; capacity steps one: give broker.instances and broker.routing instead",
            scenario.source_name,
            scenario.broker.topologies().len()
        ));
    }
    if let Err(e) = scenario.apply_overrides(&opts.overrides()) {
        return fail(&e.to_string().replace("--duration", "--step-secs"));
    }
    let planned = capacity::plan(&scenario, opts.search())
        .and_then(|p| Ok((p, capacity::criteria(slo_of(&opts, &scenario))?)));
    let (plan, criteria) = match planned {
        Ok(x) => x,
        Err(e) => return fail(&e),
    };
    let seed = scenario.run.seed.unwrap_or_else(|| fastrand::u64(..));
    let out_dir = opts
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&format!("{}-capacity", scenario.name)));
    let _out_guard = match RunDir::create(&out_dir) {
        Ok(guard) => guard,
        Err(e) => return fail(&e),
    };
    // Capacity fires no faults: the standby (replication's cost) without the relays.
    let side = DatabaseSide {
        relay: false,
        ..scenario.database_side()
    };
    let env = match Env::prepare(&opts.target.settings(), side, out_dir.clone()).await {
        Ok(env) => env,
        Err(e) => return fail(&e),
    };
    if let Err(e) = env.check_peers(&scenario.run.cells).await {
        return fail(&e);
    }
    let cancel = cancel_on_ctrl_c("step");
    eprintln!(
        "ackbench: {} capacity — cells {}; offered {} msg/s; warm-up {}s and window {}s per step; target p99 <= {} ms; seed {seed}; output in {}",
        scenario.name,
        scenario
            .run
            .cells
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", "),
        plan.rates
            .iter()
            .map(|r| ackbench_reports::capacity::amount(*r))
            .collect::<Vec<_>>()
            .join(" -> "),
        plan.warmup_secs,
        plan.step_secs,
        ackbench_reports::capacity::amount(criteria.slo_p99_ms),
        out_dir.display()
    );
    let (mut results, error) = capacity::run(&scenario, &env, &plan, &criteria, seed, cancel).await;
    drop(env);
    results.meta.scenario.overrides = describe_capacity_flags(&opts);
    if let Err(e) = capacity::write_outputs(&results, &out_dir) {
        return fail(&e);
    }
    println!("{}", capacity::summary(&results));
    println!("report: {}", out_dir.join("capacity.html").display());
    match error {
        Some(e) => fail(&e),
        None if !results.complete => 130,
        None => 0,
    }
}

/// The latency target of a capacity search: `--slo-p99-ms`, else the scenario's `[capacity]
/// slo_p99_ms`, else 50 ms.
fn slo_of(opts: &CapacityOptions, scenario: &Scenario) -> f64 {
    opts.slo_p99_ms
        .or(scenario.capacity.slo_p99_ms)
        .unwrap_or(capacity::DEFAULT_SLO_P99_MS)
}

fn describe_capacity_flags(opts: &CapacityOptions) -> Vec<String> {
    let o = &opts.overrides();
    let mut v = Vec::new();
    if let Some(c) = &o.cells {
        v.push(format!("--cells {}", c.join(",")));
    }
    if let Some(d) = o.duration_secs {
        v.push(format!("--step-secs {d}"));
    }
    if let Some(w) = o.warmup_secs {
        v.push(format!("--warmup {w}"));
    }
    if let Some(s) = o.seed {
        v.push(format!("--seed {s}"));
    }
    if let Some(x) = opts.start {
        v.push(format!("--start {x}"));
    }
    if let Some(x) = opts.step {
        v.push(format!("--step {x}"));
    }
    if let Some(x) = opts.min {
        v.push(format!("--min {x}"));
    }
    if let Some(x) = opts.max {
        v.push(format!("--max {x}"));
    }
    if let Some(x) = opts.precision {
        v.push(format!("--precision {x}"));
    }
    if let Some(x) = opts.slo_p99_ms {
        v.push(format!("--slo-p99-ms {x}"));
    }
    v
}

/// `ackbench merge DIR... [--out DIR]`: merges the results of every shard of a sharded run
/// into one results.json and report.html (default: `merged-<run id>` beside the first DIR),
/// judges the scenario's gates on it and exits as `run` does. Shards that are not one run are
/// refused (exit 2) and nothing is written.
pub fn merge(dirs: &[PathBuf], out: Option<&Path>) -> u8 {
    let merged = shard::merge::merge_dirs(dirs).and_then(|r| {
        let scenario = Scenario::parse(&r.meta.scenario.text, &r.meta.scenario.path)
            .map_err(|e| format!("the scenario recorded in the shards no longer parses: {e}"))?;
        Ok((r, scenario))
    });
    let (mut results, scenario) = match merged {
        Ok(x) => x,
        Err(e) => return fail(&e),
    };
    // Each shard offered its slice; the merge offered the scenario's whole rate.
    results.meta.offered_rate = scenario
        .producers
        .open_rate()
        .filter(|_| scenario.producers.count > 0);
    let run_id = results.meta.shards.as_ref().map(|s| s.run_id.clone());
    let out_dir = out.map(Path::to_path_buf).unwrap_or_else(|| {
        let beside = dirs[0].parent().unwrap_or(Path::new("."));
        beside.join(format!("merged-{}", run_id.unwrap_or_default()))
    });
    let eval = gates::evaluate(&results, &scenario.gates, None);
    results.gates = eval.verdicts.clone();
    let written = std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("--out {}: {e}", out_dir.display()))
        .and_then(|_| write_outputs(&results, &out_dir));
    if let Err(e) = written {
        return fail(&e);
    }
    print_summary(&results);
    println!("\n{}", gates::table(&eval));
    if let Some(line) = eval.inconclusive_line(false) {
        println!("{line}");
    }
    let code = run_exit_code(&results, &eval, false);
    println!("report: {}", out_dir.join("report.html").display());
    code
}

/// `ackbench gate`: judges a results file; exit 0 held (or inconclusive), 1 failed (or, with
/// `strict`, inconclusive), 2 broken.
pub fn gate(
    results: &Path,
    baseline: Option<&Path>,
    gates_file: Option<&Path>,
    format: &str,
    strict: bool,
) -> u8 {
    let judged = (|| {
        let r = ackbench_reports::results::read(results)?;
        let scenario = match gates_file {
            Some(p) => Scenario::load(p).map_err(|e| e.to_string())?,
            None => Scenario::parse(&r.meta.scenario.text, &r.meta.scenario.path).map_err(|e| {
                format!(
                    "the scenario recorded in {} no longer parses: {e}",
                    results.display()
                )
            })?,
        };
        let b = baseline.map(Baseline::read).transpose()?;
        let wants_baseline = scenario
            .gates
            .iter()
            .any(|g| matches!(g.check, crate::scenario::GateCheck::Baseline { .. }));
        if let (Some(path), false) = (baseline, wants_baseline) {
            eprintln!(
                "ackbench: --baseline {} is unused: no gate of the scenario is a baseline gate (kind = \"baseline\")",
                path.display()
            );
        }
        Ok::<_, String>((gates::evaluate(&r, &scenario.gates, b.as_ref()), r))
    })();
    let (eval, r) = match judged {
        Ok(x) => x,
        Err(e) => return fail(&e),
    };
    let out = match format {
        "table" => gates::table(&eval)
            + &eval
                .inconclusive_line(strict)
                .map_or_else(String::new, |l| format!("{l}\n")),
        "markdown" => export::markdown(&r, &eval),
        "json" => export::json(&eval, strict).to_string(),
        "github-action-benchmark" => export::github_action_benchmark(&r).to_string(),
        "bencher" => export::bencher(&r).to_string(),
        other => {
            return fail(&format!(
            "--format: `{other}` is not one of table, json, markdown, github-action-benchmark, bencher"
        ))
        }
    };
    println!("{out}");
    eval.exit_code_strict(strict)
}

/// `ackbench baseline RESULTS --out FILE`: never from a run that failed.
pub fn baseline(results: &Path, out: &Path) -> u8 {
    let written = ackbench_reports::results::read(results).and_then(|r| {
        let scenario = Scenario::parse(&r.meta.scenario.text, &r.meta.scenario.path)
            .map_err(|e| e.to_string())?;
        let eval = gates::evaluate(&r, &scenario.gates, None);
        if let Some(v) = eval.verdicts.iter().find(|v| !v.passed) {
            return Err(format!(
                "gate `{}` failed; a failed run cannot become a baseline ({} is unchanged)",
                v.gate,
                out.display()
            ));
        }
        Baseline::from_results(&r)?.write(out)
    });
    match written {
        Ok(()) => {
            println!("{}", out.display());
            0
        }
        Err(e) => {
            eprintln!("ackbench: {e}");
            1
        }
    }
}

/// A flag that flips on the first Ctrl-C, so the run stops at a clean point and still writes
/// what it measured; a second Ctrl-C exits at once. `what` names what is stopped.
pub(crate) fn cancel_on_ctrl_c(what: &'static str) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nackbench: interrupted; stopping the {what} and writing what was measured (Ctrl-C again to abort)");
            let _ = tx.send(true);
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    rx
}

fn default_out_dir(scenario: &str) -> PathBuf {
    let stamp = run::now_iso()
        .replace([':', '-'], "")
        .chars()
        .take(15)
        .collect::<String>();
    Path::new("reports")
        .join("runs")
        .join(format!("{stamp}-{scenario}"))
}

fn describe_overrides(o: &Overrides) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(c) = &o.cells {
        v.push(format!("--cells {}", c.join(",")));
    }
    if let Some(r) = o.rounds {
        v.push(format!("--rounds {r}"));
    }
    if let Some(d) = o.duration_secs {
        v.push(format!("--duration {d}"));
    }
    if let Some(w) = o.warmup_secs {
        v.push(format!("--warmup {w}"));
    }
    if let Some(s) = o.seed {
        v.push(format!("--seed {s}"));
    }
    v
}

fn write_outputs(results: &Results, out_dir: &Path) -> Result<(), String> {
    let path = out_dir.join("results.json");
    ackbench_reports::results::write(results, &path)?;
    eprintln!("ackbench: wrote {}", path.display());
    let html = ackbench_reports::render_report(results)?;
    let report = out_dir.join("report.html");
    ackbench_reports::write_report(&report, &html)?;
    eprintln!("ackbench: wrote {}", report.display());
    Ok(())
}

/// `ackbench report RESULTS [--compare OTHER] [--out FILE]`: renders from the results file
/// alone; with `--compare`, OTHER is the baseline and RESULTS the candidate.
pub fn report(results: &Path, compare: Option<&Path>, out: Option<&Path>) -> u8 {
    let rendered = (|| {
        let candidate = ackbench_reports::results::read(results)?;
        let (html, default_name) = match compare {
            Some(other) => {
                let baseline = ackbench_reports::results::read(other)?;
                for w in ackbench_reports::model::comparability_warnings(&baseline, &candidate) {
                    eprintln!("ackbench: warning: {w}");
                }
                let html = ackbench_reports::render_comparison(&baseline, &candidate)?;
                (html, "compare.html")
            }
            None => (ackbench_reports::render_report(&candidate)?, "report.html"),
        };
        let path = match out {
            Some(p) => p.to_path_buf(),
            None => results
                .parent()
                .unwrap_or(Path::new("."))
                .join(default_name),
        };
        ackbench_reports::write_report(&path, &html)?;
        Ok::<PathBuf, String>(path)
    })();
    match rendered {
        Ok(path) => {
            println!("{}", path.display());
            0
        }
        Err(e) => fail(&e),
    }
}

/// An accelerator's figure for the terminal: `off` where the cell runs without it, `—` where it
/// was not measured.
fn accelerator_figure(on: bool, value: f64, decimals: usize) -> String {
    if on {
        figure_text(value, decimals)
    } else {
        "off".into()
    }
}

/// The summary table, one row per cell and its audit on the line below, within 100 columns.
fn print_summary(results: &Results) {
    println!(
        "{:<15} {:>7} {:>7} {:>10} {:>10} {:>9} {:>9} {:>5} {:>10} {:>8}",
        "cell",
        "ack/s",
        "push/s",
        "commit/ack",
        "ackcmt/ack",
        "wsync/ack",
        "pg ms/ack",
        "hit",
        "rows/flush",
        "ack p99"
    );
    for c in &results.cells {
        let f = &c.summary.figures;
        let ack_p99 = f
            .latency_ms
            .get("ack")
            .map(|x| x.p99.median)
            .unwrap_or(f64::NAN);
        println!(
            "{:<15} {:>7} {:>7} {:>10} {:>10} {:>9} {:>9} {:>5} {:>10} {:>8}",
            gates::clip(&c.name, 15),
            figure_text(f.ack_throughput.median, 0),
            figure_text(f.push_throughput.median, 0),
            figure_text(f.commits_per_ack.median, 3),
            figure_text(f.ack_commits_per_ack.median, 3),
            figure_text(f.wal_syncs_per_ack.median, 3),
            figure_text(f.pg_exec_ms_per_ack.median, 4),
            accelerator_figure(c.registry, f.registry_hit_rate.median, 2),
            accelerator_figure(c.fusion, f.fusion_rows_per_commit.median, 1),
            figure_text(ack_p99, 2),
        );
        let audit = format!("audit {}", audit_words(&c.summary.audit));
        print!("{}", gates::wrap(&audit, 100, "    "));
    }
    let legend = "(medians over rounds; commit/ack: commits per acked message; ackcmt/ack: ack \
                  commits per acked message; wsync/ack: WAL syncs per acked message; hit: registry \
                  hit rate; rows/flush: fusion rows per commit; ack p99 in ms)";
    print!("{}", gates::wrap(legend, 100, ""));
    if !results.complete {
        println!("INCOMPLETE: the run was interrupted; figures cover what was measured");
    }
}

/// The promised guarantees some cell broke, in words (`cell: name count, ...`), if any.
fn broken_guarantees(results: &Results) -> Option<String> {
    let words: Vec<String> = results
        .cells
        .iter()
        .flat_map(|c| {
            c.summary
                .audit
                .broken()
                .into_iter()
                .map(move |(name, n)| format!("{}: {name} {n}", c.name))
        })
        .collect();
    (!words.is_empty()).then(|| words.join(", "))
}

/// The run's exit code: a lost message, a broken promised guarantee or a failed gate is 1, a gate that could not be judged
/// 2, an interrupted run 130.
fn run_exit_code(results: &Results, eval: &gates::Evaluation, strict: bool) -> u8 {
    if results.cells.iter().any(|c| !c.summary.audit.passed()) {
        eprintln!("ackbench: FAILED: messages were lost (see the audit)");
        return 1;
    }
    if let Some(words) = broken_guarantees(results) {
        eprintln!(
            "ackbench: FAILED: guarantees the target promises were broken: {words} (see the audit)"
        );
        return 1;
    }
    if !results.complete {
        return 130;
    }
    let undrained: u64 = results
        .cells
        .iter()
        .map(|c| c.summary.audit.undrained)
        .sum();
    if undrained > 0 {
        eprintln!(
            "ackbench: FAILED: the drain did not finish ({undrained} messages undrained: loss neither proven nor ruled out)"
        );
        return 1;
    }
    match eval.exit_code_strict(strict) {
        0 => 0,
        code => {
            eprintln!(
                "ackbench: FAILED: {}",
                match (code, eval.exit_code()) {
                    (1, 0) => "a gate was inconclusive (--strict)",
                    (1, _) => "a gate failed",
                    _ => "a gate could not be judged",
                }
            );
            code
        }
    }
}

fn fail(message: &str) -> u8 {
    eprintln!("ackbench: {message}");
    2
}
