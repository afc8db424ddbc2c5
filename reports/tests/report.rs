//! The HTML report rendered from a small but realistic results document: its structure, its
//! numbers against the fixture, its verdict, its size, comparison mode and escaping.

mod common;

use ackbench_reports::model::{self, format_number, format_ratio, format_value, Format};
use ackbench_reports::results::Results;
use ackbench_reports::stats::Spread;
use ackbench_reports::{render_comparison, render_report, write_report};

use common::{row_of, small_results, summary_td, td_of, FIXTURE};

const CELLS: [&str; 4] = ["registry+fusion", "registry", "fusion", "none"];

/// Every chart a single-run report must have, by title.
const CHART_TITLES: [&str; 14] = [
    "Commit rate over time",
    "Ack throughput over time",
    "Latency percentile spectrum: push",
    "Latency percentile spectrum: pop",
    "Latency percentile spectrum: ack",
    "Latency percentile spectrum: end-to-end (push to ack)",
    "Latency histogram: push",
    "Latency histogram: pop",
    "Latency histogram: ack",
    "Latency histogram: end-to-end (push to ack)",
    "Commits per acked message, by procedure",
    "PostgreSQL execution time per acked message, by procedure",
    "Ack registry hit rate",
    "Ack fusion rows per commit",
];

fn svg_count(html: &str) -> usize {
    html.matches("<svg").count()
}

/// The SVG of the chart with this id.
fn chart<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<figure id=\"chart-{id}\""))
        .unwrap_or_else(|| panic!("no chart {id}"));
    let rest = &html[start..];
    &rest[..rest.find("</figure>").unwrap()]
}

#[test]
fn every_chart_is_present_with_title_axes_and_legend() {
    let r = small_results();
    let html = render_report(&r).unwrap();
    assert_eq!(svg_count(&html), CHART_TITLES.len(), "one <svg> per chart");
    for title in CHART_TITLES {
        assert!(
            html.contains(&format!("aria-label=\"{title}\"")),
            "chart {title} missing"
        );
    }
    // Axis labels with units, and a legend naming every cell, in each chart.
    let ids = [
        ("commit-rate", "commits/s"),
        ("ack-rate", "acked messages/s"),
        ("spectrum-ack", "latency (ms, log scale)"),
        ("histogram-ack", "share of requests (%)"),
        ("commits-by-procedure", "commits per acked message"),
        ("pg-ms-by-procedure", "PostgreSQL ms per acked message"),
        ("registry-hit-rate", "hit rate (%)"),
        ("fusion-rows-per-commit", "rows per flush commit"),
    ];
    for (id, unit) in ids {
        let svg = chart(&html, id);
        assert!(svg.contains(unit), "{id}: no axis label {unit}");
        for cell in CELLS {
            assert!(
                svg.contains(&format!(">\n{cell}\n<")) || svg.contains(&format!(">{cell}<")),
                "{id}: no legend entry for {cell}"
            );
        }
        assert!(svg.contains("<figcaption>") || html.contains("figcaption"));
    }
    // The percentile axis is labelled as percentiles.
    let spectrum = chart(&html, "spectrum-ack");
    for tick in ["50%", "90%", "99%", "99.9%"] {
        assert!(
            spectrum.contains(&format!("\n{tick}\n")),
            "spectrum tick {tick}"
        );
    }
    // The procedures appear as bar groups.
    let by_proc = chart(&html, "commits-by-procedure");
    for p in [
        "log_ack_by_hash_v1",
        "log_ack_at_v1",
        "log_ack_multi_v1",
        "log_push_v1",
        "log_pop_wildcard_v1",
        "all commits",
    ] {
        assert!(by_proc.contains(p), "commits by procedure: no {p}");
    }
    // One colour per cell, the same in every chart that draws it and in the tables.
    for cell in CELLS {
        let hex = ackbench_reports::charts::cell_colour_hex(cell);
        assert!(
            chart(&html, "commit-rate").contains(&hex),
            "{cell} colour {hex} not in the commit rate chart"
        );
        assert!(chart(&html, "spectrum-ack").contains(&hex));
        assert!(chart(&html, "commits-by-procedure").contains(&hex));
        assert!(row_of(&html, "id=\"summary\"", cell).contains(&hex));
    }
}

#[test]
fn summary_numbers_match_the_fixture() {
    let r = small_results();
    let html = render_report(&r).unwrap();
    let none = r.cell("none").unwrap();
    for cell in &r.cells {
        let name = cell.name.as_str();
        let s = &cell.summary.figures;
        let expect = |key: &str, v: f64, fmt: Format| {
            let td = summary_td(&html, name, key);
            let text = format_value(v, fmt);
            assert!(
                td.contains(&format!("<span class=\"v\">{text}</span>")),
                "{} {key}: expected {text} in {td}",
                cell.name
            );
        };
        expect("ack_throughput", s.ack_throughput.median, Format::Number);
        expect("push_throughput", s.push_throughput.median, Format::Number);
        expect("commits_per_sec", s.commits_per_sec.median, Format::Number);
        expect("commits_per_ack", s.commits_per_ack.median, Format::Number);
        expect(
            "wal_syncs_per_ack",
            s.wal_syncs_per_ack.median,
            Format::Number,
        );
        expect(
            "wal_bytes_per_ack",
            s.wal_bytes_per_ack.median,
            Format::Number,
        );
        expect(
            "pg_exec_ms_per_ack",
            s.pg_exec_ms_per_ack.median,
            Format::Ms,
        );
        expect(
            "latency_ms.ack.p50",
            s.latency_ms["ack"].p50.median,
            Format::Ms,
        );
        expect(
            "latency_ms.ack.p99",
            s.latency_ms["ack"].p99.median,
            Format::Ms,
        );
        expect(
            "latency_ms.ack.p999",
            s.latency_ms["ack"].p999.median,
            Format::Ms,
        );
        // Spreads over rounds are shown.
        let td = summary_td(&html, name, "ack_throughput");
        let spread = format!(
            "{}–{}",
            format_number(s.ack_throughput.min),
            format_number(s.ack_throughput.max)
        );
        assert!(
            td.contains(&spread),
            "{}: spread {spread} in {td}",
            cell.name
        );
        // Accelerator figures: a value where the accelerator runs, "off" where it does not.
        let hit = summary_td(&html, name, "registry_hit_rate");
        if cell.registry {
            let text = format_value(s.registry_hit_rate.median, Format::Percent);
            assert!(hit.contains(&text), "{}: {text} in {hit}", cell.name);
        } else {
            assert!(hit.contains(">off<"), "{}: {hit}", cell.name);
        }
        let rows = summary_td(&html, name, "fusion_rows_per_commit");
        if cell.fusion {
            assert!(rows.contains(&format_number(s.fusion_rows_per_commit.median)));
        } else {
            assert!(rows.contains(">off<"));
        }
        // The audit column.
        assert!(summary_td(&html, name, "audit").contains("ok, 0 lost"));

        // The ratio to none, taken round by round.
        let ratios: Vec<f64> = cell
            .rounds
            .iter()
            .zip(&none.rounds)
            .map(|(a, b)| a.figures.commits_per_ack / b.figures.commits_per_ack)
            .collect();
        let ratio = Spread::of(&ratios);
        let td = summary_td(&html, name, "commits_per_ack");
        if cell.name == "none" {
            assert!(!td.contains("×"), "the baseline has no ratio: {td}");
        } else {
            let text = format_ratio(ratio.median);
            assert!(td.contains(&text), "{}: ratio {text} in {td}", cell.name);
            let (lo, hi) = (format_number(ratio.min), format_number(ratio.max));
            if lo != hi {
                assert!(td.contains(&format!("<small>{lo}–{hi}</small>")), "{td}");
            }
            assert!(
                td.contains(&format!("data-ratio=\"{}\"", ratio.median)),
                "{td}"
            );
        }
    }
    // The ratio's range over rounds, where rounds differ.
    let rf = r.cell("registry+fusion").unwrap();
    let ratios: Vec<f64> = rf
        .rounds
        .iter()
        .zip(&none.rounds)
        .map(|(a, b)| a.figures.ack_throughput / b.figures.ack_throughput)
        .collect();
    let ratio = Spread::of(&ratios);
    let td = summary_td(&html, "registry+fusion", "ack_throughput");
    assert!(
        td.contains(&format!(
            "{}<small>{}–{}</small>",
            format_ratio(ratio.median),
            format_number(ratio.min),
            format_number(ratio.max)
        )),
        "{td}"
    );
    // registry+fusion commits less per ack than none in every round: the ratio is green.
    let td = summary_td(&html, "registry+fusion", "commits_per_ack");
    assert!(td.contains("class=\"ra better\""), "{td}");
}

#[test]
fn glance_answers_commits_saved_latency_and_loss() {
    let r = small_results();
    let html = render_report(&r).unwrap();
    let base = r
        .cell("none")
        .unwrap()
        .summary
        .figures
        .commits_per_ack
        .median;
    let rf = r.cell("registry+fusion").unwrap();
    let row = row_of(&html, "id=\"glance\"", "registry+fusion");
    let saved = (base - rf.summary.figures.commits_per_ack.median) * 1000.0;
    assert!(
        row.contains(&format!(
            "saves {} commits per 1,000 acked messages",
            format_number(saved)
        )),
        "{row}"
    );
    assert!(row.contains(&format_value(
        rf.summary.figures.latency_ms["ack"].p99.median,
        Format::Ms
    )));
    assert!(row.contains("0 lost"));
    assert!(row_of(&html, "id=\"glance\"", "none").contains("the baseline"));
}

#[test]
fn audit_table_and_verdict() {
    let mut r = small_results();
    let html = render_report(&r).unwrap();
    assert!(html.contains("PASSED: audit passed, 0 lost; 1/1 gates hold"));
    for cell in &r.cells {
        let row = row_of(&html, "id=\"audit\"", &cell.name);
        let a = &cell.summary.audit;
        for (key, v) in [
            ("pushed", a.pushed),
            ("acked", a.acked),
            ("dead_lettered", a.dead_lettered),
            ("dropped", a.dropped),
            ("lost", a.lost),
            ("duplicates", a.duplicates),
        ] {
            assert!(
                td_of(row, key).ends_with(&format!(">{}", format_number(v as f64))),
                "{} {key}",
                cell.name
            );
        }
    }

    // A lost message fails the run, however fast it was.
    r.cells[2].summary.audit.lost = 3;
    r.cells[2].rounds[1].audit.lost = 3;
    let html = render_report(&r).unwrap();
    assert!(html.contains("class=\"verdict failed\""));
    assert!(html.contains("FAILED: audit FAILED, 3 lost"), "headline");
    assert!(html.contains("Audit FAILED: 3 messages lost (fusion lost 3)."));
    assert!(td_of(row_of(&html, "id=\"audit\"", "fusion"), "lost").contains("class=\"bad\""));
}

#[test]
fn gates_and_interruptions_are_prominent() {
    let mut r = small_results();
    r.gates[0].passed = false;
    r.complete = false;
    r.cells[3].rounds[2].complete = false;
    let html = render_report(&r).unwrap();
    assert!(html.contains("id=\"gates\""));
    assert!(html.contains("Gates FAILED: 1 of 1 do not hold"));
    assert!(html.contains("FAILED: audit passed, 0 lost; 1/1 gates FAILED"));
    assert!(html.contains("INTERRUPTED: this run did not complete"));
    assert!(html.contains("none round 3 did not complete."));
    // The banner comes before any figure.
    assert!(html.find("INTERRUPTED").unwrap() < html.find("id=\"summary\"").unwrap());

    let mut r = small_results();
    r.complete = false;
    let html = render_report(&r).unwrap();
    assert!(html.contains("class=\"verdict incomplete\""));
    assert!(html.contains("INCOMPLETE: the run was interrupted"));

    let mut r = small_results();
    r.gates.clear();
    let html = render_report(&r).unwrap();
    assert!(!html.contains("id=\"gates\""));
    assert!(html.contains("no gates"));
}

#[test]
fn header_says_what_when_and_where() {
    let r = small_results();
    let html = render_report(&r).unwrap();
    for fact in [
        "tiny-batches (scenarios/tiny-batches.toml)",
        "2025-06-01T10:00:00Z",
        "2 cores",
        "PostgreSQL 15.8",
        "synchronous_commit = on",
        "wal_sync_method = fdatasync",
        "3f2c1e9a7b5d40c8e1f2a3b4c5d6e7f809a1b2c3",
        "3 rounds × 4 cells, 30 s measured per cell and round (+5 s warm-up, excluded)",
        "<details><summary>Scenario file as run",
    ] {
        assert!(html.contains(fact), "header lacks {fact}");
    }
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
    let html = render_report(&r).unwrap();
    assert!(!html.contains("<script>"), "unescaped script");
    assert!(!html.contains("<img src=x"));
    assert!(!html.contains("<b>bold</b>"));
    assert!(html.contains("&lt;/pre&gt;&lt;script&gt;alert('boom')&lt;/script&gt;"));
    assert!(html.contains("&lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot;"));
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
    let html = render_comparison(&a, &b).unwrap();
    assert!(html.contains("id=\"comparison\""));
    assert!(html.contains("2025-06-01T10:00"), "run A label");
    assert!(html.contains("feedfacecaf"), "run B label");
    let row = {
        let i = html.find("<tr data-key=\"ack_throughput\"").unwrap();
        let rest = &html[i..];
        &rest[..rest.find("</tr>").unwrap()]
    };
    let fa = a
        .cell("fusion")
        .unwrap()
        .summary
        .figures
        .ack_throughput
        .median;
    let fb = b
        .cell("fusion")
        .unwrap()
        .summary
        .figures
        .ack_throughput
        .median;
    assert!(row.contains(&format_number(fa)));
    assert!(row.contains(&format_number(fb)));
    assert!(
        row.contains(
            "data-cell=\"fusion\" data-run=\"ratio\" data-ratio=\"2\" class=\"better\">×2.00<"
        ),
        "{row}"
    );
    // Unchanged cells have ratio 1 and no colour.
    assert!(
        row.contains("data-cell=\"none\" data-run=\"ratio\" data-ratio=\"1\" class=\"\">×1.00<"),
        "{row}"
    );
    // One chart per key figure with both runs, plus series and spectra.
    let n = model::KEY_FIGURES.len() + 2 + 4;
    assert_eq!(svg_count(&html), n);
    let bars = chart(&html, "compare-ack_throughput");
    assert!(bars.contains("A: tiny-batches") && bars.contains("B: tiny-batches"));
    // Both verdicts and both audits.
    assert!(html.contains("id=\"verdict-a\"") && html.contains("id=\"verdict-b\""));
    assert!(html.contains("id=\"audit-a\"") && html.contains("id=\"audit-b\""));
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
    let html = render_report(&r).unwrap();
    assert_eq!(svg_count(&html), CHART_TITLES.len());
    assert!(chart(&html, "spectrum-pop").contains("no data recorded"));
    assert!(
        html.contains("registry ack histogram"),
        "warning for the bad histogram"
    );
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
    let html = render_report(&r).unwrap();
    assert!(summary_td(&html, "none", "commits_per_ack").contains(">—<"));
    assert!(!summary_td(&html, "registry+fusion", "commits_per_ack").contains("×"));
    assert!(summary_td(&html, "registry+fusion", "registry_hit_rate").contains(">—<"));
    assert!(summary_td(&html, "registry+fusion", "latency_ms.ack.p99").contains(">—<"));
    assert!(!html.contains("NaN"));
    // Only the baseline: no ratios, nothing breaks.
    let mut only = small_results();
    only.cells.retain(|c| c.name == "registry");
    let html = render_report(&only).unwrap();
    assert!(html.contains("no baseline cell to compare with"));
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
    let html = render_report(&empty).unwrap();
    assert_eq!(svg_count(&html), CHART_TITLES.len());
    assert!(html.contains("No cell was measured."));
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
