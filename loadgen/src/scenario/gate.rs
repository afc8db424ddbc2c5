//! Gates: what a run must show to pass. `Gate` is the validated form of a `[[gates]]` entry;
//! `gate_from_file` checks an entry against its kind and the run's cells.

use serde::Serialize;

use super::error::ScenarioError;
use super::figure::{Direction, Figure, GateDefaults};
use super::locate::Locator;
use super::schema::{Cell, GateFile, GateKind};

/// A validated gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gate {
    /// The label shown in verdicts: the file's `name`, or one made from the gate itself.
    pub name: String,
    /// The figure judged.
    pub figure: Figure,
    /// What the figure is compared with.
    pub check: GateCheck,
    /// The line of the `[[gates]]` header in the scenario file, for verdict messages.
    pub line: usize,
}

/// The two kinds of gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GateCheck {
    /// `figure(numerator) / figure(denominator)` of the same run, judged by its 95 % interval
    /// over the rounds (`gates::interval`): it must be at most `max` and at least `min` (one or
    /// both are given).
    Ratio {
        numerator: Cell,
        denominator: Cell,
        max: Option<f64>,
        min: Option<f64>,
    },
    /// `figure(cell)` against the same figure of a stored baseline run: it may move by at most
    /// `tolerance` (a fraction of the baseline) in the worse `direction`.
    Baseline {
        cell: Cell,
        tolerance: f64,
        direction: Direction,
    },
}

impl Gate {
    /// The cells this gate needs in the run.
    pub fn cells(&self) -> Vec<Cell> {
        match &self.check {
            GateCheck::Ratio {
                numerator,
                denominator,
                ..
            } => vec![*numerator, *denominator],
            GateCheck::Baseline { cell, .. } => vec![*cell],
        }
    }
}

/// Keys that belong to one kind only, for "only for kind = ..." errors.
const RATIO_ONLY: [&str; 4] = ["numerator", "denominator", "max", "min"];
const BASELINE_ONLY: [&str; 3] = ["cell", "tolerance", "direction"];

/// Validates `gates[index]` and builds the `Gate`; `cells` are the run's cells.
pub(crate) fn gate_from_file(
    raw: &GateFile,
    index: usize,
    cells: &[Cell],
    loc: &Locator,
) -> Result<Gate, ScenarioError> {
    let path = format!("gates[{index}]");
    refuse_other_kind(raw.kind, &path, loc)?;
    let check = match raw.kind {
        GateKind::Ratio => ratio_check(raw, &path, loc)?,
        GateKind::Baseline => baseline_check(raw, &path, loc)?,
    };
    let gate = Gate {
        name: raw
            .name
            .clone()
            .unwrap_or_else(|| default_name(&raw.figure, &check)),
        figure: raw.figure,
        check,
        line: loc.line_of(&path),
    };
    require_cells_in_run(&gate, &path, cells, loc)?;
    Ok(gate)
}

fn refuse_other_kind(kind: GateKind, path: &str, loc: &Locator) -> Result<(), ScenarioError> {
    let (foreign, kind_name, other): (&[&str], &str, &str) = match kind {
        GateKind::Ratio => (&BASELINE_ONLY, "ratio", "baseline"),
        GateKind::Baseline => (&RATIO_ONLY, "baseline", "ratio"),
    };
    for key in foreign {
        let full = format!("{path}.{key}");
        if loc.has(&full) {
            return Err(loc.invalid(
                &full,
                format!("{full} belongs to kind = \"{other}\", not to kind = \"{kind_name}\""),
            ));
        }
    }
    Ok(())
}

fn ratio_check(raw: &GateFile, path: &str, loc: &Locator) -> Result<GateCheck, ScenarioError> {
    let numerator = required(raw.numerator, path, "numerator", loc)?;
    let denominator = required(raw.denominator, path, "denominator", loc)?;
    if numerator == denominator {
        let key = format!("{path}.denominator");
        return Err(loc.invalid(
            &key,
            format!("{key} must differ from the numerator, both are `{numerator}`"),
        ));
    }
    if raw.max.is_none() && raw.min.is_none() {
        let key = format!("{path}.max");
        return Err(loc.invalid_at(
            loc.line_of(path),
            &key,
            format!("{key} or {path}.min is required for kind = \"ratio\""),
        ));
    }
    bound(raw.max, path, "max", loc)?;
    bound(raw.min, path, "min", loc)?;
    if let (Some(max), Some(min)) = (raw.max, raw.min) {
        if min > max {
            let key = format!("{path}.min");
            return Err(loc.invalid(
                &key,
                format!("{key} must be at most max ({max}), got {min}"),
            ));
        }
    }
    Ok(GateCheck::Ratio {
        numerator,
        denominator,
        max: raw.max,
        min: raw.min,
    })
}

fn baseline_check(raw: &GateFile, path: &str, loc: &Locator) -> Result<GateCheck, ScenarioError> {
    let cell = required(raw.cell, path, "cell", loc)?;
    let tolerance = raw
        .tolerance
        .unwrap_or_else(|| raw.figure.default_tolerance());
    if !(0.0..=10.0).contains(&tolerance) {
        let key = format!("{path}.tolerance");
        return Err(loc.invalid(
            &key,
            format!("{key} must be a fraction between 0 and 10, got {tolerance}"),
        ));
    }
    Ok(GateCheck::Baseline {
        cell,
        tolerance,
        direction: raw.direction.unwrap_or_else(|| raw.figure.better()),
    })
}

fn required<T>(value: Option<T>, path: &str, key: &str, loc: &Locator) -> Result<T, ScenarioError> {
    value.ok_or_else(|| {
        let full = format!("{path}.{key}");
        loc.invalid_at(
            loc.line_of(path),
            &full,
            format!("missing required key `{key}` in [[gates]] ({full})"),
        )
    })
}

fn bound(value: Option<f64>, path: &str, key: &str, loc: &Locator) -> Result<(), ScenarioError> {
    match value {
        Some(v) if !(v.is_finite() && v > 0.0) => {
            let full = format!("{path}.{key}");
            Err(loc.invalid(&full, format!("{full} must be a positive number, got {v}")))
        }
        _ => Ok(()),
    }
}

fn require_cells_in_run(
    gate: &Gate,
    path: &str,
    cells: &[Cell],
    loc: &Locator,
) -> Result<(), ScenarioError> {
    let keys: &[&str] = match gate.check {
        GateCheck::Ratio { .. } => &["numerator", "denominator"],
        GateCheck::Baseline { .. } => &["cell"],
    };
    for (cell, key) in gate.cells().into_iter().zip(keys) {
        if !cells.contains(&cell) {
            let full = format!("{path}.{key}");
            return Err(loc.invalid(
                &full,
                format!("{full} is `{cell}`, which run.cells does not run"),
            ));
        }
    }
    Ok(())
}

/// A label made from the gate: `ack_commits_per_ack registry+fusion/none <= 0.5`.
fn default_name(figure: &Figure, check: &GateCheck) -> String {
    match check {
        GateCheck::Ratio {
            numerator,
            denominator,
            max,
            min,
        } => {
            let mut text = format!("{figure} {numerator}/{denominator}");
            if let Some(min) = min {
                text.push_str(&format!(" >= {min}"));
            }
            if let Some(max) = max {
                text.push_str(&format!(" <= {max}"));
            }
            text
        }
        GateCheck::Baseline {
            cell, tolerance, ..
        } => format!("{figure} {cell} vs baseline within {tolerance}"),
    }
}
