//! The figures of a long measured window per minute: at each minute's end, the rates since the
//! last minute (from the counters), each operation's latency over that minute alone (the
//! recorder's histograms less their copy at the minute's start: HDR histograms subtract, so no
//! sample is kept), the backlog and the load generator's resident memory. What is kept is one
//! copy of the histograms and one `MinuteSample` per minute, whatever the run's length.

use std::collections::BTreeMap;

use ackbench_reports::results::{MinuteLatency, MinuteSample};
use hdrhistogram::Histogram;

use crate::workload::CounterValues;

/// Seconds in a minute of the per-minute figures.
pub const MINUTE_SECS: f64 = 60.0;

/// Cuts a window into minutes as it runs.
pub struct MinuteClock {
    minute_secs: f64,
    /// Where the current minute began: seconds since the window's start, the counters and the
    /// histograms then.
    began_at: f64,
    counters: CounterValues,
    histograms: BTreeMap<String, Histogram<u64>>,
    samples: Vec<MinuteSample>,
}

/// What the window reads at a minute's end.
pub struct Reading<'a> {
    /// Seconds since the window's start.
    pub t: f64,
    pub counters: CounterValues,
    pub histograms: &'a BTreeMap<String, Histogram<u64>>,
    pub backlog: u64,
    pub rss_mib: f64,
}

impl MinuteClock {
    /// A clock whose minutes last `minute_secs`, starting from the window's start counters.
    pub fn new(minute_secs: f64, counters: CounterValues) -> MinuteClock {
        MinuteClock {
            minute_secs,
            began_at: 0.0,
            counters,
            histograms: BTreeMap::new(),
            samples: Vec::new(),
        }
    }

    /// Whether the current minute is over at `t` seconds into the window.
    pub fn due(&self, t: f64) -> bool {
        t >= self.began_at + self.minute_secs - 1e-6
    }

    /// Closes the current minute with `now`; returns its sample.
    pub fn close(&mut self, now: &Reading<'_>) -> &MinuteSample {
        let secs = (now.t - self.began_at).max(1e-3);
        let delta = now.counters.since(&self.counters);
        let sample = MinuteSample {
            minute: self.samples.len() as u32 + 1,
            t: now.t,
            secs,
            pushed: delta.pushed_messages / secs,
            popped: delta.popped_messages / secs,
            acked: delta.acked_messages / secs,
            errors: delta.errors,
            backlog: now.backlog as f64,
            latency: minute_latency(now.histograms, &self.histograms),
            rss_mib: now.rss_mib,
        };
        self.began_at = now.t;
        self.counters = now.counters;
        self.histograms = now.histograms.clone();
        self.samples.push(sample);
        self.samples.last().expect("pushed above")
    }

    /// Closes a last, partial minute with `now` if it lasted at least a second; returns every
    /// minute.
    pub fn finish(mut self, now: &Reading<'_>) -> Vec<MinuteSample> {
        if now.t - self.began_at >= 1.0 {
            self.close(now);
        }
        self.samples
    }
}

/// Each operation's count, p50 and p99 over the samples in `now` and not in `before`.
fn minute_latency(
    now: &BTreeMap<String, Histogram<u64>>,
    before: &BTreeMap<String, Histogram<u64>>,
) -> BTreeMap<String, MinuteLatency> {
    let mut out = BTreeMap::new();
    for (op, h) in now {
        let mut minute = h.clone();
        if let Some(b) = before.get(op) {
            if minute.subtract(b).is_err() {
                continue;
            }
        }
        let ms = |q: f64| match minute.is_empty() {
            true => f64::NAN,
            false => minute.value_at_quantile(q) as f64 / 1000.0,
        };
        let figures = MinuteLatency {
            count: minute.len(),
            p50_ms: ms(0.5),
            p99_ms: ms(0.99),
        };
        out.insert(op.clone(), figures);
    }
    out
}

/// The load generator's resident memory in MiB, from `/proc/self/status` (`VmRSS`); NaN where
/// it cannot be read.
pub fn resident_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| vm_rss_mib(&status))
        .unwrap_or(f64::NAN)
}

/// `VmRSS` of a `/proc/PID/status` text, in MiB.
fn vm_rss_mib(status: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ackbench_reports::stats::new_histogram;

    fn counters(pushed: f64, acked: f64, errors: f64) -> CounterValues {
        CounterValues {
            pushed_messages: pushed,
            popped_messages: acked,
            acked_messages: acked,
            errors,
            ..Default::default()
        }
    }

    fn record(h: &mut BTreeMap<String, Histogram<u64>>, op: &str, us: u64, n: u64) {
        let h = h.entry(op.to_string()).or_insert_with(new_histogram);
        h.record_n(us, n).expect("in bounds");
    }

    #[test]
    fn each_minute_has_its_own_rates_and_latency() {
        let mut clock = MinuteClock::new(60.0, counters(0.0, 0.0, 0.0));
        let mut recorder = BTreeMap::new();
        record(&mut recorder, "ack", 2_000, 100);
        assert!(!clock.due(59.0) && clock.due(60.0));
        let first = clock
            .close(&Reading {
                t: 60.0,
                counters: counters(6000.0, 5400.0, 1.0),
                histograms: &recorder,
                backlog: 600,
                rss_mib: 40.0,
            })
            .clone();
        assert_eq!((first.minute, first.pushed, first.acked), (1, 100.0, 90.0));
        assert_eq!(
            (first.errors, first.backlog, first.rss_mib),
            (1.0, 600.0, 40.0)
        );
        let ack = first.latency["ack"];
        assert_eq!(ack.count, 100);
        assert!((ack.p99_ms - 2.0).abs() < 0.01, "{ack:?}");
        // The second minute is slow: its percentiles are its own, not the window's.
        record(&mut recorder, "ack", 50_000, 100);
        assert!(!clock.due(119.0) && clock.due(120.0));
        let second = clock
            .close(&Reading {
                t: 120.0,
                counters: counters(12000.0, 12000.0, 1.0),
                histograms: &recorder,
                backlog: 0,
                rss_mib: 41.0,
            })
            .clone();
        assert_eq!(
            (second.minute, second.pushed, second.acked),
            (2, 100.0, 110.0)
        );
        assert_eq!(second.errors, 0.0);
        let ack = second.latency["ack"];
        assert_eq!(ack.count, 100);
        assert!((ack.p50_ms - 50.0).abs() < 0.1, "{ack:?}");
        // A last partial minute of 30 s, no samples in it; a fraction of a second is dropped.
        let end = |t: f64| Reading {
            t,
            counters: counters(15000.0, 15000.0, 1.0),
            histograms: &recorder,
            backlog: 0,
            rss_mib: 41.0,
        };
        let minutes = clock.finish(&end(150.0));
        assert_eq!(minutes.len(), 3);
        assert_eq!((minutes[2].secs, minutes[2].pushed), (30.0, 100.0));
        assert_eq!(minutes[2].latency["ack"].count, 0);
        assert!(minutes[2].latency["ack"].p99_ms.is_nan());
        let clock = MinuteClock::new(60.0, counters(0.0, 0.0, 0.0));
        assert!(clock.finish(&end(0.5)).is_empty());
    }

    #[test]
    fn resident_memory_comes_from_vm_rss() {
        let status = "Name:\tackbench\nVmPeak:\t  900 kB\nVmRSS:\t   20480 kB\nThreads:\t4\n";
        assert_eq!(vm_rss_mib(status), Some(20.0));
        assert_eq!(vm_rss_mib("Name:\tx\n"), None);
        assert!(resident_mib() > 0.0, "this process has resident memory");
    }
}
