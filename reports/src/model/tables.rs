//! The report's tables as data: each figure of each cell formatted with its spread over rounds
//! and its ratio to the baseline cell (round by round), the summary and "at a glance" rows, the
//! audit rows and the gate rows. Which figures the tables show comes from the catalogue.

use std::sync::LazyLock;

use super::format::{format_number, format_range, format_ratio, format_value, group_thousands};
use super::BASELINE;
use crate::figures::{self, Better, FigureDef, Needs, View};
use crate::results::{Audit, CellResults, Figures, GateOutcome, Results};
use crate::stats::Spread;

/// The columns of the summary table, in order (the catalogue's `View::Summary` figures). The
/// table is drawn in two parts (so it fits a screen): the figures before `SUMMARY_SPLIT`, then
/// the accelerators' and the latency with the audit.
pub static SUMMARY_FIGURES: LazyLock<Vec<&'static FigureDef>> =
    LazyLock::new(|| figures::shown_in(View::Summary));

/// Where the summary table's second part begins: its first accelerator figure.
pub static SUMMARY_SPLIT: LazyLock<usize> = LazyLock::new(|| {
    SUMMARY_FIGURES
        .iter()
        .position(|d| d.needs != Needs::Nothing)
        .unwrap_or(SUMMARY_FIGURES.len())
});

/// The figures a comparison draws one chart each for.
pub static KEY_FIGURES: LazyLock<Vec<&'static FigureDef>> =
    LazyLock::new(|| figures::shown_in(View::KeyChart));

/// The definition of a figure by key.
pub fn figure_def(key: &str) -> Option<&'static FigureDef> {
    figures::def(key)
}

/// A summary figure by the key `Figures::get` understands.
pub fn summary_figure(f: &Figures<Spread>, key: &str) -> Option<Spread> {
    f.get(key)
}

pub(super) fn applies(cell: &CellResults, needs: Needs) -> bool {
    match needs {
        Needs::Nothing => true,
        Needs::Registry => cell.registry,
        Needs::Fusion => cell.fusion,
    }
}

/// The ratio of `key` between `cell` and `base`, taken round by round (rounds paired by number,
/// so the machine's drift falls on both) and spread over rounds. Falls back to the ratio of the
/// medians when no round pairs up.
pub fn ratio_to(cell: &CellResults, base: &CellResults, key: &str) -> Option<Spread> {
    let mut ratios = Vec::new();
    for r in &cell.rounds {
        let Some(b) = base.rounds.iter().find(|b| b.round == r.round) else {
            continue;
        };
        if let (Some(x), Some(y)) = (r.figures.get(key), b.figures.get(key)) {
            if x.is_finite() && y.is_finite() && y != 0.0 {
                ratios.push(x / y);
            }
        }
    }
    if !ratios.is_empty() {
        return Some(Spread::of(&ratios));
    }
    let x = summary_figure(&cell.summary.figures, key)?.median;
    let y = summary_figure(&base.summary.figures, key)?.median;
    (x.is_finite() && y.is_finite() && y != 0.0).then(|| {
        let r = x / y;
        Spread {
            median: r,
            min: r,
            max: r,
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Tables

/// How a ratio reads against the figure's better direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Better,
    Worse,
    Same,
}

/// The fewest rounds whose range a ratio is coloured by: with fewer, a range over rounds says
/// too little about noise (with one round it is a point), so nothing is coloured.
pub const MIN_ROUNDS_TO_COLOUR: u32 = 3;

/// The note a table shows when its runs have too few rounds to colour anything, if they do.
pub fn colour_note(rounds: u32) -> Option<String> {
    (rounds < MIN_ROUNDS_TO_COLOUR).then(|| {
        format!(
            "No ratio is coloured: with {rounds} round{} per cell there is no spread to tell a \
             change from noise. Ratios are coloured only where their range over at least \
             {MIN_ROUNDS_TO_COLOUR} rounds excludes 1 (run with --rounds {MIN_ROUNDS_TO_COLOUR} or more).",
            if rounds == 1 { "" } else { "s" }
        )
    })
}

/// How a ratio over `rounds` rounds reads against the figure's better direction: better or worse
/// only when there are enough rounds and its range over them (min–max) excludes 1, by at least
/// 1% at the median (changes under 1% are not worth a colour either way).
pub(super) fn tone_of(ratio: &Spread, better: Better, rounds: u32) -> Tone {
    if rounds < MIN_ROUNDS_TO_COLOUR {
        return Tone::Same;
    }
    let lo = ratio.max < 1.0 && ratio.median < 0.99;
    let hi = ratio.min > 1.0 && ratio.median > 1.01;
    match (better, lo, hi) {
        (Better::Lower, true, _) | (Better::Higher, _, true) => Tone::Better,
        (Better::Lower, _, true) | (Better::Higher, true, _) => Tone::Worse,
        _ => Tone::Same,
    }
}

/// One figure of one cell, formatted.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureCell {
    pub key: &'static str,
    /// None when the figure is missing or does not apply (accelerator off).
    pub value: Option<Spread>,
    /// The median, formatted; `off` or `—` when there is no value.
    pub text: String,
    /// `min–max` over rounds, when there are several.
    pub spread_text: Option<String>,
    /// The ratio to the baseline cell, round by round.
    pub ratio: Option<Spread>,
    pub ratio_text: Option<String>,
    pub ratio_spread_text: Option<String>,
    pub tone: Tone,
    /// Why a figure that applies has no value (`—`), in words: e.g. fusion without the
    /// registry has nothing to fold.
    pub why_none: Option<&'static str>,
}

pub(super) fn figure_cell(
    def: &'static FigureDef,
    cell: &CellResults,
    base: Option<&CellResults>,
) -> FigureCell {
    let rounds = cell.summary.rounds.max(cell.rounds.len() as u32);
    let on = applies(cell, def.needs);
    let value = on
        .then(|| summary_figure(&cell.summary.figures, def.key))
        .flatten()
        .filter(|s| s.median.is_finite());
    let text = match value {
        Some(s) => format_value(s.median, def.format),
        None if !on => "off".into(),
        None => "—".into(),
    };
    // A range is shown when rounds differ at the precision shown.
    let spread_text = value
        .filter(|s| {
            rounds > 1 && format_value(s.min, def.format) != format_value(s.max, def.format)
        })
        .map(|s| format_range(&s, def.format));
    let ratio = match base {
        Some(b) if b.name != cell.name && value.is_some() && applies(b, def.needs) => {
            ratio_to(cell, b, def.key)
        }
        _ => None,
    };
    let several = rounds > 1;
    let why_none = (on && value.is_none()).then(|| super::bars::no_value_reason(cell, def.key).1);
    FigureCell {
        why_none,
        key: def.key,
        value,
        text,
        spread_text,
        ratio_text: ratio.map(|r| format_ratio(r.median)),
        ratio_spread_text: ratio
            .filter(|r| several && format_number(r.min) != format_number(r.max))
            .map(|r| format!("{}–{}", format_number(r.min), format_number(r.max))),
        tone: ratio
            .map(|r| tone_of(&r, def.better, rounds))
            .unwrap_or(Tone::Same),
        ratio,
    }
}

/// A row of the summary table.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    pub cell: String,
    pub registry: bool,
    pub fusion: bool,
    pub rounds: u32,
    pub figures: Vec<FigureCell>,
    pub audit: Audit,
    pub audit_text: String,
    pub audit_passed: bool,
}

pub(super) fn audit_text(a: &Audit) -> String {
    let mut t = if a.passed() {
        "ok, 0 lost".to_string()
    } else {
        format!("FAILED: {} lost", group_thousands(a.lost as f64))
    };
    if a.undrained > 0 {
        t.push_str(&format!(
            ", {} undrained",
            group_thousands(a.undrained as f64)
        ));
    }
    if a.still_queued > 0 {
        t.push_str(&format!(
            ", {} still queued",
            group_thousands(a.still_queued as f64)
        ));
    }
    if a.duplicates > 0 {
        t.push_str(&format!(
            ", {} duplicates",
            group_thousands(a.duplicates as f64)
        ));
    }
    if !a.drained {
        t.push_str(", not drained");
    }
    if a.dlq_unchecked {
        t.push_str(&format!("; not checked: {}", a.unchecked_words()));
    }
    t
}

/// An audit row: the summed audit of a cell, or one round's.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    pub cell: String,
    /// None for the cell's total over rounds.
    pub round: Option<u32>,
    pub audit: Audit,
    pub verdict: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GateRow {
    pub gate: String,
    pub kind: String,
    pub measured: String,
    /// The gated figure's estimate with its 95 % interval, `estimate [low, high]`; a dash
    /// where there is none (one round without per-second samples, or an older document).
    pub interval: String,
    pub threshold: String,
    pub outcome: GateOutcome,
    /// `held`, `FAILED`, `inconclusive` or `not judged`, as the terminal writes it.
    pub verdict: &'static str,
    pub detail: String,
}

/// A row of the summary table per cell: every summary figure against the baseline.
pub(super) fn summary_rows(r: &Results) -> Vec<SummaryRow> {
    let base = r.cell(BASELINE);
    r.cells
        .iter()
        .map(|c| SummaryRow {
            cell: c.name.clone(),
            registry: c.registry,
            fusion: c.fusion,
            rounds: c.summary.rounds.max(c.rounds.len() as u32),
            figures: SUMMARY_FIGURES
                .iter()
                .map(|&d| paced(figure_cell(d, c, base), r))
                .collect(),
            audit: c.summary.audit.clone(),
            audit_text: audit_text(&c.summary.audit),
            audit_passed: c.summary.audit.passed(),
        })
        .collect()
}

/// Throughput figures of an open-loop run uncoloured: the offered rate sets them, and a cell
/// that drained a bigger warm-up backlog in its window acks faster without being faster ("At a
/// glance" judges each cell's pace against the offer).
pub(super) fn paced(mut f: FigureCell, r: &Results) -> FigureCell {
    if r.meta.offered_rate.is_some() && matches!(f.key, "ack_throughput" | "push_throughput") {
        f.tone = Tone::Same;
    }
    f
}

/// What the cell's commits per acked message save (or cost) against the baseline, in words.
/// What a cell does to commits against the baseline, the ack path and the whole message cycle
/// apart: "ack-path commits −66% (saves 660 per 1,000 acked messages); all commits +21% (210
/// more), because the rest of the cycle grew: see Commits by procedure".
pub(super) fn commits_saved_text(
    c: &CellResults,
    base: Option<&CellResults>,
    cpa: &FigureCell,
) -> String {
    match (base, &cpa.value) {
        (Some(b), Some(_)) if b.name != c.name => {
            let ack = per_thousand_change(c, b, "ack_commits_per_ack");
            let all = per_thousand_change(c, b, "commits_per_ack");
            let mut text = format!(
                "{}; {}",
                change_words("ack-path commits", ack),
                change_words("all commits", all)
            );
            if ack.is_some_and(|(d, _)| d < 0.0) && all.is_some_and(|(d, _)| d > 0.0) {
                text.push_str(", because the rest of the cycle grew: see Commits by procedure");
            }
            text
        }
        (Some(b), _) if b.name == c.name => "the baseline".to_string(),
        (Some(_), None) => "no commits measured".to_string(),
        _ => "no baseline cell to compare with".to_string(),
    }
}

/// The change of `key` from `base` to `cell`: (per 1,000 acked messages, percent), when both
/// medians are known.
fn per_thousand_change(cell: &CellResults, base: &CellResults, key: &str) -> Option<(f64, f64)> {
    let x = summary_figure(&cell.summary.figures, key)?.median;
    let y = summary_figure(&base.summary.figures, key)?.median;
    (x.is_finite() && y.is_finite() && y > 0.0).then(|| ((x - y) * 1000.0, (x / y - 1.0) * 100.0))
}

/// `what −66% (saves 660 per 1,000 acked messages)`, `what +21% (210 more per 1,000 acked
/// messages)`, `what about as many as none (within 1%)`.
fn change_words(what: &str, change: Option<(f64, f64)>) -> String {
    match change {
        None => format!("{what}: not measured"),
        Some((_, pct)) if pct.abs() < 1.0 => {
            format!("{what} about as many as {BASELINE} (within 1%)")
        }
        Some((delta, pct)) if delta < 0.0 => format!(
            "{what} −{:.0}% (saves {} per 1,000 acked messages)",
            -pct,
            format_number(-delta)
        ),
        Some((delta, pct)) => format!(
            "{what} +{pct:.0}% ({} more per 1,000 acked messages)",
            format_number(delta)
        ),
    }
}

/// The audit rows: each cell's total over rounds first, then every round of every cell.
pub(super) fn audit_rows(r: &Results) -> Vec<AuditRow> {
    let row = |cell: &str, round: Option<u32>, audit: &Audit| AuditRow {
        cell: cell.to_string(),
        round,
        audit: audit.clone(),
        verdict: audit_text(audit),
    };
    let totals = r.cells.iter().map(|c| row(&c.name, None, &c.summary.audit));
    let rounds = r.cells.iter().flat_map(|c| {
        c.rounds
            .iter()
            .map(move |x| row(&c.name, Some(x.round), &x.audit))
    });
    totals.chain(rounds).collect()
}

/// A spread as the gates table writes it: the median, and the range when rounds differ.
fn measured_text(s: &Spread) -> String {
    if format_number(s.min) == format_number(s.max) {
        format_number(s.median)
    } else {
        format!(
            "{} ({}–{})",
            format_number(s.median),
            format_number(s.min),
            format_number(s.max)
        )
    }
}

pub(super) fn gate_rows(r: &Results) -> Vec<GateRow> {
    r.gates
        .iter()
        .map(|g| GateRow {
            gate: g.gate.clone(),
            kind: g.kind.clone(),
            measured: measured_text(&g.measured),
            interval: g.interval.map_or_else(|| "—".to_string(), |i| i.words()),
            threshold: format_number(g.threshold),
            outcome: g.outcome(),
            verdict: g.word(),
            detail: g.detail.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_split_is_at_the_accelerator_figures() {
        assert_eq!(SUMMARY_FIGURES[*SUMMARY_SPLIT].key, "registry_hit_rate");
    }

    #[test]
    fn tone_needs_enough_rounds_and_every_round_to_agree() {
        let s = |median, min, max| Spread { median, min, max };
        let r = MIN_ROUNDS_TO_COLOUR;
        assert_eq!(tone_of(&s(0.5, 0.4, 0.6), Better::Lower, r), Tone::Better);
        assert_eq!(tone_of(&s(0.9, 0.8, 1.1), Better::Lower, r), Tone::Same);
        assert_eq!(tone_of(&s(1.5, 1.2, 1.9), Better::Lower, r), Tone::Worse);
        assert_eq!(tone_of(&s(1.5, 1.2, 1.9), Better::Higher, r), Tone::Better);
        assert_eq!(tone_of(&s(1.5, 1.2, 1.9), Better::Neither, r), Tone::Same);
        // One round's "range" is a point, two rounds a thin one: nothing is coloured.
        assert_eq!(tone_of(&s(0.5, 0.5, 0.5), Better::Lower, 1), Tone::Same);
        assert_eq!(tone_of(&s(0.5, 0.4, 0.6), Better::Lower, 2), Tone::Same);
        assert!(colour_note(1).unwrap().contains("with 1 round per cell"));
        assert_eq!(colour_note(r), None);
    }
}
