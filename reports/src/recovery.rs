//! Recovery after a fault, from a round's per-second series: the seconds from the fault's end
//! until the ack rate is back to at least 90 % of its level over the seconds before the fault
//! (their median, so an earlier fault's dip in those seconds does not lower the level). A second
//! above the level counts as recovered: it is the fault's backlog being drained, which only a
//! working system does (requiring the rate to come back *down* into a band would make the
//! verdict hang on how the catch-up and an earlier fault's dip fall into whole seconds).

use crate::results::SecondSample;
use crate::stats::Spread;

/// How far below the pre-fault level a second may be and still count as recovered.
pub const RECOVERY_BAND: f64 = 0.10;

/// How many seconds before the fault set its level.
pub const LEVEL_SECS: f64 = 5.0;

/// The median ack rate of the seconds that ended by `at_secs` (at most `LEVEL_SECS` of them);
/// `None` when no such second had acks.
pub fn level_before(series: &[SecondSample], at_secs: f64) -> Option<f64> {
    let before: Vec<f64> = series
        .iter()
        .filter(|s| s.t <= at_secs + 1e-6 && s.t > at_secs - LEVEL_SECS)
        .map(|s| s.acked)
        .collect();
    let level = Spread::of(&before).median;
    (level > 0.0).then_some(level)
}

/// Seconds from `ended_secs` to the end of the first later second whose ack rate is at least
/// `1 - RECOVERY_BAND` of the level before `at_secs`; `None` when that never happened in the series
/// (or there was no level to return to).
pub fn recovery_secs(series: &[SecondSample], at_secs: f64, ended_secs: f64) -> Option<f64> {
    let level = level_before(series, at_secs)?;
    series
        .iter()
        .filter(|s| s.t > ended_secs)
        .find(|s| s.acked >= (1.0 - RECOVERY_BAND) * level)
        .map(|s| s.t - ended_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(acked: &[f64]) -> Vec<SecondSample> {
        acked
            .iter()
            .enumerate()
            .map(|(i, a)| SecondSample {
                t: (i + 1) as f64,
                acked: *a,
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn recovery_ends_at_the_first_second_back_to_the_level() {
        // Level 100 over t=1..4; fault 4.0..5.5; t=6 is still low, t=7 at 89 is just short,
        // t=8 is back at 95.
        let s = series(&[100.0, 100.0, 100.0, 100.0, 10.0, 40.0, 89.0, 95.0, 100.0]);
        assert_eq!(level_before(&s, 4.0), Some(100.0));
        assert_eq!(recovery_secs(&s, 4.0, 5.5), Some(2.5));
    }

    #[test]
    fn draining_the_backlog_above_the_level_is_recovered() {
        // The second after the fault catches up at 2.5x the level: the system is back.
        let s = series(&[100.0, 100.0, 100.0, 100.0, 0.0, 250.0, 100.0]);
        assert_eq!(recovery_secs(&s, 4.0, 5.0), Some(1.0));
        // The failing case of a level set by an earlier fault's dip and catch-up
        // (0, 150, 200, 495 before the fault): 190 a second later is recovered.
        let s = series(&[150.0, 0.0, 495.0, 200.0, 190.0]);
        assert_eq!(recovery_secs(&s, 4.0, 4.5), Some(0.5));
    }

    #[test]
    fn an_earlier_dip_does_not_lower_the_level() {
        let s = series(&[100.0, 0.0, 100.0, 100.0, 100.0, 0.0, 95.0]);
        assert_eq!(level_before(&s, 5.0), Some(100.0));
        assert_eq!(recovery_secs(&s, 5.0, 6.0), Some(1.0));
    }

    #[test]
    fn no_recovery_inside_the_window_is_none() {
        let s = series(&[100.0, 100.0, 0.0, 0.0]);
        assert_eq!(recovery_secs(&s, 2.0, 2.5), None);
        assert_eq!(recovery_secs(&series(&[0.0, 0.0]), 1.0, 1.5), None);
    }
}
