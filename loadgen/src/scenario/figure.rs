//! The figures a gate may judge. Their names, kinds (how noisy) and better directions come from
//! the figure catalogue (`ackbench_reports::figures`); what a gate adds is its `Direction` and
//! the default tolerance of a baseline gate (`GateDefaults`).

use serde::{Deserialize, Serialize};

use ackbench_reports::figures::Better;
pub use ackbench_reports::figures::{Figure, FigureKind, LatencyOp, Percentile, ScalarFigure};

/// Which way a figure moving is an improvement; a baseline gate fails on the other way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// A rise beyond the tolerance fails (commits per ack, latency, ...).
    LowerIsBetter,
    /// A fall beyond the tolerance fails (throughput, hit rate, ...).
    HigherIsBetter,
    /// A move beyond the tolerance either way fails.
    TwoSided,
}

impl From<Better> for Direction {
    fn from(better: Better) -> Direction {
        match better {
            Better::Lower => Direction::LowerIsBetter,
            Better::Higher => Direction::HigherIsBetter,
            Better::Neither => Direction::TwoSided,
        }
    }
}

/// What a gate assumes about a figure when the scenario does not say.
pub trait GateDefaults {
    /// Which way is better, the default `direction` of a baseline gate.
    fn better(&self) -> Direction;
    /// The default tolerance of a baseline gate on this figure: counters tight, wall-clock wide.
    fn default_tolerance(&self) -> f64;
}

impl GateDefaults for Figure {
    fn better(&self) -> Direction {
        self.def().better.into()
    }

    fn default_tolerance(&self) -> f64 {
        match self.kind() {
            FigureKind::Counter => 0.10,
            FigureKind::WallClock => 0.50,
        }
    }
}
