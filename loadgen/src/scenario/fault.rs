//! `[[faults]]`: fault steps injected at a time inside the measured window (seconds from the
//! window's start), as written (`FaultFile`) and once validated (`Fault`).
//!
//! Kinds from the client's and broker's side: `kill_broker` (SIGKILL the cell's broker, restart
//! it after `restart_after_ms`), `pause_broker` (SIGSTOP, SIGCONT after `duration_ms`); in a
//! cell of several brokers both strike the first one while the others keep serving; and
//! `pause_consumers` (consumers hold what they popped without acking for `duration_ms`). From
//! the database's side: `restart_postgres` (immediate-mode restart of the throwaway cluster),
//! `failover_postgres` (SIGKILL the primary, promote its standby: needs `[postgres]
//! replication`; with `lag_ms`, the primary's WAL sender is frozen that long first, a standby
//! lagging as over a slow link), `partition_postgres` (the broker's database connections cut for
//! `duration_ms`), `latency_postgres` (`delay_ms` added each way for `duration_ms`),
//! `kill_pg_backends` (`pg_terminate_backend` of the broker's sessions) and `pause_postgres`
//! (SIGSTOP of the server's processes, SIGCONT after `duration_ms`); `hold_xmin` (a
//! `REPEATABLE READ` transaction that takes a snapshot on its own connection to the cell's
//! database and stays open for `duration_ms`, holding back the xmin horizon so vacuum cannot
//! remove what dies meanwhile; then rolled back). Each fault must end inside
//! the window and faults may not overlap, so the recovery after each one is its own.
//!
//! A fault's time may be given as shares of the measured window instead (`at_share`, and for
//! the kinds with `duration_ms`, `duration_share`): such a fault moves with the window when
//! `--duration` changes it, so a long scenario (`endurance`) runs shortened with the same shape.
//!
//! `[postgres]` says how the throwaway cluster is set up for them: `replication = "none"`
//! (default), `"async"` or `"sync"` (a streaming standby).

use serde::{Deserialize, Serialize};

use super::error::ScenarioError;
use super::locate::Locator;

/// The kind of a fault step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    KillBroker,
    RestartPostgres,
    PauseBroker,
    PauseConsumers,
    FailoverPostgres,
    PartitionPostgres,
    LatencyPostgres,
    KillPgBackends,
    PausePostgres,
    HoldXmin,
}

impl FaultKind {
    /// Every kind, in the order of the enum.
    pub const ALL: &'static [FaultKind] = &[
        FaultKind::KillBroker,
        FaultKind::RestartPostgres,
        FaultKind::PauseBroker,
        FaultKind::PauseConsumers,
        FaultKind::FailoverPostgres,
        FaultKind::PartitionPostgres,
        FaultKind::LatencyPostgres,
        FaultKind::KillPgBackends,
        FaultKind::PausePostgres,
        FaultKind::HoldXmin,
    ];

    /// The kind's name in scenario files and results.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillBroker => "kill_broker",
            FaultKind::RestartPostgres => "restart_postgres",
            FaultKind::PauseBroker => "pause_broker",
            FaultKind::PauseConsumers => "pause_consumers",
            FaultKind::FailoverPostgres => "failover_postgres",
            FaultKind::PartitionPostgres => "partition_postgres",
            FaultKind::LatencyPostgres => "latency_postgres",
            FaultKind::KillPgBackends => "kill_pg_backends",
            FaultKind::PausePostgres => "pause_postgres",
            FaultKind::HoldXmin => "hold_xmin",
        }
    }

    /// Whether the fault acts on a broker process this run started (or on its database
    /// connections: through the relay in front of its database, by its sessions'
    /// `application_name`).
    pub fn needs_broker_process(self) -> bool {
        matches!(
            self,
            FaultKind::KillBroker
                | FaultKind::PauseBroker
                | FaultKind::PartitionPostgres
                | FaultKind::LatencyPostgres
                | FaultKind::KillPgBackends
        )
    }

    /// Whether the fault acts on the throwaway cluster this run started.
    pub fn needs_embedded_postgres(self) -> bool {
        matches!(
            self,
            FaultKind::RestartPostgres | FaultKind::FailoverPostgres | FaultKind::PausePostgres
        )
    }

    /// Whether the broker reaches its database through the load generator's relay for it.
    pub fn needs_relay(self) -> bool {
        matches!(
            self,
            FaultKind::PartitionPostgres | FaultKind::LatencyPostgres
        )
    }

    /// The key giving how long the fault lasts, if the kind has one.
    fn length_key(self) -> Option<&'static str> {
        match self {
            FaultKind::KillBroker => Some("restart_after_ms"),
            FaultKind::FailoverPostgres => Some("lag_ms"),
            FaultKind::PauseBroker
            | FaultKind::PauseConsumers
            | FaultKind::PartitionPostgres
            | FaultKind::LatencyPostgres
            | FaultKind::PausePostgres
            | FaultKind::HoldXmin => Some("duration_ms"),
            FaultKind::RestartPostgres | FaultKind::KillPgBackends => None,
        }
    }
}

/// `[postgres] replication`: whether the throwaway cluster runs a streaming standby, and how
/// the primary waits for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Replication {
    /// One server, no standby (the default).
    #[default]
    None,
    /// A standby the primary does not wait for: a failover may lose acknowledged commits.
    Async,
    /// A synchronous standby (`synchronous_standby_names`): a commit is acknowledged only once
    /// the standby has it.
    Sync,
}

impl Replication {
    pub fn name(self) -> &'static str {
        match self {
            Replication::None => "none",
            Replication::Async => "async",
            Replication::Sync => "sync",
        }
    }
}

/// `[postgres]`: how the throwaway cluster is set up (refused with `--database-url`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PostgresSetup {
    pub replication: Replication,
}

/// What the run's database side needs for its faults: a standby, and a relay in front of the
/// database for the broker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatabaseSide {
    pub replication: Replication,
    pub relay: bool,
}

impl DatabaseSide {
    pub fn of(setup: &PostgresSetup, faults: &[Fault]) -> DatabaseSide {
        DatabaseSide {
            replication: setup.replication,
            relay: faults.iter().any(|f| f.kind.needs_relay()),
        }
    }
}

/// One `[[faults]]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FaultFile {
    pub kind: FaultKind,
    pub at_secs: Option<f64>,
    /// When it fires, as a share of the measured window (instead of `at_secs`).
    pub at_share: Option<f64>,
    /// How long it lasts, as a share of the measured window (instead of `duration_ms`).
    pub duration_share: Option<f64>,
    pub restart_after_ms: Option<u64>,
    pub duration_ms: Option<u64>,
    pub delay_ms: Option<u64>,
    pub lag_ms: Option<u64>,
}

/// A validated fault step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fault {
    pub kind: FaultKind,
    /// Seconds from the start of the measured window.
    pub at_secs: f64,
    /// How long the fault lasts: the broker's downtime, the pause, the cut or the delay, a
    /// failover's lag before the kill (0 for a PostgreSQL restart, a failover without lag or
    /// backends terminated, which last as long as they take).
    pub length_ms: u64,
    /// `latency_postgres`: the delay added to each direction of the broker's database traffic
    /// (0 for the other kinds).
    pub delay_ms: u64,
    /// The entry's line in the file.
    pub line: usize,
    /// `at_share` and `duration_share` (0 without one), when the fault is placed by them: it
    /// moves with the window.
    pub shares: Option<(f64, f64)>,
}

impl Fault {
    /// The fault in a window of `window_secs`: moved with it when placed by shares.
    pub fn in_window(mut self, window_secs: f64) -> Fault {
        if let Some((at, length)) = self.shares {
            self.at_secs = at * window_secs;
            if length > 0.0 {
                self.length_ms = (length * window_secs * 1000.0).round().max(1.0) as u64;
            }
        }
        self
    }

    /// When the fault is planned to end, in seconds from the window's start.
    pub fn planned_end_secs(&self) -> f64 {
        self.at_secs + self.length_ms as f64 / 1000.0
    }
}

/// Longest downtime or pause: ten minutes.
const MAX_LENGTH_MS: u64 = 600_000;

/// Longest `hold_xmin`: a day (an endurance run holds the horizon for half an hour or more).
const MAX_HOLD_MS: u64 = 86_400_000;

/// Longest added latency: ten seconds each way.
const MAX_DELAY_MS: u64 = 10_000;

/// Validates every `faults[i]` against the window length and the `[postgres]` setup, and builds
/// the steps in time order.
pub(crate) fn faults_from_file(
    raw: &[FaultFile],
    setup: &PostgresSetup,
    window_secs: f64,
    loc: &Locator,
) -> Result<Vec<Fault>, ScenarioError> {
    let mut faults = raw
        .iter()
        .enumerate()
        .map(|(i, f)| fault_from_file(f, &format!("faults[{i}]"), setup, loc))
        .map(|f| f.map(|f| f.in_window(window_secs)))
        .collect::<Result<Vec<Fault>, _>>()?;
    check_in_window(&faults, window_secs, loc)?;
    faults.sort_by(|a, b| a.at_secs.total_cmp(&b.at_secs));
    refuse_overlaps(&faults, loc)?;
    Ok(faults)
}

fn fault_from_file(
    raw: &FaultFile,
    path: &str,
    setup: &PostgresSetup,
    loc: &Locator,
) -> Result<Fault, ScenarioError> {
    refuse_foreign_length(raw.kind, path, loc)?;
    if raw.kind == FaultKind::FailoverPostgres && setup.replication == Replication::None {
        let key = format!("{path}.kind");
        let message = format!(
            "{key} = \"failover_postgres\" needs a standby to promote: set [postgres] replication = \"sync\" or \"async\""
        );
        return Err(loc.invalid(&key, message));
    }
    let (at_secs, shares) = placement(raw, path, loc)?;
    let length_ms = match (raw.kind.length_key(), shares) {
        (Some(_), Some((_, length))) if length > 0.0 => 0,
        (Some(key), _) => required_length(raw, path, key, loc)?,
        (None, _) => 0,
    };
    Ok(Fault {
        kind: raw.kind,
        at_secs,
        length_ms,
        delay_ms: delay(raw, path, loc)?,
        line: loc.line_of(path),
        shares,
    })
}

/// When the fault fires: `at_secs`, or `at_share` of the window (with `duration_share`, how
/// long it lasts), one of the two; the shares are `None` with `at_secs`.
fn placement(
    raw: &FaultFile,
    path: &str,
    loc: &Locator,
) -> Result<(f64, Option<(f64, f64)>), ScenarioError> {
    let at_key = format!("{path}.at_secs");
    let share_key = format!("{path}.at_share");
    let length_key = format!("{path}.duration_share");
    match (raw.at_secs, raw.at_share) {
        (Some(_), Some(_)) => {
            let message = format!("{path}: give at_secs or at_share, not both");
            Err(loc.invalid(&share_key, message))
        }
        (None, None) => {
            let message = format!("{at_key} (or at_share) is required");
            Err(loc.invalid_at(loc.line_of(path), &at_key, message))
        }
        (Some(at), None) if !at.is_finite() || at < 0.0 => {
            let message = format!("{at_key} must be a number of seconds >= 0, got {at}");
            Err(loc.invalid(&at_key, message))
        }
        (Some(at), None) if raw.duration_share.is_some() => {
            let message = format!("{length_key} needs at_share (got at_secs = {at})");
            Err(loc.invalid(&length_key, message))
        }
        (Some(at), None) => Ok((at, None)),
        (None, Some(share)) => {
            check_share(&share_key, share, loc)?;
            let length = duration_share(raw, &length_key, loc)?;
            Ok((0.0, Some((share, length))))
        }
    }
}

/// `duration_share` (0 without one): for a kind with `duration_ms`, instead of it.
fn duration_share(raw: &FaultFile, key: &str, loc: &Locator) -> Result<f64, ScenarioError> {
    let Some(share) = raw.duration_share else {
        return Ok(0.0);
    };
    if raw.kind.length_key() != Some("duration_ms") {
        let message = format!("{key} does not apply to kind = \"{}\"", raw.kind.name());
        return Err(loc.invalid(key, message));
    }
    if raw.duration_ms.is_some() {
        let message = format!("{key}: give duration_ms or duration_share, not both");
        return Err(loc.invalid(key, message));
    }
    check_share(key, share, loc)?;
    match share > 0.0 {
        true => Ok(share),
        false => Err(loc.invalid(key, format!("{key} must be above 0, got {share}"))),
    }
}

/// A share of the window: from 0 up to (not including) 1.
fn check_share(key: &str, share: f64, loc: &Locator) -> Result<(), ScenarioError> {
    match share.is_finite() && (0.0..1.0).contains(&share) {
        true => Ok(()),
        false => Err(loc.invalid(
            key,
            format!("{key} must be a share of the window from 0 up to 1, got {share}"),
        )),
    }
}

/// `delay_ms`: required for `latency_postgres` (1 to `MAX_DELAY_MS`), refused elsewhere.
fn delay(raw: &FaultFile, path: &str, loc: &Locator) -> Result<u64, ScenarioError> {
    let key = format!("{path}.delay_ms");
    let wanted = raw.kind == FaultKind::LatencyPostgres;
    match (raw.delay_ms, wanted) {
        (None, false) => Ok(0),
        (Some(_), false) => {
            let message = format!("{key} does not apply to kind = \"{}\"", raw.kind.name());
            Err(loc.invalid(&key, message))
        }
        (None, true) => {
            let message = format!("{key} is required for kind = \"latency_postgres\"");
            Err(loc.invalid_at(loc.line_of(path), &key, message))
        }
        (Some(ms), true) if ms == 0 || ms > MAX_DELAY_MS => {
            let message = format!("{key} must be between 1 and {MAX_DELAY_MS}, got {ms}");
            Err(loc.invalid(&key, message))
        }
        (Some(ms), true) => Ok(ms),
    }
}

/// `restart_after_ms` belongs to `kill_broker`, `duration_ms` to the pauses and link faults,
/// `lag_ms` to `failover_postgres`.
fn refuse_foreign_length(kind: FaultKind, path: &str, loc: &Locator) -> Result<(), ScenarioError> {
    for key in ["restart_after_ms", "duration_ms", "lag_ms"] {
        let full = format!("{path}.{key}");
        if kind.length_key() != Some(key) && loc.has(&full) {
            let message = format!("{full} does not apply to kind = \"{}\"", kind.name());
            return Err(loc.invalid(&full, message));
        }
    }
    Ok(())
}

fn required_length(
    raw: &FaultFile,
    path: &str,
    key: &str,
    loc: &Locator,
) -> Result<u64, ScenarioError> {
    let full = format!("{path}.{key}");
    let value = match key {
        "restart_after_ms" => raw.restart_after_ms,
        "lag_ms" => Some(raw.lag_ms.unwrap_or(0)),
        _ => raw.duration_ms,
    };
    let Some(ms) = value else {
        let message = format!("{full} is required for kind = \"{}\"", raw.kind.name());
        return Err(loc.invalid_at(loc.line_of(path), &full, message));
    };
    let least = u64::from(key != "lag_ms");
    let most = match raw.kind {
        FaultKind::HoldXmin => MAX_HOLD_MS,
        _ => MAX_LENGTH_MS,
    };
    if ms < least || ms > most {
        let message = format!("{full} must be between {least} and {most}, got {ms}");
        return Err(loc.invalid(&full, message));
    }
    Ok(ms)
}

/// Every fault starts and ends inside the measured window.
fn check_in_window(faults: &[Fault], window_secs: f64, loc: &Locator) -> Result<(), ScenarioError> {
    for (i, f) in faults.iter().enumerate() {
        if f.planned_end_secs() >= window_secs {
            let key = format!("faults[{i}].at_secs");
            let message = format!(
                "{key}: the {} fault at {} s must end inside the measured window of {window_secs} s (it ends at {} s)",
                f.kind.name(),
                f.at_secs,
                f.planned_end_secs()
            );
            return Err(loc.invalid(&key, message));
        }
    }
    Ok(())
}

/// A fault starts after the previous one ended, so each recovery is measured on its own.
fn refuse_overlaps(sorted: &[Fault], loc: &Locator) -> Result<(), ScenarioError> {
    for pair in sorted.windows(2) {
        if pair[1].at_secs < pair[0].planned_end_secs() + 1.0 {
            let message = format!(
                "faults: the {} fault at {} s starts less than a second after the {} fault at {} s ends ({} s)",
                pair[1].kind.name(),
                pair[1].at_secs,
                pair[0].kind.name(),
                pair[0].at_secs,
                pair[0].planned_end_secs()
            );
            return Err(loc.invalid_at(pair[1].line, "faults", message));
        }
    }
    Ok(())
}

/// Re-checks the faults against a window changed by `--duration` (those placed by shares moved
/// with it).
pub(crate) fn check_window_override(faults: &[Fault], window_secs: f64) -> Result<(), String> {
    let mut moved: Vec<Fault> = faults.iter().map(|f| f.in_window(window_secs)).collect();
    moved.sort_by(|a, b| a.at_secs.total_cmp(&b.at_secs));
    if let Some(pair) = moved
        .windows(2)
        .find(|p| p[1].at_secs < p[0].planned_end_secs())
    {
        return Err(format!(
            "in a window of {window_secs} s the {} fault (line {}) would start before the {} fault (line {}) ends",
            pair[1].kind.name(),
            pair[1].line,
            pair[0].kind.name(),
            pair[0].line
        ));
    }
    match moved.iter().find(|f| f.planned_end_secs() >= window_secs) {
        Some(f) => Err(format!(
            "the {} fault (line {}) ends at {} s, outside a window of {window_secs} s",
            f.kind.name(),
            f.line,
            f.planned_end_secs()
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kind's place in `FaultKind::ALL`; a kind left out of this match fails to compile, so a
    /// new kind is added here and to `ALL`.
    fn place(kind: FaultKind) -> usize {
        match kind {
            FaultKind::KillBroker => 0,
            FaultKind::RestartPostgres => 1,
            FaultKind::PauseBroker => 2,
            FaultKind::PauseConsumers => 3,
            FaultKind::FailoverPostgres => 4,
            FaultKind::PartitionPostgres => 5,
            FaultKind::LatencyPostgres => 6,
            FaultKind::KillPgBackends => 7,
            FaultKind::PausePostgres => 8,
            FaultKind::HoldXmin => 9,
        }
    }

    #[test]
    fn every_kind_is_listed_once_in_all() {
        assert_eq!(FaultKind::ALL.len(), 10);
        for (i, kind) in FaultKind::ALL.iter().enumerate() {
            assert_eq!(place(*kind), i, "{}", kind.name());
        }
    }
}
