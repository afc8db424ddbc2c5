//! Two runs side by side: every summary figure of every cell in A and in B, with B/A coloured
//! only where both runs have enough rounds to show their spread and their ranges over rounds do
//! not overlap; with too few rounds nothing is coloured, and the comparison says why.

use super::format::format_ratio;
use super::tables::{
    colour_note, figure_cell, tone_of, FigureCell, Tone, MIN_ROUNDS_TO_COLOUR, SUMMARY_FIGURES,
};
use super::BASELINE;
use crate::figures::FigureDef;
use crate::results::Results;
use crate::stats::Spread;

#[derive(Debug, Clone, PartialEq)]
pub struct CompareCell {
    pub a: Option<FigureCell>,
    pub b: Option<FigureCell>,
    /// B's median over A's.
    pub ratio: Option<f64>,
    pub ratio_text: String,
    pub tone: Tone,
    /// The two runs' ranges over rounds do not overlap.
    pub distinct: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CompareRow {
    pub def: &'static FigureDef,
    pub cells: Vec<CompareCell>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub cells: Vec<String>,
    pub rows: Vec<CompareRow>,
    /// Lost messages per cell, A and B.
    pub lost: Vec<(Option<u64>, Option<u64>)>,
    /// Why nothing is coloured, when the runs have too few rounds.
    pub colour_note: Option<String>,
}

/// The fewest rounds any of `cells` has in either run (0 when a cell is missing from both).
fn fewest_rounds(a: &Results, b: &Results, cells: &[String]) -> u32 {
    cells
        .iter()
        .flat_map(|n| [a.cell(n), b.cell(n)])
        .flatten()
        .map(|c| c.summary.rounds.max(c.rounds.len() as u32))
        .min()
        .unwrap_or(0)
}

/// One figure of one cell in both runs.
fn compare_cell(a: &Results, b: &Results, def: &'static FigureDef, name: &str) -> CompareCell {
    let fa = a.cell(name).map(|c| figure_cell(def, c, a.cell(BASELINE)));
    let fb = b.cell(name).map(|c| figure_cell(def, c, b.cell(BASELINE)));
    let (va, vb) = (
        fa.as_ref().and_then(|f| f.value),
        fb.as_ref().and_then(|f| f.value),
    );
    let ratio = match (va, vb) {
        (Some(x), Some(y)) if x.median != 0.0 => Some(y.median / x.median),
        _ => None,
    };
    let rounds = fewest_rounds(a, b, &[name.to_string()]);
    let distinct = match (va, vb) {
        (Some(x), Some(y)) => rounds >= MIN_ROUNDS_TO_COLOUR && (x.max < y.min || y.max < x.min),
        _ => false,
    };
    // Ranges apart: the ratio of medians is coloured as a ratio whose every round agrees.
    let tone = match ratio {
        Some(r) if distinct => tone_of(&Spread::of(&[r]), def.better, rounds),
        _ => Tone::Same,
    };
    CompareCell {
        a: fa,
        b: fb,
        ratio,
        ratio_text: ratio.map(format_ratio).unwrap_or_else(|| "—".into()),
        tone,
        distinct,
    }
}

pub(super) fn comparison(a: &Results, b: &Results, cells: &[String]) -> Comparison {
    let rows = SUMMARY_FIGURES
        .iter()
        .map(|&def| CompareRow {
            def,
            cells: cells.iter().map(|n| compare_cell(a, b, def, n)).collect(),
        })
        .collect();
    let lost = cells
        .iter()
        .map(|n| {
            (
                a.cell(n).map(|c| c.summary.audit.lost),
                b.cell(n).map(|c| c.summary.audit.lost),
            )
        })
        .collect();
    Comparison {
        cells: cells.to_vec(),
        rows,
        lost,
        colour_note: colour_note(fewest_rounds(a, b, cells)),
    }
}
