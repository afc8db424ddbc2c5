//! The pure part of capacity planning, kept free of I/O so it can be checked on known numbers:
//! the ladder of offered rates, each step's verdict, the load generator's own warnings, the
//! search for the knee (which rate to try next), and the cell's sustained rate and knee.

use super::model::{Condition, Criteria, Failure, Step};
use ackbench_reports::capacity::amount;

/// The most steps a ladder may have.
pub const MAX_STEPS: usize = 100;

/// The offered rates: `start`, `start × factor`, ... up to `max`, each rounded to three
/// significant digits (so reports read 338, not 337.5).
pub fn ladder(start: f64, factor: f64, max: f64) -> Result<Vec<f64>, String> {
    if !(start.is_finite() && start > 0.0) {
        return Err(format!("--start must be a positive rate, got {start}"));
    }
    if !(factor.is_finite() && factor > 1.0 && factor <= 100.0) {
        return Err(format!(
            "--step must be a factor above 1 and at most 100, got {factor}"
        ));
    }
    if !(max.is_finite() && max >= start) {
        return Err(format!(
            "--max must be at least --start ({}), got {max}",
            amount(start)
        ));
    }
    let mut rates: Vec<f64> = Vec::new();
    let mut r = start;
    while r <= max * (1.0 + 1e-9) {
        let v = round3(r);
        if rates.last().is_none_or(|last| v > *last) {
            rates.push(v);
        }
        if rates.len() > MAX_STEPS {
            return Err(format!(
                "--start {}, --step {factor} and --max {} make more than {MAX_STEPS} steps",
                amount(start),
                amount(max)
            ));
        }
        r *= factor;
    }
    Ok(rates)
}

/// `v` rounded to three significant digits.
pub fn round3(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return v;
    }
    let e = v.log10().floor() as i32 - 2;
    if e >= 0 {
        let m = 10f64.powi(e);
        (v / m).round() * m
    } else {
        let m = 10f64.powi(-e);
        (v * m).round() / m
    }
}

/// `v <= limit`, false for NaN.
fn at_most(v: f64, limit: f64) -> bool {
    v <= limit
}

/// `v >= floor`, false for NaN.
fn at_least(v: f64, floor: f64) -> bool {
    v >= floor
}

fn pct(share: f64) -> String {
    format!("{}%", amount(share * 100.0))
}

/// The conditions a step failed; empty when it is sustained.
pub fn judge(s: &Step, c: &Criteria) -> Vec<Failure> {
    let mut failed = Vec::new();
    let mut fail = |condition, detail: String| failed.push(Failure { condition, detail });
    let offered = s.offered_rate;
    if !at_least(s.achieved_push_rate, c.min_achieved_ratio * offered) {
        fail(
            Condition::Achieved,
            format!(
                "pushed {} msg/s < {} of {}",
                amount(s.achieved_push_rate),
                pct(c.min_achieved_ratio),
                amount(offered)
            ),
        );
    }
    let groups = s.consumer_groups.max(1) as f64;
    if !at_least(s.answered_rate, c.min_answered_ratio * offered * groups) {
        fail(
            Condition::Answered,
            format!(
                "answered {} msg/s per group < {} of {}",
                amount(s.answered_rate / groups),
                pct(c.min_answered_ratio),
                amount(offered)
            ),
        );
    }
    let offered_obligations = s.offered_messages * groups;
    if !at_most(
        s.backlog_growth,
        c.max_backlog_growth_ratio * offered_obligations,
    ) {
        fail(
            Condition::Backlog,
            format!(
                "backlog grew by {} (> {} of {} offered)",
                amount(s.backlog_growth),
                pct(c.max_backlog_growth_ratio),
                amount(offered_obligations)
            ),
        );
    }
    let slo = c.slo_p99_ms;
    for (condition, name, v) in [
        (Condition::AckP99, "ack", s.ack_p99_ms),
        (Condition::E2eP99, "e2e", s.e2e_p99_ms),
    ] {
        if v.is_nan() {
            fail(condition, format!("no {name} latency measured"));
        } else if !at_most(v, slo) {
            fail(
                condition,
                format!("{name} p99 {} ms > {} ms", amount(v), amount(slo)),
            );
        }
    }
    failed
}

/// What limited the load generator itself in this step: its CPU near a core, or producers
/// starting their sends late.
pub fn loadgen_warnings(s: &Step, c: &Criteria) -> Vec<String> {
    let mut out = Vec::new();
    if s.loadgen_cpu_cores > c.loadgen_cpu_warn_cores {
        out.push(format!(
            "the load generator used {:.2} cores (near a whole core): it may be the bottleneck",
            s.loadgen_cpu_cores
        ));
    }
    if s.schedule_lag_p99_ms > c.schedule_lag_warn_ms {
        let slow_pushes = s.push_uncorrected_p99_ms >= s.producer_interval_ms;
        out.push(if slow_pushes {
            format!(
                "producers started sends {} ms late at p99: pushes ({} ms p99) outlast each producer's {} ms interval and a producer sends one batch at a time, so the full rate was not offered (more [producers] count would offer it)",
                amount(s.schedule_lag_p99_ms),
                amount(s.push_uncorrected_p99_ms),
                amount(s.producer_interval_ms)
            )
        } else {
            format!(
                "producers started sends {} ms late at p99 although pushes ({} ms p99) fit their {} ms interval: the load generator fell behind its own schedule",
                amount(s.schedule_lag_p99_ms),
                amount(s.push_uncorrected_p99_ms),
                amount(s.producer_interval_ms)
            )
        });
    }
    out
}

/// Judges a measured step in place: its verdict, failed conditions and loadgen warnings.
pub fn apply(s: &mut Step, c: &Criteria) {
    s.failed = judge(s, c);
    s.sustained = s.failed.is_empty();
    s.loadgen_warnings = loadgen_warnings(s, c);
}

/// The cell's sustained rate (the highest sustained offered rate before the first failing
/// step) and its knee (the first failing step's offered rate).
pub fn select(steps: &[Step]) -> (Option<f64>, Option<f64>) {
    let sustained = steps
        .iter()
        .take_while(|s| s.sustained)
        .last()
        .map(|s| s.offered_rate);
    let knee = steps.iter().find(|s| !s.sustained).map(|s| s.offered_rate);
    (sustained, knee)
}

/// Where a cell's knee search goes next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// Measure a step at this offered rate.
    Try(f64),
    /// A sustained rate and a failing one within the precision of each other: the knee.
    Bracketed,
    /// Every rate up to `--max` held: the knee lies above.
    SustainedAtMax,
    /// Even the floor (`--min`) failed: the knee lies below.
    FailedAtFloor,
}

/// The bounds of a knee search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    pub start: f64,
    pub factor: f64,
    pub min: f64,
    pub max: f64,
    /// The bracket is narrow enough once failing / sustained <= 1 + precision.
    pub precision: f64,
}

/// The next step of the search, given the steps judged so far (in any order): first the start;
/// then by the factor up from a sustained rate or down from a failing one until the knee is
/// bracketed (a sustained rate below a failing one); then the geometric middle of the bracket
/// until it is within the precision. Rates are rounded to three digits; a rate already tried
/// ends the search (the bracket cannot narrow further at that rounding).
pub fn next_rate(steps: &[Step], b: &Bounds) -> Next {
    let failing = steps
        .iter()
        .filter(|s| !s.sustained)
        .map(|s| s.offered_rate)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))));
    let sustained = steps
        .iter()
        .filter(|s| s.sustained && failing.is_none_or(|f| s.offered_rate < f))
        .map(|s| s.offered_rate)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    let (next, end) = match (sustained, failing) {
        (None, None) => (b.start, Next::Bracketed),
        (Some(s), None) if s >= b.max * (1.0 - 1e-9) => return Next::SustainedAtMax,
        (Some(s), None) => ((s * b.factor).min(b.max), Next::SustainedAtMax),
        (None, Some(f)) if f <= b.min * (1.0 + 1e-9) => return Next::FailedAtFloor,
        (None, Some(f)) => ((f / b.factor).max(b.min), Next::FailedAtFloor),
        (Some(s), Some(f)) if f / s <= 1.0 + b.precision => return Next::Bracketed,
        (Some(s), Some(f)) => ((s * f).sqrt(), Next::Bracketed),
    };
    let rate = round3(next);
    let tried = steps.iter().any(|s| s.offered_rate == rate);
    if tried || steps.len() >= MAX_STEPS {
        end
    } else {
        Next::Try(rate)
    }
}
