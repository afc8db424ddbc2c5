//! Draws `ChartSpec`s as SVG with plotters' SVG backend (text stays `<text>`: no font files).
//!
//! Every axis is drawn on a linear f64 coordinate; log and percentile scales are applied to the
//! values here (log10, and log10(1/(1-p)) for percentiles) with ticks and labels chosen to match,
//! so one code path draws every chart. Each cell has one colour, the same in every chart and in
//! the tables (`cell_colour`).

use std::error::Error;

use std::ops::Range;

use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::model::{
    Bar, BarGroup, ChartBody, ChartSpec, FaultMark, Format, LegendItem, Line, Mark, Run, Scale,
};
use crate::stats::Spread;

/// Pixel size of a chart spanning the page, and of one in the two-column grid.
pub const WIDE_SIZE: (u32, u32) = (1360, 400);
pub const NARROW_SIZE: (u32, u32) = (670, 390);

const FONT: &str = "sans-serif";
const TEXT: RGBColor = RGBColor(0x22, 0x22, 0x22);
const MUTED: RGBColor = RGBColor(0x77, 0x77, 0x77);
const GRID: RGBColor = RGBColor(0xE4, 0xE4, 0xE4);
const NEUTRAL: RGBColor = RGBColor(0x44, 0x44, 0x44);
/// Fault bands and their labels on charts over time.
const FAULT_BAND: RGBColor = RGBColor(0xC6, 0x28, 0x28);

/// Colour-blind safe (Okabe–Ito); `none`, the baseline, is a neutral dark grey.
const KNOWN: [(&str, RGBColor); 6] = [
    ("registry+fusion", RGBColor(0x00, 0x72, 0xB2)),
    ("registry", RGBColor(0x00, 0x9E, 0x73)),
    ("fusion", RGBColor(0xE6, 0x9F, 0x00)),
    ("none", RGBColor(0x55, 0x55, 0x55)),
    // The peers.
    ("pgmq", RGBColor(0xCC, 0x79, 0xA7)),
    ("pgq", RGBColor(0xD5, 0x5E, 0x00)),
];
const EXTRA: [RGBColor; 4] = [
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0x88, 0x44, 0xAA),
];

/// The colour of a cell, everywhere in the report.
pub fn cell_colour(name: &str) -> RGBColor {
    if let Some((_, c)) = KNOWN.iter().find(|(n, _)| *n == name) {
        return *c;
    }
    // Unknown cells get a colour from their name, so it is stable across reports.
    let h = name
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
    EXTRA[h as usize % EXTRA.len()]
}

/// `#RRGGBB` of a cell's colour, for the HTML.
pub fn cell_colour_hex(name: &str) -> String {
    let RGBColor(r, g, b) = cell_colour(name);
    format!("#{r:02X}{g:02X}{b:02X}")
}

fn colour_of(cell: &Option<String>) -> RGBColor {
    cell.as_deref().map(cell_colour).unwrap_or(NEUTRAL)
}

/// Plotters' SVG backend has no dashed stroke (its dashed series writes one element per dash),
/// so run B's lines are drawn solid at this opacity and the attribute is then rewritten into a
/// real SVG dash pattern.
const DASH_ALPHA: f64 = 0.997;
const DASH_ATTR: &str = "opacity=\"0.997\"";
const DASH_SVG: &str = "opacity=\"1\" stroke-dasharray=\"8 5\"";

type Res<T> = Result<T, Box<dyn Error>>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The chart as an SVG document (an `<svg>` element, ready to inline).
pub fn render_svg(spec: &ChartSpec) -> Result<String, String> {
    let size = if spec.wide { WIDE_SIZE } else { NARROW_SIZE };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw(&root, spec, size).map_err(|e| format!("chart {}: {e}", spec.id))?;
        root.present()
            .map_err(|e| format!("chart {}: {e}", spec.id))?;
    }
    Ok(svg.replace(DASH_ATTR, DASH_SVG))
}

fn draw(root: &Area, spec: &ChartSpec, (w, _h): (u32, u32)) -> Res<()> {
    root.fill(&WHITE)?;
    let area = root.titled(
        &spec.title,
        (FONT, 21).into_font().style(FontStyle::Bold).color(&TEXT),
    )?;
    let rows = legend_rows(&spec.legend, w);
    let (legend_area, plot_area) = area.split_vertically(rows as u32 * 20 + 8);
    draw_legend(&legend_area, &spec.legend, w)?;
    if !spec.has_data() {
        return draw_empty(&plot_area, spec);
    }
    match &spec.body {
        ChartBody::Lines(lines) => draw_lines(&plot_area, spec, lines),
        ChartBody::Bars(groups) => draw_bars(&plot_area, spec, groups, w),
    }
}

// ---------------------------------------------------------------------------------------------
// Legend

const LEGEND_FONT: u32 = 15;
/// Width of a character of the legend font, roughly (the SVG font is the viewer's sans-serif).
const LEGEND_CHAR_PX: i32 = 7;

fn legend_item_width(item: &LegendItem) -> i32 {
    30 + item.label.chars().count() as i32 * LEGEND_CHAR_PX + 18
}

fn legend_positions(items: &[LegendItem], width: u32) -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    let (mut x, mut row) = (16, 0);
    for item in items {
        let w = legend_item_width(item);
        if x + w > width as i32 - 10 && x > 16 {
            x = 16;
            row += 1;
        }
        out.push((x, 10 + row * 20));
        x += w;
    }
    out
}

fn legend_rows(items: &[LegendItem], width: u32) -> usize {
    legend_positions(items, width)
        .last()
        .map(|p| (p.1 - 10) as usize / 20 + 1)
        .unwrap_or(0)
}

fn draw_legend(area: &Area, items: &[LegendItem], width: u32) -> Res<()> {
    let style = (FONT, LEGEND_FONT)
        .into_font()
        .color(&TEXT)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (item, (x, y)) in items.iter().zip(legend_positions(items, width)) {
        let c = colour_of(&item.cell);
        match item.mark {
            Mark::Line => {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 24, y)],
                    c.stroke_width(3),
                ))?;
            }
            Mark::DashedLine => {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 24, y)],
                    c.mix(DASH_ALPHA).stroke_width(3),
                ))?;
            }
            Mark::FaintLine => {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 24, y)],
                    NEUTRAL.mix(0.35).stroke_width(1),
                ))?;
            }
            Mark::Box => {
                area.draw(&Rectangle::new(
                    [(x + 5, y - 6), (x + 19, y + 6)],
                    c.filled(),
                ))?;
            }
            Mark::LightBox => {
                area.draw(&Rectangle::new(
                    [(x + 5, y - 6), (x + 19, y + 6)],
                    c.mix(0.35).filled(),
                ))?;
                area.draw(&Rectangle::new(
                    [(x + 5, y - 6), (x + 19, y + 6)],
                    c.stroke_width(1),
                ))?;
            }
        }
        area.draw(&Text::new(item.label.clone(), (x + 30, y), style.clone()))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Scales and ticks

/// A linear f64 axis with the ticks (and grid lines) we chose, labelled by our own formatter.
struct Ticked {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ticked {
    fn new(range: Range<f64>, ticks: Vec<f64>) -> Self {
        Ticked {
            inner: range.into(),
            ticks,
        }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.inner.range()
    }
}

fn to_axis(scale: Scale, v: f64) -> Option<f64> {
    let t = match scale {
        Scale::Linear => v,
        Scale::Log => {
            if v > 0.0 {
                v.log10()
            } else {
                return None;
            }
        }
        Scale::Percentile => {
            if (0.0..1.0).contains(&v) {
                -(1.0 - v).log10()
            } else {
                return None;
            }
        }
    };
    t.is_finite().then_some(t)
}

/// Ticks at round values: a step of 1, 2, 2.5 or 5 times a power of ten.
fn nice_step(span: f64, target: usize) -> f64 {
    let raw = (span / target as f64).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let k = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|k| *k >= norm - 1e-9)
        .unwrap_or(10.0);
    k * mag
}

fn decimals_for(step: f64) -> usize {
    let mut d = 0;
    while d < 8
        && ((step * 10f64.powi(d as i32)).round() - step * 10f64.powi(d as i32)).abs() > 1e-6
    {
        d += 1;
    }
    d
}

fn tick_text(v: f64, decimals: usize) -> String {
    let v = if v.abs() < 1e-12 { 0.0 } else { v };
    if decimals == 0 && v.abs() >= 1000.0 {
        crate::model::format_number(v.round())
    } else {
        format!("{v:.decimals$}")
    }
}

/// A linear axis: its range (starting at zero when `from_zero`) and ticks.
fn linear_axis(lo: f64, hi: f64, from_zero: bool, target: usize) -> (f64, f64, Vec<f64>, usize) {
    let lo = if from_zero { lo.min(0.0) } else { lo };
    let (lo, hi) = if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        (
            lo - 0.5_f64.max(lo.abs() * 0.1),
            hi + 0.5_f64.max(hi.abs() * 0.1),
        )
    } else {
        (lo, hi)
    };
    let step = nice_step(hi - lo, target);
    let start = if from_zero && lo >= 0.0 {
        0.0
    } else {
        (lo / step).floor() * step
    };
    let end = (hi / step).ceil() * step;
    let end = if end < hi { end + step } else { end };
    let mut ticks = Vec::new();
    let mut t = start;
    while t <= end + step * 1e-6 {
        ticks.push(t);
        t += step;
    }
    (start, end, ticks, decimals_for(step))
}

/// A log axis (in log10 units) over `lo..hi` (positive values): ticks on 1-2-5 while the range
/// is short, on powers of ten when it is long.
fn log_axis(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let (a, b) = (lo.log10(), hi.log10());
    let (a, b) = if b - a < 0.3 {
        let mid = (a + b) / 2.0;
        (mid - 0.3, mid + 0.3)
    } else {
        (a - 0.04 * (b - a), b + 0.04 * (b - a))
    };
    let decades = b - a;
    let mults: &[f64] = if decades <= 2.5 {
        &[1.0, 2.0, 5.0]
    } else if decades <= 5.0 {
        &[1.0, 3.0]
    } else {
        &[1.0]
    };
    let mut ticks = Vec::new();
    let mut e = a.floor() as i32;
    while (e as f64) <= b {
        for m in mults {
            let t = (m * 10f64.powi(e)).log10();
            if t >= a && t <= b {
                ticks.push(t);
            }
        }
        e += 1;
    }
    (a, b, ticks)
}

fn log_tick_text(t: f64) -> String {
    let v = 10f64.powf(t);
    let v = {
        // Snap to the three significant digits the tick was chosen at.
        let mag = 10f64.powf(v.log10().floor() - 2.0);
        (v / mag).round() * mag
    };
    if v >= 1.0 {
        tick_text(v, 0)
    } else {
        let d = (-v.log10().floor()) as usize;
        let s = format!("{v:.d$}");
        s
    }
}

fn percentile_axis(max_x: f64) -> (f64, f64, Vec<f64>) {
    let end = max_x.ceil().max(3.0);
    let mut ticks = vec![0.0, 2f64.log10()];
    let mut k = 1.0;
    while k <= end {
        ticks.push(k);
        k += 1.0;
    }
    (0.0, end + 0.05, ticks)
}

fn percentile_tick_text(t: f64) -> String {
    let pct = 100.0 * (1.0 - 10f64.powf(-t));
    let d = (t.round() as i64 - 2).max(0) as usize;
    format!("{pct:.d$}%")
}

// ---------------------------------------------------------------------------------------------
// The plot area

/// How a tick is labelled.
type TickLabel = Box<dyn Fn(&f64) -> String>;

/// An axis as drawn: its range, its ticks and how a tick is labelled.
struct TickAxis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    label: TickLabel,
}

type Plot<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<Ticked, Ticked>>;

/// The plot's coordinates and mesh: grid, axis descriptions and tick labels.
fn plot<'a, 'b>(
    area: &'a Area<'b>,
    spec: &ChartSpec,
    x: &TickAxis,
    y: &TickAxis,
    x_mesh: bool,
) -> Res<Plot<'a, 'b>> {
    let mut chart = ChartBuilder::on(area)
        .margin_left(10)
        .margin_right(24)
        .margin_top(8)
        .margin_bottom(6)
        .x_label_area_size(52)
        .y_label_area_size(78)
        .build_cartesian_2d(
            Ticked::new(x.lo..x.hi, x.ticks.clone()),
            Ticked::new(y.lo..y.hi, y.ticks.clone()),
        )?;
    let mut mesh = chart.configure_mesh();
    if !x_mesh {
        mesh.disable_x_mesh();
    }
    mesh.x_desc(spec.x.label.as_str())
        .y_desc(spec.y.label.as_str())
        .x_label_formatter(&x.label)
        .y_label_formatter(&y.label)
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(MUTED)
        .axis_desc_style((FONT, 16).into_font().color(&TEXT))
        .label_style((FONT, 14).into_font().color(&TEXT))
        .draw()?;
    Ok(chart)
}

// ---------------------------------------------------------------------------------------------
// Line charts

/// Each line's points on the axes' linear coordinates (log10 and percentile applied); points
/// a scale cannot place (zero on a log axis) are dropped.
fn on_axes<'l>(spec: &ChartSpec, lines: &'l [Line]) -> Vec<(&'l Line, Vec<(f64, f64)>)> {
    let place =
        |(x, y): &(f64, f64)| Some((to_axis(spec.x.scale, *x)?, to_axis(spec.y.scale, *y)?));
    lines
        .iter()
        .map(|l| (l, l.points.iter().filter_map(place).collect()))
        .collect()
}

/// The lowest and highest of `values`; infinite when there are none.
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    })
}

/// The x axis of a line chart over data from `lo` to `hi` (axis coordinates).
fn x_axis(scale: Scale, lo: f64, hi: f64) -> TickAxis {
    match scale {
        Scale::Linear => {
            let (a, b, t, d) = linear_axis(lo, hi, false, 10);
            // Time and similar axes end at the data, not at the next tick.
            let (a, b) = if hi > lo { (lo, hi) } else { (a, b) };
            let ticks = t
                .into_iter()
                .filter(|v| *v >= a - 1e-9 && *v <= b + 1e-9)
                .collect();
            let label = Box::new(move |v: &f64| tick_text(*v, d));
            TickAxis {
                lo: a,
                hi: b,
                ticks,
                label,
            }
        }
        other => scaled_axis(other, lo, hi),
    }
}

/// The y axis of a line chart: linear ones start at zero.
fn y_axis(scale: Scale, lo: f64, hi: f64) -> TickAxis {
    match scale {
        Scale::Linear => {
            let (a, b, ticks, d) = linear_axis(lo.min(0.0), hi, true, 6);
            let label = Box::new(move |v: &f64| tick_text(*v, d));
            TickAxis {
                lo: a,
                hi: b,
                ticks,
                label,
            }
        }
        other => scaled_axis(other, lo, hi),
    }
}

/// A log or percentile axis.
fn scaled_axis(scale: Scale, lo: f64, hi: f64) -> TickAxis {
    let ((a, b, ticks), label): (_, TickLabel) = match scale {
        Scale::Percentile => (percentile_axis(hi), Box::new(|v| percentile_tick_text(*v))),
        _ => (
            log_axis(10f64.powf(lo), 10f64.powf(hi)),
            Box::new(|v| log_tick_text(*v)),
        ),
    };
    TickAxis {
        lo: a,
        hi: b,
        ticks,
        label,
    }
}

fn line_style(line: &Line) -> ShapeStyle {
    let c = cell_colour(&line.cell);
    match (line.faint, line.run) {
        (true, _) => c.mix(0.3).stroke_width(1),
        (false, Run::A) => c.stroke_width(2),
        (false, Run::B) => c.mix(DASH_ALPHA).stroke_width(2),
    }
}

fn draw_lines(area: &Area, spec: &ChartSpec, lines: &[Line]) -> Res<()> {
    let placed = on_axes(spec, lines);
    let all = || placed.iter().flat_map(|(_, p)| p.iter());
    let (x_lo, x_hi) = span(all().map(|p| p.0));
    let (y_lo, y_hi) = span(all().map(|p| p.1));
    if !x_lo.is_finite() || !y_lo.is_finite() {
        return draw_empty(area, spec);
    }
    let (x, y) = (
        x_axis(spec.x.scale, x_lo, x_hi),
        y_axis(spec.y.scale, y_lo, y_hi),
    );
    let mut chart = plot(area, spec, &x, &y, true)?;
    if spec.x.scale == Scale::Linear {
        draw_fault_marks(&mut chart, &spec.faults, &y)?;
    }
    // Faint lines underneath, then run A, then run B on top.
    let mut sorted: Vec<&(&Line, Vec<(f64, f64)>)> = placed.iter().collect();
    sorted.sort_by_key(|(l, _)| (!l.faint, l.run == Run::B));
    for (line, pts) in sorted.into_iter().filter(|(_, p)| !p.is_empty()) {
        chart.draw_series(LineSeries::new(pts.iter().copied(), line_style(line)))?;
    }
    Ok(())
}

/// Each fault step as a shaded band over the whole height (at least a fifth of a second wide,
/// so an instant fault still shows), its kind written at the top.
fn draw_fault_marks(chart: &mut Plot, marks: &[FaultMark], y: &TickAxis) -> Res<()> {
    for m in marks {
        let corners = [(m.from, y.lo), (m.to.max(m.from + 0.2), y.hi)];
        chart.draw_series(std::iter::once(Rectangle::new(
            corners,
            FAULT_BAND.mix(0.18).filled(),
        )))?;
        let label = EmptyElement::at((m.from, y.hi))
            + Text::new(m.label.clone(), (3, 3), fault_label_style());
        chart.draw_series(std::iter::once(label))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Bar charts

fn bar_text(v: f64, format: Format) -> String {
    match format {
        Format::Percent => crate::model::format_value(v, format),
        _ => crate::model::format_number(v),
    }
}

/// The top of the value axis: room above the highest whisker, capped at `y_max`.
fn bars_top(spec: &ChartSpec, groups: &[BarGroup]) -> f64 {
    let y_hi = groups
        .iter()
        .flat_map(|g| g.bars.iter())
        .filter_map(|b| b.value)
        .map(|v| v.max.max(v.median))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let y_hi = if y_hi > 0.0 { y_hi * 1.12 } else { 1.0 };
    match spec.y_max {
        Some(cap) if y_hi > cap => cap.max(y_hi / 1.12),
        _ => y_hi,
    }
}

/// The categorical x axis: one tick per group, labelled with the group's name.
fn group_axis(groups: &[BarGroup]) -> TickAxis {
    let n = groups.len().max(1);
    let labels: Vec<String> = groups.iter().map(|g| g.label.clone()).collect();
    let label = Box::new(move |v: &f64| {
        let i = v.round();
        if i >= 0.0 && (i as usize) < labels.len() && (v - i).abs() < 1e-6 {
            labels[i as usize].clone()
        } else {
            String::new()
        }
    });
    TickAxis {
        lo: -0.5,
        hi: n as f64 - 0.5,
        ticks: (0..n).map(|i| i as f64).collect(),
        label,
    }
}

/// Where a bar stands: its edges on the x axis, the whisker caps' half width, and whether its
/// value fits above it.
struct Slot {
    x0: f64,
    x1: f64,
    cap: f64,
    labelled: bool,
}

impl Slot {
    fn centre(&self) -> f64 {
        (self.x0 + self.x1) / 2.0
    }
}

fn text_style(colour: &RGBColor) -> TextStyle<'static> {
    (FONT, 13)
        .into_font()
        .color(colour)
        .pos(Pos::new(HPos::Center, VPos::Bottom))
}

/// A fault band's label: hung from the band's top left corner.
fn fault_label_style() -> TextStyle<'static> {
    (FONT, 12)
        .into_font()
        .color(&FAULT_BAND)
        .pos(Pos::new(HPos::Left, VPos::Top))
}

/// The min–max whisker of a spread; returns the top of what was drawn.
fn draw_whisker(chart: &mut Plot, s: &Slot, v: &Spread) -> Res<f64> {
    if !(v.max > v.min && v.max.is_finite() && v.min.is_finite()) {
        return Ok(v.median);
    }
    let (xc, cap, whisker) = (s.centre(), s.cap, TEXT.stroke_width(1));
    chart.draw_series([
        PathElement::new(vec![(xc, v.min), (xc, v.max)], whisker),
        PathElement::new(vec![(xc - cap, v.min), (xc + cap, v.min)], whisker),
        PathElement::new(vec![(xc - cap, v.max), (xc + cap, v.max)], whisker),
    ])?;
    Ok(v.max.max(v.median))
}

/// A bar with a value: run A filled, run B light with an outline; its whisker and its value.
fn draw_value_bar(chart: &mut Plot, spec: &ChartSpec, s: &Slot, bar: &Bar, v: &Spread) -> Res<()> {
    let c = cell_colour(&bar.cell);
    let corners = [(s.x0, 0.0), (s.x1, v.median)];
    let fill = match bar.run {
        Run::A => c.filled(),
        Run::B => c.mix(0.35).filled(),
    };
    chart.draw_series(std::iter::once(Rectangle::new(corners, fill)))?;
    if bar.run == Run::B {
        chart.draw_series(std::iter::once(Rectangle::new(corners, c.stroke_width(1))))?;
    }
    let top = draw_whisker(chart, s, v)?;
    if s.labelled {
        let text = bar_text(v.median, spec.value_format);
        let label =
            EmptyElement::at((s.centre(), top)) + Text::new(text, (0, -4), text_style(&TEXT));
        chart.draw_series(std::iter::once(label))?;
    }
    Ok(())
}

/// A bar: its value, or its note (`off`, `no data`) where the bar would stand.
fn draw_bar(chart: &mut Plot, spec: &ChartSpec, s: &Slot, bar: &Bar) -> Res<()> {
    match (&bar.value, &bar.note) {
        (Some(v), _) if v.median.is_finite() => draw_value_bar(chart, spec, s, bar, v),
        (_, Some(note)) => {
            let text = Text::new(note.clone(), (0, -4), text_style(&MUTED));
            chart.draw_series(std::iter::once(EmptyElement::at((s.centre(), 0.0)) + text))?;
            Ok(())
        }
        _ => Ok(()),
    }
}

fn draw_bars(area: &Area, spec: &ChartSpec, groups: &[BarGroup], width: u32) -> Res<()> {
    let n = groups.len().max(1);
    let (y0, y1, ticks, d) = linear_axis(0.0, bars_top(spec, groups), true, 6);
    let y = TickAxis {
        lo: y0,
        hi: y1,
        ticks,
        label: Box::new(move |v: &f64| tick_text(*v, d)),
    };
    let mut chart = plot(area, spec, &group_axis(groups), &y, false)?;
    let plot_px = width as f64 - 120.0;
    for (gi, g) in groups.iter().enumerate() {
        let k = g.bars.len().max(1);
        let slot = (0.8 / k as f64).min(0.5);
        let start = gi as f64 - slot * k as f64 / 2.0;
        let labelled = plot_px / n as f64 * slot * 0.84 >= 34.0;
        for (bi, bar) in g.bars.iter().enumerate() {
            let x0 = start + bi as f64 * slot + slot * 0.08;
            let s = Slot {
                x0,
                x1: x0 + slot * 0.84,
                cap: slot * 0.15,
                labelled,
            };
            draw_bar(&mut chart, spec, &s, bar)?;
        }
    }
    Ok(())
}

fn draw_empty(area: &Area, spec: &ChartSpec) -> Res<()> {
    let (w, h) = area.dim_in_pixel();
    area.draw(&Rectangle::new(
        [(78, 8), (w as i32 - 24, h as i32 - 58)],
        GRID.stroke_width(1),
    ))?;
    area.draw(&Text::new(
        format!("no data recorded ({} / {})", spec.x.label, spec.y.label),
        ((w as i32 + 54) / 2, (h as i32 - 50) / 2),
        (FONT, 16)
            .into_font()
            .color(&MUTED)
            .pos(Pos::new(HPos::Center, VPos::Center)),
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_cells_have_fixed_colours() {
        assert_eq!(cell_colour_hex("registry+fusion"), "#0072B2");
        assert_eq!(cell_colour_hex("none"), "#555555");
        assert_eq!(cell_colour("odd"), cell_colour("odd"));
    }

    #[test]
    fn percentile_ticks_read_as_percentiles() {
        assert_eq!(percentile_tick_text(0.0), "0%");
        assert_eq!(percentile_tick_text(2f64.log10()), "50%");
        assert_eq!(percentile_tick_text(1.0), "90%");
        assert_eq!(percentile_tick_text(2.0), "99%");
        assert_eq!(percentile_tick_text(3.0), "99.9%");
        assert_eq!(percentile_tick_text(4.0), "99.99%");
    }

    #[test]
    fn log_ticks_are_round() {
        let (_, _, ticks) = log_axis(0.3, 40.0);
        let texts: Vec<String> = ticks.iter().map(|t| log_tick_text(*t)).collect();
        assert_eq!(texts, ["0.5", "1", "2", "5", "10", "20"]);
        assert_eq!(log_tick_text(-2.0), "0.01");
    }

    #[test]
    fn linear_axes_start_at_zero_and_cover_the_data() {
        let (a, b, ticks, d) = linear_axis(0.0, 1234.0, true, 6);
        assert_eq!(a, 0.0);
        assert!(b > 1234.0);
        assert_eq!(ticks[0], 0.0);
        assert_eq!(d, 0);
        let (_, _, _, d) = linear_axis(0.0, 0.12, true, 6);
        assert_eq!(d, 2);
    }
}
