//! A lane's smoothed arrival rate, the input of its linger.

use std::time::Instant;

/// A lane's smoothed arrival rate: work items counted as they arrive, over the time
/// since the previous update, averaged with a half-life of 50 ms of elapsed time so that a
/// burst or a lull changes it within a few flushes. Looks closer together than 100 µs are
/// pooled into the next update.
pub struct ArrivalRate {
    last: Instant,
    pending: usize,
    per_second: f64,
}

impl ArrivalRate {
    const HALF_LIFE_SECS: f64 = 0.05;
    const MIN_INTERVAL_SECS: f64 = 0.0001;

    pub fn new(now: Instant) -> ArrivalRate {
        ArrivalRate {
            last: now,
            pending: 0,
            per_second: 0.0,
        }
    }

    pub fn record(&mut self, items: usize, now: Instant) {
        self.pending += items;
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        if elapsed < Self::MIN_INTERVAL_SECS {
            return;
        }
        let keep = 0.5f64.powf(elapsed / Self::HALF_LIFE_SECS);
        let recent = self.pending as f64 / elapsed;
        self.per_second = keep * self.per_second + (1.0 - keep) * recent;
        (self.last, self.pending) = (now, 0);
    }

    pub fn per_second(&self) -> f64 {
        self.per_second
    }
}

#[cfg(test)]
mod tests {
    use super::ArrivalRate;
    use std::time::{Duration, Instant};

    /// Feeds `items` every `gap` for `secs` seconds and returns the smoothed rate.
    fn steady(rate: &mut ArrivalRate, start: Instant, gap: Duration, items: usize, secs: f64) {
        let steps = (secs / gap.as_secs_f64()) as u32;
        for k in 1..=steps {
            rate.record(items, start + gap * k);
        }
    }

    #[test]
    fn a_steady_stream_converges_to_its_rate() {
        let start = Instant::now();
        let mut rate = ArrivalRate::new(start);
        steady(&mut rate, start, Duration::from_millis(2), 3, 1.0);
        assert!(
            (rate.per_second() - 1500.0).abs() < 15.0,
            "{}",
            rate.per_second()
        );
    }

    #[test]
    fn a_lull_brings_it_down_and_a_burst_up_within_a_few_half_lives() {
        let start = Instant::now();
        let mut rate = ArrivalRate::new(start);
        steady(&mut rate, start, Duration::from_micros(500), 4, 1.0); // 8 000/s
        assert!(rate.per_second() > 7_500.0);
        let later = start + Duration::from_secs(1);
        steady(&mut rate, later, Duration::from_millis(10), 1, 0.3); // 100/s
        assert!(rate.per_second() < 300.0, "{}", rate.per_second());
    }
}
