//! Client-side latency: one HDR histogram per operation, recording only inside the measured
//! window (warm-up and drain are excluded).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ackbench_reports::stats::new_histogram;
use hdrhistogram::Histogram;

/// The operations measured; `_uncorrected` twins hold open-loop latency from the actual send.
pub const OPERATIONS: &[&str] = &["push", "pop", "ack", "e2e"];

pub struct Recorder {
    measuring: AtomicBool,
    histograms: Mutex<BTreeMap<String, Histogram<u64>>>,
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder {
            measuring: AtomicBool::new(false),
            histograms: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Recorder {
    pub fn set_measuring(&self, on: bool) {
        self.measuring.store(on, Ordering::SeqCst);
    }

    pub fn measuring(&self) -> bool {
        self.measuring.load(Ordering::Relaxed)
    }

    /// Records `d` under `op` when inside the window.
    pub fn record(&self, op: &str, d: Duration) {
        if !self.measuring() {
            return;
        }
        let us = (d.as_micros() as u64).clamp(1, 3_600_000_000);
        let mut map = self.histograms.lock().expect("latency lock");
        match map.get_mut(op) {
            Some(h) => h.saturating_record(us),
            None => {
                let mut h = new_histogram();
                h.saturating_record(us);
                map.insert(op.to_string(), h);
            }
        }
    }

    /// The p99 of `op` so far, in ms (for the progress line).
    pub fn p99_ms(&self, op: &str) -> f64 {
        let map = self.histograms.lock().expect("latency lock");
        map.get(op)
            .filter(|h| !h.is_empty())
            .map(|h| h.value_at_quantile(0.99) as f64 / 1000.0)
            .unwrap_or(0.0)
    }

    /// `read` applied to every histogram recorded so far, by operation, under the recorder's
    /// lock (no copy): for the live metrics' scrape.
    pub fn read<T>(&self, read: impl FnOnce(&BTreeMap<String, Histogram<u64>>) -> T) -> T {
        read(&self.histograms.lock().expect("latency lock"))
    }

    /// Every histogram recorded, by operation.
    pub fn snapshot(&self) -> BTreeMap<String, Histogram<u64>> {
        self.histograms.lock().expect("latency lock").clone()
    }
}
