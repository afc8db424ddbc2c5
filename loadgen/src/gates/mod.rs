//! Gates: what a run must show to pass, judged only from its results file.
//!
//! - A ratio gate divides a figure of two cells of the same run round by round (cells of one
//!   round ran back to back on the same machine) and holds when every round's ratio, hence the
//!   worst, is within the bound; the spread over rounds is reported beside it.
//! - A baseline gate compares a cell's median figure with the same figure of a stored baseline
//!   within a tolerance, in the figure's worse direction.
//! - Every cell's audit is a gate too: a lost message fails the run whatever else held.
//! - Against an external broker the run has one cell, named after the target: a ratio gate
//!   between accelerator cells is not applicable there (neither held nor failed), and a
//!   baseline gate judges that one cell whichever cell it names.
//!
//! Outcome: `Held` (exit 0), `Failed` (exit 1), `Broken` (exit 2: a missing cell or figure,
//! an unreadable baseline: the gate could not be judged).

pub mod baseline;
pub mod export;

use ackbench_reports::results::{GateVerdict, Results};
use ackbench_reports::stats::Spread;

use crate::scenario::{Direction, Gate, GateCheck};
use baseline::Baseline;

/// The verdicts of one evaluation.
pub struct Evaluation {
    pub verdicts: Vec<GateVerdict>,
    /// Gates that could not be judged, with why.
    pub broken: Vec<String>,
}

impl Evaluation {
    /// 0 all held, 1 one failed, 2 one could not be judged.
    pub fn exit_code(&self) -> u8 {
        if !self.broken.is_empty() {
            2
        } else if self.verdicts.iter().any(|v| !v.passed) {
            1
        } else {
            0
        }
    }
}

/// Judges `gates` (and every cell's audit) on `results`. A gate that needs a cell the run left
/// out (`--cells`: not in its cell order) is not judged and does not count as broken; any other
/// gate that cannot be judged (a cell an interrupted run never reached, a figure without a
/// value, no baseline) is recorded as not judged and counts as broken.
pub fn evaluate(results: &Results, gates: &[Gate], baseline: Option<&Baseline>) -> Evaluation {
    let mut eval = Evaluation {
        verdicts: audit_verdicts(results),
        broken: Vec::new(),
    };
    for gate in gates {
        if let Some(cell) = left_out_cell(results, gate) {
            let why = format!(
                "{}: not judged, cell `{cell}` did not run (this run's --cells left it out)",
                gate.figure.name()
            );
            eval.verdicts.push(not_judged(gate, &why));
            continue;
        }
        match judge(results, gate, baseline) {
            Ok(v) => eval.verdicts.push(v),
            Err(why) => {
                eval.verdicts.push(not_judged(gate, &why));
                eval.broken.push(why);
            }
        }
    }
    eval
}

/// One gate's verdict, or why it cannot be judged.
fn judge(
    results: &Results,
    gate: &Gate,
    baseline: Option<&Baseline>,
) -> Result<GateVerdict, String> {
    match &gate.check {
        GateCheck::Ratio {
            numerator,
            denominator,
            max,
            min,
        } if target_cell(results).is_some() => Ok(not_applicable(
            results,
            gate,
            (numerator.name(), denominator.name()),
            max.or(*min).unwrap_or(f64::NAN),
        )),
        GateCheck::Ratio {
            numerator,
            denominator,
            max,
            min,
        } => ratio(
            results,
            gate,
            numerator.name(),
            denominator.name(),
            *max,
            *min,
        ),
        GateCheck::Baseline {
            cell,
            tolerance,
            direction,
        } => match baseline {
            Some(b) => {
                let cell = target_cell(results).unwrap_or(cell.name());
                against_baseline(results, b, gate, cell, *tolerance, *direction)
            }
            None => Err(format!(
                "gate `{}` needs a baseline: pass --baseline FILE",
                gate.name
            )),
        },
    }
}

/// A cell `gate` needs that the run did not plan (its `--cells` left it out), if any. Runs
/// against an external broker (one cell named after the target) and results without a cell
/// order plan nothing to leave out; a cell planned once per topology (`registry@3rr`) counts as
/// planned.
fn left_out_cell(results: &Results, gate: &Gate) -> Option<&'static str> {
    let planned = &results.meta.cell_order;
    if planned.is_empty() || target_cell(results).is_some() {
        return None;
    }
    gate.cells().into_iter().map(|c| c.name()).find(|name| {
        !planned
            .iter()
            .any(|p| p == name || p.strip_prefix(name).is_some_and(|t| t.starts_with('@')))
    })
}

/// A gate that could not be judged, with why (`detail`).
fn not_judged(gate: &Gate, why: &str) -> GateVerdict {
    GateVerdict {
        gate: gate.name.clone(),
        kind: match gate.check {
            GateCheck::Ratio { .. } => "ratio",
            GateCheck::Baseline { .. } => "baseline",
        }
        .into(),
        measured: Spread {
            median: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
        },
        threshold: f64::NAN,
        passed: true,
        detail: why.to_string(),
        not_applicable: false,
        not_judged: true,
    }
}

/// The one cell of a run against an external broker (named after the target), if it is one.
fn target_cell(results: &Results) -> Option<&str> {
    match results.cells.as_slice() {
        [only] if results.meta.broker.external => Some(&only.name),
        _ => None,
    }
}

/// A ratio gate between accelerator cells, against a target that has no such cells.
fn not_applicable(
    results: &Results,
    gate: &Gate,
    (num, den): (&str, &str),
    threshold: f64,
) -> GateVerdict {
    GateVerdict {
        gate: gate.name.clone(),
        kind: "ratio".into(),
        measured: Spread {
            median: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
        },
        threshold,
        passed: true,
        detail: format!(
            "{} of {num} / {den}: not applicable to {}, an external broker whose accelerators this run cannot switch",
            gate.figure.name(),
            target_cell(results).unwrap_or("the target")
        ),
        not_applicable: true,
        not_judged: false,
    }
}

fn audit_verdicts(results: &Results) -> Vec<GateVerdict> {
    results
        .cells
        .iter()
        .map(|c| {
            let a = &c.summary.audit;
            GateVerdict {
                gate: format!("audit of {}: no message lost", c.name),
                kind: "audit".into(),
                measured: Spread {
                    median: a.lost as f64,
                    min: a.lost as f64,
                    max: a.lost as f64,
                },
                threshold: 0.0,
                passed: audit_passed(a, results.complete),
                detail: format!(
                    "pushed {}, acked {}, dead-lettered {}, dropped {}, lost {}, undrained {}, duplicates {}{}{}",
                    a.pushed,
                    a.acked,
                    a.dead_lettered,
                    a.dropped,
                    a.lost,
                    a.undrained,
                    a.duplicates,
                    match (a.drained, results.complete) {
                        (true, _) => "",
                        (false, true) => " (drain did not finish: loss neither proven nor ruled out)",
                        (false, false) => " (run interrupted: undrained messages were in flight, not lost)",
                    },
                    match a.dlq_unchecked {
                        true => format!("; not checked: {}", a.unchecked_words()),
                        false => String::new(),
                    }
                ),
                not_applicable: false,
                not_judged: false,
            }
        })
        .collect()
}

/// A cell's audit holds when nothing was lost and, in a complete run, the drain resolved
/// everything (an interrupted run's undrained messages were in flight, not lost).
fn audit_passed(a: &ackbench_reports::results::Audit, complete: bool) -> bool {
    a.passed() && (a.undrained == 0 || !complete)
}

/// Per-round ratios of `figure` between two cells, paired by round number.
pub fn round_ratios(
    results: &Results,
    figure: &str,
    num: &str,
    den: &str,
) -> Result<Vec<f64>, String> {
    let cell = |name: &str| {
        results
            .cell(name)
            .ok_or_else(|| format!("the run has no cell `{name}`"))
    };
    let (n, d) = (cell(num)?, cell(den)?);
    let mut ratios = Vec::new();
    for rn in &n.rounds {
        let Some(rd) = d.rounds.iter().find(|r| r.round == rn.round) else {
            continue;
        };
        let missing = || {
            format!(
                "figure `{figure}` is missing in round {} of `{num}` or `{den}`",
                rn.round
            )
        };
        let (a, b) = (
            rn.figures.get(figure).ok_or_else(missing)?,
            rd.figures.get(figure).ok_or_else(missing)?,
        );
        if !a.is_finite() || !b.is_finite() || b == 0.0 {
            return Err(format!(
                "figure `{figure}` has no value in round {} ({num} {a}, {den} {b})",
                rn.round
            ));
        }
        ratios.push(a / b);
    }
    if ratios.is_empty() {
        return Err(format!("cells `{num}` and `{den}` share no round"));
    }
    Ok(ratios)
}

fn ratio(
    results: &Results,
    gate: &Gate,
    num: &str,
    den: &str,
    max: Option<f64>,
    min: Option<f64>,
) -> Result<GateVerdict, String> {
    let figure = gate.figure.name();
    let ratios = round_ratios(results, &figure, num, den)
        .map_err(|e| format!("gate `{}`: {e}", gate.name))?;
    let spread = Spread::of(&ratios);
    let worst_high = spread.max;
    let worst_low = spread.min;
    let held_max = max.is_none_or(|m| worst_high <= m);
    let held_min = min.is_none_or(|m| worst_low >= m);
    let bound = match (max, min) {
        (Some(m), None) => format!("<= {m}"),
        (None, Some(m)) => format!(">= {m}"),
        (Some(a), Some(b)) => format!("in [{b}, {a}]"),
        (None, None) => "any".into(),
    };
    Ok(GateVerdict {
        gate: gate.name.clone(),
        kind: "ratio".into(),
        measured: spread,
        threshold: max.or(min).unwrap_or(f64::NAN),
        passed: held_max && held_min,
        detail: format!(
            "{figure} of {num} / {den}, per round {}; worst round must be {bound}",
            ratios
                .iter()
                .map(|r| format!("{r:.3}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        not_applicable: false,
        not_judged: false,
    })
}

fn against_baseline(
    results: &Results,
    b: &Baseline,
    gate: &Gate,
    cell: &str,
    tolerance: f64,
    direction: Direction,
) -> Result<GateVerdict, String> {
    let figure = gate.figure.name();
    let now = results
        .cell(cell)
        .ok_or_else(|| format!("gate `{}`: the run has no cell `{cell}`", gate.name))?;
    let rounds: Vec<f64> = now
        .rounds
        .iter()
        .filter_map(|r| r.figures.get(&figure))
        .collect();
    let measured = Spread::of(&rounds);
    let base = b.figure(cell, &figure).ok_or_else(|| {
        format!(
            "gate `{}`: the baseline has no `{figure}` for cell `{cell}`",
            gate.name
        )
    })?;
    if !measured.median.is_finite() || !base.is_finite() || base == 0.0 {
        return Err(format!(
            "gate `{}`: `{figure}` of `{cell}` has no value (now {}, baseline {base})",
            gate.name, measured.median
        ));
    }
    let change = measured.median / base - 1.0;
    let passed = match direction {
        Direction::LowerIsBetter => change <= tolerance,
        Direction::HigherIsBetter => change >= -tolerance,
        Direction::TwoSided => change.abs() <= tolerance,
    };
    Ok(GateVerdict {
        gate: gate.name.clone(),
        kind: "baseline".into(),
        measured,
        threshold: tolerance,
        passed,
        detail: format!(
            "{figure} of {cell}: {:.4} now vs {base:.4} in the baseline ({:+.1}%, tolerance {:.0}% {})",
            measured.median,
            change * 100.0,
            tolerance * 100.0,
            match direction {
                Direction::LowerIsBetter => "upward",
                Direction::HigherIsBetter => "downward",
                Direction::TwoSided => "either way",
            }
        ),
        not_applicable: false,
        not_judged: false,
    })
}

/// A/A noise: for every figure the scenario gates on (and the key counter figures), the ratio
/// twin / cell per round. A ratio gate's threshold must sit well beyond this spread, or the gate
/// flips on noise alone.
pub fn aa_noise(results: &Results, gates: &[Gate], cell: &str, twin: &str) -> String {
    let mut figures: Vec<String> = gates.iter().map(|g| g.figure.name()).collect();
    for f in [
        "ack_commits_per_ack",
        "commits_per_ack",
        "pg_exec_ms_per_ack",
        "wal_syncs_per_ack",
        "latency_ms.ack.p99",
        "ack_throughput",
    ] {
        if !figures.iter().any(|x| x == f) {
            figures.push(f.to_string());
        }
    }
    let mut out = format!(
        "A/A noise: {twin} / {cell}, per round\n{:<28} {:>9} {:>9} {:>9}  {}\n",
        "figure", "min", "median", "max", "widest deviation from 1"
    );
    for f in figures {
        match round_ratios(results, &f, twin, cell) {
            Ok(r) => {
                let s = Spread::of(&r);
                let dev = (s.max - 1.0).abs().max((1.0 - s.min).abs());
                out.push_str(&format!(
                    "{f:<28} {:>9.4} {:>9.4} {:>9.4}  {:.1}%\n",
                    s.min,
                    s.median,
                    s.max,
                    dev * 100.0
                ));
            }
            Err(e) => out.push_str(&format!("{f:<28} {e}\n")),
        }
    }
    out
}

/// The verdict table printed by `gate` and `run` (fits 100 columns): per gate its verdict
/// (`held`, `FAILED`, `not judged`, the words of the report), what was measured, and the detail.
pub fn table(eval: &Evaluation) -> String {
    let mut out = format!(
        "{:<10}  {:<50} {:>26}\n",
        "verdict", "gate", "measured: median [min, max]"
    );
    for v in &eval.verdicts {
        let m = &v.measured;
        let measured = match v.outcome() {
            ackbench_reports::results::GateOutcome::NotJudged => "—".to_string(),
            _ => format!("{:.4} [{:.4}, {:.4}]", m.median, m.min, m.max),
        };
        out.push_str(&format!(
            "{:<10}  {:<50} {:>26}\n{}",
            v.word(),
            clip(&v.gate, 50),
            measured,
            wrap(&v.detail, 100, "    ")
        ));
    }
    out
}

/// `text` cut to `width` characters, an ellipsis marking the cut.
pub fn clip(text: &str, width: usize) -> String {
    match text.chars().count() > width {
        true => format!("{}…", text.chars().take(width - 1).collect::<String>()),
        false => text.to_string(),
    }
}

/// `text` in lines of at most `width` characters (words kept whole where they fit), each line
/// after `indent`, each ending in a newline.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let room = width.saturating_sub(indent.chars().count()).max(20);
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > room {
            out.push_str(&format!("{indent}{line}\n"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&format!("{indent}{line}\n"));
    }
    out
}
