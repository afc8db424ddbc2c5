//! The page: one self-contained HTML file (inline CSS, inline SVG charts, no scripts, nothing
//! fetched), laid out from a `ReportModel`. Every text that comes from a results file is escaped.

use std::fmt::Write as _;
use std::path::Path;

use crate::charts::{cell_colour_hex, render_svg};
use crate::model::{
    self, ChartSection, Comparison, FigureCell, Header, ReportModel, RunModel, Status, Tone,
    BASELINE, SUMMARY_FIGURES, SUMMARY_SPLIT,
};
use crate::results::Results;

/// The HTML report of one run.
pub fn render_report(results: &Results) -> Result<String, String> {
    render_model(&model::build(results))
}

/// The HTML report comparing two runs: `baseline` is shown as A, `candidate` as B, and every
/// ratio is B/A. (`ackbench report NEW.json --compare OLD.json` is `render_comparison(OLD, NEW)`.)
pub fn render_comparison(baseline: &Results, candidate: &Results) -> Result<String, String> {
    render_model(&model::build_comparison(baseline, candidate))
}

/// Writes a report next to where it belongs, replacing any older one whole (written to a
/// temporary file first, then renamed).
pub fn write_report(path: &Path, html: &str) -> Result<(), String> {
    let tmp = path.with_extension("html.tmp");
    std::fs::write(&tmp, html).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const CSS: &str = r#"
:root{--fg:#1f2328;--muted:#656d76;--line:#d8dee4;--soft:#f6f8fa;--good:#1a7f37;--bad:#cf222e;--warn:#9a6700}
*{box-sizing:border-box}
body{margin:0;background:#eef1f4;color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1440px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:24px;margin:0 0 2px}h2{font-size:18px;margin:0 0 10px}h3{font-size:15px;margin:14px 0 6px}
.sub{color:var(--muted);margin:0 0 12px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 20px;margin:14px 0}
.banner{border-radius:8px;padding:14px 20px;margin:14px 0;font-size:18px;font-weight:700;color:#fff;background:var(--bad)}
.banner.incomplete{background:var(--warn)}
.verdict{border-left:10px solid var(--muted)}
.verdict.passed{border-left-color:var(--good)}.verdict.failed{border-left-color:var(--bad)}.verdict.incomplete{border-left-color:var(--warn)}
.verdict .headline{font-size:20px;font-weight:700;margin:0 0 6px}
.verdict.passed .headline{color:var(--good)}.verdict.failed .headline{color:var(--bad)}.verdict.incomplete .headline{color:var(--warn)}
.verdict ul{margin:0;padding-left:20px}
li.failed{color:var(--bad);font-weight:600}li.incomplete,li.warning{color:var(--warn)}li.passed{color:var(--good)}li.info{color:var(--muted)}
.warnings{border-left:10px solid var(--warn)}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}
.runs{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:14px}
.runs>section{margin:0}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{padding:5px 9px;border-bottom:1px solid #eaeef2;text-align:right;vertical-align:top;white-space:nowrap}
thead th{background:var(--soft);font-weight:600;vertical-align:bottom;white-space:normal;min-width:70px}
th[scope=row],td.l,th.l{text-align:left}
th .unit{display:block;font-weight:400;color:var(--muted);font-size:11.5px}
.flags{display:block;font-weight:400;color:var(--muted);font-size:11.5px}
.sp{display:block;color:var(--muted);font-size:11.5px}
.ra{display:block;font-size:12px;color:var(--muted)}
.ra small{font-size:10.5px}
.better{color:var(--good)}.worse{color:var(--bad)}
.ra.better,.ra.worse{font-weight:600}
td.bad,span.bad{color:var(--bad);font-weight:700}td.ok{color:var(--good)}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px}
.scroll{overflow-x:auto}
.help{color:var(--muted);margin:0 0 10px;max-width:1100px}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:18px}
figure{margin:0;min-width:0}figure.wide{grid-column:1/-1}
figure svg{display:block;width:100%;height:auto;border:1px solid #eaeef2;border-radius:4px}
figcaption{color:var(--muted);font-size:12.5px;margin-top:5px}
pre{background:var(--soft);padding:10px 12px;border-radius:6px;overflow-x:auto;font-size:12.5px}
details{margin-top:10px}summary{cursor:pointer;color:#0969da}
footer{color:var(--muted);font-size:12px;margin-top:18px}
tr.total td,tr.total th{font-weight:600}
table.summary thead th{min-width:96px}
table.summary thead th:first-child{min-width:0}
.ra small{display:block;font-size:10.5px;font-weight:400}
td.wrap{white-space:normal;min-width:220px;max-width:340px}
table.compare th,table.compare td{padding:4px 6px}
table.compare .sp{font-size:10.5px}
@media print{body{background:#fff}section{break-inside:avoid}}
"#;

fn status_class(s: Status) -> &'static str {
    match s {
        Status::Passed => "passed",
        Status::Failed => "failed",
        Status::Incomplete => "incomplete",
        Status::Warning => "warning",
        Status::Info => "info",
    }
}

fn tone_class(t: Tone) -> &'static str {
    match t {
        Tone::Better => " better",
        Tone::Worse => " worse",
        Tone::Same => "",
    }
}

fn swatch(cell: &str) -> String {
    format!(
        "<span class=\"sw\" style=\"background:{}\"></span>",
        cell_colour_hex(cell)
    )
}

/// Lays out the page of a model.
pub fn render_model(m: &ReportModel) -> Result<String, String> {
    let mut h = String::with_capacity(256 * 1024);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"ackbench-reports {}\">\n<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n",
        env!("CARGO_PKG_VERSION"),
        esc(&m.title),
        CSS
    );
    let _ = writeln!(h, "<header>\n<h1>{}</h1>", esc(&m.title));
    let first = &m.runs[0];
    if m.runs.len() == 1 {
        let f = |k: &str| {
            first
                .header
                .facts
                .iter()
                .find(|(l, _)| l == k)
                .map(|(_, v)| v.as_str())
                .unwrap_or("")
        };
        let _ = writeln!(
            h,
            "<p class=\"sub\">{} · {} · git {}</p>",
            esc(f("Started")),
            esc(f("Machine")),
            esc(f("Git revision"))
        );
    } else {
        let _ = writeln!(
            h,
            "<p class=\"sub\">A (baseline): {} · B: {} · ratios are B/A</p>",
            esc(&m.runs[0].label),
            esc(&m.runs[1].label)
        );
    }
    h.push_str("</header>\n");

    for run in &m.runs {
        if !run.complete {
            let _ = writeln!(
                h,
                "<div class=\"banner incomplete\" id=\"incomplete{}\">{}INTERRUPTED: this run did not complete. The figures below cover only the rounds that finished; do not read them as a full run.</div>",
                esc(&run.tag),
                tag_prefix(run)
            );
        }
    }

    // Verdicts.
    if m.runs.len() == 1 {
        verdict(&mut h, first);
    } else {
        h.push_str("<div class=\"runs\">\n");
        for run in &m.runs {
            verdict(&mut h, run);
        }
        h.push_str("</div>\n");
    }

    if !m.warnings.is_empty() {
        h.push_str("<section class=\"warnings\" id=\"warnings\"><h2>Warnings</h2><ul>\n");
        for w in &m.warnings {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul></section>\n");
    }

    // What ran, where.
    if m.runs.len() == 1 {
        run_facts(&mut h, first, "run");
    } else {
        h.push_str("<div class=\"runs\">\n");
        for run in &m.runs {
            run_facts(&mut h, run, &format!("run-{}", run.tag.to_lowercase()));
        }
        h.push_str("</div>\n");
    }

    match &m.comparison {
        None => {
            glance(&mut h, first);
            summary(&mut h, first, "summary", "Summary");
        }
        Some(c) => {
            comparison(&mut h, m, c);
        }
    }

    for section in &m.chart_sections {
        charts(&mut h, section)?;
    }

    for run in &m.runs {
        audit(&mut h, run);
    }
    for run in &m.runs {
        gates(&mut h, run);
    }
    if m.comparison.is_some() {
        for run in &m.runs {
            let id = format!("summary-{}", run.tag.to_lowercase());
            let title = format!("Summary of run {}: {}", run.tag, run.label);
            h.push_str("<details><summary>");
            let _ = write!(h, "{}", esc(&title));
            h.push_str("</summary>\n");
            summary(&mut h, run, &id, &title);
            h.push_str("</details>\n");
        }
    }

    let _ = writeln!(
        h,
        "<footer>Rendered by ackbench-reports {} from the results file alone; medians over rounds, min–max beside them, ratios to <b>{}</b> taken round by round. Self-contained: no scripts, nothing fetched.</footer>\n</main>\n</body>\n</html>",
        env!("CARGO_PKG_VERSION"),
        BASELINE
    );
    Ok(h)
}

fn tag_prefix(run: &RunModel) -> String {
    if run.tag.is_empty() {
        String::new()
    } else {
        format!("Run {}: ", esc(&run.tag))
    }
}

fn verdict(h: &mut String, run: &RunModel) {
    let v = &run.verdict;
    let id = if run.tag.is_empty() {
        "verdict".to_string()
    } else {
        format!("verdict-{}", run.tag.to_lowercase())
    };
    let _ = writeln!(
        h,
        "<section class=\"verdict {}\" id=\"{}\">\n<p class=\"headline\">{}{}</p>\n<ul>",
        status_class(v.status),
        id,
        tag_prefix(run),
        esc(&v.headline)
    );
    for (s, text) in &v.items {
        let _ = writeln!(h, "<li class=\"{}\">{}</li>", status_class(*s), esc(text));
    }
    h.push_str("</ul>\n</section>\n");
}

fn run_facts(h: &mut String, run: &RunModel, id: &str) {
    let hd: &Header = &run.header;
    let title = if run.tag.is_empty() {
        "The run".to_string()
    } else {
        format!("Run {}", run.tag)
    };
    let _ = writeln!(
        h,
        "<section id=\"{}\">\n<h2>{}</h2>\n<dl class=\"facts\">",
        esc(id),
        esc(&title)
    );
    for (k, v) in &hd.facts {
        let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    if !hd.pg_settings.is_empty() {
        let settings: Vec<String> = hd
            .pg_settings
            .iter()
            .map(|(k, v)| format!("{} = {}", esc(k), esc(v)))
            .collect();
        let _ = writeln!(
            h,
            "<dt>PostgreSQL settings</dt><dd>{}</dd>",
            settings.join(" · ")
        );
    }
    h.push_str("</dl>\n");
    notes_and_scenario(h, &hd.notes, &hd.scenario_name, &hd.scenario_text);
}

fn value_html(f: &FigureCell, with_ratio: bool) -> String {
    let mut s = format!("<span class=\"v\">{}</span>", esc(&f.text));
    if let Some(sp) = &f.spread_text {
        let _ = write!(s, "<span class=\"sp\">{}</span>", esc(sp));
    }
    if with_ratio {
        if let Some(r) = &f.ratio_text {
            let _ = write!(
                s,
                "<span class=\"ra{}\" title=\"ratio to {}, round by round\">{}",
                tone_class(f.tone),
                BASELINE,
                esc(r)
            );
            if let Some(rs) = &f.ratio_spread_text {
                let _ = write!(s, "<small>{}</small>", esc(rs));
            }
            s.push_str("</span>");
        }
    }
    s
}

fn data_attrs(f: &FigureCell) -> String {
    let mut s = format!(" data-key=\"{}\"", esc(f.key));
    if let Some(v) = f.value {
        let _ = write!(s, " data-median=\"{}\"", v.median);
    }
    if let Some(r) = f.ratio {
        let _ = write!(s, " data-ratio=\"{}\"", r.median);
    }
    s
}

fn glance(h: &mut String, run: &RunModel) {
    h.push_str("<section id=\"glance\">\n<h2>At a glance: what each accelerator does</h2>\n");
    let _ = writeln!(
        h,
        "<p class=\"help\">Medians over rounds. × is the ratio to the <b>{BASELINE}</b> cell (both accelerators off) taken round by round, with its range over rounds; green where every round improved, red where every round got worse.</p>"
    );
    h.push_str("<div class=\"scroll\"><table>\n<thead><tr><th class=\"l\">cell</th><th>commits per acked message<span class=\"unit\">× vs none</span></th><th class=\"l\">commits saved</th><th>ack latency p50<span class=\"unit\">ms, × vs none</span></th><th>ack latency p99<span class=\"unit\">ms, × vs none</span></th><th>ack throughput<span class=\"unit\">msg/s, × vs none</span></th><th>audit</th></tr></thead>\n<tbody>\n");
    for g in &run.glance {
        let _ = writeln!(
            h,
            "<tr data-cell=\"{c}\"><th scope=\"row\">{sw}{c}</th><td{a1}>{v1}</td><td class=\"l wrap\">{saved}</td><td{a2}>{v2}</td><td{a3}>{v3}</td><td{a4}>{v4}</td><td class=\"{lc}\">{lost}{dups}</td></tr>",
            c = esc(&g.cell),
            sw = swatch(&g.cell),
            a1 = data_attrs(&g.commits_per_ack),
            v1 = value_html(&g.commits_per_ack, true),
            saved = esc(&g.commits_saved_text),
            a2 = data_attrs(&g.ack_p50),
            v2 = value_html(&g.ack_p50, true),
            a3 = data_attrs(&g.ack_p99),
            v3 = value_html(&g.ack_p99, true),
            a4 = data_attrs(&g.ack_throughput),
            v4 = value_html(&g.ack_throughput, true),
            lc = if g.lost == 0 { "ok" } else { "bad" },
            lost = esc(&g.lost_text),
            dups = if g.duplicates > 0 {
                format!(
                    "<span class=\"sp\">{} duplicates</span>",
                    model::format_number(g.duplicates as f64)
                )
            } else {
                String::new()
            },
        );
    }
    h.push_str("</tbody></table></div>\n</section>\n");
}

fn summary(h: &mut String, run: &RunModel, id: &str, title: &str) {
    let _ = writeln!(h, "<section id=\"{}\">\n<h2>{}</h2>", esc(id), esc(title));
    let rounds = run.summary.iter().map(|r| r.rounds).max().unwrap_or(0);
    let _ = writeln!(
        h,
        "<p class=\"help\">One row per cell. Each figure is the median over {rounds} round{s}{range}; × is its ratio to <b>{BASELINE}</b>, computed within each round and then summarised. \"off\": the figure needs an accelerator the cell runs without.</p>",
        s = if rounds == 1 { "" } else { "s" },
        range = if rounds > 1 { ", with min–max under it" } else { "" },
    );
    let parts = [
        (
            "Throughput and what an acked message costs",
            0..*SUMMARY_SPLIT,
            false,
        ),
        (
            "Accelerators, ack latency and the audit",
            *SUMMARY_SPLIT..SUMMARY_FIGURES.len(),
            true,
        ),
    ];
    for (part, (caption, range, with_audit)) in parts.into_iter().enumerate() {
        let _ = write!(
            h,
            "<h3>{}</h3>\n<div class=\"scroll\"><table class=\"summary\" id=\"{}-{}\">\n<thead><tr><th class=\"l\">cell</th>",
            esc(caption),
            esc(id),
            part + 1
        );
        for d in &SUMMARY_FIGURES[range.clone()] {
            let _ = write!(
                h,
                "<th data-key=\"{}\">{}{}</th>",
                esc(d.key),
                esc(d.label),
                if d.column.is_empty() {
                    String::new()
                } else {
                    format!("<span class=\"unit\">{}</span>", esc(d.column))
                }
            );
        }
        if with_audit {
            h.push_str("<th class=\"l\">audit</th>");
        }
        h.push_str("</tr></thead>\n<tbody>\n");
        for row in &run.summary {
            let onoff = |b: bool| if b { "on" } else { "off" };
            let _ = write!(
                h,
                "<tr data-cell=\"{c}\"><th scope=\"row\">{sw}{c}<span class=\"flags\">registry {r} · fusion {f}</span></th>",
                c = esc(&row.cell),
                sw = swatch(&row.cell),
                r = onoff(row.registry),
                f = onoff(row.fusion),
            );
            for f in &row.figures[range.clone()] {
                let _ = write!(h, "<td{}>{}</td>", data_attrs(f), value_html(f, true));
            }
            if with_audit {
                let _ = write!(
                    h,
                    "<td class=\"l {}\" data-key=\"audit\">{}</td>",
                    if row.audit_passed { "ok" } else { "bad" },
                    esc(&row.audit_text)
                );
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody></table></div>\n");
    }
    h.push_str("</section>\n");
}

fn comparison(h: &mut String, m: &ReportModel, c: &Comparison) {
    h.push_str("<section id=\"comparison\">\n<h2>A against B</h2>\n");
    let _ = writeln!(
        h,
        "<p class=\"help\">A: {} &nbsp;·&nbsp; B: {}. Medians over each run's rounds (min–max under them); B/A is the ratio of the medians, coloured only where the two runs' ranges over rounds do not overlap.</p>",
        esc(&m.runs[0].label),
        esc(&m.runs[1].label)
    );
    h.push_str("<div class=\"scroll\"><table class=\"compare\">\n<thead><tr><th class=\"l\" rowspan=\"2\">figure</th>");
    for cell in &c.cells {
        let _ = write!(
            h,
            "<th colspan=\"3\" style=\"text-align:center\">{}{}</th>",
            swatch(cell),
            esc(cell)
        );
    }
    h.push_str("</tr><tr>");
    for _ in &c.cells {
        h.push_str("<th>A</th><th>B</th><th>B/A</th>");
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for row in &c.rows {
        let _ = write!(
            h,
            "<tr data-key=\"{}\"><th scope=\"row\">{}{}</th>",
            esc(row.def.key),
            esc(row.def.label),
            if row.def.column.is_empty() {
                String::new()
            } else {
                format!("<span class=\"unit\">{}</span>", esc(row.def.column))
            }
        );
        for (cell, x) in c.cells.iter().zip(&row.cells) {
            let side = |f: &Option<FigureCell>| match f {
                Some(f) => value_html(f, false),
                None => "<span class=\"v\">not run</span>".to_string(),
            };
            let _ = write!(
                h,
                "<td data-cell=\"{c}\" data-run=\"A\">{a}</td><td data-cell=\"{c}\" data-run=\"B\">{b}</td><td data-cell=\"{c}\" data-run=\"ratio\"{ratio_attr} class=\"{tone}\">{r}</td>",
                c = esc(cell),
                a = side(&x.a),
                b = side(&x.b),
                ratio_attr = x
                    .ratio
                    .map(|r| format!(" data-ratio=\"{r}\""))
                    .unwrap_or_default(),
                tone = tone_class(x.tone).trim(),
                r = esc(&x.ratio_text),
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("<tr data-key=\"lost\"><th scope=\"row\">Lost messages<span class=\"unit\">audit</span></th>");
    for (a, b) in &c.lost {
        let cell = |v: &Option<u64>| match v {
            Some(0) => "<td class=\"ok\">0</td>".to_string(),
            Some(n) => format!("<td class=\"bad\">{}</td>", model::format_number(*n as f64)),
            None => "<td>not run</td>".to_string(),
        };
        let _ = write!(h, "{}{}<td></td>", cell(a), cell(b));
    }
    h.push_str("</tr>\n</tbody></table></div>\n</section>\n");
}

fn charts(h: &mut String, section: &ChartSection) -> Result<(), String> {
    let _ = writeln!(
        h,
        "<section id=\"charts-{}\">\n<h2>{}</h2>\n<div class=\"charts\">",
        esc(&section.id),
        esc(&section.title)
    );
    for spec in &section.charts {
        let _ = writeln!(
            h,
            "{}",
            figure_html(
                &spec.id,
                &spec.title,
                &spec.how_to_read,
                spec.wide,
                &render_svg(spec)?
            )
        );
    }
    h.push_str("</div>\n</section>\n");
    Ok(())
}

fn audit(h: &mut String, run: &RunModel) {
    let id = if run.tag.is_empty() {
        "audit".to_string()
    } else {
        format!("audit-{}", run.tag.to_lowercase())
    };
    let _ = writeln!(
        h,
        "<section id=\"{id}\">\n<h2>{}Audit</h2>\n<p class=\"help\">After the measured window every cell drains; each pushed transactionId must end acked, dead-lettered, or dropped by an exhausted no-DLQ policy. Lost must be zero; duplicates are at-least-once redeliveries, counted, not failures.</p>",
        tag_prefix(run)
    );
    let head = "<thead><tr><th class=\"l\">cell</th><th>round</th><th>pushed</th><th>acked</th><th>dead-lettered</th><th>dropped</th><th>lost</th><th>duplicates</th><th>drained</th><th class=\"l\">verdict</th></tr></thead>";
    let row = |h: &mut String, r: &model::AuditRow| {
        let a = &r.audit;
        let n = |v: u64| model::format_number(v as f64);
        let _ = writeln!(
            h,
            "<tr data-cell=\"{c}\"{cls}><th scope=\"row\">{sw}{c}</th><td>{round}</td><td data-key=\"pushed\">{}</td><td data-key=\"acked\">{}</td><td data-key=\"dead_lettered\">{}</td><td data-key=\"dropped\">{}</td><td data-key=\"lost\" class=\"{lc}\">{}</td><td data-key=\"duplicates\">{}</td><td>{}</td><td class=\"l {lc}\">{}</td></tr>",
            n(a.pushed),
            n(a.acked),
            n(a.dead_lettered),
            n(a.dropped),
            n(a.lost),
            n(a.duplicates),
            if a.drained { "yes" } else { "no" },
            esc(&r.verdict),
            c = esc(&r.cell),
            cls = if r.round.is_none() { " class=\"total\"" } else { "" },
            sw = swatch(&r.cell),
            round = r.round.map(|x| x.to_string()).unwrap_or_else(|| "all".into()),
            lc = if a.lost == 0 { "ok" } else { "bad" },
        );
    };
    let _ = writeln!(
        h,
        "<div class=\"scroll\"><table class=\"audit\">{head}<tbody>"
    );
    for r in run.audit.iter().filter(|r| r.round.is_none()) {
        row(h, r);
    }
    h.push_str("</tbody></table></div>\n");
    let rounds: Vec<_> = run.audit.iter().filter(|r| r.round.is_some()).collect();
    if !rounds.is_empty() {
        let _ = writeln!(
            h,
            "<details><summary>Audit of every round</summary><div class=\"scroll\"><table class=\"audit-rounds\">{head}<tbody>"
        );
        for r in rounds {
            row(h, r);
        }
        h.push_str("</tbody></table></div></details>\n");
    }
    h.push_str("</section>\n");
}

fn gates(h: &mut String, run: &RunModel) {
    if run.gates.is_empty() {
        return;
    }
    let id = if run.tag.is_empty() {
        "gates".to_string()
    } else {
        format!("gates-{}", run.tag.to_lowercase())
    };
    let _ = writeln!(
        h,
        "<section id=\"{id}\">\n<h2>{}Gates</h2>\n<div class=\"scroll\"><table class=\"gates\"><thead><tr><th class=\"l\">gate</th><th class=\"l\">kind</th><th>measured<span class=\"unit\">median (min–max)</span></th><th>threshold</th><th class=\"l\">verdict</th><th class=\"l\">detail</th></tr></thead><tbody>",
        tag_prefix(run)
    );
    for g in &run.gates {
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td class=\"l {}\">{}</td><td class=\"l\">{}</td></tr>",
            esc(&g.gate),
            esc(&g.kind),
            esc(&g.measured),
            esc(&g.threshold),
            if g.passed { "ok" } else { "bad" },
            if g.passed { "holds" } else { "FAILED" },
            esc(&g.detail)
        );
    }
    h.push_str("</tbody></table></div>\n</section>\n");
}

/// The end of a page's "run" section: the run's notes and the scenario file as run, collapsed.
pub(crate) fn notes_and_scenario(
    h: &mut String,
    notes: &[String],
    scenario_name: &str,
    scenario_text: &str,
) {
    if !notes.is_empty() {
        h.push_str("<h3>Notes</h3><ul>\n");
        for n in notes {
            let _ = writeln!(h, "<li>{}</li>", esc(n));
        }
        h.push_str("</ul>\n");
    }
    let _ = writeln!(
        h,
        "<details><summary>Scenario file as run ({})</summary>\n<pre>{}</pre>\n</details>\n</section>",
        esc(scenario_name),
        esc(scenario_text)
    );
}

/// One chart as the page shows it: the SVG labelled for screen readers, in a figure with its
/// "how to read" caption.
pub(crate) fn figure_html(
    id: &str,
    title: &str,
    how_to_read: &str,
    wide: bool,
    svg: &str,
) -> String {
    let svg = match svg.find("<svg") {
        Some(i) => format!(
            "<svg role=\"img\" aria-label=\"{}\"{}",
            esc(title),
            &svg[i + 4..]
        ),
        None => svg.to_string(),
    };
    format!(
        "<figure id=\"chart-{}\" class=\"chart{}\">\n{}\n<figcaption>{}</figcaption>\n</figure>",
        esc(id),
        if wide { " wide" } else { "" },
        svg.trim(),
        esc(how_to_read)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }
}
