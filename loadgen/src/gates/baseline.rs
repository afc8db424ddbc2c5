//! Stored baselines: the medians (with spreads) of every figure of every cell of a run that
//! passed, for baseline gates of later runs. A failed run never becomes a baseline.

use std::collections::BTreeMap;
use std::path::Path;

use ackbench_reports::figures;
use ackbench_reports::results::Results;
use ackbench_reports::stats::Spread;
use serde::{Deserialize, Serialize};

pub const BASELINE_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Baseline {
    pub baseline_version: u32,
    pub scenario: String,
    pub scenario_hash: String,
    pub git_revision: Option<String>,
    pub created_at: String,
    /// cell -> figure -> spread over the run's rounds.
    pub cells: BTreeMap<String, BTreeMap<String, Spread>>,
}

impl Baseline {
    /// The baseline of a run; refused (naming why) when the run did not pass.
    pub fn from_results(results: &Results) -> Result<Baseline, String> {
        if !results.complete {
            return Err("the run is incomplete (interrupted); it cannot become a baseline".into());
        }
        if let Some(c) = results.cells.iter().find(|c| !c.summary.audit.passed()) {
            return Err(format!(
                "cell `{}` lost messages; a failed run cannot become a baseline",
                c.name
            ));
        }
        if let Some(c) = results.cells.iter().find(|c| !c.summary.audit.proven()) {
            return Err(format!(
                "cell `{}` did not drain; a run that proves nothing cannot become a baseline",
                c.name
            ));
        }
        if let Some(g) = results.gates.iter().find(|g| !g.passed) {
            return Err(format!(
                "gate `{}` failed; a failed run cannot become a baseline",
                g.gate
            ));
        }
        let cells = results
            .cells
            .iter()
            .map(|c| (c.name.clone(), figures_of(c)))
            .collect();
        Ok(Baseline {
            baseline_version: BASELINE_VERSION,
            scenario: results.meta.scenario.name.clone(),
            scenario_hash: results.meta.scenario.hash.clone(),
            git_revision: results.meta.git_revision.clone(),
            created_at: results.meta.finished_at.clone(),
            cells,
        })
    }

    pub fn read(path: &Path) -> Result<Baseline, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--baseline {}: {e}", path.display()))?;
        let b: Baseline = serde_json::from_str(&text)
            .map_err(|e| format!("--baseline {}: not a baseline file: {e}", path.display()))?;
        if b.baseline_version != BASELINE_VERSION {
            return Err(format!(
                "--baseline {}: version {} is not supported",
                path.display(),
                b.baseline_version
            ));
        }
        Ok(b)
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The baseline median of `figure` in `cell`.
    pub fn figure(&self, cell: &str, figure: &str) -> Option<f64> {
        self.cells.get(cell)?.get(figure).map(|s| s.median)
    }
}

fn figures_of(cell: &ackbench_reports::results::CellResults) -> BTreeMap<String, Spread> {
    figures::all()
        .filter_map(|def| {
            let values: Vec<f64> = cell
                .rounds
                .iter()
                .filter_map(|r| r.figures.get(def.key))
                .collect();
            (!values.is_empty()).then(|| (def.key.to_string(), Spread::of(&values)))
        })
        .collect()
}
