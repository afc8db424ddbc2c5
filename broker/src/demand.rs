//! Whether consumers are waiting for messages: long-polls that looked, found nothing and wait
//! now or did lately, and pops that came back empty lately. A leaf that the pop route writes and the lanes
//! read: while consumers wait for messages, a lane's linger costs latency they would spend
//! waiting anyway; while every consumer finds work, the lanes are what they wait for, and a
//! linger would cost throughput.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Consumers' demand for messages, as the pop route saw it.
pub struct Demand {
    waiting: AtomicUsize,
    /// When a pop last answered empty or a long-poll last began to wait, microseconds after
    /// `origin` (0: never).
    last_empty_us: AtomicU64,
    origin: Instant,
}

impl Default for Demand {
    fn default() -> Demand {
        Demand {
            waiting: AtomicUsize::new(0),
            last_empty_us: AtomicU64::new(0),
            origin: Instant::now(),
        }
    }
}

/// Counts a long-poll as waiting for messages for as long as it lives.
pub struct Waiting<'a>(&'a Demand);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Relaxed);
    }
}

impl Demand {
    /// How recently a pop must have come back empty for consumers to count as waiting.
    pub const RECENT: Duration = Duration::from_millis(100);

    /// A long-poll found nothing and waits, until the guard drops.
    pub fn waiting(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, Relaxed);
        self.came_back_empty();
        Waiting(self)
    }

    /// A pop answered empty (or a long-poll found nothing).
    pub fn came_back_empty(&self) {
        let us = self.origin.elapsed().as_micros().max(1) as u64;
        self.last_empty_us.store(us, Relaxed);
    }

    /// Whether consumers wait for messages: a long-poll waits, or one began to wait or a pop
    /// came back empty within `RECENT` (consumers that are woken and served at once still
    /// come back to wait).
    pub fn consumers_wait(&self) -> bool {
        if self.waiting.load(Relaxed) > 0 {
            return true;
        }
        let last = self.last_empty_us.load(Relaxed);
        let now = self.origin.elapsed().as_micros() as u64;
        last > 0 && now.saturating_sub(last) < Self::RECENT.as_micros() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_long_poll_or_a_recent_empty_pop_means_consumers_wait() {
        let d = Demand::default();
        assert!(!d.consumers_wait(), "nobody has waited yet");
        {
            let _w = d.waiting();
            assert!(d.consumers_wait());
        }
        assert!(d.consumers_wait(), "it waited lately");
        std::thread::sleep(Demand::RECENT + Duration::from_millis(20));
        assert!(!d.consumers_wait(), "it got its message long ago");
        d.came_back_empty();
        assert!(d.consumers_wait());
        std::thread::sleep(Demand::RECENT + Duration::from_millis(20));
        assert!(
            !d.consumers_wait(),
            "an empty pop long ago says nothing of now"
        );
    }
}
