//! `ackbench calibrate SCENARIO --runs N --out DIR`: how often each ratio gate of a scenario
//! raises a false alarm, and whether it catches the regression it exists for.
//!
//! - A/A: N runs of the gated cells on the broker as built, nothing injected. A gate that fails
//!   there is a false alarm (an inconclusive one is counted apart: it neither passed nor
//!   failed the build).
//! - Per regression the scenario's gates exist to catch, N runs with it injected into the
//!   broker through a test-only setting (`regression`): a gate that fails there caught it.
//!   Every gate is judged on every run, so the table also shows what a gate makes of the other
//!   gates' regressions.
//!
//! Each run is an ordinary `ackbench run` of the gated cells (its results.json kept under
//! DIR/<condition>-<i>/); everything else is tallied into DIR/calibration.json (`tally`).

pub mod regression;
pub mod tally;

use std::path::{Path, PathBuf};

use tokio::sync::watch;

use ackbench_reports::results::Results;

use crate::gates;
use crate::lifecycle::env::{Env, TargetSettings};
use crate::lifecycle::settle::Whole;
use crate::run::confirm::{confirm, Confirmation};
use crate::run::{self, PlannedCell};
use crate::scenario::{find_scenario, Cell, GateCheck, Overrides, Scenario};
use regression::Regression;
use tally::Calibration;

/// `ackbench calibrate`.
#[derive(clap::Args, Clone, Debug)]
pub struct CalibrateOptions {
    /// The scenario file whose ratio gates are calibrated.
    pub scenario: PathBuf,
    /// Runs per condition (A/A, and each regression).
    #[arg(long, default_value_t = 5)]
    pub runs: u32,
    /// Where calibration.json and every run's results go.
    #[arg(long)]
    pub out: PathBuf,
    /// Rounds per run (default: the scenario's).
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Measured window per cell and round, in seconds (default: the scenario's).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Warm-up before each window, in seconds (default: the scenario's).
    #[arg(long)]
    pub warmup: Option<f64>,
    /// Seed of the first run (run i takes seed + i); default: the scenario's, else chosen.
    #[arg(long)]
    pub seed: Option<u64>,
    /// The fixed extra cost injected into every ack request for latency gates, in µs.
    #[arg(long, value_name = "US", default_value_t = regression::DEFAULT_EXTRA_COST_US)]
    pub extra_cost_us: u64,
    /// As `run --confirm N`: a gate inconclusive in a run gets up to N more rounds of its
    /// cells before that run's verdict is counted (default: the scenario's `[run] confirm`).
    #[arg(long, value_name = "N")]
    pub confirm: Option<u32>,
    /// The broker binary to start per cell (default: beside this executable).
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
}

/// Runs the calibration; exit 0 when every gate raised no false alarm and caught its own
/// regression in every run, 1 otherwise, 2 when it could not run, 130 when interrupted.
pub async fn command(opts: CalibrateOptions) -> u8 {
    match calibrate(&opts).await {
        Ok(c) if c.interrupted => 130,
        Ok(c) => match c.every_gate_calibrated() {
            true => 0,
            false => 1,
        },
        Err(e) => {
            eprintln!("ackbench: {e}");
            2
        }
    }
}

async fn calibrate(opts: &CalibrateOptions) -> Result<Calibration, String> {
    if opts.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let scenario = load(opts)?;
    let cells = gated_cells(&scenario)?;
    let regressions = regression::for_gates(&scenario.gates, opts.extra_cost_us);
    std::fs::create_dir_all(&opts.out).map_err(|e| format!("--out {}: {e}", opts.out.display()))?;
    let settings = TargetSettings {
        broker_bin: opts.broker_bin.clone(),
        ..Default::default()
    };
    let mut env = Env::prepare(&settings, scenario.database_side(), opts.out.clone()).await?;
    let seed = scenario.run.seed.unwrap_or_else(|| fastrand::u64(..));
    let cancel = cancel_on_ctrl_c();
    let mut calibration = Calibration::new(&scenario, opts.runs, &regressions);
    let conditions: Vec<Option<Regression>> = std::iter::once(None)
        .chain(regressions.iter().copied().map(Some))
        .collect();
    eprintln!(
        "ackbench: calibrating {}: cells {}; {} run(s) each of A/A{}; output in {}",
        scenario.name,
        cells
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        opts.runs,
        regressions
            .iter()
            .map(|r| format!(", {}", r.name()))
            .collect::<String>(),
        opts.out.display()
    );
    'conditions: for condition in conditions {
        for i in 1..=opts.runs {
            if *cancel.borrow() {
                calibration.interrupted = true;
                break 'conditions;
            }
            let label = format!("{}-{i}", condition.map_or("aa", |r| r.name()));
            let injected = with_regression(&scenario, condition);
            env.out_dir = opts.out.join(&label);
            std::fs::create_dir_all(&env.out_dir)
                .map_err(|e| format!("{}: {e}", env.out_dir.display()))?;
            let run_seed = seed.wrapping_add(i as u64);
            let mut results =
                run::run(&injected, &cells, &env, &Whole, run_seed, cancel.clone()).await?;
            let confirmation = Confirmation {
                scenario: &injected,
                cells: &cells,
                env: &env,
                settlement: &Whole,
                seed: run_seed,
                gates: &scenario.gates,
                max_rounds: if results.complete {
                    scenario.run.confirm
                } else {
                    0
                },
            };
            let eval = confirm(&confirmation, &mut results, &cancel).await?;
            record(
                &mut calibration,
                condition,
                &label,
                &mut results,
                eval,
                &env.out_dir,
            )?;
        }
    }
    let path = opts.out.join("calibration.json");
    calibration.write(&path)?;
    eprintln!("ackbench: wrote {}", path.display());
    println!("\n{}", calibration.markdown());
    Ok(calibration)
}

/// Keeps one run's results.json (with its verdicts) and tallies the verdicts.
fn record(
    calibration: &mut Calibration,
    condition: Option<Regression>,
    label: &str,
    results: &mut Results,
    eval: gates::Evaluation,
    dir: &Path,
) -> Result<(), String> {
    results.gates = eval.verdicts.clone();
    ackbench_reports::results::write(results, &dir.join("results.json"))?;
    println!("{label}:\n{}", gates::table(&eval));
    calibration.add(condition, &eval, results.complete);
    Ok(())
}

/// The scenario with the command line's overrides, its gates checked: at least one ratio gate
/// (baseline gates are not calibrated: they need a stored run).
fn load(opts: &CalibrateOptions) -> Result<Scenario, String> {
    let path = find_scenario(&opts.scenario)?;
    let mut scenario = Scenario::load(&path).map_err(|e| e.to_string())?;
    scenario
        .apply_overrides(&Overrides {
            rounds: opts.rounds,
            duration_secs: opts.duration,
            warmup_secs: opts.warmup,
            seed: opts.seed,
            confirm: opts.confirm,
            ..Default::default()
        })
        .map_err(|e| e.to_string())?;
    scenario
        .gates
        .retain(|g| matches!(g.check, GateCheck::Ratio { .. }));
    if scenario.gates.is_empty() {
        return Err(format!(
            "{}: no ratio gate to calibrate (baseline gates need a stored run)",
            path.display()
        ));
    }
    Ok(scenario)
}

/// The cells the gates judge, in the scenario's run order (one topology).
fn gated_cells(scenario: &Scenario) -> Result<Vec<PlannedCell>, String> {
    let judged: Vec<Cell> = scenario.gates.iter().flat_map(|g| g.cells()).collect();
    let planned: Vec<PlannedCell> = run::cell_list(scenario, None, None)
        .into_iter()
        .filter(|p| judged.contains(&p.cell))
        .collect();
    match planned.is_empty() {
        true => Err("the gates judge no cell the scenario runs".into()),
        false => Ok(planned),
    }
}

/// The scenario with `regression`'s test-only setting in its broker's environment.
fn with_regression(scenario: &Scenario, regression: Option<Regression>) -> Scenario {
    let mut s = scenario.clone();
    if let Some(r) = regression {
        let (name, value) = r.setting();
        s.broker.env.insert(name.to_string(), value);
    }
    s
}

/// A receiver that flips on the first Ctrl-C.
fn cancel_on_ctrl_c() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nackbench: interrupted; finishing the current cell");
            let _ = tx.send(true);
        }
    });
    rx
}
