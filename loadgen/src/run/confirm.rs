//! `run --confirm N`: when a gate's interval straddles its bound, the cells that gate judges
//! run up to N more rounds (one at a time, the gate re-judged after each) before the run
//! decides. The extra rounds are ordinary rounds of those cells, numbered after the run's
//! last, so ratios still pair cells of the same round; a note in the results says so.

use tokio::sync::watch;

use ackbench_reports::results::Results;

use super::{cell_round, summary, PlannedCell, RoundAt};
use crate::gates::{self, Evaluation};
use crate::lifecycle::env::Env;
use crate::lifecycle::settle::Settlement;
use crate::progress::Progress;
use crate::scenario::{Gate, Scenario};

/// What a confirmation needs besides the results: the run as it was set up.
pub struct Confirmation<'a> {
    pub scenario: &'a Scenario,
    pub cells: &'a [PlannedCell],
    pub env: &'a Env,
    pub settlement: &'a dyn Settlement,
    pub seed: u64,
    pub gates: &'a [Gate],
    /// Most extra rounds.
    pub max_rounds: u32,
}

/// Judges `results`, runs extra rounds of the inconclusive gates' cells while some gate is
/// inconclusive and rounds remain (appending them to `results`), and returns the last
/// evaluation. Stops early, results marked incomplete, when `cancel` flips.
pub async fn confirm(
    c: &Confirmation<'_>,
    results: &mut Results,
    cancel: &watch::Receiver<bool>,
) -> Result<Evaluation, String> {
    let mut eval = gates::evaluate(results, c.gates, None);
    let mut progress = Progress::default();
    for extra in 1..=c.max_rounds {
        let wanted = cells_to_confirm(c, &eval);
        if wanted.is_empty() || *cancel.borrow() {
            break;
        }
        let round = results.meta.rounds + 1;
        progress.say(&format!(
            "ackbench: --confirm {extra}/{}: inconclusive {}; round {round} of {}",
            c.max_rounds,
            eval.inconclusive()
                .iter()
                .map(|v| v.gate.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            names(&wanted)
        ));
        one_more_round(c, &wanted, round, results, cancel, &mut progress).await?;
        eval = gates::evaluate(results, c.gates, None);
    }
    Ok(eval)
}

/// Runs round `round` of the `wanted` cells and appends it to `results`, with a note.
async fn one_more_round(
    c: &Confirmation<'_>,
    wanted: &[PlannedCell],
    round: u32,
    results: &mut Results,
    cancel: &watch::Receiver<bool>,
    progress: &mut Progress,
) -> Result<(), String> {
    let at = RoundAt {
        round,
        rounds: round,
        seed: c.seed,
    };
    for planned in wanted {
        if *cancel.borrow() {
            results.complete = false;
            break;
        }
        let (r, warning) = cell_round(
            c.scenario,
            planned,
            c.env,
            c.settlement,
            at,
            cancel,
            progress,
        )
        .await?;
        results.complete &= r.complete;
        results.meta.notes.extend(warning);
        append_round(results, &planned.name, r);
    }
    results.meta.rounds = round;
    results.meta.notes.push(format!(
        "--confirm: round {round} ran only {} (a gate was inconclusive after round {})",
        names(wanted),
        round - 1
    ));
    Ok(())
}

/// The cells' names, comma-separated.
fn names(cells: &[PlannedCell]) -> String {
    cells
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The planned cells the inconclusive gates of `eval` judge, in run order.
fn cells_to_confirm(c: &Confirmation<'_>, eval: &Evaluation) -> Vec<PlannedCell> {
    let names: Vec<&str> = eval
        .inconclusive()
        .iter()
        .map(|v| v.gate.as_str())
        .collect();
    let judged: Vec<&'static str> = c
        .gates
        .iter()
        .filter(|g| names.contains(&g.name.as_str()))
        .flat_map(|g| g.cells())
        .map(|cell| cell.name())
        .collect();
    c.cells
        .iter()
        .filter(|p| judged.contains(&p.name.as_str()))
        .cloned()
        .collect()
}

/// Appends a round to the cell `name` of `results` and recomputes that cell's summary.
fn append_round(results: &mut Results, name: &str, round: ackbench_reports::results::RoundResults) {
    if let Some(cell) = results.cells.iter_mut().find(|c| c.name == name) {
        cell.rounds.push(round);
        cell.summary = summary(&cell.rounds);
    }
}
