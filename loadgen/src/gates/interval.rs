//! Confidence intervals around gated figures, from the data a run already has: the rounds, and
//! the per-second samples inside each round's measured window.
//!
//! A gated figure is judged on the log scale (a ratio's noise is multiplicative): each round
//! gives one estimate `y = ln(figure)` (a ratio gate: `ln(num) - ln(den)` of that round; a
//! baseline gate: `ln(now / baseline)`). Two variances of one round's `y` are formed:
//!
//! - within rounds `W`: each round's variance of `y` from its per-second samples, by the ratio
//!   estimator's linearisation (the figure is a sum over seconds over a sum over seconds:
//!   `Var(ln(A/B)) ~ n/(n-1) * sum (a_i - F b_i)^2 / (F * sum b_i)^2`), added over the two cells
//!   of a ratio (Welch-Satterthwaite degrees of freedom), averaged over rounds, with their
//!   degrees of freedom added;
//! - between rounds `B`: the sample variance of the rounds' `y`, with `k - 1` degrees of
//!   freedom (needs two rounds or more).
//!
//! A round's variance is taken as `W + B`: `B` already holds the per-second noise besides any
//! drift between rounds, so the sum counts that noise twice, conservative by design, and stays
//! sound when a few rounds happen to agree. Its degrees of freedom are Welch-Satterthwaite's
//! for the sum (rounded down), either alone when only one exists. The interval is
//! `exp(mean +- t_975(df) * sqrt(var / k))`. With one round and no per-second samples of the
//! figure there is no interval.

use ackbench_reports::results::{GateInterval, RoundResults, SecondSample};

/// The confidence level of every gate interval.
pub const LEVEL: f64 = 0.95;

/// One round's estimate on the log scale and, when its per-second samples allow, the variance
/// of that estimate with its degrees of freedom.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoundLog {
    pub value: f64,
    pub within: Option<(f64, u32)>,
}

impl RoundLog {
    /// `num / den` of one round: the logs subtract, the (independent) variances add, with
    /// Welch-Satterthwaite degrees of freedom.
    pub fn ratio(num: RoundLog, den: RoundLog) -> RoundLog {
        let within = match (num.within, den.within) {
            (Some(a), Some(b)) => Some(sum_of_variances(a, b)),
            _ => None,
        };
        RoundLog {
            value: num.value - den.value,
            within,
        }
    }

    /// The round's value of `figure` on the log scale, with its per-second variance when the
    /// figure has per-second samples.
    pub fn of(round: &RoundResults, figure: &str, value: f64) -> RoundLog {
        RoundLog {
            value: value.ln(),
            within: within_log_variance(figure, &round.series),
        }
    }
}

/// One part of a per-second ratio, read from a second's sample.
type Part = fn(&SecondSample) -> f64;

/// Where the per-second samples carry a figure: the numerator and denominator of its
/// per-second ratio (a rate has the second itself, 1, below it). Figures not listed have no
/// per-second samples (latency percentiles are cumulative within a window, so its seconds are
/// not independent samples of it).
fn per_second_parts(figure: &str) -> Option<(Part, Part)> {
    let one: Part = |_| 1.0;
    Some(match figure {
        "ack_commits_per_ack" => (|s| s.ack_commits, |s| s.acked),
        "commits_per_ack" => (|s| s.commits, |s| s.acked),
        "pg_exec_ms_per_ack" => (|s| s.ack_exec_ms, |s| s.acked),
        "ack_throughput" => (|s| s.acked, one),
        "push_throughput" => (|s| s.pushed, one),
        "commits_per_sec" => (|s| s.commits, one),
        _ => return None,
    })
}

/// The variance of `ln(figure)` over one window from its per-second samples (each second one
/// block), with its degrees of freedom; `None` without at least three usable seconds.
pub fn within_log_variance(figure: &str, series: &[SecondSample]) -> Option<(f64, u32)> {
    let (num, den) = per_second_parts(figure)?;
    let pairs: Vec<(f64, f64)> = series
        .iter()
        .map(|s| (num(s), den(s)))
        .filter(|(a, b)| a.is_finite() && b.is_finite())
        .collect();
    let n = pairs.len();
    let (sum_a, sum_b) = pairs
        .iter()
        .fold((0.0, 0.0), |(x, y), (a, b)| (x + a, y + b));
    if n < 3 || sum_a <= 0.0 || sum_b <= 0.0 {
        return None;
    }
    let f = sum_a / sum_b;
    let residuals: f64 = pairs.iter().map(|(a, b)| (a - f * b).powi(2)).sum();
    let var_f = residuals * n as f64 / (n as f64 - 1.0) / (sum_b * sum_b);
    Some((var_f / (f * f), n as u32 - 1))
}

/// The interval of the rounds' geometric mean, back on the figure's own scale; `None` when it
/// cannot be formed (one round without per-second samples, or a value that is not finite).
pub fn interval(rounds: &[RoundLog]) -> Option<GateInterval> {
    let k = rounds.len();
    if k == 0 || rounds.iter().any(|r| !r.value.is_finite()) {
        return None;
    }
    let mean = rounds.iter().map(|r| r.value).sum::<f64>() / k as f64;
    let between = (k >= 2).then(|| {
        let ss: f64 = rounds.iter().map(|r| (r.value - mean).powi(2)).sum();
        (ss / (k as f64 - 1.0), (k - 1) as u32)
    });
    let within = rounds
        .iter()
        .map(|r| r.within)
        .collect::<Option<Vec<_>>>()
        .map(|w| {
            let var = w.iter().map(|(v, _)| v).sum::<f64>() / k as f64;
            (var, w.iter().map(|(_, d)| d).sum::<u32>())
        });
    let (var, df) = match (between, within) {
        (Some(b), Some(w)) => sum_of_variances(b, w),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => return None,
    };
    let half = t_975(df) * (var / k as f64).sqrt();
    half.is_finite().then(|| GateInterval {
        estimate: mean.exp(),
        low: (mean - half).exp(),
        high: (mean + half).exp(),
        level: LEVEL,
        rounds: k as u32,
    })
}

/// Two independent variance estimates added, with the Welch-Satterthwaite degrees of freedom
/// of the sum (rounded down; the larger of the two when both variances are zero).
fn sum_of_variances((a, da): (f64, u32), (b, db): (f64, u32)) -> (f64, u32) {
    let denominator = a * a / da.max(1) as f64 + b * b / db.max(1) as f64;
    let df = match denominator > 0.0 {
        true => ((a + b).powi(2) / denominator).floor() as u32,
        false => da.max(db),
    };
    (a + b, df.max(da.min(db)).max(1))
}

/// The 97.5th percentile of Student's t with `df` degrees of freedom (a two-sided 95 %
/// interval): exact to three decimals from a table up to 30, then the Cornish-Fisher
/// expansion around the normal quantile.
pub fn t_975(df: u32) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df as usize - 1],
        _ => {
            let (z, n) = (1.959964_f64, df as f64);
            z + (z.powi(3) + z) / (4.0 * n)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * n * n)
        }
    }
}

/// What an interval says about a bound: the region `[min, max]` a gate passes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// The whole interval is inside the passing region.
    Held,
    /// The whole interval is outside it.
    Failed,
    /// The interval straddles a bound.
    Inconclusive,
}

/// Judges the interval `[low, high]` against the passing region `[min, max]` (either side
/// open when `None`).
pub fn judge(low: f64, high: f64, min: Option<f64>, max: Option<f64>) -> Judgement {
    let inside = |x: f64| min.is_none_or(|m| x >= m) && max.is_none_or(|m| x <= m);
    let beyond = min.is_some_and(|m| high < m) || max.is_some_and(|m| low > m);
    match (inside(low) && inside(high), beyond) {
        (true, _) => Judgement::Held,
        (false, true) => Judgement::Failed,
        (false, false) => Judgement::Inconclusive,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A standard normal draw (Box-Muller) from a seeded generator.
    fn normal(rng: &mut fastrand::Rng) -> f64 {
        let (u, v) = (rng.f64().max(1e-12), rng.f64());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// `rounds` rounds of two cells whose true ratio is `ratio`: each cell's second draws
    /// `mean * exp(noise)`, and each round drifts both cells' figure by its own factor.
    fn rounds_of(rng: &mut fastrand::Rng, ratio: f64, rounds: usize, secs: usize) -> Vec<RoundLog> {
        let cell = |rng: &mut fastrand::Rng, mean: f64| {
            let drift = (0.05 * normal(rng)).exp();
            let series: Vec<SecondSample> = (0..secs)
                .map(|_| SecondSample {
                    ack_commits: 1000.0 * mean * drift * (0.1 * normal(rng)).exp(),
                    acked: 1000.0,
                    ..Default::default()
                })
                .collect();
            let f = series.iter().map(|s| s.ack_commits).sum::<f64>()
                / series.iter().map(|s| s.acked).sum::<f64>();
            RoundLog {
                value: f.ln(),
                within: within_log_variance("ack_commits_per_ack", &series),
            }
        };
        (0..rounds)
            .map(|_| {
                let num = cell(rng, ratio);
                RoundLog::ratio(num, cell(rng, 1.0))
            })
            .collect()
    }

    #[test]
    fn the_t_quantile_matches_known_values_and_falls_towards_the_normal() {
        assert_eq!(t_975(1), 12.706);
        assert_eq!(t_975(30), 2.042);
        assert!((t_975(60) - 2.000).abs() < 0.002, "{}", t_975(60));
        assert!((t_975(120) - 1.980).abs() < 0.002, "{}", t_975(120));
        assert!(t_975(31) < t_975(30) && t_975(31) > t_975(1000));
    }

    #[test]
    fn intervals_shrink_with_more_rounds_and_more_seconds() {
        let width = |rounds: usize, secs: usize| {
            let mut rng = fastrand::Rng::with_seed(7);
            let trials = 50;
            (0..trials)
                .map(|_| {
                    let i = interval(&rounds_of(&mut rng, 0.4, rounds, secs)).unwrap();
                    (i.high / i.low).ln()
                })
                .sum::<f64>()
                / trials as f64
        };
        let (w2, w5, w20) = (width(2, 10), width(5, 10), width(20, 10));
        assert!(w2 > w5 && w5 > w20, "{w2} {w5} {w20}");
        assert!(
            width(1, 5) > width(1, 60),
            "one round: more seconds, narrower"
        );
    }

    #[test]
    fn the_interval_covers_a_known_ratio_at_least_as_often_as_it_claims() {
        for (rounds, secs) in [(1, 6), (2, 10), (3, 20), (8, 10)] {
            let mut rng = fastrand::Rng::with_seed(rounds as u64 * 31 + secs as u64);
            let trials = 400;
            let covered = (0..trials)
                .filter(|_| {
                    let i = interval(&rounds_of(&mut rng, 0.4, rounds, secs)).unwrap();
                    i.low <= 0.4 && 0.4 <= i.high
                })
                .count();
            let rate = covered as f64 / trials as f64;
            // One round cannot see drift between rounds: the per-second variance alone covers
            // less than 95 % here, where each round drifts by 5 %.
            let floor = if rounds == 1 { 0.5 } else { 0.93 };
            assert!(rate >= floor, "{rounds} rounds x {secs} s: covered {rate}");
        }
    }

    #[test]
    fn no_interval_from_one_round_without_seconds_nor_from_a_missing_value() {
        let bare = RoundLog {
            value: 0.5f64.ln(),
            within: None,
        };
        assert!(interval(&[bare]).is_none());
        assert!(interval(&[]).is_none());
        let i = interval(&[bare, bare]).unwrap();
        assert!((i.low - 0.5).abs() < 1e-12 && (i.high - 0.5).abs() < 1e-12);
        let nan = RoundLog {
            value: f64::NAN,
            within: None,
        };
        assert!(interval(&[bare, nan]).is_none());
    }

    #[test]
    fn an_interval_holds_fails_or_straddles() {
        use Judgement::*;
        assert_eq!(judge(0.3, 0.45, None, Some(0.5)), Held);
        assert_eq!(judge(0.55, 0.7, None, Some(0.5)), Failed);
        assert_eq!(judge(0.45, 0.55, None, Some(0.5)), Inconclusive);
        assert_eq!(judge(1.1, 1.3, Some(1.0), None), Held);
        assert_eq!(judge(0.7, 0.9, Some(1.0), None), Failed);
        assert_eq!(judge(0.9, 1.05, Some(0.8), Some(1.0)), Inconclusive);
        assert_eq!(judge(0.85, 0.95, Some(0.8), Some(1.0)), Held);
        assert_eq!(judge(0.5, 0.7, Some(0.8), Some(1.0)), Failed);
    }
}
