//! Two runs side by side: every summary figure of every cell in A and in B, with B/A coloured
//! only where the runs' ranges over rounds do not overlap.

use super::format::format_ratio;
use super::tables::{figure_cell, tone_of, FigureCell, Tone, SUMMARY_FIGURES};
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
    let distinct = match (va, vb) {
        (Some(x), Some(y)) => x.max < y.min || y.max < x.min,
        _ => false,
    };
    let tone = match ratio {
        Some(r) if distinct => tone_of(&Spread::of(&[r]), def.better, false),
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
    }
}
