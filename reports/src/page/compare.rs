//! The A-against-B table of a comparison: every summary figure of every cell in both runs, with
//! B/A coloured only where the runs' ranges over rounds do not overlap.

use maud::{html, Markup};

use super::chrome::{swatch, th_with_unit};
use super::run::{tone_class, value};
use crate::model::{format_count, CompareCell, CompareRow, Comparison, FigureCell, ReportModel};

fn side(f: &Option<FigureCell>) -> Markup {
    html! {
        @match f {
            Some(f) => { (value(f, false)) }
            None => { span class="v" { "not run" } }
        }
    }
}

fn cells(cell: &str, x: &CompareCell) -> Markup {
    html! {
        td data-cell=(cell) data-run="A" { (side(&x.a)) }
        td data-cell=(cell) data-run="B" { (side(&x.b)) }
        td data-cell=(cell) data-run="ratio" data-ratio=[x.ratio.map(|r| r.to_string())]
            class=(tone_class(x.tone)) { (x.ratio_text) }
    }
}

fn row(c: &Comparison, row: &CompareRow) -> Markup {
    html! {
        tr data-key=(row.def.key) {
            th scope="row" { (th_with_unit(row.def.label, row.def.column)) }
            @for (cell, x) in c.cells.iter().zip(&row.cells) { (cells(cell, x)) }
        }
    }
}

fn lost(v: &Option<u64>) -> Markup {
    html! {
        @match v {
            Some(0) => { td class="ok" { "0" } }
            Some(n) => { td class="bad" { (format_count(*n)) } }
            None => { td { "not run" } }
        }
    }
}

fn lost_row(c: &Comparison) -> Markup {
    html! {
        tr data-key="lost" {
            th scope="row" { (th_with_unit("Lost messages", "audit")) }
            @for (a, b) in &c.lost { (lost(a)) (lost(b)) td {} }
        }
    }
}

/// The comparison section.
pub(super) fn table(m: &ReportModel, c: &Comparison) -> Markup {
    html! {
        section id="comparison" {
            h2 { "A against B" }
            p class="help" {
                "A: " (m.runs[0].label) " \u{a0}·\u{a0} B: " (m.runs[1].label)
                ". Medians over each run's rounds (min–max under them); B/A is the ratio of the \
                 medians, coloured only where the two runs' ranges over rounds do not overlap."
            }
            (super::run::colour_note(&c.colour_note))
            div class="scroll" { table class="compare" {
                thead {
                    tr {
                        th class="l" rowspan="2" { "figure" }
                        @for cell in &c.cells {
                            th colspan="3" style="text-align:center" { (swatch(cell)) (cell) }
                        }
                    }
                    tr { @for _ in &c.cells { th { "A" } th { "B" } th { "B/A" } } }
                }
                tbody {
                    @for r in &c.rows { (row(c, r)) }
                    (lost_row(c))
                }
            } }
        }
    }
}
