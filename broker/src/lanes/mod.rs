//! Commit lanes: the engine that decides when ack fusion's rows and pop fusion's jobs flush, and
//! with what. Its clients only enqueue (`Inbox::send`); the flush itself is theirs (`Flusher`,
//! implemented by `fusion.rs`), run by the engine.
//!
//! One task owns the lanes. Work is keyed by a hash of its partition into slots (`core.rs`), the
//! folding and ordering domains; a flush takes the ready work of every idle slot, so the lanes'
//! work shares a transaction unless the engine runs several flushes at once. Flushing is
//! fire-on-idle: an arrival at an idle engine flushes at once (or after a linger), arrivals
//! during a flush go in the next one. How many flushes run at once and how long an idle lane
//! lingers are decided at run time from what the engine measures (`control.rs`); the
//! variables `QUEEN_ACK_FUSION_SHARDS`, `QUEEN_POP_FUSION_SHARDS` and `QUEEN_FUSION_LINGER_MS`
//! fix them instead.
//!
//! The lanes serve ack fusion, pop fusion, or, with both on and `QUEEN_FUSION_JOINT` (on by
//! default), both: acks and pops that wait together then commit together, in one transaction
//! and one fsync. With pops of one message each delivered message costs a pop and an ack;
//! joined, their commits halve, and a pop can claim the partition an ack of the same flush just
//! released.
//!
//! How a flush runs (a joint one: acks first, then pops, pipelined in one transaction) is
//! described in `fusion.rs`. Waiters hold no pooled connection; only the flush takes one, for
//! its statements. A waiter's answer resolves only after its flush committed.

pub mod control;
pub mod core;
mod rate;
#[cfg(test)]
mod sim;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;

use crate::counters::counters;
use crate::demand::Demand;
use control::{Concurrency, ConcurrencyMode, Linger};
use core::{Batch, Core, CoreSettings, Kind, Step};

/// What the lanes flush, implemented by their client (fusion) and run by the engine: the lanes
/// decide when and with what, the flusher how.
pub trait Flusher: Send + Sync + 'static {
    /// An ack waiting for its flush (with whatever answers it).
    type Ack: Send + 'static;
    /// A pop waiting for its flush.
    type Pop: Send + 'static;
    /// The key acks fold by: two acks of one key in a slot are one row of a flush.
    fn fold_key(ack: &Self::Ack) -> u64;
    /// Flushes one batch and answers its waiters.
    fn flush(&self, acks: Vec<Self::Ack>, pops: Vec<Self::Pop>) -> impl Future<Output = ()> + Send;
}

/// One piece of work waiting for a flush.
pub enum Work<A, P> {
    Ack(A),
    Pop(P),
}

/// How the lanes decide.
pub struct LaneSettings {
    /// How many flushes may run at once: adaptive (the default) or fixed by the operator.
    pub concurrency: ConcurrencyMode,
    /// How long an idle lane waits after a first arrival (adaptive up to a hold bound, or
    /// fixed).
    pub linger: Linger,
    /// Folded ack rows one flush carries at most (unbounded normally; 1 for the gates' tests).
    pub max_ack_rows: usize,
    /// Pops one flush carries at most.
    pub max_pops: usize,
    /// Whether consumers wait for messages: an adaptive linger applies only then.
    pub demand: Arc<Demand>,
}

/// The lanes' engine as the metrics see it.
#[derive(Default)]
pub struct LaneGauges {
    /// Flushes allowed in flight now.
    pub limit: AtomicU64,
    pub counters: LaneCounters,
}

counters! {
    /// What the lanes' engine counts.
    LaneCounters,
    /// The lanes' counters at one instant.
    LaneCounts {
        /// Lingers started.
        lingers: "queen_lanes_lingers_total", "Lingers of an idle lane after a first arrival.";
        /// The total the lingers were set to hold, microseconds (a linger that a full inbox
        /// ends early counts whole).
        linger_us: "queen_lanes_linger_microseconds_total", "Time the lanes' lingers were set to hold their work (one ended early by a full flush counts whole).";
        /// Probes of one more flush in flight.
        probes: "queen_lanes_probes_total", "Epochs the lanes tried one more flush in flight.";
        probes_kept: "queen_lanes_probes_kept_total", "Probes that measured a gain and were kept.";
    }
}

/// Work of a flusher's kinds, with the slot key it was enqueued under.
type Keyed<F> = (u64, Work<<F as Flusher>::Ack, <F as Flusher>::Pop>);

/// The lanes' inbox: every client enqueues here, keyed by partition.
pub struct Lanes<A, P> {
    inbox: mpsc::UnboundedSender<(u64, Work<A, P>)>,
    pub gauges: Arc<LaneGauges>,
}

impl<A: Send + 'static, P: Send + 'static> Lanes<A, P> {
    /// Starts the lanes' engine task, flushing through `flusher`.
    pub fn start<F: Flusher<Ack = A, Pop = P>>(flusher: F, settings: LaneSettings) -> Arc<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        let gauges = Arc::new(LaneGauges::default());
        tokio::spawn(engine(rx, Arc::new(flusher), settings, gauges.clone()));
        Arc::new(Lanes { inbox: tx, gauges })
    }

    /// Flushes allowed in flight now.
    pub fn concurrency(&self) -> usize {
        self.gauges.limit.load(Relaxed).max(1) as usize
    }

    /// Enqueues `work` in the slot `key` (a hash of its partition) selects; false when the
    /// lanes are shut down.
    pub fn send(&self, key: u64, work: Work<A, P>) -> bool {
        self.inbox.send((key, work)).is_ok()
    }

    /// The acks' way in.
    pub fn acks(self: &Arc<Self>) -> Inbox<A> {
        let lanes = Arc::clone(self);
        Inbox {
            send: Box::new(move |key, ack| lanes.send(key, Work::Ack(ack))),
            gauges: Arc::clone(&self.gauges),
        }
    }

    /// The pops' way in.
    pub fn pops(self: &Arc<Self>) -> Inbox<P> {
        let lanes = Arc::clone(self);
        Inbox {
            send: Box::new(move |key, pop| lanes.send(key, Work::Pop(pop))),
            gauges: Arc::clone(&self.gauges),
        }
    }
}

/// One client's way into the lanes: it only enqueues, and reads the gauges.
pub struct Inbox<T> {
    send: Box<dyn Fn(u64, T) -> bool + Send + Sync>,
    gauges: Arc<LaneGauges>,
}

impl<T> Inbox<T> {
    /// Enqueues `item` in the slot `key` selects; false when the lanes are shut down.
    pub fn send(&self, key: u64, item: T) -> bool {
        (self.send)(key, item)
    }

    /// The lanes' gauges.
    pub fn gauges(&self) -> &LaneGauges {
        &self.gauges
    }

    /// Flushes allowed in flight now.
    pub fn concurrency(&self) -> usize {
        self.gauges.limit.load(Relaxed).max(1) as usize
    }
}

fn core_settings(s: &LaneSettings) -> CoreSettings {
    CoreSettings {
        concurrency: s.concurrency,
        linger: s.linger,
        max_acks: s.max_ack_rows.max(1),
        max_pops: s.max_pops,
    }
}

/// The engine: one task that decides, runs its flushes as futures of its own (no task per
/// flush, no wake-up across threads), and reports what they did back to its `Core`.
async fn engine<F: Flusher>(
    mut inbox: mpsc::UnboundedReceiver<Keyed<F>>,
    flusher: Arc<F>,
    s: LaneSettings,
    gauges: Arc<LaneGauges>,
) {
    let mut core: Core<Work<F::Ack, F::Pop>> = Core::new(core_settings(&s), Instant::now());
    let mut flushes = FuturesUnordered::new();
    let mut open = true;
    loop {
        let wait = loop {
            match core.step(Instant::now()) {
                Step::Flush(batch) => {
                    let flusher = Arc::clone(&flusher);
                    flushes.push(async move {
                        let (slots, items) = (batch.slots.clone(), batch.items());
                        let (acks, pops) = split(batch);
                        flusher.flush(acks, pops).await;
                        (slots, items)
                    });
                }
                Step::WaitUntil(until) => break Some(until),
                Step::Idle => break None,
            }
        };
        publish(&gauges, &core);
        if !open && flushes.is_empty() && core.pending() == 0 {
            return;
        }
        // Above one flush, look again each epoch even when nothing happens, so that a probe or
        // a limit that idle capacity should lower is judged without waiting for the next
        // arrival.
        let tick = (core.limit() > 1).then(|| Instant::now() + Concurrency::EPOCH);
        let wait = [wait, tick].into_iter().flatten().min();
        tokio::select! {
            biased;
            Some((slots, items)) = flushes.next(), if !flushes.is_empty() => {
                core.completed(Instant::now(), &slots, items);
            }
            w = inbox.recv(), if open => match w {
                Some((key, work)) => {
                    let now = Instant::now();
                    let waits = s.demand.consumers_wait();
                    arrive::<F>(&mut core, (now, waits), key, work);
                    while let Ok((key, work)) = inbox.try_recv() {
                        arrive::<F>(&mut core, (now, waits), key, work);
                    }
                }
                None => open = false,
            },
            _ = tokio::time::sleep_until(wait.unwrap_or_else(Instant::now).into()), if wait.is_some() => {}
        }
    }
}

/// Hands `work` to the core; `at` is when it arrived and whether consumers waited for
/// messages then.
fn arrive<F: Flusher>(
    core: &mut Core<Work<F::Ack, F::Pop>>,
    at: (Instant, bool),
    key: u64,
    work: Work<F::Ack, F::Pop>,
) {
    let (now, consumers_wait) = at;
    let kind = match &work {
        Work::Ack(a) => Kind::Ack {
            fold: F::fold_key(a),
        },
        Work::Pop(..) => Kind::Pop,
    };
    core.arrive(now, consumers_wait, key, kind, work);
}

fn publish<W>(gauges: &LaneGauges, core: &Core<W>) {
    gauges.limit.store(core.limit() as u64, Relaxed);
    let c = &gauges.counters;
    c.probes.store(core.control().probes, Relaxed);
    c.probes_kept.store(core.control().probes_kept, Relaxed);
    let (lingers, lingered) = core.lingers();
    c.lingers.store(lingers, Relaxed);
    c.linger_us.store(lingered.as_micros() as u64, Relaxed);
}

/// A batch's acks and pops.
fn split<A, P>(batch: Batch<Work<A, P>>) -> (Vec<A>, Vec<P>) {
    let (mut acks, mut pops) = (Vec::new(), Vec::new());
    for w in batch.acks.into_iter().chain(batch.pops) {
        match w {
            Work::Ack(a) => acks.push(a),
            Work::Pop(p) => pops.push(p),
        }
    }
    (acks, pops)
}
