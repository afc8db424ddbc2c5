//! The lanes' two run-time decisions, as pure state machines fed with what the lanes measure:
//! how many flushes may run at once (`Concurrency`) and how long an idle lane lingers after a
//! first arrival (`Linger`). Neither touches a clock or a database, so a simulated lane can
//! drive them deterministically (`sim.rs`).
//!
//! Concurrency: more flushes at once pay only where concurrent commits overlap on the database
//! (a host with cores and a WAL device to spare); where they serialise (two cores, one WAL
//! sync at a time), a second flush halves every flush's rows and doubles the commits. The
//! controller starts at one flush and moves the limit only by probes that measured the result:
//! while work waits on the limit for most of an epoch, it allows one more flush for one epoch
//! and keeps it only if that epoch completed at least `PROBE_GAIN` times the work of the
//! epochs before; above one flush it also tries one fewer for an epoch and keeps that unless
//! the work fell by `PROBE_GAIN` (so a probe kept by a lucky epoch, or a load that changed, is
//! undone). A failed probe is not tried again in its direction for a backoff that doubles up to
//! `MAX_BACKOFF`, and a kept probe doubles the wait before one the other way. It also lowers
//! the limit when the flushes in flight, averaged over an epoch, would fit in half of one
//! fewer. Between a gain of `PROBE_GAIN` and a loss of as much, fewer flushes win; failed
//! probes back off exponentially, and so does reversing a kept one, so the limit cannot
//! oscillate: noise that keeps probes both ways flips it at intervals that double up to a
//! minute, and at most one probe epoch runs per backoff in each direction.
//!
//! Linger: an idle lane that flushes a first arrival at once commits it alone; waiting lets
//! later arrivals share its commit. It lingers only while consumers wait for messages (a
//! long-poll waits, or a pop came back empty lately: `demand.rs`). Then the supply of messages
//! bounds the throughput, and a linger costs latency the consumers would spend waiting anyway;
//! while every consumer finds work, the consumers wait on the lanes, and a linger would cost
//! a closed loop its throughput (each consumer waits for every flush it is in). The wait grows
//! with the lane's smoothed arrival rate, from none where it would gather less than half an
//! item to the whole hold bound where the bound gathers a full batch (`FULL_GATHER` items). It
//! never exceeds the hold bound nor `FLUSH_SHARE` of the lanes' smoothed flush time: the
//! consumers may be waiting for a lease the lingering ack frees, so a linger stays short while
//! the database is quick and grows, up to the bound, as a busy database slows the flushes. A
//! lane whose inbox fills a flush stops lingering at once.
//! A lane lingers when work arrives at it idle, and when its flushes finish with work waiting
//! that arrived during them: a steady stream is then paced at one flush per linger and flush,
//! and each flush carries what the whole cycle gathered.

use std::time::{Duration, Instant};

/// How many flushes may run at once: fixed by the operator, or decided from measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConcurrencyMode {
    Fixed(usize),
    /// Adaptive between one and `max`.
    Adaptive {
        max: usize,
    },
}

/// What one epoch of the lanes measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Epoch {
    /// Work items (acks and pops) whose flush completed.
    pub items: u64,
    /// Fraction of the epoch during which ready work waited because the limit was reached.
    pub saturated: f64,
    /// Flushes in flight, averaged over the epoch.
    pub mean_inflight: f64,
}

/// The flush-concurrency controller.
#[derive(Debug, Clone)]
pub struct Concurrency {
    mode: ConcurrencyMode,
    limit: usize,
    /// Items per epoch at the current limit (mean of the last two unprobed epochs).
    baseline: Option<f64>,
    last_unprobed: Option<f64>,
    /// The probe the current epoch runs, if any.
    probe: Option<Probe>,
    up: Backoff,
    down: Backoff,
    /// Probes tried and probes kept, for the metrics.
    pub probes: u64,
    pub probes_kept: u64,
}

/// Which way a probe moved the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Up,
    Down,
}

/// When a probe in one direction may run again: a wait that doubles after each failed probe
/// this way and after each kept probe the other way, up to `MAX_BACKOFF`.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    wait: Duration,
    next: Option<Instant>,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff {
            wait: Concurrency::MIN_BACKOFF,
            next: None,
        }
    }

    fn due(&self, now: Instant) -> bool {
        self.next.is_none_or(|t| now >= t)
    }

    /// A probe this way was kept: the next one waits as long as this one did.
    fn succeeded(&mut self, now: Instant) {
        self.next = Some(now + self.wait);
    }

    fn failed(&mut self, now: Instant) {
        self.wait = (self.wait * 2).min(Concurrency::MAX_BACKOFF);
        self.next = Some(now + self.wait);
    }
}

impl Concurrency {
    /// How long one epoch lasts.
    pub const EPOCH: Duration = Duration::from_millis(200);
    /// An upward probe is kept when its epoch completed at least this many times the
    /// baseline's work; a downward one when it completed more than the baseline divided by it.
    pub const PROBE_GAIN: f64 = 1.10;
    /// The fraction of an epoch work must wait on the limit before an upward probe.
    pub const SATURATED: f64 = 0.5;
    pub const MIN_BACKOFF: Duration = Duration::from_secs(2);
    pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

    pub fn new(mode: ConcurrencyMode) -> Concurrency {
        let limit = match mode {
            ConcurrencyMode::Fixed(n) => n.max(1),
            ConcurrencyMode::Adaptive { .. } => 1,
        };
        Concurrency {
            mode,
            limit,
            baseline: None,
            last_unprobed: None,
            probe: None,
            up: Backoff::new(),
            down: Backoff::new(),
            probes: 0,
            probes_kept: 0,
        }
    }

    /// Flushes allowed in flight now.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Takes an epoch's measurements at `now`, its end, and adjusts the limit.
    pub fn end_epoch(&mut self, now: Instant, e: Epoch) {
        let ConcurrencyMode::Adaptive { max } = self.mode else {
            return;
        };
        let work = e.items as f64;
        if let Some(probe) = self.probe.take() {
            self.judge(now, probe, work);
            return;
        }
        self.baseline = Some(match self.last_unprobed {
            Some(before) => (before + work) / 2.0,
            None => work,
        });
        self.last_unprobed = Some(work);
        if work <= 0.0 {
            return;
        }
        if e.saturated >= Self::SATURATED && self.limit < max && self.up.due(now) {
            self.start(Probe::Up);
        } else if self.limit > 1 && self.down.due(now) {
            self.start(Probe::Down);
        } else if self.limit > 1 && e.mean_inflight < (self.limit - 1) as f64 * 0.5 {
            self.limit -= 1;
            self.reset_baseline();
        }
    }

    fn start(&mut self, probe: Probe) {
        self.probes += 1;
        self.probe = Some(probe);
        match probe {
            Probe::Up => self.limit += 1,
            Probe::Down => self.limit -= 1,
        }
    }

    /// Keeps or undoes the probe that ran the epoch that did `work`. One more flush must gain
    /// `PROBE_GAIN`; one fewer must lose less than that: between the two, fewer flushes win.
    fn judge(&mut self, now: Instant, probe: Probe, work: f64) {
        let base = self.baseline.unwrap_or(0.0);
        let kept = match probe {
            Probe::Up => base > 0.0 && work >= base * Self::PROBE_GAIN,
            Probe::Down => work * Self::PROBE_GAIN > base,
        };
        let (this_way, other_way) = match probe {
            Probe::Up => (&mut self.up, &mut self.down),
            Probe::Down => (&mut self.down, &mut self.up),
        };
        if kept {
            self.probes_kept += 1;
            this_way.succeeded(now);
            // Undoing what a probe just kept waits longer each time: noise that keeps probes
            // both ways flips the limit ever more rarely instead of every few seconds.
            other_way.failed(now);
        } else {
            this_way.failed(now);
            match probe {
                Probe::Up => self.limit -= 1,
                Probe::Down => self.limit += 1,
            }
        }
        self.reset_baseline();
    }

    fn reset_baseline(&mut self) {
        self.baseline = None;
        self.last_unprobed = None;
    }
}

/// How long an idle lane lingers after a first arrival.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Linger {
    /// Grows with the arrival rate, up to `hold` (see the module's doc).
    Adaptive { hold: Duration },
    /// `QUEEN_FUSION_LINGER_MS`: always `linger`, while the rate is at least `min_rate` a
    /// second (0: always).
    Fixed { linger: Duration, min_rate: u64 },
}

impl Linger {
    /// Items a linger of the whole hold bound should gather for the bound to be worth it: the
    /// acks and pops of a joint flush that carries about eight acks, the rows at which a flush's
    /// fixed cost (call, commit, WAL sync) is spread over enough messages to matter less than
    /// its rows.
    pub const FULL_GATHER: f64 = 16.0;
    /// Below this many expected items a linger only adds latency.
    pub const MIN_GATHER: f64 = 0.5;
    /// An adaptive linger is at most this share of the lanes' smoothed flush time: a flush
    /// that is quick spares little by waiting for company, and one slowed by a busy database
    /// is worth more company. Measured on a 2-core host: bounded by three quarters of a flush,
    /// tiny-batches' knee at p99 <= 100 ms is about 2 700 msg/s (1 550 bounded by the hold
    /// alone) and smoke, a light load, saves 45 % of its commits against none (59 %); bounded
    /// by half a flush, 39 %; by a whole flush, the knee stays at the hold's.
    pub const FLUSH_SHARE: f64 = 0.75;

    /// The linger for a first arrival at an idle lane whose smoothed arrival rate is `rate`
    /// items a second, `consumers_wait` saying whether consumers are waiting for messages, and
    /// `flush` the lanes' smoothed flush time (none measured yet: no bound from it).
    pub fn wait(&self, rate: f64, consumers_wait: bool, flush: Option<Duration>) -> Duration {
        match *self {
            Linger::Fixed { linger, min_rate } => {
                if rate >= min_rate as f64 {
                    linger
                } else {
                    Duration::ZERO
                }
            }
            Linger::Adaptive { .. } if !consumers_wait => Duration::ZERO,
            Linger::Adaptive { hold } => {
                let hold_s = hold.as_secs_f64();
                // The rate at which the whole bound gathers a full batch.
                let full_rate = Self::FULL_GATHER / hold_s.max(1e-6);
                let by_rate = hold_s * (rate / full_rate).min(1.0);
                let wait_s = flush.map_or(by_rate, |f| {
                    by_rate.min(Self::FLUSH_SHARE * f.as_secs_f64())
                });
                if rate * wait_s < Self::MIN_GATHER {
                    Duration::ZERO
                } else {
                    Duration::from_secs_f64(wait_s)
                }
            }
        }
    }
}

/// The time integrals of one epoch, fed by the owner of the flushes at each event: what the
/// flush-concurrency controller reads at the end of an epoch.
pub struct Meter {
    epoch_start: Instant,
    last: Instant,
    /// Flushes in flight since the last event (set by the owner).
    pub inflight: usize,
    /// Work items completed this epoch (added to by the owner).
    pub items: u64,
    saturated: Duration,
    inflight_area: f64,
}

impl Meter {
    pub fn new(now: Instant) -> Meter {
        Meter {
            epoch_start: now,
            last: now,
            inflight: 0,
            items: 0,
            saturated: Duration::ZERO,
            inflight_area: 0.0,
        }
    }

    /// Counts the time since the last event in the state it was in.
    pub fn advance(&mut self, now: Instant, saturated: bool) {
        let dt = now.saturating_duration_since(self.last);
        self.inflight_area += self.inflight as f64 * dt.as_secs_f64();
        if saturated {
            self.saturated += dt;
        }
        self.last = now.max(self.last);
    }

    /// The epoch's figures once it has lasted `Concurrency::EPOCH`, and a new epoch begun.
    pub fn end_epoch(&mut self, now: Instant) -> Option<Epoch> {
        let length = now.saturating_duration_since(self.epoch_start);
        if length < Concurrency::EPOCH {
            return None;
        }
        let secs = length.as_secs_f64();
        // Items per epoch are compared across epochs: scaled to the nominal length.
        let scale = Concurrency::EPOCH.as_secs_f64() / secs;
        let epoch = Epoch {
            items: (self.items as f64 * scale).round() as u64,
            saturated: self.saturated.as_secs_f64() / secs,
            mean_inflight: self.inflight_area / secs,
        };
        (self.epoch_start, self.items) = (now, 0);
        (self.saturated, self.inflight_area) = (Duration::ZERO, 0.0);
        Some(epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(items: u64, saturated: f64, mean_inflight: f64) -> Epoch {
        Epoch {
            items,
            saturated,
            mean_inflight,
        }
    }

    #[test]
    fn a_fixed_limit_never_moves() {
        let mut c = Concurrency::new(ConcurrencyMode::Fixed(4));
        let t = Instant::now();
        for k in 0..20 {
            c.end_epoch(t + Concurrency::EPOCH * k, epoch(100, 1.0, 4.0));
        }
        assert_eq!(c.limit(), 4);
    }

    #[test]
    fn a_probe_without_gain_is_undone_and_backs_off() {
        let mut c = Concurrency::new(ConcurrencyMode::Adaptive { max: 8 });
        let t = Instant::now();
        c.end_epoch(t, epoch(1000, 0.9, 1.0));
        assert_eq!(c.limit(), 2, "saturated: probe a second flush");
        c.end_epoch(t + Concurrency::EPOCH, epoch(1020, 0.9, 2.0));
        assert_eq!(c.limit(), 1, "2 % is no gain");
        // Saturated again at once: no probe before the backoff (4 s after the first failure).
        for k in 2..=20 {
            c.end_epoch(t + Concurrency::EPOCH * k, epoch(1000, 0.9, 1.0));
            assert_eq!(c.limit(), 1, "epoch {k}");
        }
        c.end_epoch(t + Duration::from_secs(5), epoch(1000, 0.9, 1.0));
        assert_eq!(c.limit(), 2, "probed again after the backoff");
    }

    #[test]
    fn a_probe_with_gain_is_kept_and_idle_capacity_is_given_back() {
        let mut c = Concurrency::new(ConcurrencyMode::Adaptive { max: 8 });
        let t = Instant::now();
        c.end_epoch(t, epoch(1000, 0.9, 1.0));
        c.end_epoch(t + Concurrency::EPOCH, epoch(1500, 0.9, 2.0));
        assert_eq!((c.limit(), c.probes_kept), (2, 1));
        // Light load: half a flush in flight on average fits one fewer.
        c.end_epoch(t + Concurrency::EPOCH * 2, epoch(200, 0.0, 0.3));
        assert_eq!(c.limit(), 1);
    }

    #[test]
    fn a_lucky_probe_is_undone_by_a_probe_of_one_fewer() {
        let mut c = Concurrency::new(ConcurrencyMode::Adaptive { max: 8 });
        let t = Instant::now();
        c.end_epoch(t, epoch(1000, 0.9, 1.0));
        // A ramping load: the probe's epoch did more work whatever the limit.
        c.end_epoch(t + Concurrency::EPOCH, epoch(1200, 0.9, 2.0));
        assert_eq!(c.limit(), 2, "kept");
        // Busy at two flushes, as much work as one did: one fewer is tried, and kept, since it
        // does as well.
        let mut k = 2;
        while c.limit() == 2 && k < 40 {
            c.end_epoch(t + Concurrency::EPOCH * k, epoch(1200, 0.2, 1.8));
            k += 1;
        }
        c.end_epoch(t + Concurrency::EPOCH * k, epoch(1190, 0.9, 1.0));
        assert_eq!(c.limit(), 1, "one fewer did as well: kept");
    }

    #[test]
    fn one_fewer_that_loses_work_is_undone() {
        let mut c = Concurrency::new(ConcurrencyMode::Adaptive { max: 8 });
        let t = Instant::now();
        c.end_epoch(t, epoch(1000, 0.9, 1.0));
        c.end_epoch(t + Concurrency::EPOCH, epoch(1600, 0.9, 2.0));
        assert_eq!(c.limit(), 2);
        let mut k = 2;
        while c.limit() == 2 && k < 40 {
            c.end_epoch(t + Concurrency::EPOCH * k, epoch(1600, 0.2, 1.9));
            k += 1;
        }
        assert_eq!(c.limit(), 1, "the downward probe runs");
        c.end_epoch(t + Concurrency::EPOCH * k, epoch(1000, 0.9, 1.0));
        assert_eq!(c.limit(), 2, "it lost 37 %: undone");
    }

    #[test]
    fn probes_kept_both_ways_by_noise_flip_the_limit_ever_more_rarely() {
        // Every probe is kept (each epoch a little luckier than the last): the flips spread out.
        let mut c = Concurrency::new(ConcurrencyMode::Adaptive { max: 2 });
        let t = Instant::now();
        // A kept probe moves the limit for good; a probe epoch that is undone does not count.
        // Every probe's epoch is lucky (20 % more work than the epochs before), so every probe
        // either way is kept.
        let (mut flips, mut kept, mut probing) = (Vec::new(), 0, false);
        for k in 0..3000u32 {
            let now = t + Concurrency::EPOCH * k;
            let before = c.limit();
            let work = if probing { 1200 } else { 1000 };
            c.end_epoch(now, epoch(work, 0.9, c.limit() as f64));
            probing = !probing && c.limit() != before;
            if c.probes_kept != kept {
                flips.push(now - t);
                kept = c.probes_kept;
            }
        }
        let gaps: Vec<Duration> = flips.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(flips.len() < 40, "{} flips in 10 minutes", flips.len());
        let late = &gaps[gaps.len() - 4..];
        assert!(
            late.iter().all(|g| *g >= Duration::from_secs(30)),
            "late flips still come every {late:?}"
        );
    }

    #[test]
    fn the_adaptive_linger_grows_with_the_rate_up_to_the_bound() {
        let l = Linger::Adaptive {
            hold: Duration::from_millis(3),
        };
        assert_eq!(l.wait(0.0, true, None), Duration::ZERO);
        assert_eq!(
            l.wait(100.0, true, None),
            Duration::ZERO,
            "would gather 0.005 items"
        );
        let at_1000 = l.wait(1000.0, true, None);
        assert!(at_1000 > Duration::ZERO && at_1000 < Duration::from_millis(1));
        assert!(l.wait(3000.0, true, None) > at_1000);
        assert_eq!(l.wait(5400.0, true, None), Duration::from_millis(3));
        assert_eq!(
            l.wait(1e9, true, None),
            Duration::from_millis(3),
            "never past the bound"
        );
    }

    #[test]
    fn the_adaptive_linger_is_bounded_by_the_flush_time() {
        let l = Linger::Adaptive {
            hold: Duration::from_millis(5),
        };
        let ms = Duration::from_millis;
        assert_eq!(l.wait(6000.0, true, None), ms(5), "no flush measured yet");
        assert_eq!(
            l.wait(6000.0, true, Some(ms(2))),
            ms(2).mul_f64(Linger::FLUSH_SHARE),
            "a quick database"
        );
        assert_eq!(
            l.wait(6000.0, true, Some(ms(20))),
            ms(5),
            "never past the bound"
        );
        assert_eq!(
            l.wait(100.0, true, Some(ms(20))),
            Duration::ZERO,
            "nothing to gather"
        );
    }

    #[test]
    fn the_adaptive_linger_waits_only_while_consumers_wait() {
        let l = Linger::Adaptive {
            hold: Duration::from_millis(3),
        };
        assert_eq!(l.wait(6000.0, false, None), Duration::ZERO);
    }

    #[test]
    fn a_fixed_linger_applies_from_its_rate() {
        let l = Linger::Fixed {
            linger: Duration::from_millis(2),
            min_rate: 5000,
        };
        assert_eq!(l.wait(4999.0, true, None), Duration::ZERO);
        assert_eq!(
            l.wait(5000.0, false, None),
            Duration::from_millis(2),
            "whoever waits"
        );
    }
}
