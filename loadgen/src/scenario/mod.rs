//! Declarative scenarios (`scenarios/*.toml`): the schema, its parser and its validation.
//!
//! A scenario is plain data: the queue and its options, an optional prefill, the producers, the
//! consumers and what they answer, the run's timing, cells and rounds, the broker's extra
//! settings, the gates, and the fault steps. [`Scenario::parse`] reads TOML, refuses unknown keys and bad values
//! with the key's dotted name and its line, and fills documented defaults;
//! [`Scenario::apply_overrides`] applies the command-line flags that override the file.
//!
//! Files: `schema` (sections and defaults), `figure` (gate figure names), `gate` (gates),
//! `fault` (fault steps),
//! `validate` (ranges and cross-key rules), `locate` (lines and key names), `key_path` (dotted key names), `sweep` (`[sweep]` and its
//! grid), `error`.

mod error;
mod fault;
mod figure;
mod find;
mod gate;
mod key_path;
mod locate;
mod schema;
pub mod sweep;
mod validate;

use serde::Serialize;
use std::path::Path;

pub use error::ScenarioError;
pub use fault::{DatabaseSide, Fault, FaultKind, PostgresSetup, Replication};
pub use figure::{
    Direction, Figure, FigureKind, GateDefaults, LatencyOp, Percentile, ScalarFigure,
};
pub use find::find_scenario;
pub use gate::{Gate, GateCheck};
pub use schema::{
    AckMode, Broker, CapacitySetup, Cell, Consumers, LoopMode, Outcomes, Partitioning, PopRoute,
    Prefill, Producers, Queue, QueueOptions, Routing, Run, Topology,
};

/// A validated scenario. Outcome shares are fractions summing to 1; gates are typed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    /// Short name, used in reports and output directories (default: the file's stem).
    pub name: String,
    /// Free text shown in reports (default empty).
    pub description: String,
    /// `[queue]`.
    pub queue: Queue,
    /// `[prefill]`.
    pub prefill: Prefill,
    /// `[producers]`.
    pub producers: Producers,
    /// `[consumers]`.
    pub consumers: Consumers,
    /// `[run]`.
    pub run: Run,
    /// `[broker]`.
    pub broker: Broker,
    /// `[postgres]`.
    pub postgres: PostgresSetup,
    /// `[[gates]]`, in file order.
    pub gates: Vec<Gate>,
    /// `[[faults]]`, in time order.
    pub faults: Vec<Fault>,
    /// `[capacity]`.
    pub capacity: CapacitySetup,
    /// `[sweep]`: the settings `ackbench sweep` varies (empty for other commands).
    pub sweep: sweep::Sweep,
    /// Where the scenario was read from (a path or a name given to `parse`).
    #[serde(skip)]
    pub source_name: String,
    /// The scenario's text as read, for the results metadata (text and hash).
    #[serde(skip)]
    pub source_text: String,
}

/// Command-line flags that override the file (`--cells`, `--rounds`, `--duration`, `--warmup`,
/// `--seed`). `None` leaves the file's value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// Cell names; each element may itself be a comma-separated list.
    pub cells: Option<Vec<String>>,
    /// Peer names (`pgmq,pgq`, or `none`): they replace the peer cells of the list.
    pub peers: Option<Vec<String>>,
    pub rounds: Option<u32>,
    pub duration_secs: Option<f64>,
    pub warmup_secs: Option<f64>,
    pub seed: Option<u64>,
    /// `--confirm N`: the most extra rounds for an inconclusive gate (`[run] confirm`).
    pub confirm: Option<u32>,
}

impl Scenario {
    /// What the run's database side needs for this scenario's faults.
    pub fn database_side(&self) -> DatabaseSide {
        DatabaseSide::of(&self.postgres, &self.faults)
    }

    /// Parses and validates scenario text; `source_name` is what errors are reported against.
    pub fn parse(text: &str, source_name: &str) -> Result<Scenario, ScenarioError> {
        let loc = locate::Locator::new(text, source_name)?;
        let file: schema::ScenarioFile =
            toml::from_str(text).map_err(|e| locate::toml_error(&e, &loc))?;
        validate::validate(file, &loc, text)
    }

    /// Reads, parses and validates a scenario file.
    pub fn load(path: impl AsRef<Path>) -> Result<Scenario, ScenarioError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| ScenarioError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Scenario::parse(&text, &path.display().to_string())
    }

    /// Applies command-line overrides. All are checked first; on error nothing changes and the
    /// error names the flag (`--cells: unknown cell `foo` ...`).
    pub fn apply_overrides(&mut self, overrides: &Overrides) -> Result<(), ScenarioError> {
        let mut cells = overrides.cells.as_deref().map(parse_cells).transpose()?;
        if let Some(peers) = overrides.peers.as_deref() {
            let base = cells.as_deref().unwrap_or(&self.run.cells);
            cells = Some(self.with_peers(base, peers)?);
        }
        if let Some(rounds) = overrides.rounds {
            check_override_rounds(rounds)?;
        }
        if let Some(secs) = overrides.duration_secs {
            check_override_secs("--duration", secs, false)?;
            fault::check_window_override(&self.faults, secs).map_err(flag("--duration"))?;
        }
        if let Some(secs) = overrides.warmup_secs {
            check_override_secs("--warmup", secs, true)?;
        }
        self.assign_overrides(overrides, cells);
        Ok(())
    }

    /// `base` without its peer cells, then `peers` (`none` for no peer), each able to run this
    /// scenario.
    fn with_peers(&self, base: &[Cell], peers: &[String]) -> Result<Vec<Cell>, ScenarioError> {
        let mut cells: Vec<Cell> = base
            .iter()
            .copied()
            .filter(|c| c.peer().is_none())
            .collect();
        let names = peers.iter().flat_map(|p| p.split(',')).map(str::trim);
        let asks = validate::asks_of(&self.consumers);
        for name in names.filter(|n| !n.is_empty() && *n != "none") {
            let cell: Cell = name.parse().map_err(flag("--peers"))?;
            let Some(peer) = cell.peer() else {
                return Err(flag("--peers")(format!(
                    "`{name}` is not a peer ({})",
                    crate::driver::peer::listed()
                )));
            };
            if let Some(reason) = peer.refusal(&asks) {
                return Err(flag("--peers")(format!(
                    "`{name}` cannot run this scenario: {reason}"
                )));
            }
            cells.push(cell);
        }
        validate::check_cells(&cells).map_err(|(_, message)| flag("--peers")(message))?;
        Ok(cells)
    }

    fn assign_overrides(&mut self, o: &Overrides, cells: Option<Vec<Cell>>) {
        let run = &mut self.run;
        run.cells = cells.unwrap_or_else(|| run.cells.clone());
        run.rounds = o.rounds.unwrap_or(run.rounds);
        run.duration_secs = o.duration_secs.unwrap_or(run.duration_secs);
        let window = run.duration_secs;
        self.faults = self.faults.iter().map(|f| f.in_window(window)).collect();
        run.warmup_secs = o.warmup_secs.unwrap_or(run.warmup_secs);
        run.seed = o.seed.or(run.seed);
        run.confirm = o.confirm.unwrap_or(run.confirm);
    }

    /// The lease each pop takes, in seconds (`consumers.lease_seconds`, else the queue's).
    pub fn lease_seconds(&self) -> u32 {
        validate::effective_lease(&self.consumers, &self.queue)
    }

    /// Partition names, `p-0` .. `p-{n-1}`.
    pub fn partition_names(&self) -> Vec<String> {
        (0..self.queue.partitions)
            .map(|i| format!("p-{i}"))
            .collect()
    }
}

fn flag(name: &'static str) -> impl Fn(String) -> ScenarioError {
    move |message| ScenarioError::Override {
        flag: name.to_string(),
        message,
    }
}

/// Parses `--cells`: names, each element possibly comma-separated.
fn parse_cells(items: &[String]) -> Result<Vec<Cell>, ScenarioError> {
    let cells = items
        .iter()
        .flat_map(|item| item.split(','))
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::parse::<Cell>)
        .collect::<Result<Vec<Cell>, String>>()
        .map_err(flag("--cells"))?;
    validate::check_cells(&cells).map_err(|(_, message)| flag("--cells")(message))?;
    Ok(cells)
}

fn check_override_rounds(rounds: u32) -> Result<(), ScenarioError> {
    if !(1..=1000).contains(&rounds) {
        return Err(flag("--rounds")(format!(
            "must be between 1 and 1000, got {rounds}"
        )));
    }
    Ok(())
}

fn check_override_secs(name: &'static str, secs: f64, zero_ok: bool) -> Result<(), ScenarioError> {
    let low_ok = if zero_ok { secs >= 0.0 } else { secs > 0.0 };
    if !(secs.is_finite() && low_ok && secs <= 86_400.0) {
        let what = if zero_ok { "at least 0" } else { "positive" };
        return Err(flag(name)(format!(
            "must be {what} and at most 86400 seconds, got {secs}"
        )));
    }
    Ok(())
}
