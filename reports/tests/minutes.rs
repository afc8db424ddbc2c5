//! The per-minute figures of long windows: results.json carries them per cell round, the model
//! lists a row per minute, and the page shows the "Per minute" table only for long windows.

mod common;

use std::collections::BTreeMap;

use ackbench_reports::model;
use ackbench_reports::render_report;
use ackbench_reports::results::{MinuteLatency, MinuteSample, Results};

fn minute(n: u32, ack_p99_ms: f64, rss_mib: f64) -> MinuteSample {
    let ack = MinuteLatency {
        count: 6000,
        p50_ms: 1.5,
        p99_ms: ack_p99_ms,
    };
    MinuteSample {
        minute: n,
        t: 60.0 * n as f64,
        secs: 60.0,
        pushed: 3000.0,
        popped: 3000.0,
        acked: 2990.0,
        errors: 0.0,
        backlog: 40.0,
        latency: BTreeMap::from([("ack".to_string(), ack)]),
        rss_mib,
    }
}

/// The first cell's first round made a 3-minute window with its minutes.
fn long_run() -> Results {
    let mut r = common::small_results();
    let round = &mut r.cells[0].rounds[0];
    round.window_secs = 180.0;
    round.minutes = vec![
        minute(1, 4.0, 50.0),
        minute(2, 9.0, 51.0),
        minute(3, 4.5, 50.5),
    ];
    r
}

#[test]
fn a_long_window_has_a_row_per_minute() {
    let r = long_run();
    let rows = &model::build(&r).runs[0].minutes;
    assert_eq!(rows.len(), 3);
    let second = &rows[1];
    assert_eq!(
        (second.cell.as_str(), second.minute),
        (r.cells[0].name.as_str(), 2)
    );
    assert_eq!(
        (second.acked, second.rss_mib, second.t),
        (2990.0, 51.0, 120.0)
    );
    let ack = model::MINUTE_OPERATIONS
        .iter()
        .position(|op| *op == "ack")
        .unwrap();
    assert_eq!(second.latency[ack], (1.5, 9.0));
    let push = model::MINUTE_OPERATIONS
        .iter()
        .position(|op| *op == "push")
        .unwrap();
    assert!(second.latency[push].0.is_nan(), "no push samples recorded");
    let html = render_report(&r).unwrap();
    assert!(html.contains("Per minute"));
    assert!(html.contains("1.50 / 9.00"), "the minute's ack p50 / p99");
}

#[test]
fn minutes_survive_results_json_and_short_runs_show_none() {
    let r = long_run();
    let text = serde_json::to_string(&r).unwrap();
    let back: Results = serde_json::from_str(&text).unwrap();
    assert_eq!(
        back.cells[0].rounds[0].minutes,
        r.cells[0].rounds[0].minutes
    );
    let short = common::small_results();
    let v = serde_json::to_value(&short).unwrap();
    assert!(
        v["cells"][0]["rounds"][0].get("minutes").is_none(),
        "a short run's results.json is as before"
    );
    assert!(model::build(&short).runs[0].minutes.is_empty());
    assert!(!render_report(&short).unwrap().contains("Per minute"));
    // A short window that somehow carries minutes still shows none.
    let mut odd = long_run();
    odd.cells[0].rounds[0].window_secs = 60.0;
    assert!(model::build(&odd).runs[0].minutes.is_empty());
}
