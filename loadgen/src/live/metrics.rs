//! The series the live endpoint exports for one cell round, read at scrape time from what the
//! workers already count (`CellContext`: counters, error kinds, the ledger's running counts,
//! the latency recorder) and from what the window sampler hands over (PostgreSQL's live
//! counters, the window's figures per acked message, the faults under way). Nothing here is
//! touched per message.

use std::time::Instant;

use ackbench_reports::results::{Audit, VacuumSample};
use hdrhistogram::Histogram;

use super::exposition::{Family, Sample, Type};
use crate::measure::pg_counters::LiveCounters;
use crate::workload::{CellContext, Phase};

const fn family(name: &'static str, kind: Type, help: &'static str) -> Family {
    Family { name, kind, help }
}

pub const RUNNING: Family = family(
    "ackbench_cell_running",
    Type::Gauge,
    "1 while the cell round runs, 0 once it has finished (its series then keep their last values).",
);
pub const PHASE: Family = family(
    "ackbench_cell_phase",
    Type::Gauge,
    "1 for the phase the cell round is in (warmup, measure, drain, stop), 0 for the others.",
);
pub const OFFERED: Family = family(
    "ackbench_offered_messages_total",
    Type::Counter,
    "Messages the open-loop producers were due to push so far (their rate times the time they ran).",
);
pub const MESSAGES: Family = family(
    "ackbench_messages_total",
    Type::Counter,
    "Messages pushed, popped and acked (achieved), by operation, warm-up included.",
);
pub const REQUESTS: Family = family(
    "ackbench_requests_total",
    Type::Counter,
    "Requests answered, by operation.",
);
pub const REDELIVERIES: Family = family(
    "ackbench_redeliveries_total",
    Type::Counter,
    "Deliveries of a (message, group) already delivered before.",
);
pub const REFUSED: Family = family(
    "ackbench_refused_acks_total",
    Type::Counter,
    "Acks the system refused (a lease gone).",
);
pub const ERRORS: Family = family(
    "ackbench_errors_total",
    Type::Counter,
    "Failed requests and checks, by kind (push, pop, ack, tick, audit, drain, other).",
);
pub const BACKLOG: Family = family(
    "ackbench_backlog_messages",
    Type::Gauge,
    "(message, group) obligations not yet acked, dead-lettered or dropped.",
);
pub const LATENCY: Family = family(
    "ackbench_latency_seconds",
    Type::Histogram,
    "Client latency in the measured window, by operation (push, pop, ack, e2e; _uncorrected: open loop from the actual send).",
);
pub const QUANTILE: Family = family(
    "ackbench_latency_quantile_seconds",
    Type::Gauge,
    "Client latency quantiles of the measured window so far, from the run's HDR histograms.",
);
pub const AUDIT: Family = family(
    "ackbench_audit_messages",
    Type::Gauge,
    "The audit so far: pushed, acked, dead_lettered, dropped, unresolved; lost once the cell round is audited.",
);
pub const PG_COMMITS: Family = family(
    "ackbench_pg_commits_total",
    Type::Counter,
    "Writing transactions of the PostgreSQL cluster (pg_snapshot_xmax), sampled each second of the window.",
);
pub const PG_ACK_COMMITS: Family = family(
    "ackbench_pg_ack_commits_total",
    Type::Counter,
    "Top-level calls of the ack procedures in the cell's database (pg_stat_statements), sampled each second of the window.",
);
pub const WINDOW: Family = family(
    "ackbench_window_per_acked_message",
    Type::Gauge,
    "The measured window's figures per acked message (commits, ack_commits, wal_bytes), once the window has closed.",
);
pub const FAULT: Family = family(
    "ackbench_fault_active",
    Type::Gauge,
    "1 while a fault of this kind is under way in the cell round's window, else 0.",
);

pub const DEAD_TUPLES: Family = family(
    "ackbench_pg_dead_tuples",
    Type::Gauge,
    "Dead tuples of the cell database's user tables (n_dead_tup), sampled each second of a window with a hold_xmin fault.",
);
pub const RELATION_BYTES: Family = family(
    "ackbench_pg_relation_bytes",
    Type::Gauge,
    "Size of the cell database's user tables (kind=table: heap and TOAST; kind=index), sampled with the dead tuples.",
);
pub const AUTOVACUUMS: Family = family(
    "ackbench_pg_autovacuums_total",
    Type::Counter,
    "Autovacuum runs on the cell database's user tables (autovacuum_count), sampled with the dead tuples.",
);
pub const BYSTANDER: Family = family(
    "ackbench_bystander_query_seconds",
    Type::Gauge,
    "How long the last bystander query took (a bounded scan of the busiest table), sampled with the dead tuples.",
);

/// Upper bounds of the latency histogram's buckets, in seconds.
pub const BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// The latency quantiles exported.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// The window's figures per acked message, once it closed.
#[derive(Debug, Clone, Copy)]
pub struct WindowFigures {
    pub commits: f64,
    pub ack_commits: f64,
    pub wal_bytes: f64,
}

/// One cell round as the endpoint sees it.
pub struct CellRoundLive {
    /// `run_id`, `scenario`, `cell`, `round`.
    pub labels: Vec<(&'static str, String)>,
    pub ctx: std::sync::Arc<CellContext>,
    /// The open-loop producers' offered rate, msg/s.
    pub offered_rate: Option<f64>,
    pub started: Instant,
    pub producers_stopped: Option<Instant>,
    pub pg: Option<LiveCounters>,
    pub window: Option<WindowFigures>,
    /// Every fault kind, and whether one is under way.
    pub faults: Vec<(&'static str, bool)>,
    /// The database's last vacuum reading (windows with a `hold_xmin` fault).
    pub vacuum: Option<VacuumSample>,
}

impl CellRoundLive {
    /// Every sample of the cell round now; `audit`, once it is audited, gives the final counts.
    pub fn samples(&self, running: bool, audit: Option<&Audit>) -> Vec<Sample> {
        let mut out = Samples {
            base: &self.labels,
            out: Vec::new(),
        };
        out.add(RUNNING, &[], f64::from(u8::from(running)));
        self.phase(&mut out);
        self.throughput(&mut out);
        latency(&mut out, &self.ctx);
        self.audit(&mut out, audit);
        self.postgres(&mut out);
        if let Some(v) = &self.vacuum {
            vacuum(&mut out, v);
        }
        for (kind, active) in &self.faults {
            out.add(FAULT, &[("kind", kind)], f64::from(u8::from(*active)));
        }
        out.out
    }

    fn phase(&self, out: &mut Samples<'_>) {
        let now = self.ctx.phase();
        let phases = [
            (Phase::Warmup, "warmup"),
            (Phase::Measure, "measure"),
            (Phase::Drain, "drain"),
            (Phase::Stop, "stop"),
        ];
        for (phase, name) in phases {
            out.add(PHASE, &[("phase", name)], f64::from(u8::from(phase == now)));
        }
    }

    fn throughput(&self, out: &mut Samples<'_>) {
        let c = self.ctx.counters.values();
        if let Some(rate) = self.offered_rate {
            let until = self.producers_stopped.unwrap_or_else(Instant::now);
            let secs = until.saturating_duration_since(self.started).as_secs_f64();
            out.add(OFFERED, &[("op", "push")], (rate * secs).floor());
        }
        let ops = [
            ("push", c.pushed_messages, c.push_requests),
            ("pop", c.popped_messages, c.pop_requests),
            ("ack", c.acked_messages, c.ack_requests),
        ];
        for (op, messages, requests) in ops {
            out.add(MESSAGES, &[("op", op)], messages);
            out.add(REQUESTS, &[("op", op)], requests);
        }
        out.add(REDELIVERIES, &[], c.redeliveries);
        out.add(REFUSED, &[], c.refused_acks);
        for (kind, n) in self.ctx.error_kinds.values() {
            out.add(ERRORS, &[("kind", kind)], n as f64);
        }
    }

    fn audit(&self, out: &mut Samples<'_>, audit: Option<&Audit>) {
        let counts: Vec<(&str, f64)> = match audit {
            Some(a) => vec![
                ("pushed", a.pushed as f64),
                ("acked", a.acked as f64),
                ("dead_lettered", a.dead_lettered as f64),
                ("dropped", a.dropped as f64),
                ("unresolved", a.undrained as f64),
                ("lost", a.lost as f64),
            ],
            None => {
                let s = self.ctx.ledger.so_far();
                vec![
                    ("pushed", s.pushed as f64),
                    ("acked", s.acked as f64),
                    ("dead_lettered", s.dead_lettered as f64),
                    ("dropped", s.dropped as f64),
                    ("unresolved", s.unresolved as f64),
                ]
            }
        };
        let backlog = counts.iter().find(|(k, _)| *k == "unresolved");
        out.add(BACKLOG, &[], backlog.map_or(0.0, |(_, n)| *n));
        for (outcome, n) in counts {
            out.add(AUDIT, &[("outcome", outcome)], n);
        }
    }

    fn postgres(&self, out: &mut Samples<'_>) {
        if let Some(pg) = self.pg.filter(|pg| pg.write_commits.is_finite()) {
            out.add(PG_COMMITS, &[], pg.write_commits);
            out.add(PG_ACK_COMMITS, &[], pg.ack_calls);
        }
        if let Some(w) = self.window {
            let figures = [
                ("commits", w.commits),
                ("ack_commits", w.ack_commits),
                ("wal_bytes", w.wal_bytes),
            ];
            for (figure, v) in figures {
                out.add(WINDOW, &[("figure", figure)], v);
            }
        }
    }
}

/// A vacuum reading's series.
fn vacuum(out: &mut Samples<'_>, v: &VacuumSample) {
    out.add(DEAD_TUPLES, &[], v.dead_tuples);
    out.add(RELATION_BYTES, &[("kind", "table")], v.table_bytes);
    out.add(RELATION_BYTES, &[("kind", "index")], v.index_bytes);
    out.add(AUTOVACUUMS, &[], v.autovacuums);
    out.add(BYSTANDER, &[], v.bystander_ms / 1000.0);
}

/// Samples sharing the cell round's labels.
struct Samples<'a> {
    base: &'a [(&'static str, String)],
    out: Vec<Sample>,
}

impl Samples<'_> {
    fn add(&mut self, family: Family, labels: &[(&'static str, &str)], value: f64) {
        self.add_series(family, "", labels, value);
    }

    fn add_series(
        &mut self,
        family: Family,
        suffix: &'static str,
        labels: &[(&'static str, &str)],
        value: f64,
    ) {
        let mut all = self.base.to_vec();
        all.extend(labels.iter().map(|(k, v)| (*k, v.to_string())));
        self.out.push(Sample {
            family,
            suffix,
            labels: all,
            value,
        });
    }
}

/// The latency histograms and quantiles of every operation recorded so far, read under the
/// recorder's lock.
fn latency(out: &mut Samples<'_>, ctx: &CellContext) {
    ctx.latency.read(|histograms| {
        for (op, h) in histograms.iter().filter(|(_, h)| !h.is_empty()) {
            histogram(out, op, h);
            for q in QUANTILES {
                let secs = h.value_at_quantile(q) as f64 / 1e6;
                out.add(QUANTILE, &[("op", op), ("quantile", &q.to_string())], secs);
            }
        }
    });
}

/// One operation's HDR histogram (microseconds) as cumulative fixed buckets in seconds.
fn histogram(out: &mut Samples<'_>, op: &str, h: &Histogram<u64>) {
    for le in BUCKETS {
        let count = h.count_between(0, (le * 1e6) as u64) as f64;
        out.add_series(
            LATENCY,
            "_bucket",
            &[("op", op), ("le", &le.to_string())],
            count,
        );
    }
    let count = h.len() as f64;
    out.add_series(LATENCY, "_bucket", &[("op", op), ("le", "+Inf")], count);
    out.add_series(LATENCY, "_sum", &[("op", op)], h.mean() * count / 1e6);
    out.add_series(LATENCY, "_count", &[("op", op)], count);
}
