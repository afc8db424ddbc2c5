//! "At a glance" is first and fair: each accelerator's gate figure beside all commits, and in an
//! open-loop run throughput judged against the offered rate (a cell that drained a bigger
//! warm-up backlog is not coloured faster, nor one that drained less slower), the warm-up
//! backlog shown and taken out; the run's facts folded below it.

mod common;

use ackbench_reports::model::{self, GlanceRow, Pace, Tone};
use ackbench_reports::render_report;
use ackbench_reports::results::{Results, SecondSample};

use common::small_results;

/// Every round of `cell` offered 250 msg/s: pushed that, with a backlog that starts at
/// `start` 1 s into the window and moves by `step` each second, the window's ack rate being
/// 250 plus what the backlog lost per second.
fn pace_series(r: &mut Results, cell: &str, start: f64, step: f64) {
    let c = r.cells.iter_mut().find(|c| c.name == cell).unwrap();
    for round in &mut c.rounds {
        round.window_secs = 4.0;
        round.figures.push_throughput = 250.0;
        round.figures.ack_throughput = 250.0 - step;
        round.series = (0..4)
            .map(|t| SecondSample {
                t: t as f64 + 1.0,
                pushed: 250.0,
                acked: 250.0 - step,
                backlog: (start + step * t as f64).max(0.0),
                ..Default::default()
            })
            .collect();
    }
    let refs: Vec<_> = c.rounds.iter().map(|r| &r.figures).collect();
    c.summary.figures = ackbench_reports::results::summarize(&refs);
}

fn row<'a>(rows: &'a [GlanceRow], cell: &str) -> &'a GlanceRow {
    rows.iter().find(|g| g.cell == cell).unwrap()
}

#[test]
fn in_an_open_loop_a_cell_that_kept_up_is_not_coloured_for_draining_a_backlog() {
    let mut r = small_results();
    r.meta.offered_rate = Some(250.0);
    // registry+fusion drains a 900-message backlog (acks 550/s), none a small one (acks 300/s):
    // both kept up; fusion fell behind (its backlog grows by 100/s).
    pace_series(&mut r, "registry+fusion", 900.0, -300.0);
    pace_series(&mut r, "none", 150.0, -50.0);
    pace_series(&mut r, "fusion", 100.0, 100.0);
    let run = &model::build(&r).runs[0];
    let fused = row(&run.glance, "registry+fusion");
    assert!(
        fused.ack_throughput.ratio.unwrap().median > 1.5,
        "it acked faster"
    );
    assert_eq!(
        fused.ack_throughput.tone,
        Tone::Same,
        "but is not coloured for it"
    );
    let summary = run
        .summary
        .iter()
        .find(|s| s.cell == "registry+fusion")
        .unwrap();
    let in_summary = summary
        .figures
        .iter()
        .find(|f| f.key == "ack_throughput")
        .unwrap();
    assert_eq!(in_summary.tone, Tone::Same, "nor in the summary table");
    assert_eq!(fused.pace, Pace::KeptUp);
    assert!(
        fused.pace_text.contains("kept up with 250 msg/s offered"),
        "{}",
        fused.pace_text
    );
    assert!(
        fused
            .pace_text
            .contains("250 acks/s without the warm-up backlog"),
        "{}",
        fused.pace_text
    );
    assert_eq!(fused.backlog_at_start, Some(900.0));
    assert_eq!(row(&run.glance, "none").pace, Pace::KeptUp);
    let behind = row(&run.glance, "fusion");
    assert_eq!(behind.pace, Pace::FellBehind, "{}", behind.pace_text);

    // The page says so, in the row's own cell.
    let html = render_report(&r).unwrap();
    assert!(html.contains("data-pace=\"FellBehind\""));
    assert!(html.contains("judged against it, not against another cell"));
}

#[test]
fn a_closed_loop_keeps_judging_throughput_by_ratio() {
    let r = small_results();
    assert_eq!(r.meta.offered_rate, None);
    let run = &model::build(&r).runs[0];
    for g in &run.glance {
        assert_eq!(g.pace, Pace::NotJudged, "{}", g.cell);
        assert!(g.pace_text.starts_with("closed loop"));
    }
}

#[test]
fn glance_shows_each_accelerators_gate_figure_and_comes_before_the_folded_facts() {
    let r = small_results();
    let run = &model::build(&r).runs[0];
    let fused = row(&run.glance, "registry+fusion");
    let rf = &r.cell("registry+fusion").unwrap().summary.figures;
    assert_eq!(fused.ack_commits_per_ack.key, "ack_commits_per_ack");
    assert_eq!(
        fused.ack_commits_per_ack.value.unwrap().median,
        rf.ack_commits_per_ack.median
    );
    assert_eq!(fused.pg_ms_per_ack.key, "pg_exec_ms_per_ack");
    assert!(fused.pg_ms_per_ack.ratio.is_some(), "its ratio to none");

    let html = render_report(&r).unwrap();
    let at = |what: &str| html.find(what).unwrap_or_else(|| panic!("{what} missing"));
    assert!(at("id=\"verdict\"") < at("id=\"glance\""));
    assert!(
        at("id=\"glance\"") < at("id=\"run\""),
        "the run's facts come after the glance"
    );
    let facts = &html[at("id=\"run\"")..];
    assert!(
        facts.find("<details").unwrap() < facts.find("class=\"facts\"").unwrap(),
        "folded"
    );
}
