//! `sweep.html`: the sweep's page, laid out from `sweep.json` alone: the grid as a table whose
//! knee cells are shaded as a heat map (with each knee's interval over the repeats), the Pareto
//! frontier of sustained rate against p99 (points that may lose acknowledged commits on a crash
//! marked), and the cost model's predicted knee against the measured one.

use maud::{html, Markup};

use super::{SweepPoint, SweepResults};
use crate::capacity::amount;
use crate::charts::cell_colour_hex;
use crate::model::format_number;
use crate::page::chrome::{self, document, esc, figure, swatch, Page};

const CSS: &str = r#"
table.grid td.knee{font-variant-numeric:tabular-nums}
td.volatile{color:var(--bad)}
.legend span{margin-right:14px}
"#;

/// `sweep.html`: one self-contained page (inline CSS and SVG, no scripts).
pub fn render_sweep(r: &SweepResults) -> Result<String, String> {
    let m = &r.meta;
    let title = format!("ackbench sweep: {}", m.scenario.name);
    let subtitle = html! {
        (m.started_at) " · " (m.machine.cores) " cores · " (m.machine.hostname) " · "
        (count(r.points.len(), "point")) " × " (count(r.repeats as usize, "repeat"))
    };
    let body = html! {
        @if !r.complete {
            div class="banner incomplete" id="incomplete" {
                "INTERRUPTED: this sweep did not complete; points are missing."
            }
        }
        (summary(r))
        (chrome::warnings(&r.warnings))
        (grid(r))
        (figure("sweep-pareto", "Sustained rate against p99", "Each point and cell at its knee: \
            further right sustains more, lower answers faster. Filled points are on the Pareto \
            frontier (nothing is both faster and higher). Red rings: synchronous_commit or fsync \
            off, so a crash may lose commits already acknowledged.", true, &pareto_svg(r)))
        (figure("sweep-model", "Predicted against measured knee", "Each point and cell: the \
            cost model's knee (from costs per message below the knee and what the machine \
            offered) against the measured one; on the diagonal the model is exact, the dashed \
            lines are ±25%. Hollow: the knee was not bracketed (only a bound), left out of the \
            model's error.", true, &model_svg(r)))
        (facts(r))
    };
    Ok(document(Page {
        title: &title,
        subtitle,
        css: CSS,
        body,
        footer: html! { "from sweep.json alone." },
    }))
}

fn summary(r: &SweepResults) -> Markup {
    let best = r
        .points
        .iter()
        .flat_map(|p| p.cells.iter().map(move |c| (p, c)))
        .filter_map(|(p, c)| Some((p, c, c.knee.sustained?)))
        .max_by(|a, b| a.2.total_cmp(&b.2));
    html! {
        section class="verdict" id="verdict" {
            @if let Some((p, c, rate)) = best {
                p class="headline" {
                    "Highest knee: " (amount(rate)) " msg/s at p99 ≤ " (amount(r.criteria.slo_p99_ms))
                    " ms, " (c.name) " with " (SweepResults::point_label(p))
                    @if !p.durable { " (may lose acknowledged commits on a crash)" }
                    "."
                }
            }
            p {
                @match &r.model_error {
                    Some(e) => {
                        "The cost model's knee was off by " (amount(e.mean_abs * 100.0))
                        "% on average and " (amount(e.max_abs * 100.0)) "% at worst over "
                        (e.pairs) " measured knees (" (signed(e.mean_signed)) " on average)."
                    }
                    None => { "No knee could be compared with the cost model's prediction." }
                }
            }
        }
    }
}

/// `1 repeat`, `2 repeats`.
fn count(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

fn signed(share: f64) -> String {
    let pct = amount((share * 100.0).abs());
    match share >= 0.0 {
        true => format!("predicting {pct}% high"),
        false => format!("predicting {pct}% low"),
    }
}

/// The knees' range, for the heat map's shading.
fn knee_range(r: &SweepResults) -> (f64, f64) {
    let knees = r
        .points
        .iter()
        .flat_map(|p| &p.cells)
        .filter_map(|c| c.knee.sustained);
    knees.fold((f64::MAX, 0.0), |(lo, hi), k| (lo.min(k), hi.max(k)))
}

/// A blue whose depth grows with `v` between `lo` and `hi`.
fn heat(v: f64, (lo, hi): (f64, f64)) -> String {
    let t = match hi > lo {
        true => ((v - lo) / (hi - lo)).clamp(0.0, 1.0),
        false => 1.0,
    };
    let channel = |full: f64| (255.0 - t * (255.0 - full)).round() as u8;
    format!(
        "background:#{:02X}{:02X}{:02X}",
        channel(110.0),
        channel(170.0),
        channel(230.0)
    )
}

fn grid(r: &SweepResults) -> Markup {
    let cells: Vec<&str> = r
        .points
        .first()
        .map(|p| p.cells.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();
    let range = knee_range(r);
    html! {
        section id="grid" {
            h2 { "The grid" }
            p class="help" {
                "Each point's knee per cell: the median sustained rate over "
                (count(r.repeats as usize, "repeat")) " [lowest–highest], shaded deeper the higher it is (≥: a search held up \
                 to --max, so the knee lies above); under it the cost model's prediction and the \
                 resource it says limits the rate."
            }
            table class="grid" {
                thead { tr {
                    @for k in &r.keys { th { (k) } }
                    th { "durable" }
                    @for c in &cells { th { (swatch(c)) (c) } }
                } }
                tbody { @for p in &r.points { (grid_row(r, p, range)) } }
            }
        }
    }
}

fn grid_row(r: &SweepResults, p: &SweepPoint, range: (f64, f64)) -> Markup {
    html! {
        tr {
            @for k in &r.keys { td { (p.settings.get(k).map(String::as_str).unwrap_or("")) } }
            td class=(if p.durable { "" } else { "volatile" }) {
                @if p.durable { "yes" } @else { "no: may lose acked commits" }
            }
            @for c in &p.cells {
                @let style = c.knee.sustained.map(|k| heat(k, range)).unwrap_or_default();
                td class="knee" style=(style) data-cell=(c.name) {
                    @match c.knee.sustained {
                        Some(k) => {
                            @if !c.bracketed { "≥ " }
                            strong { (amount(k)) }
                            " [" (c.knee.low.map(amount).unwrap_or_default()) "–"
                            (c.knee.high.map(amount).unwrap_or_default()) "]"
                        }
                        None => { "no rate held" }
                    }
                    br;
                    span class="unit" {
                        "p99 " (format_number(c.p99_ms)) " ms · model "
                        (c.predicted_knee.map(amount).unwrap_or_else(|| "—".into()))
                        @if let Some(l) = &c.limited_by { " (" (l) ")" }
                    }
                }
            }
        }
    }
}

/// One dot of a chart: x, y, colour, whether filled, whether ringed red, its tooltip.
struct Dot {
    x: f64,
    y: f64,
    colour: String,
    filled: bool,
    ringed: bool,
    label: String,
}

/// (sustained rate, p99) of every point and cell with a knee, and which lie on the frontier.
pub(super) fn pareto(r: &SweepResults) -> Vec<(f64, f64, bool)> {
    let pts: Vec<(f64, f64)> = r
        .points
        .iter()
        .flat_map(|p| &p.cells)
        .filter_map(|c| Some((c.knee.sustained?, c.p99_ms)))
        .filter(|(_, l)| l.is_finite())
        .collect();
    pts.iter()
        .map(|&(x, y)| {
            let dominated = pts
                .iter()
                .any(|&(a, b)| a >= x && b <= y && (a > x || b < y));
            (x, y, !dominated)
        })
        .collect()
}

fn pareto_svg(r: &SweepResults) -> String {
    let frontier = pareto(r);
    let mut dots = Vec::new();
    let mut i = 0;
    for p in &r.points {
        for c in &p.cells {
            let (Some(x), true) = (c.knee.sustained, c.p99_ms.is_finite()) else {
                continue;
            };
            dots.push(Dot {
                x,
                y: c.p99_ms,
                colour: cell_colour_hex(&c.name),
                filled: frontier.get(i).is_some_and(|f| f.2),
                ringed: !p.durable,
                label: format!("{} · {}", c.name, SweepResults::point_label(p)),
            });
            i += 1;
        }
    }
    scatter(&dots, "sustained msg/s", "p99 ms at the knee", false)
}

fn model_svg(r: &SweepResults) -> String {
    let dots: Vec<Dot> = r
        .points
        .iter()
        .flat_map(|p| p.cells.iter().map(move |c| (p, c)))
        .filter_map(|(p, c)| {
            Some(Dot {
                x: c.knee.sustained?,
                y: c.predicted_knee?,
                colour: cell_colour_hex(&c.name),
                filled: c.bracketed,
                ringed: !p.durable,
                label: format!("{} · {}", c.name, SweepResults::point_label(p)),
            })
        })
        .collect();
    scatter(&dots, "measured knee msg/s", "predicted knee msg/s", true)
}

/// A scatter chart from zero, with the diagonal and ±25% lines when `diagonal`.
fn scatter(dots: &[Dot], x_label: &str, y_label: &str, diagonal: bool) -> String {
    let (w, h, left, bottom) = (640.0, 360.0, 64.0, 40.0);
    let mut x_max = dots.iter().fold(0.0f64, |m, d| m.max(d.x)) * 1.1;
    let mut y_max = dots.iter().fold(0.0f64, |m, d| m.max(d.y)) * 1.1;
    if diagonal {
        x_max = x_max.max(y_max);
        y_max = x_max;
    }
    let (x_max, y_max) = (x_max.max(1.0), y_max.max(1.0));
    let sx = |x: f64| left + x / x_max * (w - left - 16.0);
    let sy = |y: f64| h - bottom - y / y_max * (h - bottom - 16.0);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" font-size=\"12\">"
    );
    svg += &format!(
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#444\"/><line x1=\"{left}\" y1=\"16\" x2=\"{left}\" y2=\"{}\" stroke=\"#444\"/>",
        h - bottom, w - 16.0, h - bottom, h - bottom
    );
    for t in 0..=4 {
        let (xv, yv) = (x_max * t as f64 / 4.0, y_max * t as f64 / 4.0);
        svg += &format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            sx(xv), h - bottom + 16.0, esc(&amount(xv)), left - 6.0, sy(yv) + 4.0, esc(&amount(yv))
        );
    }
    svg += &format!(
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"14\" y=\"{:.1}\" transform=\"rotate(-90 14 {:.1})\" text-anchor=\"middle\">{}</text>",
        (left + w) / 2.0, h - 4.0, esc(x_label), h / 2.0, h / 2.0, esc(y_label)
    );
    if diagonal {
        for (f, dash) in [
            (1.0, ""),
            (1.25, " stroke-dasharray=\"4 3\""),
            (0.75, " stroke-dasharray=\"4 3\""),
        ] {
            let end = (x_max).min(y_max / f);
            svg +=
                &format!(
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#999\"{dash}/>",
                sx(0.0), sy(0.0), sx(end), sy(end * f)
            );
        }
    }
    for d in dots {
        let fill = if d.filled { d.colour.as_str() } else { "white" };
        svg += &format!(
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"{fill}\" stroke=\"{}\" stroke-width=\"2\"><title>{}</title></circle>",
            sx(d.x), sy(d.y), d.colour, esc(&format!("{}: {} / {}", d.label, amount(d.x), amount(d.y)))
        );
        if d.ringed {
            svg += &format!(
                "<circle class=\"volatile\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"9\" fill=\"none\" stroke=\"#D55E00\" stroke-width=\"1.5\"/>",
                sx(d.x), sy(d.y)
            );
        }
    }
    svg + "</svg>"
}

fn facts(r: &SweepResults) -> Markup {
    let m = &r.machine;
    let list = vec![
        (
            "latency target".to_string(),
            format!("p99 ≤ {} ms", amount(r.criteria.slo_p99_ms)),
        ),
        ("repeats".to_string(), r.repeats.to_string()),
        (
            "window per step".to_string(),
            format!(
                "{} s (longer after rejections near the knee)",
                amount(r.plan.step_secs)
            ),
        ),
        ("cores".to_string(), amount(m.cores)),
        (
            "fsync rate".to_string(),
            format!("{}/s ({})", format_number(m.fsync_per_sec), m.fsync_source),
        ),
    ];
    html! {
        section id="run" {
            h2 { "The sweep" }
            (chrome::facts(&list, html! {}))
            (probes(r))
            (chrome::notes_and_scenario(&r.meta.notes, &r.meta.scenario.name, &r.meta.scenario.text))
        }
    }
}

/// The machine as probed before each search, in the order run.
fn probes(r: &SweepResults) -> Markup {
    html! {
        @if !r.probes.is_empty() {
            h3 id="probes" { "The machine before each search" }
            p class="note" { "PostgreSQL's CPU probe (the fastest of its runs; lower is faster) \
                and the fsync probe, just before each search: the same code runs slower when the \
                machine is busy elsewhere." }
            table {
                tr { th { "point" } th { "repeat" } th { "CPU probe" } th { "fsync" } }
                @for p in &r.probes {
                    tr {
                        td { (p.point) } td { (p.repeat) }
                        td { (measured(p.cpu_ms, |v| format!("{v:.1} ms"))) }
                        td { (measured(p.fsync_per_sec, |v| format!("{}/s", format_number(v)))) }
                    }
                }
            }
        }
    }
}

/// A probe's figure with its unit, or a dash for a probe that failed (NaN).
fn measured(v: f64, shown: impl FnOnce(f64) -> String) -> String {
    if v.is_finite() {
        shown(v)
    } else {
        "—".into()
    }
}

#[cfg(test)]
mod tests {
    use super::super::cost_model::{Costs, Offer};
    use super::super::*;
    use super::*;

    fn point(sync: &str, knee: f64, p99: f64, predicted: f64) -> SweepPoint {
        SweepPoint {
            settings: [("pg.synchronous_commit".to_string(), sync.to_string())].into(),
            durable: sync == "on",
            offer: Offer::default(),
            cells: vec![PointCell {
                name: "none".into(),
                knee: Knee::of(vec![Some(knee), Some(knee * 1.1)]),
                p99_ms: p99,
                costs: Costs::default(),
                predicted_knee: Some(predicted),
                limited_by: Some("machine CPU (2 cores)".into()),
                limits: vec![],
                stopped: vec![],
                bracketed: true,
            }],
        }
    }

    fn doc() -> SweepResults {
        SweepResults {
            kind: SWEEP_KIND.into(),
            schema_version: SWEEP_SCHEMA_VERSION,
            complete: true,
            meta: Default::default(),
            criteria: Default::default(),
            plan: Default::default(),
            repeats: 2,
            machine: MachineOffer {
                cores: 2.0,
                fsync_per_sec: 400.0,
                fsync_source: "probe".into(),
            },
            keys: vec!["pg.synchronous_commit".into()],
            points: vec![
                point("on", 800.0, 30.0, 900.0),
                point("off", 2000.0, 20.0, 1800.0),
            ],
            model_error: None,
            warnings: vec![],
            probes: vec![],
        }
    }

    #[test]
    fn the_frontier_keeps_only_undominated_points() {
        let mut d = doc();
        d.points.push(point("on", 500.0, 40.0, 500.0));
        d.points.push(point("on", 3000.0, 45.0, 500.0));
        let f: Vec<bool> = pareto(&d).iter().map(|p| p.2).collect();
        assert_eq!(f, [false, true, false, true]);
    }

    #[test]
    fn the_page_shows_the_grid_intervals_and_marks_volatile_points() {
        let html = render_sweep(&doc()).unwrap();
        assert!(
            html.contains("id=\"chart-sweep-pareto\"") && html.contains("id=\"chart-sweep-model\"")
        );
        assert!(
            html.contains("2,100") || html.contains("2100"),
            "knee median shown"
        );
        assert!(html.contains("may lose acked commits"));
        assert_eq!(
            html.matches("class=\"volatile\" cx=").count(),
            2,
            "ringed in both charts"
        );
        let mut d = doc();
        d.meta.scenario.name = "<b>x</b>".into();
        assert!(!render_sweep(&d).unwrap().contains("<b>x"));
    }

    #[test]
    fn the_probe_table_shows_each_probe_and_a_dash_for_one_that_failed() {
        let probe = |point, repeat, fsync_per_sec, cpu_ms| SearchProbe {
            point,
            repeat,
            fsync_per_sec,
            cpu_ms,
        };
        let mut d = doc();
        assert!(!render_sweep(&d).unwrap().contains("id=\"probes\""));
        d.probes = vec![probe(1, 1, 420.0, 31.25), probe(2, 1, f64::NAN, f64::NAN)];
        let html = render_sweep(&d).unwrap();
        let table = &html[html.find("id=\"probes\"").unwrap()..];
        assert!(table.contains("<td>31.2 ms</td><td>420/s</td>"), "{table}");
        assert!(table.contains("<td>—</td><td>—</td>"), "{table}");
        assert!(!table.contains("NaN"));
    }
}
