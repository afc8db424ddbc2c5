//! The per-minute figures of long windows, as the report's "Per minute" table lists them: one
//! row per minute of every cell round whose window recorded minutes (longer than
//! `MINUTES_AFTER_SECS`).

use crate::results::{Results, MINUTES_AFTER_SECS};

/// The operations whose latency the table shows per minute.
pub const MINUTE_OPERATIONS: [&str; 4] = ["push", "pop", "ack", "e2e"];

/// One minute of one cell round.
#[derive(Debug, Clone, PartialEq)]
pub struct MinuteRow {
    pub cell: String,
    pub round: u32,
    pub minute: u32,
    /// The minute's end, in seconds since the window's start.
    pub t: f64,
    pub pushed: f64,
    pub popped: f64,
    pub acked: f64,
    /// p50 and p99 in ms per operation of `MINUTE_OPERATIONS` (NaN without samples).
    pub latency: [(f64, f64); 4],
    pub backlog: f64,
    pub errors: f64,
    pub rss_mib: f64,
}

/// Every minute of every long cell round, in cell, round and minute order.
pub(super) fn minute_rows(r: &Results) -> Vec<MinuteRow> {
    let mut rows = Vec::new();
    for c in &r.cells {
        for round in c
            .rounds
            .iter()
            .filter(|x| x.window_secs > MINUTES_AFTER_SECS)
        {
            for m in &round.minutes {
                let latency = MINUTE_OPERATIONS.map(|op| {
                    m.latency
                        .get(op)
                        .map_or((f64::NAN, f64::NAN), |l| (l.p50_ms, l.p99_ms))
                });
                rows.push(MinuteRow {
                    cell: c.name.clone(),
                    round: round.round,
                    minute: m.minute,
                    t: m.t,
                    pushed: m.pushed,
                    popped: m.popped,
                    acked: m.acked,
                    latency,
                    backlog: m.backlog,
                    errors: m.errors,
                    rss_mib: m.rss_mib,
                });
            }
        }
    }
    rows
}
