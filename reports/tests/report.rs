//! The report of a small but realistic results document. Most tests read the report model (the
//! tables, the verdict, the chart specs: what the page shows, as data); a few smoke-check the
//! rendered HTML (one SVG per chart, captions, self-containment, escaping of user text).

mod common;

use ackbench_reports::figures::{self, View};
use ackbench_reports::model::{
    self, format_number, format_ratio, format_value, ChartBody, ChartSpec, FigureCell, Format,
    ReportModel, RunModel, Scale, Status, Tone, Verdict,
};
use ackbench_reports::page::esc;
use ackbench_reports::results::Results;
use ackbench_reports::stats::Spread;
use ackbench_reports::{render_comparison, render_report, write_report};

use common::{small_results, FIXTURE};

const CELLS: [&str; 4] = ["registry+fusion", "registry", "fusion", "none"];

/// Every chart a single-run report must have, by title.
const CHART_TITLES: [&str; 14] = [
    "Commit rate over time",
    "Ack throughput over time",
    "Latency percentile spectrum: push",
    "Latency percentile spectrum: pop",
    "Latency percentile spectrum: ack",
    "Latency percentile spectrum: end-to-end (intended push to ack)",
    "Latency histogram: push",
    "Latency histogram: pop",
    "Latency histogram: ack",
    "Latency histogram: end-to-end (intended push to ack)",
    "Calls per acked message, by procedure",
    "PostgreSQL execution time per acked message, by procedure",
    "Ack registry hit rate",
    "Ack fusion rows per commit",
];

fn svg_count(html: &str) -> usize {
    html.matches("<svg").count()
}

/// The `<figure>` of the chart with this id, in the page.
fn chart<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<figure id=\"chart-{id}\""))
        .unwrap_or_else(|| panic!("no chart {id}"));
    let rest = &html[start..];
    &rest[..rest.find("</figure>").unwrap()]
}

fn chart_spec<'a>(m: &'a ReportModel, id: &str) -> &'a ChartSpec {
    m.charts()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no chart spec {id}"))
}

/// The cells a chart draws: its lines' or bars' cells.
fn drawn_cells(spec: &ChartSpec) -> Vec<String> {
    let mut cells: Vec<String> = match &spec.body {
        ChartBody::Lines(lines) => lines.iter().map(|l| l.cell.clone()).collect(),
        ChartBody::Bars(groups) => groups
            .iter()
            .flat_map(|g| g.bars.iter().map(|b| b.cell.clone()))
            .collect(),
    };
    cells.dedup();
    cells
}

fn summary_cell<'a>(run: &'a RunModel, cell: &str, key: &str) -> &'a FigureCell {
    let row = run
        .summary
        .iter()
        .find(|r| r.cell == cell)
        .unwrap_or_else(|| panic!("no summary row {cell}"));
    row.figures
        .iter()
        .find(|f| f.key == key)
        .unwrap_or_else(|| panic!("no {key} for {cell}"))
}

fn has_item(v: &Verdict, status: Status, text: &str) -> bool {
    v.items
        .iter()
        .any(|(s, t)| *s == status && t.contains(text))
}

#[test]
fn every_chart_is_specified_with_title_axes_and_legend() {
    let r = small_results();
    let m = model::build(&r);
    let titles: Vec<&str> = m.charts().map(|c| c.title.as_str()).collect();
    assert_eq!(titles.len(), CHART_TITLES.len());
    for title in CHART_TITLES {
        assert!(titles.contains(&title), "chart {title} missing");
    }
    // Axis labels with units, and a legend naming every cell, in each chart.
    let ids = [
        ("commit-rate", "commits/s"),
        ("ack-rate", "acked messages/s"),
        ("spectrum-ack", "latency (ms, log scale)"),
        ("histogram-ack", "share of requests (%)"),
        ("commits-by-procedure", "calls per acked message"),
        ("pg-ms-by-procedure", "PostgreSQL ms per acked message"),
        ("registry-hit-rate", "hit rate (%)"),
        ("fusion-rows-per-commit", "rows per flush commit"),
    ];
    for (id, unit) in ids {
        let spec = chart_spec(&m, id);
        assert!(spec.y.label.contains(unit), "{id}: y axis {}", spec.y.label);
        assert!(!spec.how_to_read.is_empty(), "{id}: no caption");
        let legend: Vec<Option<&str>> = spec.legend.iter().map(|l| l.cell.as_deref()).collect();
        for cell in CELLS {
            assert!(
                legend.contains(&Some(cell)),
                "{id}: no legend entry for {cell}"
            );
        }
        assert!(spec.has_data(), "{id}: no data");
    }
    // The spectrum's x axis is a percentile scale, its y a log scale.
    let spectrum = chart_spec(&m, "spectrum-ack");
    assert_eq!(
        (spectrum.x.scale, spectrum.y.scale),
        (Scale::Percentile, Scale::Log)
    );
    assert_eq!(drawn_cells(spectrum), CELLS);
    // The procedures are bar groups, the ack procedures first.
    let ChartBody::Bars(groups) = &chart_spec(&m, "commits-by-procedure").body else {
        panic!("commits by procedure is a bar chart")
    };
    let labels: Vec<&str> = groups.iter().map(|g| g.label.as_str()).collect();
    for p in [
        "log_ack_by_hash_v1",
        "log_ack_at_v1",
        "log_ack_multi_v1",
        "log_push_v1",
        "log_pop_wildcard_v1",
        "all commits",
    ] {
        assert!(
            labels.contains(&p),
            "commits by procedure: no {p} in {labels:?}"
        );
    }
    assert_eq!(labels[0], "log_ack_by_hash_v1");
    // The accelerators' charts say "off" where the accelerator does not run.
    let ChartBody::Bars(groups) = &chart_spec(&m, "registry-hit-rate").body else {
        panic!("hit rate is a bar chart")
    };
    for g in groups {
        let registry = r.cell(&g.label).unwrap().registry;
        let bar = &g.bars[0];
        assert_eq!(bar.value.is_some(), registry, "{}", g.label);
        assert_eq!(bar.note.as_deref(), (!registry).then_some("off"));
    }
}

#[test]
fn every_chart_is_drawn_with_its_caption_and_the_cells_colours() {
    let r = small_results();
    let m = model::build(&r);
    let html = render_report(&r).unwrap();
    assert_eq!(svg_count(&html), m.charts().count(), "one <svg> per chart");
    for spec in m.charts() {
        let figure = chart(&html, &spec.id);
        assert!(
            figure.contains(&format!("aria-label=\"{}\"", esc(&spec.title))),
            "{}: no accessible title",
            spec.id
        );
        assert!(
            figure.contains(&format!(
                "<figcaption>{}</figcaption>",
                esc(&spec.how_to_read)
            )),
            "{}: no caption",
            spec.id
        );
    }
    // The percentile axis is labelled as percentiles.
    let spectrum = chart(&html, "spectrum-ack");
    for tick in ["50%", "90%", "99%", "99.9%"] {
        assert!(
            spectrum.contains(&format!("\n{tick}\n")),
            "spectrum tick {tick}"
        );
    }
    // One colour per cell, the same in every chart that draws it and in the tables.
    let summary = &html[html.find("id=\"summary\"").unwrap()..];
    for cell in CELLS {
        let hex = ackbench_reports::charts::cell_colour_hex(cell);
        for id in ["commit-rate", "spectrum-ack", "commits-by-procedure"] {
            assert!(
                chart(&html, id).contains(&hex),
                "{cell} colour {hex} not in {id}"
            );
        }
        assert!(
            summary.contains(&format!("background:{hex}")),
            "{cell} swatch"
        );
    }
}

#[test]
fn the_summary_has_the_catalogue_figures_with_spreads_and_ratios() {
    let r = small_results();
    let run = &model::build(&r).runs[0];
    let keys: Vec<&str> = figures::shown_in(View::Summary)
        .iter()
        .map(|d| d.key)
        .collect();
    for row in &run.summary {
        let row_keys: Vec<&str> = row.figures.iter().map(|f| f.key).collect();
        assert_eq!(row_keys, keys, "{}: columns follow the catalogue", row.cell);
    }
    for cell in &r.cells {
        let name = cell.name.as_str();
        let s = &cell.summary.figures;
        for key in keys
            .iter()
            .filter(|k| !k.starts_with("registry") && !k.starts_with("fusion"))
        {
            let def = figures::def(key).unwrap();
            let want = format_value(s.get(key).unwrap().median, def.format);
            assert_eq!(summary_cell(run, name, key).text, want, "{name} {key}");
        }
        // Spreads over rounds are shown.
        let spread = format!(
            "{}–{}",
            format_number(s.ack_throughput.min),
            format_number(s.ack_throughput.max)
        );
        let f = summary_cell(run, name, "ack_throughput");
        assert_eq!(f.spread_text.as_deref(), Some(spread.as_str()), "{name}");
        // Accelerator figures: a value where the accelerator runs, "off" where it does not.
        let hit = summary_cell(run, name, "registry_hit_rate");
        if cell.registry {
            assert_eq!(
                hit.text,
                format_value(s.registry_hit_rate.median, Format::Percent)
            );
        } else {
            assert_eq!(hit.text, "off");
        }
        let rows = summary_cell(run, name, "fusion_rows_per_commit");
        if cell.fusion {
            assert_eq!(rows.text, format_number(s.fusion_rows_per_commit.median));
        } else {
            assert_eq!(rows.text, "off");
        }
        let row = run.summary.iter().find(|x| x.cell == name).unwrap();
        assert!(
            row.audit_text.starts_with("ok, 0 lost"),
            "{}",
            row.audit_text
        );
    }
}

#[test]
fn ratios_to_the_baseline_are_taken_round_by_round() {
    let r = small_results();
    let run = &model::build(&r).runs[0];
    let none = r.cell("none").unwrap();
    for cell in &r.cells {
        let ratios: Vec<f64> = cell
            .rounds
            .iter()
            .zip(&none.rounds)
            .map(|(a, b)| a.figures.commits_per_ack / b.figures.commits_per_ack)
            .collect();
        let ratio = Spread::of(&ratios);
        let f = summary_cell(run, &cell.name, "commits_per_ack");
        if cell.name == "none" {
            assert_eq!(f.ratio, None, "the baseline has no ratio");
            continue;
        }
        assert_eq!(f.ratio, Some(ratio), "{}", cell.name);
        assert_eq!(
            f.ratio_text.as_deref(),
            Some(format_ratio(ratio.median).as_str())
        );
        let (lo, hi) = (format_number(ratio.min), format_number(ratio.max));
        let range = (lo != hi).then(|| format!("{lo}–{hi}"));
        assert_eq!(f.ratio_spread_text, range, "{}", cell.name);
    }
    // registry+fusion commits less per ack than none in every round: the ratio reads better.
    assert_eq!(
        summary_cell(run, "registry+fusion", "commits_per_ack").tone,
        Tone::Better
    );
    // And the page colours it so.
    let html = render_report(&r).unwrap();
    let row = common::row_of(&html, "id=\"summary\"", "registry+fusion");
    assert!(common::td_of(row, "commits_per_ack").contains("class=\"ra better\""));
}

#[test]
fn glance_answers_commits_saved_latency_and_loss() {
    let r = small_results();
    let run = &model::build(&r).runs[0];
    let base = r
        .cell("none")
        .unwrap()
        .summary
        .figures
        .commits_per_ack
        .median;
    let rf = r.cell("registry+fusion").unwrap();
    let row = run
        .glance
        .iter()
        .find(|g| g.cell == "registry+fusion")
        .unwrap();
    let saved = (base - rf.summary.figures.commits_per_ack.median) * 1000.0;
    let pct = (1.0 - rf.summary.figures.commits_per_ack.median / base) * 100.0;
    assert!(
        row.commits_saved_text.contains(&format!(
            "; all commits −{pct:.0}% (saves {} per 1,000 acked messages)",
            format_number(saved)
        )),
        "{}",
        row.commits_saved_text
    );
    assert!(
        row.commits_saved_text.starts_with("ack-path commits −"),
        "the ack path first: {}",
        row.commits_saved_text
    );
    let p99 = rf.summary.figures.latency_ms["ack"].p99.median;
    assert_eq!(row.ack_p99.text, format_value(p99, Format::Ms));
    assert_eq!(row.lost_text, "0 lost");
    let none = run.glance.iter().find(|g| g.cell == "none").unwrap();
    assert_eq!(none.commits_saved_text, "the baseline");

    // Fewer ack-path commits but more commits in all: both said, and why.
    let mut grown = r.clone();
    let base_all = grown
        .cell("none")
        .unwrap()
        .summary
        .figures
        .commits_per_ack
        .median;
    let fused = grown
        .cells
        .iter_mut()
        .find(|c| c.name == "registry+fusion")
        .unwrap();
    fused.summary.figures.commits_per_ack.median = base_all * 1.21;
    let m = model::build(&grown);
    let row = m.runs[0]
        .glance
        .iter()
        .find(|g| g.cell == "registry+fusion")
        .unwrap();
    let text = &row.commits_saved_text;
    assert!(text.starts_with("ack-path commits −"), "{text}");
    assert!(text.contains("; all commits +21% ("), "{text}");
    assert!(
        text.ends_with("because the rest of the cycle grew: see Commits by procedure"),
        "{text}"
    );
}

#[test]
fn audit_rows_and_verdict() {
    let mut r = small_results();
    let run = &model::build(&r).runs[0];
    assert_eq!(run.verdict.status, Status::Passed);
    assert_eq!(
        run.verdict.headline,
        "PASSED: audit passed, 0 lost; 1/1 gates held"
    );
    for cell in &r.cells {
        let total = run
            .audit
            .iter()
            .find(|a| a.cell == cell.name && a.round.is_none())
            .unwrap();
        assert_eq!(total.audit, cell.summary.audit, "{}", cell.name);
        let rounds = run
            .audit
            .iter()
            .filter(|a| a.cell == cell.name && a.round.is_some());
        assert_eq!(rounds.count(), cell.rounds.len());
    }

    // A lost message fails the run, however fast it was.
    r.cells[2].summary.audit.lost = 3;
    r.cells[2].rounds[1].audit.lost = 3;
    let run = &model::build(&r).runs[0];
    assert_eq!(run.verdict.status, Status::Failed);
    assert!(run
        .verdict
        .headline
        .starts_with("FAILED: audit FAILED, 3 lost"));
    assert!(has_item(
        &run.verdict,
        Status::Failed,
        "Audit FAILED: 3 messages lost (fusion lost 3)."
    ));
    let fusion = run.audit.iter().find(|a| a.cell == "fusion").unwrap();
    assert!(
        fusion.verdict.starts_with("FAILED: 3 lost"),
        "{}",
        fusion.verdict
    );
    let html = render_report(&r).unwrap();
    assert!(html.contains("class=\"verdict failed\""));
    let row = common::row_of(&html, "id=\"audit\"", "fusion");
    assert!(common::td_of(row, "lost").contains("class=\"bad\""));
}

#[test]
fn a_round_the_host_slowed_is_named_in_the_verdict() {
    let mut r = small_results();
    let quiet = &model::build(&r).runs[0];
    assert!(!quiet.verdict.items.iter().any(|(_, t)| t.contains("steal")));
    // Just below the bound in one cell, above it in another's second round: only that one is
    // named, with its share; a warning, not a failure.
    r.cells[1].rounds[0].figures.host_steal_share = model::HOST_STEAL_WARN - 0.001;
    r.cells[2].rounds[1].figures.host_steal_share = 0.12;
    let run = &model::build(&r).runs[0];
    let stolen: Vec<&String> = run
        .verdict
        .items
        .iter()
        .filter(|(_, t)| t.contains("steal"))
        .map(|(s, t)| {
            assert_eq!(*s, Status::Warning);
            t
        })
        .collect();
    assert_eq!(stolen.len(), 1, "{stolen:?}");
    let name = &r.cells[2].name;
    assert!(
        stolen[0].starts_with(&format!("{name}: the host took CPU time"))
            && stolen[0].contains("in round 2 (12 %)"),
        "{}",
        stolen[0]
    );
    assert_eq!(run.verdict.status, Status::Passed);
}

#[test]
fn an_interrupted_cell_counts_its_in_flight_messages_as_undrained_not_lost() {
    let mut r = small_results();
    r.complete = false;
    r.cells[1].summary.audit.drained = false;
    r.cells[1].summary.audit.undrained = 90;
    let run = &model::build(&r).runs[0];
    assert_eq!(run.verdict.status, Status::Incomplete);
    assert!(
        run.verdict.headline.contains("0 lost, 90 undrained"),
        "{}",
        run.verdict.headline
    );
    assert!(has_item(
        &run.verdict,
        Status::Incomplete,
        "Audit incomplete: the run was interrupted with 90 messages still in flight"
    ));
    // A complete run whose drain did not finish proves nothing: that fails.
    r.complete = true;
    let run = &model::build(&r).runs[0];
    assert_eq!(run.verdict.status, Status::Failed);
    assert!(run.verdict.headline.contains("audit FAILED, 90 undrained"));
}

#[test]
fn old_results_without_undrained_still_load() {
    let text = r#"{"pushed":3,"acked":3,"dead_lettered":0,"dropped":0,"lost":0,"duplicates":0,"drained":true}"#;
    let a: ackbench_reports::results::Audit = serde_json::from_str(text).unwrap();
    assert_eq!(a.undrained, 0);
    assert!(a.proven());
}

#[test]
fn gates_and_interruptions_are_prominent() {
    let mut r = small_results();
    r.gates[0].passed = false;
    r.complete = false;
    r.cells[3].rounds[2].complete = false;
    let run = &model::build(&r).runs[0];
    assert_eq!(run.verdict.status, Status::Failed);
    assert!(has_item(
        &run.verdict,
        Status::Failed,
        "Gates FAILED: 1 of 1 do not hold"
    ));
    assert!(has_item(
        &run.verdict,
        Status::Incomplete,
        "none round 3 did not complete."
    ));
    assert_eq!(
        run.verdict.headline,
        "FAILED: audit passed, 0 lost; 1/1 gates FAILED; the run was interrupted"
    );
    assert_eq!(
        run.gates[0].outcome,
        ackbench_reports::results::GateOutcome::Failed
    );
    // The banner comes before any figure.
    let html = render_report(&r).unwrap();
    let banner = html.find("INTERRUPTED: this run did not complete").unwrap();
    assert!(banner < html.find("id=\"summary\"").unwrap());
    assert!(html.contains("id=\"gates\""));

    let mut r = small_results();
    r.complete = false;
    let run = &model::build(&r).runs[0];
    assert_eq!(run.verdict.status, Status::Incomplete);
    assert!(run
        .verdict
        .headline
        .starts_with("INCOMPLETE: the run was interrupted"));

    let mut r = small_results();
    r.gates.clear();
    let run = &model::build(&r).runs[0];
    assert!(run.gates.is_empty());
    assert!(run.verdict.headline.ends_with("no gates"));
    assert!(!render_report(&r).unwrap().contains("id=\"gates\""));
}

#[test]
fn header_says_what_when_and_where() {
    let r = small_results();
    let header = &model::build(&r).runs[0].header;
    let fact = |k: &str| {
        header
            .facts
            .iter()
            .find(|(l, _)| l == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no fact {k}"))
    };
    assert_eq!(
        fact("Scenario"),
        "tiny-batches (scenarios/tiny-batches.toml)"
    );
    assert_eq!(fact("Started"), "2025-06-01T10:00:00Z");
    assert!(fact("Machine").contains("2 cores"));
    assert!(fact("PostgreSQL").contains("15.8"));
    assert_eq!(
        fact("Git revision"),
        "3f2c1e9a7b5d40c8e1f2a3b4c5d6e7f809a1b2c3"
    );
    assert_eq!(
        fact("Rounds"),
        "3 rounds × 4 cells, 30 s measured per cell and round (+5 s warm-up, excluded)"
    );
    let setting = |k: &str| {
        header
            .pg_settings
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(setting("synchronous_commit"), Some("on"));
    assert_eq!(setting("wal_sync_method"), Some("fdatasync"));
    assert_eq!(header.scenario_text, common::SCENARIO_TEXT);
    let html = render_report(&r).unwrap();
    assert!(html.contains("synchronous_commit = on"));
    assert!(html.contains("<details><summary>Scenario file as run"));
}

#[test]
fn report_is_small_and_self_contained() {
    let html = render_report(&small_results()).unwrap();
    assert!(
        html.len() < 300 * 1024,
        "report of 4 cells × 3 rounds is {} bytes",
        html.len()
    );
    for external in [
        "<script",
        "<link",
        "src=\"http",
        "href=\"http",
        "@import",
        "url(",
    ] {
        assert!(
            !html.contains(external),
            "report refers outside: {external}"
        );
    }
    // A long run stays small too: series are thinned.
    let long = common::results_sized(3, 600, 500);
    let html = render_report(&long).unwrap();
    assert!(
        html.len() < 300 * 1024,
        "10-minute run: {} bytes",
        html.len()
    );
}

#[test]
fn scenario_text_and_names_are_escaped() {
    let mut r = small_results();
    r.meta.scenario.text = "name = \"x\" # </pre><script>alert('boom')</script>".into();
    r.meta.scenario.name = "<b>bold</b> & \"quoted\"".into();
    r.meta.notes.push("<img src=x onerror=alert(1)>".into());
    r.gates[0].detail = "<script>bad()</script>".into();
    for html in [
        render_report(&r).unwrap(),
        render_comparison(&r, &small_results()).unwrap(),
    ] {
        assert!(!html.contains("<script>"), "unescaped script");
        assert!(!html.contains("<img src=x"));
        assert!(!html.contains("<b>bold</b>"));
        assert!(html.contains("&lt;/pre&gt;&lt;script&gt;alert('boom')&lt;/script&gt;"));
        assert!(html.contains("&lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot;"));
    }
}

#[test]
fn comparison_shows_both_runs_and_the_ratio() {
    let a = small_results();
    let mut b = small_results();
    b.meta.started_at = "2025-06-02T09:00:00Z".into();
    b.meta.git_revision = Some("feedfacecafe0000".into());
    // B doubles ack throughput of the fusion cell in every round.
    for round in &mut b.cells[2].rounds {
        round.figures.ack_throughput *= 2.0;
    }
    let s = &mut b.cells[2].summary.figures.ack_throughput;
    *s = Spread {
        median: s.median * 2.0,
        min: s.min * 2.0,
        max: s.max * 2.0,
    };
    let m = model::build_comparison(&a, &b);
    assert!(m.runs[0].label.contains("2025-06-01T10:00"), "run A label");
    assert!(m.runs[1].label.contains("feedfaceca"), "run B label");
    let c = m.comparison.as_ref().unwrap();
    let row = c
        .rows
        .iter()
        .find(|r| r.def.key == "ack_throughput")
        .unwrap();
    let at = |cell: &str| &row.cells[c.cells.iter().position(|n| n == cell).unwrap()];
    let fusion = at("fusion");
    let (fa, fb) = (
        a.cell("fusion")
            .unwrap()
            .summary
            .figures
            .ack_throughput
            .median,
        b.cell("fusion")
            .unwrap()
            .summary
            .figures
            .ack_throughput
            .median,
    );
    assert_eq!(fusion.a.as_ref().unwrap().text, format_number(fa));
    assert_eq!(fusion.b.as_ref().unwrap().text, format_number(fb));
    assert_eq!((fusion.ratio, fusion.tone), (Some(2.0), Tone::Better));
    assert_eq!(fusion.ratio_text, "×2.00");
    // Unchanged cells have ratio 1 and no colour.
    let none = at("none");
    assert_eq!((none.ratio, none.tone), (Some(1.0), Tone::Same));
    // One chart per key figure with both runs, plus series and spectra.
    assert_eq!(m.charts().count(), model::KEY_FIGURES.len() + 2 + 4);
    let bars = chart_spec(&m, "compare-ack_throughput");
    let legend: Vec<&str> = bars.legend.iter().map(|l| l.label.as_str()).collect();
    assert!(
        legend.iter().any(|l| l.starts_with("A: tiny-batches")),
        "{legend:?}"
    );
    assert!(
        legend.iter().any(|l| l.starts_with("B: tiny-batches")),
        "{legend:?}"
    );
    // The page: both verdicts, both audits, the ratio in its cell, one SVG per chart.
    let html = render_comparison(&a, &b).unwrap();
    assert_eq!(svg_count(&html), m.charts().count());
    assert!(html.contains("id=\"verdict-a\"") && html.contains("id=\"verdict-b\""));
    assert!(html.contains("id=\"audit-a\"") && html.contains("id=\"audit-b\""));
    assert!(html.contains(
        "data-cell=\"fusion\" data-run=\"ratio\" data-ratio=\"2\" class=\"better\">×2.00<"
    ));
    assert!(
        html.len() < 300 * 1024,
        "comparison is {} bytes",
        html.len()
    );
}

#[test]
fn checked_in_fixture_parses_and_renders() {
    let text = std::fs::read_to_string(FIXTURE).expect("fixture present");
    let r = Results::from_json(&text).expect("fixture parses");
    assert_eq!(r.schema_version, 1, "the fixture is an older document");
    assert!(
        r.cells[0]
            .summary
            .figures
            .broker_cpu_us_per_request
            .median
            .is_nan(),
        "a figure version 1 lacks reads as NaN"
    );
    assert_eq!(r.cells.len(), 4);
    assert_eq!(r.meta.rounds, 3);
    let fresh = small_results();
    for (x, y) in r.cells.iter().zip(&fresh.cells) {
        assert_eq!(x.name, y.name);
        assert_eq!(x.summary.audit, y.summary.audit, "regenerate the fixture");
        assert_eq!(
            x.summary.histograms, y.summary.histograms,
            "regenerate the fixture"
        );
    }
    let html = render_report(&r).unwrap();
    assert_eq!(svg_count(&html), CHART_TITLES.len());
    let dir = std::env::temp_dir().join(format!("ackbench-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("report.html");
    write_report(&path, &html).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), html);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cell_without_data_still_renders() {
    let mut r = small_results();
    for c in &mut r.cells {
        c.summary.histograms.remove("pop");
        for round in &mut c.rounds {
            round.histograms.remove("pop");
        }
    }
    r.cells[1]
        .summary
        .histograms
        .insert("ack".into(), "!!not base64".into());
    let m = model::build(&r);
    assert_eq!(m.charts().count(), CHART_TITLES.len());
    assert!(!chart_spec(&m, "spectrum-pop").has_data());
    assert!(
        m.warnings
            .iter()
            .any(|w| w.contains("registry ack histogram")),
        "warning for the bad histogram: {:?}",
        m.warnings
    );
    let html = render_report(&r).unwrap();
    assert_eq!(svg_count(&html), CHART_TITLES.len());
    assert!(chart(&html, "spectrum-pop").contains("no data recorded"));
    // Figures without a denominator are NaN (JSON null): shown as "—", never as a number.
    let mut r = small_results();
    let nan = Spread::of(&[]);
    assert!(nan.median.is_nan());
    r.cells[3].summary.figures.commits_per_ack = nan;
    for round in &mut r.cells[3].rounds {
        round.figures.commits_per_ack = f64::NAN;
    }
    r.cells[0].summary.figures.registry_hit_rate = nan;
    r.cells[0]
        .summary
        .figures
        .latency_ms
        .get_mut("ack")
        .unwrap()
        .p99 = nan;
    let r = Results::from_json(&serde_json::to_string(&r).unwrap()).unwrap();
    let run = &model::build(&r).runs[0];
    assert_eq!(summary_cell(run, "none", "commits_per_ack").text, "—");
    assert_eq!(
        summary_cell(run, "registry+fusion", "commits_per_ack").ratio,
        None
    );
    assert_eq!(
        summary_cell(run, "registry+fusion", "registry_hit_rate").text,
        "—"
    );
    assert_eq!(
        summary_cell(run, "registry+fusion", "latency_ms.ack.p99").text,
        "—"
    );
    assert!(!render_report(&r).unwrap().contains("NaN"));
    // Only the baseline: no ratios, nothing breaks.
    let mut only = small_results();
    only.cells.retain(|c| c.name == "registry");
    let run = &model::build(&only).runs[0];
    assert_eq!(
        run.glance[0].commits_saved_text,
        "no baseline cell to compare with"
    );
}

#[test]
fn an_interrupted_run_with_empty_cells_still_renders() {
    // A cell that never finished a round, a single-sample histogram, constant latencies.
    let mut r = small_results();
    r.complete = false;
    r.cells[3].rounds.clear();
    r.cells[3].summary.rounds = 0;
    r.cells[3].summary.histograms.clear();
    let mut one = ackbench_reports::stats::new_histogram();
    one.record(1500).unwrap();
    r.cells[0].summary.histograms.insert(
        "push".into(),
        ackbench_reports::stats::encode_histogram(&one),
    );
    let mut flat = ackbench_reports::stats::new_histogram();
    flat.record_n(2000, 500).unwrap();
    for c in &mut r.cells {
        c.summary.histograms.insert(
            "pop".into(),
            ackbench_reports::stats::encode_histogram(&flat),
        );
    }
    let html = render_report(&r).unwrap();
    assert_eq!(svg_count(&html), CHART_TITLES.len());
    assert!(html.contains("INTERRUPTED"));

    // Nothing measured at all.
    let mut empty = small_results();
    empty.complete = false;
    empty.cells.clear();
    empty.gates.clear();
    let m = model::build(&empty);
    assert_eq!(m.runs[0].verdict.status, Status::Incomplete);
    assert!(has_item(
        &m.runs[0].verdict,
        Status::Incomplete,
        "No cell was measured."
    ));
    assert_eq!(
        svg_count(&render_report(&empty).unwrap()),
        CHART_TITLES.len()
    );
    let m = model::build_comparison(&empty, &small_results());
    assert_eq!(m.comparison.unwrap().cells.len(), 4);
    let html = render_comparison(&empty, &small_results()).unwrap();
    assert!(html.contains("id=\"comparison\""));
}

/// Writes `tests/fixtures/small-results.json` from `small_results()`.
#[test]
#[ignore]
fn regenerate_fixture() {
    let json = serde_json::to_string_pretty(&small_results()).unwrap();
    std::fs::create_dir_all(std::path::Path::new(FIXTURE).parent().unwrap()).unwrap();
    std::fs::write(FIXTURE, json + "\n").unwrap();
}

/// Writes the fixture's report (and a comparison) where a browser can open them:
/// `REPORT_OUT=/tmp cargo test -p ackbench-reports --test report -- --ignored write_sample_reports`.
#[test]
#[ignore]
fn write_sample_reports() {
    let dir = std::env::var("REPORT_OUT").unwrap_or_else(|_| "/tmp".into());
    let a = small_results();
    write_report(
        &std::path::Path::new(&dir).join("report.html"),
        &render_report(&a).unwrap(),
    )
    .unwrap();
    let mut b = small_results();
    b.meta.started_at = "2025-06-02T09:00:00Z".into();
    for round in &mut b.cells[0].rounds {
        round.figures.ack_throughput *= 1.3;
        for second in &mut round.series {
            second.commits *= 0.7;
        }
    }
    let s = &mut b.cells[0].summary.figures.ack_throughput;
    s.median *= 1.3;
    s.min *= 1.3;
    s.max *= 1.3;
    write_report(
        &std::path::Path::new(&dir).join("compare.html"),
        &render_comparison(&a, &b).unwrap(),
    )
    .unwrap();
    let mut f = small_results();
    f.complete = false;
    f.cells[2].summary.audit.lost = 3;
    f.cells[2].rounds[1].audit.lost = 3;
    f.cells[3].rounds[2].complete = false;
    f.gates[0].passed = false;
    write_report(
        &std::path::Path::new(&dir).join("failed.html"),
        &render_report(&f).unwrap(),
    )
    .unwrap();
}

#[test]
fn peers_get_a_table_each_with_the_broker_cells_ratios_to_them() {
    let mut r = small_results();
    assert!(
        model::build(&r).runs[0].peers.is_empty(),
        "no peer ran, no peer table"
    );
    // The fixture's `fusion` cell stands in for a peer that ran in the same rounds.
    let peer = r.cells.iter_mut().find(|c| c.name == "fusion").unwrap();
    peer.name = "pgmq".into();
    peer.fusion = false;
    let m = model::build(&r);
    let tables = &m.runs[0].peers;
    assert_eq!(tables.len(), 1);
    let t = &tables[0];
    assert_eq!(t.peer, "pgmq");
    let keys: Vec<&str> = t.figures.iter().map(|d| d.key).collect();
    assert_eq!(keys, model::PEER_FIGURES);
    let cells: Vec<&str> = t.rows.iter().map(|row| row.cell.as_str()).collect();
    assert_eq!(cells, ["pgmq", "registry+fusion", "registry", "none"]);
    assert!(t.rows[0].is_peer && t.rows[0].figures.iter().all(|f| f.ratio.is_none()));
    let pgmq = r.cell("pgmq").unwrap();
    let fused = r.cell("registry+fusion").unwrap();
    let ratios: Vec<f64> = fused
        .rounds
        .iter()
        .zip(&pgmq.rounds)
        .map(|(a, b)| a.figures.ack_throughput / b.figures.ack_throughput)
        .collect();
    let throughput = &t.rows[1].figures[0];
    assert_eq!(throughput.key, "ack_throughput");
    assert_eq!(throughput.ratio, Some(Spread::of(&ratios)));
    let html = render_report(&r).unwrap();
    assert!(html.contains("id=\"peers\"") && html.contains("driven straight over SQL"));
}

#[test]
fn an_external_cell_gets_a_peer_table_and_leaves_the_broker_rows() {
    let mut r = small_results();
    // The fixture's `fusion` cell stands in for a running broker added with `--external`.
    let queen = r.cells.iter_mut().find(|c| c.name == "fusion").unwrap();
    queen.name = "queen".into();
    queen.fusion = false;
    queen.external = true;
    let tables = model::build(&r).runs[0].peers.clone();
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[0].peer, "queen");
    let cells: Vec<&str> = tables[0].rows.iter().map(|row| row.cell.as_str()).collect();
    assert_eq!(cells, ["queen", "registry+fusion", "registry", "none"]);
    let text = serde_json::to_string(&r).unwrap();
    assert!(text.contains("\"external\":true"), "recorded in results");
}

#[test]
fn faults_are_listed_with_their_recovery_and_marked_on_the_charts_over_time() {
    use ackbench_reports::results::FaultEvent;
    let mut r = small_results();
    let fault = |kind: &str, at: f64, ended: f64, recovery: Option<f64>, note: &str| FaultEvent {
        kind: kind.into(),
        at_secs: at,
        ended_secs: ended,
        note: note.into(),
        recovery_secs: recovery,
        ..Default::default()
    };
    r.cells[0].rounds[0].faults = vec![
        fault("kill_broker", 2.0, 3.1, Some(2.0), ""),
        fault("pause_consumers", 6.0, 7.5, None, ""),
    ];
    r.cells[1].rounds[0].faults = vec![fault("kill_broker", 2.01, 3.3, Some(1.0), "")];
    r.cells[2].rounds[0].faults = vec![fault("pause_broker", 4.0, 4.0, None, "skipped: x")];
    let m = model::build(&r);
    let rows = &m.runs[0].faults;
    assert_eq!(rows.len(), 4);
    assert_eq!(
        (rows[0].kind.as_str(), rows[0].recovery_text.as_str()),
        ("kill_broker", "2.0 s")
    );
    assert_eq!(rows[1].recovery_text, "not within the window");
    assert_eq!(rows[3].recovery_text, "skipped");
    for id in ["ack-rate", "commit-rate"] {
        let marks = &chart_spec(&m, id).faults;
        let spans: Vec<(&str, f64, f64)> = marks
            .iter()
            .map(|f| (f.label.as_str(), f.from, f.to))
            .collect();
        assert_eq!(
            spans,
            [("kill_broker", 2.0, 3.3), ("pause_consumers", 6.0, 7.5)],
            "one band per fault, the skipped one left out"
        );
    }
    assert!(chart_spec(&m, "ack-rate")
        .how_to_read
        .contains("Shaded bands"));
    let html = render_report(&r).unwrap();
    assert!(html.contains("id=\"faults\""));
    assert!(chart(&html, "ack-rate").contains("pause_consumers"));
    let plain = model::build(&small_results());
    assert!(plain.runs[0].faults.is_empty());
    assert!(plain.charts().all(|c| c.faults.is_empty()));
}

#[test]
fn guarantees_table_and_verdict() {
    let mut r = small_results();
    assert!(
        model::build(&r).runs[0].guarantees.is_empty(),
        "results without a checked history have no Guarantees table"
    );
    let a = &mut r.cells[0].summary.audit;
    a.history_checked = true;
    a.promises = ackbench_reports::results::Promises::ALL;
    a.reorderings_across_leases = 2;
    let run = &model::build(&r).runs[0];
    let rows: Vec<_> = run
        .guarantees
        .iter()
        .filter(|g| g.cell == r.cells[0].name)
        .collect();
    assert_eq!(rows.len(), 8, "every guarantee of the checked cell");
    assert!(rows
        .iter()
        .all(|g| g.verdict == "held" || g.name == "reorderings_across_leases"));
    let reordered = rows
        .iter()
        .find(|g| g.name == "reorderings_across_leases")
        .unwrap();
    assert_eq!((reordered.verdict, reordered.promised), ("counted", false));
    assert_eq!(
        run.verdict.status,
        Status::Passed,
        "a counted, unpromised finding fails nothing"
    );
    assert!(has_item(&run.verdict, Status::Passed, "Guarantees held"));

    let a = &mut r.cells[0].summary.audit;
    a.lease_overlaps = 4;
    a.examples.insert(
        "lease_overlaps".into(),
        vec!["consumer 2 took the partition <while> consumer 1 held it".into()],
    );
    let run = &model::build(&r).runs[0];
    assert_eq!(run.verdict.status, Status::Failed);
    assert!(run
        .verdict
        .headline
        .starts_with("FAILED: audit FAILED, guarantees broken"));
    let text = format!("Guarantees FAILED: {}: lease_overlaps 4.", r.cells[0].name);
    assert!(
        has_item(&run.verdict, Status::Failed, &text),
        "{:?}",
        run.verdict.items
    );
    let overlap = run
        .guarantees
        .iter()
        .find(|g| g.name == "lease_overlaps")
        .unwrap();
    assert_eq!((overlap.verdict, overlap.count), ("BROKEN", 4));
    let html = render_report(&r).unwrap();
    assert!(html.contains("<h2>Guarantees</h2>") || html.contains(">Guarantees</h2>"));
    assert!(
        html.contains("took the partition &lt;while&gt; consumer 1"),
        "examples escaped"
    );
}

#[test]
fn a_held_horizon_shows_its_vacuum_samples_before_during_and_after() {
    use ackbench_reports::results::{FaultEvent, VacuumSample};
    let mut r = small_results();
    let vacuum = (0..8)
        .map(|i| VacuumSample {
            t: i as f64,
            dead_tuples: if (2..6).contains(&i) {
                1000.0 * i as f64
            } else {
                50.0
            },
            table_bytes: 2.0 * 1_048_576.0,
            index_bytes: 1_048_576.0,
            autovacuums: 0.0,
            live_tuples: 10.0,
            bystander_ms: 0.5,
        })
        .collect();
    r.cells[0].rounds[0].faults = vec![FaultEvent {
        kind: "hold_xmin".into(),
        at_secs: 2.0,
        ended_secs: 5.5,
        note: "xmin horizon held".into(),
        vacuum,
        ..Default::default()
    }];
    let m = model::build(&r);
    let rows = &m.runs[0].vacuum;
    assert_eq!(rows.len(), 8, "a short hold is listed whole");
    let phases: Vec<&str> = rows.iter().map(|v| v.phase).collect();
    assert_eq!(
        phases,
        ["before", "before", "held", "held", "held", "held", "after", "after"]
    );
    let html = render_report(&r).unwrap();
    assert!(html.contains("While the xmin horizon was held"));
    assert!(html.contains("5,000") && html.contains("table class=\"vacuum\""));
    let without = render_report(&small_results()).unwrap();
    assert!(!without.contains("While the xmin horizon was held"));
}
