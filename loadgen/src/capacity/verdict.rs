//! The pure part of capacity planning, kept free of I/O so it can be checked on known numbers:
//! the ladder of offered rates, each step's verdict, the load generator's own warnings, the
//! search for the knee (which rate to try next), and the cell's sustained rate and knee.

use super::model::{Condition, Criteria, Failure, Plan, Step};
use ackbench_reports::capacity::amount;
use ackbench_reports::capacity::MAX_WINDOW_FACTOR;
use ackbench_reports::model::HOST_STEAL_WARN;

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

/// The rate a window can fall short of the offer by rounding alone: every producer sends whole
/// batches on its own interval, so each may end the window one batch short (msg/s; at most half
/// the offer, none when the interval is unknown).
pub fn batch_allowance(s: &Step) -> f64 {
    let interval = s.producer_interval_ms / 1000.0;
    if !(interval.is_finite() && interval > 0.0 && s.window_secs > 0.0) {
        return 0.0;
    }
    s.offered_rate * (interval / s.window_secs).min(0.5)
}

/// `, less a batch per producer (4)` when the allowance is worth saying.
fn allowance_words(allowance: f64) -> String {
    match allowance >= 0.005 {
        true => format!(" less a batch per producer ({})", amount(allowance)),
        false => String::new(),
    }
}

/// The conditions a step failed; empty when it is sustained. The push and answer rates are
/// judged less a batch per producer (`batch_allowance`), so a low step is not failed on the
/// rounding of whole batches.
pub fn judge(s: &Step, c: &Criteria) -> Vec<Failure> {
    let mut failed = Vec::new();
    let mut fail = |condition, detail: String| failed.push(Failure { condition, detail });
    let offered = s.offered_rate;
    let allowance = batch_allowance(s);
    if !at_least(
        s.achieved_push_rate,
        c.min_achieved_ratio * offered - allowance,
    ) {
        fail(
            Condition::Achieved,
            format!(
                "pushed {} msg/s < {} of {}{}",
                amount(s.achieved_push_rate),
                pct(c.min_achieved_ratio),
                amount(offered),
                allowance_words(allowance)
            ),
        );
    }
    let groups = s.consumer_groups.max(1) as f64;
    if !at_least(
        s.answered_rate,
        (c.min_answered_ratio * offered - allowance) * groups,
    ) {
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
    let in_flight = allowance * s.window_secs * groups;
    if !at_most(
        s.backlog_growth,
        c.max_backlog_growth_ratio * offered_obligations + in_flight,
    ) {
        fail(
            Condition::Backlog,
            format!(
                "backlog grew by {} (> {} of {} offered{})",
                amount(s.backlog_growth),
                pct(c.max_backlog_growth_ratio),
                amount(offered_obligations),
                match in_flight >= 0.5 {
                    true => format!(" plus a batch per producer, {}", amount(in_flight)),
                    false => String::new(),
                }
            ),
        );
    }
    let slo = c.slo_p99_ms;
    for (condition, name, v) in [
        (Condition::AckP99, "ack", s.ack_p99_ms),
        (
            Condition::E2eP99,
            match s.e2e_first_p99_ms.is_finite() {
                true => "first-delivery e2e",
                false => "e2e",
            },
            s.judged_e2e_p99_ms(),
        ),
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

/// Whether a judged step is to be measured again instead of counting: it failed while the host
/// took at least `HOST_STEAL_WARN` of the machine's CPU (steal stalls whole CPUs, which a
/// latency SLO feels far beyond its share), and no step of this search was measured again yet
/// (one per search: a host that keeps stealing costs a search one step, and a sweep's grid at
/// most one step per search).
pub fn slowed_by_host(step: &Step, remeasured: &[Step]) -> bool {
    !step.sustained && step.host_steal_share >= HOST_STEAL_WARN && remeasured.is_empty()
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

/// When no step of a cell was sustained and its lowest rate failed on latency alone: the
/// scenario's own latency floor (its pop batch, partitions per pop, long-poll), not the load's.
/// The sentence says so, says whether p99 moved with the rate, and names a target the scenario
/// can meet; None when a step was sustained or the lowest one failed on more than latency.
pub fn latency_floor(cell: &str, steps: &[Step], slo_p99_ms: f64) -> Option<String> {
    let p99 = Step::judged_p99_ms;
    let by_rate = |a: &&Step, b: &&Step| a.offered_rate.total_cmp(&b.offered_rate);
    let measured: Vec<&Step> = steps.iter().filter(|s| p99(s).is_finite()).collect();
    let lowest = measured.iter().copied().min_by(by_rate)?;
    let highest = measured.iter().copied().max_by(by_rate)?;
    let latency_only = lowest
        .failed
        .iter()
        .all(|f| matches!(f.condition, Condition::AckP99 | Condition::E2eP99));
    if steps.iter().any(|s| s.sustained) || lowest.failed.is_empty() || !latency_only {
        return None;
    }
    let lats = measured.iter().map(|s| p99(s));
    let (l_lo, l_hi) = lats.fold((f64::MAX, 0f64), |(lo, hi), l| (lo.min(l), hi.max(l)));
    let flat = highest.offered_rate >= 2.0 * lowest.offered_rate && l_hi <= 1.5 * l_lo;
    let seen = match flat {
        true => format!(
            "p99 latency stays at {}–{} ms from {} to {} msg/s, above the {} ms target at every rate",
            amount(l_lo),
            amount(l_hi),
            amount(lowest.offered_rate),
            amount(highest.offered_rate),
            amount(slo_p99_ms)
        ),
        false => format!(
            "at {} msg/s, the lowest rate tried, p99 latency was {} ms, above the {} ms target \
             with nothing else failing",
            amount(lowest.offered_rate),
            amount(p99(lowest)),
            amount(slo_p99_ms)
        ),
    };
    let floor = if flat { l_hi * 1.1 } else { p99(lowest) * 1.25 };
    let target = two_digits_above(floor).max(slo_p99_ms);
    Some(format!(
        "{cell}: {seen}: a floor of the scenario (its pop batch, partitions per pop, long-poll), \
         not of the load; it can meet about {} ms (--slo-p99-ms {}, or [capacity] slo_p99_ms)",
        amount(target),
        amount(target)
    ))
}

/// `v` rounded up to two significant digits (104.6 -> 110).
fn two_digits_above(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor() - 1.0);
    (v / p).ceil() * p
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
    /// When the start is a knee found before (a sweep's repeat or next point): the first move
    /// from it, each further move the same way squaring it (a gallop), up to `factor`; `None`
    /// moves by `factor` from the first.
    pub first_factor: Option<f64>,
}

impl Bounds {
    /// The factor of the search's move after `moves` moves the same way.
    fn move_factor(&self, moves: usize) -> f64 {
        match self.first_factor {
            Some(f) => f.powi(1 << moves.min(8)).min(self.factor),
            None => self.factor,
        }
    }
}

/// The first move of a search that starts at a knee found before: twice the precision, so that
/// a knee that did not move is bracketed by that move and one bisection.
pub fn gallop_from_knee(precision: f64) -> f64 {
    1.0 + 2.0 * precision
}

/// The next step of the search, given the steps judged so far (in any order): first the start;
/// then by the factor (or a gallop, `Bounds::first_factor`) up from a sustained rate or down
/// from a failing one (at once to what that step answered, if that is lower) until the knee is
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
        // Before a bracket every step moved the same way: `steps.len() - 1` moves so far.
        (Some(s), None) => {
            let factor = b.move_factor(steps.len().saturating_sub(1));
            ((s * factor).min(b.max), Next::SustainedAtMax)
        }
        (None, Some(f)) if f <= b.min * (1.0 + 1e-9) => return Next::FailedAtFloor,
        (None, Some(f)) => {
            let factor = b.move_factor(steps.len().saturating_sub(1));
            let answered = answered_at(steps, f);
            ((f / factor).min(answered).max(b.min), Next::FailedAtFloor)
        }
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

/// What the step at offered rate `rate` answered per second (infinite when unknown). A step
/// far past the knee answers what the system can, well short of what was offered (tiny-batches
/// without accelerators: about 1 000 msg/s of 3 000 offered); no rate above that can be
/// sustained, so a search coming down goes straight to it when that is further than a move.
fn answered_at(steps: &[Step], rate: f64) -> f64 {
    steps
        .iter()
        .find(|s| s.offered_rate == rate)
        .map(|s| s.answered_rate)
        .filter(|a| a.is_finite() && *a > 0.0)
        .unwrap_or(f64::INFINITY)
}

/// The measured window of the next step: `plan.step_secs`, lengthened by `plan.window_growth`
/// of it for every rejection close to the knee so far (a failing rate at most one step factor
/// above a sustained one), up to `MAX_WINDOW_FACTOR` times: near the knee a verdict is closest
/// to a coin toss, so it is given more time.
pub fn window_secs(steps: &[Step], b: &Bounds, plan: &Plan) -> f64 {
    let near = steps
        .iter()
        .filter(|f| !f.sustained)
        .filter(|f| {
            steps.iter().any(|s| {
                s.sustained
                    && s.offered_rate < f.offered_rate
                    && f.offered_rate <= s.offered_rate * b.factor * (1.0 + 1e-9)
            })
        })
        .count();
    let factor = (1.0 + plan.window_growth.max(0.0) * near as f64).min(MAX_WINDOW_FACTOR);
    plan.step_secs * factor
}

#[cfg(test)]
mod window_tests {
    use super::*;

    fn step(rate: f64, sustained: bool) -> Step {
        Step {
            offered_rate: rate,
            sustained,
            ..Default::default()
        }
    }

    #[test]
    fn windows_lengthen_after_rejections_near_the_knee_only() {
        let b = Bounds {
            start: 100.0,
            factor: 1.5,
            min: 5.0,
            max: 1000.0,
            precision: 0.05,
            first_factor: None,
        };
        let plan = Plan {
            step_secs: 10.0,
            window_growth: 0.5,
            ..Default::default()
        };
        // A failure far above the only sustained rate is not near the knee.
        let far = [step(100.0, true), step(400.0, false)];
        assert_eq!(window_secs(&far, &b, &plan), 10.0);
        let near = [step(100.0, true), step(150.0, false), step(122.0, false)];
        assert_eq!(window_secs(&near, &b, &plan), 20.0);
        let many: Vec<Step> = std::iter::once(step(100.0, true))
            .chain((0..9).map(|i| step(101.0 + i as f64, false)))
            .collect();
        assert_eq!(window_secs(&many, &b, &plan), 30.0, "capped at 3x");
        let fixed = Plan {
            window_growth: 0.0,
            ..plan
        };
        assert_eq!(window_secs(&near, &b, &fixed), 10.0);
    }
}

#[cfg(test)]
mod steal_tests {
    use super::*;

    fn step(rate: f64, sustained: bool, steal: f64) -> Step {
        Step {
            offered_rate: rate,
            sustained,
            host_steal_share: steal,
            ..Default::default()
        }
    }

    #[test]
    fn the_first_failing_step_the_host_slowed_is_measured_again_and_only_it() {
        let slowed = step(3_000.0, false, HOST_STEAL_WARN);
        assert!(slowed_by_host(&slowed, &[]));
        // One per search: the second measurement counts, however the host behaved, and so does
        // any later step.
        assert!(!slowed_by_host(&slowed, std::slice::from_ref(&slowed)));
        assert!(!slowed_by_host(&slowed, &[step(2_000.0, false, 0.2)]));
        // A sustained step counts as it is (the host only made it harder); a failing step
        // below the bound, or without a reading, counts too.
        assert!(!slowed_by_host(&step(3_000.0, true, 0.3), &[]));
        assert!(!slowed_by_host(
            &step(3_000.0, false, HOST_STEAL_WARN - 0.001),
            &[]
        ));
        assert!(!slowed_by_host(&step(3_000.0, false, f64::NAN), &[]));
    }
}
