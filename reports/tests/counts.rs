//! Charts say what they count: the by-procedure chart counts calls (a joint flush pipelines
//! several procedures' statements into one transaction), and a figure that applies but has no
//! value carries its reason instead of a bare "no data".

mod common;

use ackbench_reports::model::{self, ChartBody, ChartSpec, ReportModel};
use ackbench_reports::results::Results;

use common::small_results;

fn chart<'a>(m: &'a ReportModel, id: &str) -> &'a ChartSpec {
    m.charts().find(|c| c.id == id).unwrap()
}

/// The `fusion` cell (fusion on, registry off) as a real run has it: the broker reports its
/// fusion counters, with no flush, so rows per flush has no value.
fn fusion_without_flushes() -> Results {
    let mut r = small_results();
    let c = r.cells.iter_mut().find(|c| c.name == "fusion").unwrap();
    assert!(c.fusion && !c.registry);
    for round in &mut c.rounds {
        round.figures.fusion_rows_per_commit = f64::NAN;
        round
            .broker_metrics
            .insert("queen_ack_fusion_flushes_total".into(), 0.0);
        round
            .broker_metrics
            .insert("queen_ack_fusion_rows_total".into(), 0.0);
    }
    c.summary.figures.fusion_rows_per_commit = ackbench_reports::stats::Spread::of(&[]);
    r
}

#[test]
fn the_by_procedure_chart_counts_calls_and_says_which_bar_counts_commits() {
    let m = model::build(&small_results());
    let spec = chart(&m, "commits-by-procedure");
    assert_eq!(spec.title, "Calls per acked message, by procedure");
    assert!(
        spec.how_to_read.contains("joint flush"),
        "{}",
        spec.how_to_read
    );
    let ChartBody::Bars(groups) = &spec.body else {
        panic!("bars")
    };
    let labels: Vec<&str> = groups.iter().map(|g| g.label.as_str()).collect();
    assert!(labels.contains(&"ack procedure calls"), "{labels:?}");
    assert!(labels.contains(&"all commits"), "{labels:?}");
    assert!(!labels.contains(&"ack procedures"), "{labels:?}");
}

#[test]
fn fusion_without_the_registry_says_it_has_nothing_to_fold() {
    let r = fusion_without_flushes();
    let m = model::build(&r);
    let spec = chart(&m, "fusion-rows-per-commit");
    let ChartBody::Bars(groups) = &spec.body else {
        panic!("bars")
    };
    let bar = groups
        .iter()
        .flat_map(|g| &g.bars)
        .find(|b| b.cell == "fusion")
        .unwrap();
    assert_eq!((bar.value, bar.note.as_deref()), (None, Some("no flushes")));
    assert!(
        spec.how_to_read.contains("fusion: fusion folds the registry's cursor advances; without the registry it has nothing to fold"),
        "{}",
        spec.how_to_read
    );
    let none = groups
        .iter()
        .flat_map(|g| &g.bars)
        .find(|b| b.cell == "none")
        .unwrap();
    assert_eq!(
        none.note.as_deref(),
        Some("off"),
        "a cell without fusion is off, no reason needed"
    );

    // The summary table's cell carries the reason too.
    let row = m.runs[0]
        .summary
        .iter()
        .find(|s| s.cell == "fusion")
        .unwrap();
    let cell = row
        .figures
        .iter()
        .find(|f| f.key == "fusion_rows_per_commit")
        .unwrap();
    assert_eq!(cell.text, "—");
    assert!(cell.why_none.unwrap().contains("nothing to fold"));
    let html = ackbench_reports::render_report(&r).unwrap();
    assert!(!html.contains(">no data<"), "no bare no-data note is drawn");
}

/// `small_results` cut to its first `n` rounds, every figure summarised again from them.
fn with_rounds(mut r: Results, n: usize) -> Results {
    for c in &mut r.cells {
        c.rounds.truncate(n);
        let refs: Vec<_> = c.rounds.iter().map(|x| &x.figures).collect();
        c.summary.figures = ackbench_reports::results::summarize(&refs);
        c.summary.rounds = n as u32;
    }
    r
}

#[test]
fn one_round_colours_nothing_and_says_why_in_a_report_and_a_comparison() {
    use ackbench_reports::model::Tone;
    let one = with_rounds(small_results(), 1);
    let m = model::build(&one);
    let run = &m.runs[0];
    let coloured = run
        .summary
        .iter()
        .flat_map(|s| &s.figures)
        .chain(run.glance.iter().map(|g| &g.commits_per_ack))
        .filter(|f| f.tone != Tone::Same)
        .count();
    assert_eq!(coloured, 0, "one round colours nothing");
    assert!(run
        .colour_note
        .as_deref()
        .unwrap()
        .contains("1 round per cell"));

    // Two one-round runs of the same thing, B a fifth cheaper everywhere: still nothing coloured.
    let mut b = one.clone();
    for c in &mut b.cells {
        c.summary.figures.commits_per_ack.median *= 0.8;
        c.summary.figures.commits_per_ack.min *= 0.8;
        c.summary.figures.commits_per_ack.max *= 0.8;
    }
    let m = model::build_comparison(&one, &b);
    let c = m.comparison.as_ref().unwrap();
    let tones: Vec<Tone> = c
        .rows
        .iter()
        .flat_map(|r| &r.cells)
        .map(|x| x.tone)
        .collect();
    assert!(tones.iter().all(|t| *t == Tone::Same), "{tones:?}");
    assert!(c.colour_note.is_some());
    let html = ackbench_reports::render_comparison(&one, &b).unwrap();
    assert!(html.contains("class=\"colour-note\""));

    // With three rounds a change every round agrees on is coloured, and no note is shown.
    let three = small_results();
    assert_eq!(model::build(&three).runs[0].colour_note, None);
}
