//! `ackbench`: the command line: the subcommands and their arguments (`run` and `capacity`
//! take the library's `options` structs as they are), dispatched to `ackbench::cli`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use ackbench::options::{CapacityOptions, RunOptions};

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
    Run(RunOptions),
    /// Render the HTML report of a results file (optionally compared with another run).
    Report(ReportArgs),
    /// Judge a results file against its scenario's gates (exit 0 held or inconclusive, 1 failed
    /// or with --strict inconclusive, 2 broken).
    Gate(GateArgs),
    /// Store a passing run's figures as a baseline for baseline gates.
    Baseline(BaselineArgs),
    /// Step the offered producer rate up per cell and find the highest rate sustained within a
    /// p99 target; writes capacity.json and capacity.html.
    Capacity(CapacityOptions),
    /// Measure each ratio gate of a scenario: false alarms over A/A runs, and whether it
    /// catches the regression it exists for (injected into the broker); writes calibration.json.
    Calibrate(ackbench::calibrate::CalibrateOptions),
    /// Merge the results of every shard of a sharded run (`run --shard I/N`) into one
    /// results.json and report.html, the audit reconciled across the shards.
    Merge(MergeArgs),
    /// Keep runs' figures over time and find the runs that changed them (change points).
    History {
        #[command(subcommand)]
        command: ackbench::trend::cli::HistoryCommand,
    },
    /// Run the capacity knee search at every point of the scenario's [sweep] grid, repeated;
    /// writes sweep.json (knee intervals, costs per message, the cost model's knee) and
    /// sweep.html.
    Sweep(ackbench::sweep::options::SweepOptions),
    /// Answer a target rate and p99 from a sweep.json: which points met it here, and what the
    /// cost model says a host with the given cores and fsync rate would sustain.
    Plan(ackbench::sweep::options::PlanOptions),
    /// Apply this build's cost model to a finished sweep's measurements (its directory's
    /// sweep.json and each search's capacity.json); writes sweep.json and sweep.html to --out.
    Remodel(ackbench::sweep::options::RemodelOptions),
}

impl Command {
    /// Whether the command only reads files and prints (no sockets, no children; `history` may talk to PostgreSQL, so it is not one): such a
    /// command may die of SIGPIPE when its reader goes away, as `head` expects.
    fn only_prints(&self) -> bool {
        matches!(
            self,
            Command::Report(_)
                | Command::Gate(_)
                | Command::Baseline(_)
                | Command::Merge(_)
                | Command::Plan(_)
                | Command::Remodel(_)
        )
    }
}

/// Puts SIGPIPE back to its default action. Rust ignores it so that a write to a closed socket
/// is an error, not a death; for a command that only prints, a closed stdout (`| head`) then
/// panicked in `println!` instead of ending quietly as Unix tools do.
fn quiet_on_closed_pipe() {
    // SAFETY: called once at start, before any thread is spawned; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[derive(clap::Args)]
struct MergeArgs {
    /// The shards' output directories (each holds results.json and its ledger files).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Where to write the merged results (default: merged-<run id> beside the first DIR).
    #[arg(long)]
    out: Option<PathBuf>,
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
    /// Output: table (default), json, markdown, github-action-benchmark, bencher.
    #[arg(long, default_value = "table")]
    format: String,
    /// An inconclusive gate (its interval straddles the bound) exits 1 instead of 0.
    #[arg(long)]
    strict: bool,
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

/// Makes every allocation of 1 MiB or more a mapping of its own, returned to the system when
/// freed. glibc's threshold otherwise rises to the largest block freed so far, after which such
/// blocks come from the heap and keep the resident memory at its highest: the history roller's
/// copies and its checks' tables, allocated and freed every 10 s, then read as a soak's growth
/// (a 30-minute run at 3 000 msg/s grew from 97 MiB at minute 5 to 150 MiB in steps, with
/// nothing held longer).
fn large_allocations_return_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: called once at start, before any thread is spawned; the parameter and value are
    // ones glibc documents.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.command.only_prints() {
        quiet_on_closed_pipe();
    }
    large_allocations_return_to_the_system();
    if !cli.command.only_prints() {
        // The revision the results will name, as it is when the command starts.
        let _ = ackbench::meta::git_revision();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = rt.block_on(async {
        match cli.command {
            Command::Run(opts) => ackbench::cli::run(opts).await,
            Command::Report(a) => {
                ackbench::cli::report(&a.results, a.compare.as_deref(), a.out.as_deref())
            }
            Command::Gate(a) => ackbench::cli::gate(
                &a.results,
                a.baseline.as_deref(),
                a.gates.as_deref(),
                &a.format,
                a.strict,
            ),
            Command::Baseline(a) => ackbench::cli::baseline(&a.results, &a.out),
            Command::Capacity(opts) => ackbench::cli::capacity(opts).await,
            Command::Calibrate(opts) => ackbench::calibrate::command(opts).await,
            Command::Merge(a) => ackbench::cli::merge(&a.dirs, a.out.as_deref()),
            Command::History { command } => ackbench::trend::cli::run(command).await,
            Command::Sweep(opts) => ackbench::sweep::sweep_command(opts).await,
            Command::Plan(opts) => ackbench::sweep::plan_command(&opts),
            Command::Remodel(opts) => ackbench::sweep::remodel_command(&opts),
        }
    });
    ExitCode::from(code)
}
