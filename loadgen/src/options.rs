//! The command-line options of `ackbench run` and `ackbench capacity`, parsed by clap into these
//! structs; `cli` turns them once into the plain settings the rest takes (scenario overrides,
//! the target's settings, the knee search's flags): no clap type goes further.

use std::path::PathBuf;

use crate::lifecycle::env::TargetSettings;
use crate::scenario::Overrides;
use crate::shard::Shard;

/// What a run or a capacity search targets, shared by both.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TargetOptions {
    /// Use this PostgreSQL instead of a throwaway cluster (pg_stat_statements must be loaded).
    /// With --broker-url it names that broker's own database: measured, never created or dropped.
    #[arg(long)]
    pub database_url: Option<String>,
    /// Use this running broker instead of starting the workspace's broker per cell.
    #[arg(long)]
    pub broker_url: Option<String>,
    /// What kind of broker --broker-url is: ackbench, queen-log or queen-rows (default:
    /// detected from its /health and the procedures of its database).
    #[arg(long, value_name = "KIND")]
    pub target_kind: Option<String>,
    /// The broker binary to start per cell (default: beside this executable).
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// Seed of every random choice (default: the scenario's, else chosen and recorded).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Keep each cell's database after the run (for inspection).
    #[arg(long)]
    pub keep_databases: bool,
}

impl TargetOptions {
    /// The target's settings, as the run's environment takes them.
    pub fn settings(&self) -> TargetSettings {
        TargetSettings {
            database_url: self.database_url.clone(),
            broker_url: self.broker_url.clone(),
            target_kind: self.target_kind.clone(),
            broker_bin: self.broker_bin.clone(),
            keep_databases: self.keep_databases,
            externals: Vec::new(),
        }
    }
}

/// `ackbench run`.
#[derive(clap::Args, Clone, Debug)]
pub struct RunOptions {
    /// The scenario file (see scenarios/).
    pub scenario: PathBuf,
    /// Output directory (default reports/runs/<timestamp>-<scenario>/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Cells to run, comma-separated: registry+fusion, registry, fusion, none (and the peers
    /// pgmq, pgq, procrastinate, pgboss).
    #[arg(long)]
    pub cells: Option<String>,
    /// Peer queues to run beside the broker cells, comma-separated: pgmq, pgq, procrastinate,
    /// pgboss; `none` for none (default: the scenario's `run.peers`).
    #[arg(long)]
    pub peers: Option<String>,
    /// Interleaved rounds.
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Measured window per cell and round: seconds, or a number with s, m or h (30m, 2h).
    #[arg(long, value_parser = crate::duration_arg::parse_secs)]
    pub duration: Option<f64>,
    /// Warm-up before each window, in seconds.
    #[arg(long)]
    pub warmup: Option<f64>,
    #[command(flatten)]
    pub target: TargetOptions,
    /// A/A mode: run this one cell twice per round (instead of the scenario's cells) and print
    /// the ratio between the twins for every gated figure: the gates' own noise.
    #[arg(long, value_name = "CELL")]
    pub aa: Option<String>,
    /// Run one slice of the scenario: shard I of N, from 0 (its share of the producers, of
    /// each group's consumers, of the prefilled partitions and of the offered rate), against
    /// --broker-url; `ackbench merge` puts the shards' results back together.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// Names the run's queues and transactionIds on the external broker instead of the start
    /// time: every shard of a run must be given the same (1 to 24 lower-case letters or digits).
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Write every delivery the workers saw (consumer, partition, group, lease, message,
    /// producer and its order, pop and ack send and answer times, the ack's verdict) to FILE as
    /// JSON lines, one per delivery, for independent checkers (see docs/spec/loadgen.md). The
    /// history is then kept whole until each cell round ends (112 bytes a delivery), instead of
    /// being judged and dropped as the run goes.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Serve live metrics while the run lasts: Prometheus text at http://ADDR/metrics, per
    /// cell and round (rates, latency, backlog, errors, audit so far, PostgreSQL commits, fault
    /// markers); ADDR is IP:PORT, e.g. 127.0.0.1:9464 (see deploy/grafana/ackbench.json).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Push the same live series to a Prometheus remote-write endpoint (protocol 1.0) every
    /// --metrics-push-interval seconds and once when the run ends, e.g.
    /// http://prometheus:9090/api/v1/write (plain HTTP); a failed push is logged and counted,
    /// never fatal.
    #[arg(long, value_name = "URL")]
    pub metrics_push: Option<String>,
    /// Seconds between two pushes of --metrics-push.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 5.0,
        requires = "metrics_push"
    )]
    pub metrics_push_interval: f64,
    /// When a gate's interval straddles its bound, run the cells it judges up to N more rounds
    /// (re-judging after each) before deciding (default: the scenario's `[run] confirm`, or 0).
    #[arg(long, value_name = "N")]
    pub confirm: Option<u32>,
    /// An inconclusive gate fails the run (exit 1) instead of being reported and passed.
    #[arg(long)]
    pub strict: bool,
    /// Add a running broker (a real Queen, another build of ours) as a cell of that name,
    /// interleaved with the others in every round, on run-tagged queues, its PostgreSQL figures
    /// read from its own database (repeatable).
    #[arg(long, value_name = "NAME=BROKER_URL,DATABASE_URL")]
    pub external: Vec<String>,
}

impl RunOptions {
    /// The flags that override the scenario file.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            cells: self.cells.clone().map(|c| vec![c]),
            peers: self.peers.clone().map(|p| vec![p]),
            rounds: self.rounds,
            duration_secs: self.duration,
            warmup_secs: self.warmup,
            seed: self.target.seed,
            confirm: self.confirm,
        }
    }
}

/// `ackbench capacity`.
#[derive(clap::Args, Clone, Debug)]
pub struct CapacityOptions {
    /// The scenario file (see scenarios/); its producers run open loop at each step's rate.
    pub scenario: PathBuf,
    /// Output directory (default reports/runs/<timestamp>-<scenario>-capacity/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Target for ack and end-to-end p99, in ms (default: the scenario's `[capacity]
    /// slo_p99_ms`, else 50).
    #[arg(long)]
    pub slo_p99_ms: Option<f64>,
    /// First offered rate, msg/s (default: the scenario's open-loop rate, else 100).
    #[arg(long)]
    pub start: Option<f64>,
    /// Factor between one step's offered rate and the next while bracketing the knee, up from a
    /// sustained rate or down from a failing one (default 1.5).
    #[arg(long)]
    pub step: Option<f64>,
    /// Lowest offered rate the search tries, msg/s (default start / 20).
    #[arg(long)]
    pub min: Option<f64>,
    /// Highest offered rate, msg/s (default 1000 × start).
    #[arg(long)]
    pub max: Option<f64>,
    /// The search ends once the failing rate is within this share of the sustained one
    /// (default 0.05, 5%).
    #[arg(long)]
    pub precision: Option<f64>,
    /// Cells to run, comma-separated: registry+fusion, registry, fusion, none (and the peers
    /// pgmq, pgq).
    #[arg(long)]
    pub cells: Option<String>,
    /// Peer queues to step beside the broker cells, comma-separated: pgmq, pgq, procrastinate; `none` for none
    /// (default: the scenario's `run.peers`).
    #[arg(long)]
    pub peers: Option<String>,
    /// Measured window of each step, in seconds (default: the scenario's duration_secs).
    #[arg(long)]
    pub step_secs: Option<f64>,
    /// Warm-up of each step, in seconds (default: the scenario's warmup_secs).
    #[arg(long)]
    pub warmup: Option<f64>,
    #[command(flatten)]
    pub target: TargetOptions,
}

impl CapacityOptions {
    /// The knee search's flags.
    pub fn search(&self) -> crate::capacity::SearchFlags {
        crate::capacity::SearchFlags {
            start: self.start,
            step: self.step,
            min: self.min,
            max: self.max,
            precision: self.precision,
        }
    }

    /// The flags that override the scenario file (`--step-secs` is the measured window).
    pub fn overrides(&self) -> Overrides {
        Overrides {
            cells: self.cells.clone().map(|c| vec![c]),
            peers: self.peers.clone().map(|p| vec![p]),
            rounds: None,
            duration_secs: self.step_secs,
            warmup_secs: self.warmup,
            seed: self.target.seed,
            confirm: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Run {
        #[command(flatten)]
        options: RunOptions,
    }

    #[derive(Parser)]
    struct Capacity {
        #[command(flatten)]
        options: CapacityOptions,
    }

    #[test]
    fn run_flags_become_scenario_overrides() {
        let o = Run::parse_from([
            "run",
            "s.toml",
            "--cells",
            "none,registry",
            "--rounds",
            "2",
            "--duration",
            "3",
            "--warmup",
            "1",
            "--seed",
            "9",
            "--keep-databases",
            "--shard",
            "1/3",
        ])
        .options;
        assert_eq!(o.shard, Some(Shard { index: 1, count: 3 }));
        let ov = o.overrides();
        assert_eq!(ov.cells, Some(vec!["none,registry".to_string()]));
        assert_eq!(
            (ov.rounds, ov.duration_secs, ov.warmup_secs),
            (Some(2), Some(3.0), Some(1.0))
        );
        assert_eq!(ov.seed, Some(9));
        assert!(o.target.keep_databases && o.target.broker_url.is_none());
    }

    #[test]
    fn a_soak_duration_reads_in_hours_or_minutes() {
        let ov = |d: &str| {
            Run::parse_from(["run", "s.toml", "--duration", d])
                .options
                .overrides()
        };
        assert_eq!(ov("2h").duration_secs, Some(7200.0));
        assert_eq!(ov("30m").duration_secs, Some(1800.0));
        assert!(Run::try_parse_from(["run", "s.toml", "--duration", "2d"]).is_err());
    }

    #[test]
    fn capacity_step_secs_is_the_measured_window_and_rounds_stay_the_scenarios() {
        let o = Capacity::parse_from(["capacity", "s.toml", "--step-secs", "4", "--max", "900"])
            .options;
        let ov = o.overrides();
        assert_eq!((ov.duration_secs, ov.rounds), (Some(4.0), None));
        assert_eq!((o.max, o.slo_p99_ms), (Some(900.0), None));
    }
}
