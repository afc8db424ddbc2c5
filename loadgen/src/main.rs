//! `ackbench`: the command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use ackbench::scenario::Overrides;

#[derive(Parser)]
#[command(
    name = "ackbench",
    version,
    about = "Load generator and benchmark for the ackbench broker's ack path"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario across the accelerator cells and write results.json and report.html.
    Run(RunArgs),
    /// Render the HTML report of a results file (optionally compared with another run).
    Report(ReportArgs),
    /// Judge a results file against its scenario's gates (exit 0 held, 1 failed, 2 broken).
    Gate(GateArgs),
    /// Store a passing run's figures as a baseline for baseline gates.
    Baseline(BaselineArgs),
    /// Step the offered producer rate up per cell and find the highest rate sustained within a
    /// p99 target; writes capacity.json and capacity.html.
    Capacity(CapacityArgs),
}

#[derive(clap::Args)]
struct CapacityArgs {
    /// The scenario file (see scenarios/); its producers run open loop at each step's rate.
    scenario: PathBuf,
    /// Output directory (default reports/runs/<timestamp>-<scenario>-capacity/).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Target for ack and end-to-end p99, in ms.
    #[arg(long, default_value_t = 50.0)]
    slo_p99_ms: f64,
    /// First offered rate, msg/s (default: the scenario's open-loop rate, else 100).
    #[arg(long)]
    start: Option<f64>,
    /// Factor between one step's offered rate and the next (default 1.5).
    #[arg(long)]
    step: Option<f64>,
    /// Highest offered rate, msg/s (default 1000 × start).
    #[arg(long)]
    max: Option<f64>,
    /// Cells to run, comma-separated: registry+fusion, registry, fusion, none.
    #[arg(long)]
    cells: Option<String>,
    /// Measured window of each step, in seconds (default: the scenario's duration_secs).
    #[arg(long)]
    step_secs: Option<f64>,
    /// Warm-up of each step, in seconds (default: the scenario's warmup_secs).
    #[arg(long)]
    warmup: Option<f64>,
    #[command(flatten)]
    target: TargetArgs,
}

/// What a run or a capacity search targets, shared by both.
#[derive(clap::Args)]
struct TargetArgs {
    /// Use this PostgreSQL instead of a throwaway cluster (pg_stat_statements must be loaded).
    #[arg(long)]
    database_url: Option<String>,
    /// Use this running broker instead of starting the workspace's broker per cell.
    #[arg(long)]
    broker_url: Option<String>,
    /// The broker binary to start per cell (default: beside this executable).
    #[arg(long)]
    broker_bin: Option<PathBuf>,
    /// Seed of every random choice (default: the scenario's, else chosen and recorded).
    #[arg(long)]
    seed: Option<u64>,
    /// Keep each cell's database after the run (for inspection).
    #[arg(long)]
    keep_databases: bool,
}

#[derive(clap::Args)]
struct GateArgs {
    /// The results file to judge.
    results: PathBuf,
    /// A baseline written by `ackbench baseline`, for baseline gates.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Take the gates from this scenario file instead of the one recorded in the results.
    #[arg(long)]
    gates: Option<PathBuf>,
    /// Output: table (default), markdown, github-action-benchmark, bencher.
    #[arg(long, default_value = "table")]
    format: String,
}

#[derive(clap::Args)]
struct BaselineArgs {
    /// The results file of a run that passed.
    results: PathBuf,
    /// Where to write the baseline.
    #[arg(long)]
    out: PathBuf,
}

#[derive(clap::Args)]
struct ReportArgs {
    /// The results file to render (the candidate, when comparing).
    results: PathBuf,
    /// Another run's results file to compare with (the baseline: ratios read this run / other).
    #[arg(long)]
    compare: Option<PathBuf>,
    /// Where to write the report (default: report.html beside RESULTS, or compare.html).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(clap::Args)]
struct RunArgs {
    /// The scenario file (see scenarios/).
    scenario: PathBuf,
    /// Output directory (default reports/runs/<timestamp>-<scenario>/).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Cells to run, comma-separated: registry+fusion, registry, fusion, none.
    #[arg(long)]
    cells: Option<String>,
    /// Interleaved rounds.
    #[arg(long)]
    rounds: Option<u32>,
    /// Measured window per cell and round, in seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Warm-up before each window, in seconds.
    #[arg(long)]
    warmup: Option<f64>,
    #[command(flatten)]
    target: TargetArgs,
    /// A/A mode: run this one cell twice per round (instead of the scenario's cells) and print
    /// the ratio between the twins for every gated figure: the gates' own noise.
    #[arg(long, value_name = "CELL")]
    aa: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = rt.block_on(async {
        match cli.command {
            Command::Run(args) => ackbench::cli::run(args.into()).await,
            Command::Report(a) => {
                ackbench::cli::report(&a.results, a.compare.as_deref(), a.out.as_deref())
            }
            Command::Gate(a) => ackbench::cli::gate(
                &a.results,
                a.baseline.as_deref(),
                a.gates.as_deref(),
                &a.format,
            ),
            Command::Baseline(a) => ackbench::cli::baseline(&a.results, &a.out),
            Command::Capacity(a) => ackbench::cli::capacity(a.into()).await,
        }
    });
    ExitCode::from(code)
}

impl From<RunArgs> for ackbench::cli::RunRequest {
    fn from(a: RunArgs) -> Self {
        ackbench::cli::RunRequest {
            scenario: a.scenario,
            out: a.out,
            overrides: Overrides {
                cells: a.cells.map(|c| vec![c]),
                rounds: a.rounds,
                duration_secs: a.duration,
                warmup_secs: a.warmup,
                seed: a.target.seed,
            },
            database_url: a.target.database_url,
            broker_url: a.target.broker_url,
            broker_bin: a.target.broker_bin,
            keep_databases: a.target.keep_databases,
            aa: a.aa,
        }
    }
}

impl From<CapacityArgs> for ackbench::cli::CapacityRequest {
    fn from(a: CapacityArgs) -> Self {
        ackbench::cli::CapacityRequest {
            run: ackbench::cli::RunRequest {
                scenario: a.scenario,
                out: a.out,
                overrides: Overrides {
                    cells: a.cells.map(|c| vec![c]),
                    rounds: None,
                    duration_secs: a.step_secs,
                    warmup_secs: a.warmup,
                    seed: a.target.seed,
                },
                database_url: a.target.database_url,
                broker_url: a.target.broker_url,
                broker_bin: a.target.broker_bin,
                keep_databases: a.target.keep_databases,
                aa: None,
            },
            slo_p99_ms: a.slo_p99_ms,
            start: a.start,
            step: a.step,
            max: a.max,
        }
    }
}
