//! The lane engine's bookkeeping, without a clock or a database: what waits in which slot, when
//! a flush may start and what it takes, and the measurements the controllers read. The tokio
//! driver (`mod.rs`) and the simulated lane (`sim.rs`) feed it the same events.
//!
//! - Work is keyed by a hash of its partition into `SLOTS` slots. A slot is the folding and
//!   ordering domain: all work of a partition lands in one slot, and a slot never has two
//!   flushes in flight, so per-partition commit order is arrival order, and an ack's pop
//!   hand-off commits in its ack's flush or a later one.
//! - A flush takes the ready work of every idle slot (up to the flush's caps), so at one flush
//!   at a time all of the lanes' work shares one transaction, and at several the slots divide
//!   among them. How many run at once is `Concurrency`'s decision; how long an idle lane waits
//!   before its first flush is `Linger`'s.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::control::{Concurrency, ConcurrencyMode, Linger, Meter};
use super::rate::ArrivalRate;

/// Folding and ordering domains.
pub const SLOTS: usize = 64;

/// What kind of work an item is, for the flush's caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An ack, with the key its flush folds it by (same key, one row).
    Ack {
        fold: u64,
    },
    Pop,
}

/// The settings the engine runs with.
#[derive(Debug, Clone, Copy)]
pub struct CoreSettings {
    pub concurrency: ConcurrencyMode,
    pub linger: Linger,
    /// Folded ack rows one flush carries at most.
    pub max_acks: usize,
    /// Pop jobs one flush carries at most.
    pub max_pops: usize,
}

/// What one flush carries: its items by kind, in arrival order, and the slots it holds.
#[derive(Debug)]
pub struct Batch<T> {
    pub slots: Vec<usize>,
    pub acks: Vec<T>,
    pub pops: Vec<T>,
}

impl<T> Batch<T> {
    pub fn items(&self) -> usize {
        self.acks.len() + self.pops.len()
    }
}

/// What the driver should do next.
#[derive(Debug)]
pub enum Step<T> {
    /// Run this flush, then report it with `Core::completed`.
    Flush(Batch<T>),
    /// Nothing may start before this instant (a linger); look again then or at an arrival.
    WaitUntil(Instant),
    /// Nothing may start until an arrival or a completion.
    Idle,
}

#[derive(Debug)]
struct Slot<T> {
    acks: VecDeque<(u64, T)>,
    pops: VecDeque<T>,
    busy: bool,
    /// When the flush holding this slot started (kept on a flush's first slot).
    started: Option<Instant>,
}

impl<T> Slot<T> {
    fn is_empty(&self) -> bool {
        self.acks.is_empty() && self.pops.is_empty()
    }
}

/// The engine's state.
pub struct Core<T> {
    settings: CoreSettings,
    slots: Vec<Slot<T>>,
    /// The slot the next flush starts its walk from (so no slot is always taken last).
    cursor: usize,
    pending_acks: usize,
    pending_pops: usize,
    inflight: usize,
    linger_until: Option<Instant>,
    /// Whether consumers waited for messages at the last arrival.
    consumers_wait: bool,
    lingers: u64,
    lingered: Duration,
    /// Flush time, smoothed over the last flushes (`FLUSH_WEIGHT` each).
    flush_time: Option<Duration>,
    rate: ArrivalRate,
    control: Concurrency,
    meter: Meter,
}

impl<T> Core<T> {
    pub fn new(settings: CoreSettings, now: Instant) -> Core<T> {
        Core {
            settings,
            slots: (0..SLOTS)
                .map(|_| Slot {
                    acks: VecDeque::new(),
                    pops: VecDeque::new(),
                    busy: false,
                    started: None,
                })
                .collect(),
            cursor: 0,
            pending_acks: 0,
            pending_pops: 0,
            inflight: 0,
            linger_until: None,
            consumers_wait: false,
            lingers: 0,
            lingered: Duration::ZERO,
            flush_time: None,
            rate: ArrivalRate::new(now),
            control: Concurrency::new(settings.concurrency),
            meter: Meter::new(now),
        }
    }

    /// Work arrives for the slot of `key`; `consumers_wait` says whether consumers are waiting
    /// for messages (an adaptive linger applies only then).
    pub fn arrive(&mut self, now: Instant, consumers_wait: bool, key: u64, kind: Kind, item: T) {
        self.account(now);
        let idle = self.inflight == 0 && self.pending() == 0;
        let slot = &mut self.slots[(key % SLOTS as u64) as usize];
        match kind {
            Kind::Ack { fold } => {
                slot.acks.push_back((fold, item));
                self.pending_acks += 1;
            }
            Kind::Pop => {
                slot.pops.push_back(item);
                self.pending_pops += 1;
            }
        }
        self.rate.record(1, now);
        self.consumers_wait = consumers_wait;
        if idle {
            self.start_linger(now);
        }
    }

    /// Starts a linger for the work waiting now, if the policy wants one.
    fn start_linger(&mut self, now: Instant) {
        let wait =
            self.settings
                .linger
                .wait(self.rate.per_second(), self.consumers_wait, self.flush_time);
        self.linger_until = (!wait.is_zero()).then(|| now + wait);
        if !wait.is_zero() {
            self.lingers += 1;
            self.lingered += wait;
        }
    }

    /// Lingers started, and the time they were set to hold.
    pub fn lingers(&self) -> (u64, Duration) {
        (self.lingers, self.lingered)
    }

    /// What to do now: start a flush, wait for a linger to end, or wait for an event.
    pub fn step(&mut self, now: Instant) -> Step<T> {
        self.account(now);
        if self.pending() == 0 {
            return Step::Idle;
        }
        if let Some(until) = self.linger_until {
            if now < until && !self.full() {
                return Step::WaitUntil(until);
            }
            self.linger_until = None;
        }
        if self.inflight >= self.control.limit() {
            return Step::Idle;
        }
        let batch = self.take();
        if batch.slots.is_empty() {
            return Step::Idle; // everything pending belongs to slots in flight
        }
        self.slots[batch.slots[0]].started = Some(now);
        self.inflight += 1;
        self.meter.inflight = self.inflight;
        Step::Flush(batch)
    }

    /// A flush holding `slots` finished with `items` items.
    pub fn completed(&mut self, now: Instant, slots: &[usize], items: usize) {
        self.account(now);
        if let Some(started) = slots.first().and_then(|&s| self.slots[s].started.take()) {
            self.smooth_flush_time(now.saturating_duration_since(started));
        }
        for &s in slots {
            self.slots[s].busy = false;
        }
        self.inflight -= 1;
        self.meter.inflight = self.inflight;
        self.meter.items += items as u64;
        // The lanes went quiet with work waiting (it arrived during the flush): it lingers as
        // a first arrival at an idle lane would, so a steady stream is paced at one flush per
        // linger and flush rather than split into a flush per round trip.
        if self.inflight == 0 && self.pending() > 0 && self.linger_until.is_none() {
            self.start_linger(now);
        }
    }

    /// Folds one flush's time into the smoothed flush time.
    fn smooth_flush_time(&mut self, took: Duration) {
        const FLUSH_WEIGHT: f64 = 0.125;
        self.flush_time = Some(match self.flush_time {
            None => took,
            Some(t) => t.mul_f64(1.0 - FLUSH_WEIGHT) + took.mul_f64(FLUSH_WEIGHT),
        });
    }

    /// Flushes allowed in flight now.
    pub fn limit(&self) -> usize {
        self.control.limit()
    }

    /// The concurrency controller (its probe counters, for the metrics).
    pub fn control(&self) -> &Concurrency {
        &self.control
    }

    /// Items waiting for a flush.
    pub fn pending(&self) -> usize {
        self.pending_acks + self.pending_pops
    }

    /// Enough is waiting to fill a flush: lingering longer gathers nothing it can carry.
    fn full(&self) -> bool {
        self.pending_pops >= self.settings.max_pops || self.pending_acks >= self.settings.max_acks
    }

    /// Takes the ready work of idle slots, from the cursor on, up to the caps.
    fn take(&mut self) -> Batch<T> {
        let mut batch = Batch {
            slots: Vec::new(),
            acks: Vec::new(),
            pops: Vec::new(),
        };
        let mut rows = Rows::new(self.settings.max_acks);
        let max_pops = self.settings.max_pops;
        for k in 0..SLOTS {
            if rows.full() && batch.pops.len() >= max_pops {
                break;
            }
            let i = (self.cursor + k) % SLOTS;
            let slot = &mut self.slots[i];
            if slot.busy || slot.is_empty() {
                continue;
            }
            let acks = rows.admit(slot.acks.iter().map(|(fold, _)| *fold));
            let pops = slot.pops.len().min(max_pops - batch.pops.len());
            if acks + pops == 0 {
                continue;
            }
            batch
                .acks
                .extend(slot.acks.drain(..acks).map(|(_, item)| item));
            batch.pops.extend(slot.pops.drain(..pops));
            slot.busy = true;
            batch.slots.push(i);
        }
        self.cursor = (self.cursor + 1) % SLOTS;
        self.pending_acks -= batch.acks.len();
        self.pending_pops -= batch.pops.len();
        batch
    }

    /// Whether ready work waits only because the limit is reached.
    fn saturated(&self) -> bool {
        self.inflight >= self.control.limit() && self.slots.iter().any(|s| !s.busy && !s.is_empty())
    }

    /// Advances the meter to `now` and ends the epoch when it is over.
    fn account(&mut self, now: Instant) {
        let saturated = self.pending() > 0 && self.saturated();
        self.meter.advance(now, saturated);
        if let Some(epoch) = self.meter.end_epoch(now) {
            self.control.end_epoch(now, epoch);
        }
    }
}

/// The folded ack rows a flush has taken, against its cap.
struct Rows {
    max: usize,
    /// The fold keys taken (kept only under a finite cap).
    keys: Vec<u64>,
    taken: usize,
}

impl Rows {
    fn new(max: usize) -> Rows {
        Rows {
            max,
            keys: Vec::new(),
            taken: 0,
        }
    }

    fn full(&self) -> bool {
        self.taken >= self.max
    }

    /// How many of the leading acks with these fold keys fit; counts their rows in.
    fn admit(&mut self, folds: impl Iterator<Item = u64>) -> usize {
        if self.max == usize::MAX {
            let n = folds.count();
            self.taken += n;
            return n;
        }
        let mut n = 0;
        for fold in folds {
            if !self.keys.contains(&fold) {
                if self.full() {
                    break;
                }
                self.keys.push(fold);
                self.taken += 1;
            }
            n += 1;
        }
        n
    }
}
