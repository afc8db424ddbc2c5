//! Gates: what a run must show to pass, judged only from its results file.
//!
//! - A ratio gate divides a figure of two cells of the same run round by round (cells of one
//!   round ran back to back on the same machine) and draws a 95 % interval around the ratio
//!   from the rounds and the per-second samples within them (`interval`): the gate holds when
//!   the whole interval is within the bound, fails when the whole interval is beyond it, and is
//!   inconclusive when it straddles it. The rounds' spread is reported beside it.
//! - A baseline gate judges a cell's figure now / the same figure of a stored baseline the same
//!   way, against a tolerance in the figure's worse direction.
//! - Every cell's audit is a gate too: a lost message fails the run whatever else held.
//! - Against an external broker the run has one cell, named after the target: a ratio gate
//!   between accelerator cells is not applicable there (neither held nor failed), and a
//!   baseline gate judges that one cell whichever cell it names.
//!
//! Outcome: `Held` (exit 0), `Failed` (exit 1), `Inconclusive` (exit 0, or 1 when strict),
//! `Broken` (exit 2: a missing cell or figure, an unreadable baseline: the gate could not be
//! judged).

pub mod baseline;
pub mod export;
pub mod interval;

use ackbench_reports::results::{GateInterval, GateOutcome, GateVerdict, Results, RoundResults};
use ackbench_reports::stats::Spread;

use crate::scenario::{Direction, Gate, GateCheck};
use baseline::Baseline;
use interval::{Judgement, RoundLog};

/// The verdicts of one evaluation.
pub struct Evaluation {
    pub verdicts: Vec<GateVerdict>,
    /// Gates that could not be judged, with why.
    pub broken: Vec<String>,
}

impl Evaluation {
    /// 0 all held (or inconclusive), 1 one failed, 2 one could not be judged.
    pub fn exit_code(&self) -> u8 {
        self.exit_code_strict(false)
    }

    /// As `exit_code`, and with `strict` an inconclusive gate exits 1 too.
    pub fn exit_code_strict(&self, strict: bool) -> u8 {
        let failed = self.verdicts.iter().any(|v| !v.passed);
        if !self.broken.is_empty() {
            2
        } else if failed || (strict && !self.inconclusive().is_empty()) {
            1
        } else {
            0
        }
    }

    /// The gates whose interval straddles their bound.
    pub fn inconclusive(&self) -> Vec<&GateVerdict> {
        self.verdicts
            .iter()
            .filter(|v| v.outcome() == GateOutcome::Inconclusive)
            .collect()
    }

    /// The closing line on inconclusive gates, if any: what they mean for the exit code.
    pub fn inconclusive_line(&self, strict: bool) -> Option<String> {
        let names: Vec<&str> = self
            .inconclusive()
            .iter()
            .map(|v| v.gate.as_str())
            .collect();
        (!names.is_empty()).then(|| {
            format!(
                "{} gate(s) inconclusive (the interval straddles the bound: more rounds, or --confirm N, can settle it): {}; {}",
                names.len(),
                names.join(", "),
                match strict {
                    true => "--strict: they fail the run",
                    false => "not counted as failed (--strict would fail them)",
                }
            )
        })
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
        interval: None,
        inconclusive: false,
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
        interval: None,
        inconclusive: false,
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
                    "pushed {}, acked {}, dead-lettered {}, dropped {}, lost {}, undrained {}{}, duplicates {}{}{}",
                    a.pushed,
                    a.acked,
                    a.dead_lettered,
                    a.dropped,
                    a.lost,
                    a.undrained,
                    still_queued_words(a),
                    a.duplicates,
                    match (a.drained, results.complete) {
                        (true, _) => "",
                        (false, true) if a.undrained == 0 => " (drain did not finish: every message it left was seen still queued)",
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
                interval: None,
                inconclusive: false,
            }
        })
        .collect()
}

/// `, still queued N (in its own table)` when the drain left messages the system was seen to
/// hold unfinished; empty otherwise.
pub fn still_queued_words(a: &ackbench_reports::results::Audit) -> String {
    match a.still_queued {
        0 => String::new(),
        n => format!(", still queued {n} (seen unfinished in its own table)"),
    }
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
    Ok(paired_rounds(results, figure, num, den)?
        .iter()
        .map(|r| r.value.exp())
        .collect())
}

/// Per-round log-ratios of `figure` between two cells, paired by round number, each with its
/// per-second variance where the rounds' samples carry the figure.
fn paired_rounds(
    results: &Results,
    figure: &str,
    num: &str,
    den: &str,
) -> Result<Vec<RoundLog>, String> {
    let cell = |name: &str| {
        results
            .cell(name)
            .ok_or_else(|| format!("the run has no cell `{name}`"))
    };
    let (n, d) = (cell(num)?, cell(den)?);
    let mut logs = Vec::new();
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
        logs.push(RoundLog::ratio(
            RoundLog::of(rn, figure, a),
            RoundLog::of(rd, figure, b),
        ));
    }
    if logs.is_empty() {
        return Err(format!("cells `{num}` and `{den}` share no round"));
    }
    Ok(logs)
}

/// A gate's judgement and what it rests on: the interval when there is one, else the rounds'
/// figures themselves (one round without per-second samples: judged on its value, as the
/// interval cannot be formed).
struct Judged {
    interval: Option<GateInterval>,
    judgement: Judgement,
    basis: String,
}

/// Judges the rounds' values of a figure (`values`, on the figure's own scale, and their logs
/// with per-second variances) against the passing region `[min, max]`.
fn judge_rounds(values: &[f64], logs: &[RoundLog], min: Option<f64>, max: Option<f64>) -> Judged {
    match interval::interval(logs) {
        Some(i) => Judged {
            interval: Some(i),
            judgement: interval::judge(i.low, i.high, min, max),
            basis: format!(
                "{:.0}% interval {} over {} round(s)",
                interval::LEVEL * 100.0,
                i.words(),
                i.rounds
            ),
        },
        None => {
            let spread = Spread::of(values);
            let judgement = match interval::judge(spread.min, spread.max, min, max) {
                Judgement::Held => Judgement::Held,
                _ => Judgement::Failed,
            };
            Judged {
                interval: None,
                judgement,
                basis: "no interval (one round without per-second samples of this figure): its value decides".into(),
            }
        }
    }
}

/// A verdict's flags from a judgement: (`passed`, `inconclusive`).
fn flags(j: Judgement) -> (bool, bool) {
    match j {
        Judgement::Held => (true, false),
        Judgement::Failed => (false, false),
        Judgement::Inconclusive => (true, true),
    }
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
    let logs = paired_rounds(results, &figure, num, den)
        .map_err(|e| format!("gate `{}`: {e}", gate.name))?;
    let ratios: Vec<f64> = logs.iter().map(|r| r.value.exp()).collect();
    let judged = judge_rounds(&ratios, &logs, min, max);
    let bound = match (max, min) {
        (Some(m), None) => format!("<= {m}"),
        (None, Some(m)) => format!(">= {m}"),
        (Some(a), Some(b)) => format!("in [{b}, {a}]"),
        (None, None) => "any".into(),
    };
    let (passed, inconclusive) = flags(judged.judgement);
    Ok(GateVerdict {
        gate: gate.name.clone(),
        kind: "ratio".into(),
        measured: Spread::of(&ratios),
        threshold: max.or(min).unwrap_or(f64::NAN),
        passed,
        detail: format!(
            "{figure} of {num} / {den}, per round {}; {}; must be {bound}",
            ratios
                .iter()
                .map(|r| format!("{r:.3}"))
                .collect::<Vec<_>>()
                .join(", "),
            judged.basis
        ),
        not_applicable: false,
        not_judged: false,
        interval: judged.interval,
        inconclusive,
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
    let rounds: Vec<(&RoundResults, f64)> = now
        .rounds
        .iter()
        .filter_map(|r| r.figures.get(&figure).map(|v| (r, v)))
        .collect();
    let values: Vec<f64> = rounds.iter().map(|(_, v)| *v).collect();
    let measured = Spread::of(&values);
    let base = b.figure(cell, &figure).ok_or_else(|| {
        format!(
            "gate `{}`: the baseline has no `{figure}` for cell `{cell}`",
            gate.name
        )
    })?;
    if !measured.median.is_finite()
        || values.iter().any(|v| !v.is_finite())
        || !base.is_finite()
        || base == 0.0
    {
        return Err(format!(
            "gate `{}`: `{figure}` of `{cell}` has no value (now {}, baseline {base})",
            gate.name, measured.median
        ));
    }
    // Judged as now / baseline: the baseline's median is taken as exact.
    let changes: Vec<f64> = values.iter().map(|v| v / base).collect();
    let logs: Vec<RoundLog> = rounds
        .iter()
        .map(|(r, v)| RoundLog::of(r, &figure, v / base))
        .collect();
    let (min, max) = match direction {
        Direction::LowerIsBetter => (None, Some(1.0 + tolerance)),
        Direction::HigherIsBetter => (Some(1.0 - tolerance), None),
        Direction::TwoSided => (Some(1.0 - tolerance), Some(1.0 + tolerance)),
    };
    let judged = judge_rounds(&changes, &logs, min, max);
    let (passed, inconclusive) = flags(judged.judgement);
    let change = measured.median / base - 1.0;
    Ok(GateVerdict {
        gate: gate.name.clone(),
        kind: "baseline".into(),
        measured,
        threshold: tolerance,
        passed,
        detail: format!(
            "{figure} of {cell}: {:.4} now vs {base:.4} in the baseline ({:+.1}%, tolerance {:.0}% {}); now / baseline: {}",
            measured.median,
            change * 100.0,
            tolerance * 100.0,
            match direction {
                Direction::LowerIsBetter => "upward",
                Direction::HigherIsBetter => "downward",
                Direction::TwoSided => "either way",
            },
            judged.basis
        ),
        not_applicable: false,
        not_judged: false,
        interval: judged.interval,
        inconclusive,
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
/// (`held`, `FAILED`, `inconclusive`, `not judged`, the words of the report), the figure with
/// its 95 % interval (else the rounds' median [min, max]), and the detail.
pub fn table(eval: &Evaluation) -> String {
    let mut out = format!(
        "{:<12}  {:<50} {:>34}\n",
        "verdict", "gate", "figure [95% interval]"
    );
    for v in &eval.verdicts {
        out.push_str(&format!(
            "{:<12}  {:<50} {:>34}\n{}",
            v.word(),
            clip(&v.gate, 50),
            measured_words(v),
            wrap(&v.detail, 100, "    ")
        ));
    }
    out
}

/// A verdict's figure in words: the estimate with its interval, else the rounds' median with
/// their range (`rounds`), or a dash when not judged.
pub fn measured_words(v: &GateVerdict) -> String {
    let m = &v.measured;
    match (v.outcome(), &v.interval) {
        (GateOutcome::NotJudged, _) => "—".to_string(),
        (_, Some(i)) => i.words(),
        (_, None) if v.kind == "audit" => format!("{:.4} [{:.4}, {:.4}]", m.median, m.min, m.max),
        (_, None) => format!("{:.4} [{:.4}, {:.4}] rounds", m.median, m.min, m.max),
    }
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
