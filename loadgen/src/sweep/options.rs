//! The command-line options of `ackbench sweep`, `ackbench plan` and `ackbench remodel`.

use std::path::PathBuf;

use crate::options::TargetOptions;

/// `ackbench sweep`.
#[derive(clap::Args, Clone, Debug)]
pub struct SweepOptions {
    /// The scenario file; its `[sweep]` table names the grid.
    pub scenario: PathBuf,
    /// Output directory: sweep.json, sweep.html and each search's capacity.json.
    #[arg(long)]
    pub out: PathBuf,
    /// Target for ack and end-to-end p99, in ms (default: the scenario's `[capacity]
    /// slo_p99_ms`, else 50).
    #[arg(long)]
    pub slo_p99_ms: Option<f64>,
    /// Knee searches per point: the knee's interval is over them (default 1).
    #[arg(long, default_value_t = 1)]
    pub repeats: u32,
    /// Adds or replaces a sweep key: KEY=V1,V2,... (repeatable), e.g.
    /// `--sweep pg.synchronous_commit=on,off`.
    #[arg(long = "sweep", value_name = "KEY=V1,V2")]
    pub axes: Vec<String>,
    /// Confine PostgreSQL to this many cores (the first ones) where `host.pg_cores` is not swept.
    #[arg(long)]
    pub pg_cores: Option<u32>,
    /// Confine the broker to this many cores (the last ones) where `host.broker_cores` is not
    /// swept.
    #[arg(long)]
    pub broker_cores: Option<u32>,
    /// The WAL syncs per second the storage completes, instead of probing it.
    #[arg(long)]
    pub fsync_per_sec: Option<f64>,
    /// Allow `pg.*` sweep keys to change the settings of --database-url's server (ALTER SYSTEM;
    /// reset at the end).
    #[arg(long)]
    pub allow_pg_settings: bool,
    /// Cells to run, comma-separated (default: the scenario's).
    #[arg(long)]
    pub cells: Option<String>,
    /// Measured window of each step, in seconds (default: the scenario's duration_secs); it
    /// lengthens after rejections near the knee.
    #[arg(long)]
    pub step_secs: Option<f64>,
    /// Warm-up of each step, in seconds (default: the scenario's warmup_secs).
    #[arg(long)]
    pub warmup: Option<f64>,
    /// After each rejection near the knee, later windows lengthen by this share of
    /// --step-secs, up to 3× (default 0.5; 0 keeps every window alike).
    #[arg(long, default_value_t = crate::sweep::WINDOW_GROWTH)]
    pub window_growth: f64,
    /// First offered rate of each search, msg/s (default: the scenario's open-loop rate, else 100).
    #[arg(long)]
    pub start: Option<f64>,
    /// Factor between steps while bracketing the knee (default 1.5).
    #[arg(long)]
    pub step: Option<f64>,
    /// Lowest offered rate, msg/s (default start / 20).
    #[arg(long)]
    pub min: Option<f64>,
    /// Highest offered rate, msg/s (default 1000 × start).
    #[arg(long)]
    pub max: Option<f64>,
    /// A search ends once the failing rate is within this share of the sustained one (0.05).
    #[arg(long)]
    pub precision: Option<f64>,
    #[command(flatten)]
    pub target: TargetOptions,
}

impl SweepOptions {
    pub fn search(&self) -> crate::capacity::SearchFlags {
        crate::capacity::SearchFlags {
            start: self.start,
            step: self.step,
            min: self.min,
            max: self.max,
            precision: self.precision,
        }
    }

    pub fn overrides(&self) -> crate::scenario::Overrides {
        crate::scenario::Overrides {
            cells: self.cells.clone().map(|c| vec![c]),
            peers: None,
            rounds: None,
            duration_secs: self.step_secs,
            warmup_secs: self.warmup,
            seed: self.target.seed,
            confirm: None,
        }
    }
}

/// `ackbench plan`.
#[derive(clap::Args, Clone, Debug)]
pub struct PlanOptions {
    /// A sweep.json written by `ackbench sweep`.
    pub sweep: PathBuf,
    /// The rate to plan for, msg/s.
    #[arg(long)]
    pub target_rate: f64,
    /// The p99 the rate must hold within, ms (at least the sweep's own target).
    #[arg(long)]
    pub slo_p99_ms: f64,
    /// Cores of the host to predict for (default: the sweep machine's).
    #[arg(long)]
    pub cores: Option<f64>,
    /// WAL syncs per second of the host's storage (default: the sweep machine's probe).
    #[arg(long)]
    pub fsync_per_sec: Option<f64>,
}

/// `ackbench remodel`.
#[derive(clap::Args, Clone, Debug)]
pub struct RemodelOptions {
    /// A finished sweep's output directory (its sweep.json and point-I-repeat-R/capacity.json).
    pub sweep_dir: PathBuf,
    /// Where to write the remodelled sweep.json and sweep.html (the sweep's own files are left
    /// as they are unless this is its directory).
    #[arg(long)]
    pub out: PathBuf,
}
