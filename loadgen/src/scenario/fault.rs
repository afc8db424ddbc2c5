//! `[[faults]]`: fault steps injected at a time inside the measured window (seconds from the
//! window's start), as written (`FaultFile`) and once validated (`Fault`).
//!
//! Kinds: `kill_broker` (SIGKILL the cell's broker, restart it after `restart_after_ms`),
//! `restart_postgres` (immediate-mode restart of the throwaway cluster), `pause_broker`
//! (SIGSTOP, SIGCONT after `duration_ms`) and `pause_consumers` (consumers hold what they
//! popped without acking for `duration_ms`). Each fault must end inside the window and faults
//! may not overlap, so the recovery after each one is its own.

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
}

impl FaultKind {
    /// The kind's name in scenario files and results.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillBroker => "kill_broker",
            FaultKind::RestartPostgres => "restart_postgres",
            FaultKind::PauseBroker => "pause_broker",
            FaultKind::PauseConsumers => "pause_consumers",
        }
    }

    /// Whether the fault acts on a broker process this run started.
    pub fn needs_broker_process(self) -> bool {
        matches!(self, FaultKind::KillBroker | FaultKind::PauseBroker)
    }

    /// Whether the fault acts on the throwaway cluster this run started.
    pub fn needs_embedded_postgres(self) -> bool {
        self == FaultKind::RestartPostgres
    }

    /// The key giving how long the fault lasts, if the kind has one.
    fn length_key(self) -> Option<&'static str> {
        match self {
            FaultKind::KillBroker => Some("restart_after_ms"),
            FaultKind::PauseBroker | FaultKind::PauseConsumers => Some("duration_ms"),
            FaultKind::RestartPostgres => None,
        }
    }
}

/// One `[[faults]]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FaultFile {
    pub kind: FaultKind,
    pub at_secs: f64,
    pub restart_after_ms: Option<u64>,
    pub duration_ms: Option<u64>,
}

/// A validated fault step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fault {
    pub kind: FaultKind,
    /// Seconds from the start of the measured window.
    pub at_secs: f64,
    /// How long the fault lasts: the broker's downtime, or the pause (0 for a PostgreSQL
    /// restart, which lasts as long as the restart takes).
    pub length_ms: u64,
    /// The entry's line in the file.
    pub line: usize,
}

impl Fault {
    /// When the fault is planned to end, in seconds from the window's start.
    pub fn planned_end_secs(&self) -> f64 {
        self.at_secs + self.length_ms as f64 / 1000.0
    }
}

/// Longest downtime or pause: ten minutes.
const MAX_LENGTH_MS: u64 = 600_000;

/// Validates every `faults[i]` against the window length and builds the steps in time order.
pub(crate) fn faults_from_file(
    raw: &[FaultFile],
    window_secs: f64,
    loc: &Locator,
) -> Result<Vec<Fault>, ScenarioError> {
    let mut faults = raw
        .iter()
        .enumerate()
        .map(|(i, f)| fault_from_file(f, &format!("faults[{i}]"), loc))
        .collect::<Result<Vec<Fault>, _>>()?;
    check_in_window(&faults, window_secs, loc)?;
    faults.sort_by(|a, b| a.at_secs.total_cmp(&b.at_secs));
    refuse_overlaps(&faults, loc)?;
    Ok(faults)
}

fn fault_from_file(raw: &FaultFile, path: &str, loc: &Locator) -> Result<Fault, ScenarioError> {
    refuse_foreign_length(raw.kind, path, loc)?;
    let at_key = format!("{path}.at_secs");
    if !raw.at_secs.is_finite() || raw.at_secs < 0.0 {
        let message = format!(
            "{at_key} must be a number of seconds >= 0, got {}",
            raw.at_secs
        );
        return Err(loc.invalid(&at_key, message));
    }
    let length_ms = match raw.kind.length_key() {
        Some(key) => required_length(raw, path, key, loc)?,
        None => 0,
    };
    Ok(Fault {
        kind: raw.kind,
        at_secs: raw.at_secs,
        length_ms,
        line: loc.line_of(path),
    })
}

/// `restart_after_ms` belongs to `kill_broker`, `duration_ms` to the pauses.
fn refuse_foreign_length(kind: FaultKind, path: &str, loc: &Locator) -> Result<(), ScenarioError> {
    for key in ["restart_after_ms", "duration_ms"] {
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
    let value = if key == "restart_after_ms" {
        raw.restart_after_ms
    } else {
        raw.duration_ms
    };
    let Some(ms) = value else {
        let message = format!("{full} is required for kind = \"{}\"", raw.kind.name());
        return Err(loc.invalid_at(loc.line_of(path), &full, message));
    };
    if ms == 0 || ms > MAX_LENGTH_MS {
        let message = format!("{full} must be between 1 and {MAX_LENGTH_MS}, got {ms}");
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

/// Re-checks the faults against a window changed by `--duration`.
pub(crate) fn check_window_override(faults: &[Fault], window_secs: f64) -> Result<(), String> {
    match faults.iter().find(|f| f.planned_end_secs() >= window_secs) {
        Some(f) => Err(format!(
            "the {} fault (line {}) ends at {} s, outside a window of {window_secs} s",
            f.kind.name(),
            f.line,
            f.planned_end_secs()
        )),
        None => Ok(()),
    }
}
