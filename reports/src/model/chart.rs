//! What a chart is, as data: lines or grouped bars per cell, axes with units and scales, a
//! legend and a sentence on how to read it. `crate::charts` draws these; nothing here does.

use crate::figures::Format;
use crate::stats::Spread;

/// Which run a series belongs to: a single report only has `A`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    A,
    B,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
    /// x is a quantile p in [0, 1), drawn at log10(1 / (1 - p)) and labelled as a percentile.
    Percentile,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// With its unit.
    pub label: String,
    pub scale: Scale,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub cell: String,
    pub run: Run,
    /// Thin and translucent (a single round behind the median line).
    pub faint: bool,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub cell: String,
    pub run: Run,
    /// Median with the min–max whisker.
    pub value: Option<Spread>,
    /// Written where the bar would be when there is no value (`off`, `no data`).
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<Bar>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ChartBody {
    Lines(Vec<Line>),
    /// Grouped bars; the x axis is categorical.
    Bars(Vec<BarGroup>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Line,
    DashedLine,
    FaintLine,
    Box,
    LightBox,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LegendItem {
    pub label: String,
    /// The cell whose colour it shows; None for a neutral (grey) key.
    pub cell: Option<String>,
    pub mark: Mark,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChartSpec {
    /// Stable, used as the HTML id.
    pub id: String,
    pub title: String,
    /// One sentence under the chart.
    pub how_to_read: String,
    pub x: Axis,
    pub y: Axis,
    /// How values are written on bars.
    pub value_format: Format,
    pub body: ChartBody,
    pub legend: Vec<LegendItem>,
    /// Spans the page's width.
    pub wide: bool,
    /// The value axis never goes above this (100 for percentages).
    pub y_max: Option<f64>,
    /// Fault steps marked over a time axis (a shaded band with the fault's kind).
    pub faults: Vec<FaultMark>,
}

/// A fault step drawn on a chart over time: a band from `from` to `to` seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultMark {
    pub from: f64,
    pub to: f64,
    pub label: String,
}

impl ChartSpec {
    pub fn has_data(&self) -> bool {
        match &self.body {
            ChartBody::Lines(lines) => lines.iter().any(|l| !l.points.is_empty()),
            ChartBody::Bars(groups) => groups
                .iter()
                .any(|g| g.bars.iter().any(|b| b.value.is_some())),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChartSection {
    pub id: String,
    pub title: String,
    pub charts: Vec<ChartSpec>,
}

pub(super) fn cell_legend(cells: &[String], mark: Mark) -> Vec<LegendItem> {
    cells
        .iter()
        .map(|c| LegendItem {
            label: c.clone(),
            cell: Some(c.clone()),
            mark,
        })
        .collect()
}
