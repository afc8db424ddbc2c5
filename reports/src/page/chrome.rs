//! The chrome every page shares: the document around a page's sections (head, inline CSS,
//! header, footer), and the pieces both the run report and the capacity report lay out (cell
//! swatches, charts in figures, fact lists, warnings, notes and the scenario file). Markup is
//! written with maud, which escapes every interpolated string: text from a results file (the
//! scenario file, its name, notes, gate details) never reaches the page unescaped.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::charts::cell_colour_hex;

/// The rules both pages use.
const CSS: &str = r#"
:root{--fg:#1f2328;--muted:#656d76;--line:#d8dee4;--soft:#f6f8fa;--good:#1a7f37;--bad:#cf222e;--warn:#9a6700}
*{box-sizing:border-box}
body{margin:0;background:#eef1f4;color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1440px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:24px;margin:0 0 2px}h2{font-size:18px;margin:0 0 10px}h2.inline{display:inline;margin:0}h3{font-size:15px;margin:14px 0 6px}
.sub{color:var(--muted);margin:0 0 12px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 20px;margin:14px 0}
.banner{border-radius:8px;padding:14px 20px;margin:14px 0;font-size:18px;font-weight:700;color:#fff;background:var(--bad)}
.banner.incomplete{background:var(--warn)}
.verdict .headline{font-size:20px;font-weight:700}
.warnings{border-left:10px solid var(--warn)}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{padding:5px 9px;border-bottom:1px solid #eaeef2;text-align:right;vertical-align:top;white-space:nowrap}
thead th{background:var(--soft);font-weight:600;vertical-align:bottom;white-space:normal;min-width:70px}
td.l,th.l{text-align:left}
th .unit{display:block;font-weight:400;color:var(--muted);font-size:11.5px}
.sp{display:block;color:var(--muted);font-size:11.5px}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px}
.scroll{overflow-x:auto}
.help{color:var(--muted);margin:0 0 10px;max-width:1100px}.colour-note{margin:0 0 10px;padding:6px 10px;border-left:3px solid #bf8700;background:#fff8c5;max-width:1100px}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:18px}
figure{margin:0;min-width:0}figure.wide{grid-column:1/-1}
figure svg{display:block;width:100%;height:auto;border:1px solid #eaeef2;border-radius:4px}
figcaption{color:var(--muted);font-size:12.5px;margin-top:5px}
pre{background:var(--soft);padding:10px 12px;border-radius:6px;overflow-x:auto;font-size:12.5px}
details{margin-top:10px}summary{cursor:pointer;color:#0969da}
footer{color:var(--muted);font-size:12px;margin-top:18px}
@media print{body{background:#fff}section{break-inside:avoid}}
"#;

/// What a page puts inside the chrome.
pub struct Page<'a> {
    pub title: &'a str,
    /// The line under the title.
    pub subtitle: Markup,
    /// Rules of this page only, after the shared ones.
    pub css: &'static str,
    pub body: Markup,
    /// What the footer says the page was rendered from.
    pub footer: Markup,
}

/// A whole self-contained HTML document: inline CSS and SVG, no scripts, nothing fetched.
pub fn document(page: Page) -> String {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="generator" content=(generator());
                title { (page.title) }
                style { (PreEscaped(CSS)) (PreEscaped(page.css)) }
            }
            body {
                main {
                    header { h1 { (page.title) } p class="sub" { (page.subtitle) } }
                    (page.body)
                    footer {
                        "Rendered by " (generator()) " " (page.footer)
                        " Self-contained: no scripts, nothing fetched."
                    }
                }
            }
        }
    };
    markup.into_string()
}

fn generator() -> String {
    format!("ackbench-reports {}", env!("CARGO_PKG_VERSION"))
}

/// Text escaped as the pages escape it (for element content and attribute values).
pub fn esc(s: &str) -> String {
    html! { (s) }.into_string()
}

/// The small square of a cell's colour before its name.
pub fn swatch(cell: &str) -> Markup {
    let style = format!("background:{}", cell_colour_hex(cell));
    html! { span class="sw" style=(style) {} }
}

/// One chart as the page shows it: the SVG labelled for screen readers, in a figure with its
/// "how to read" caption.
pub fn figure(id: &str, title: &str, how_to_read: &str, wide: bool, svg: &str) -> Markup {
    let svg = match svg.find("<svg") {
        Some(i) => format!(
            "<svg role=\"img\" aria-label=\"{}\"{}",
            esc(title),
            &svg[i + 4..]
        ),
        None => svg.to_string(),
    };
    let class = if wide { "chart wide" } else { "chart" };
    html! {
        figure id=(format!("chart-{id}")) class=(class) {
            (PreEscaped(svg.trim()))
            figcaption { (how_to_read) }
        }
    }
}

/// A definition list of (label, value) facts.
pub fn facts(facts: &[(String, String)], extra: Markup) -> Markup {
    html! {
        dl class="facts" {
            @for (k, v) in facts { dt { (k) } dd { (v) } }
            (extra)
        }
    }
}

/// The warnings section, when there are any.
pub fn warnings(warnings: &[String]) -> Markup {
    html! {
        @if !warnings.is_empty() {
            section class="warnings" id="warnings" {
                h2 { "Warnings" }
                ul { @for w in warnings { li { (w) } } }
            }
        }
    }
}

/// The end of a page's "run" section: the run's notes and the scenario file as run, collapsed.
pub fn notes_and_scenario(notes: &[String], scenario_name: &str, scenario_text: &str) -> Markup {
    html! {
        @if !notes.is_empty() {
            h3 { "Notes" }
            ul { @for n in notes { li { (n) } } }
        }
        details {
            summary { "Scenario file as run (" (scenario_name) ")" }
            pre { (scenario_text) }
        }
    }
}

/// A table header cell with its unit under the label.
pub fn th_with_unit(label: &str, unit: &str) -> Markup {
    html! {
        (label)
        @if !unit.is_empty() { span class="unit" { (unit) } }
    }
}

/// Writes a page, replacing any older one whole (written to a temporary file first, then
/// renamed).
pub fn write_report(path: &std::path::Path, html: &str) -> Result<(), String> {
    let tmp = path.with_extension("html.tmp");
    std::fs::write(&tmp, html).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert('x') &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }

    #[test]
    fn user_text_in_the_chrome_is_escaped() {
        let page = document(Page {
            title: "<b>t</b>",
            subtitle: html! { ("<i>s</i>") },
            css: "",
            body: notes_and_scenario(&["<img>".into()], "<n>", "</pre><script>"),
            footer: html! { "from a file." },
        });
        assert!(!page.contains("<b>t</b>") && !page.contains("<i>s</i>"));
        assert!(!page.contains("<img>") && !page.contains("<script>"));
        assert!(page.contains("&lt;/pre&gt;&lt;script&gt;"));
    }
}
