//! The workload of one cell: producers and consumers driving the system under test through its
//! driver's calls (`calls`), written once for every system and sharing one `CellContext` (the
//! brokers, ledger (`ackbench_ledger`), history, latency recorder, counters, phase), and the
//! runtime they run on.

pub mod answers;
pub mod calls;
pub mod consumer;
pub mod errors;
pub mod plan;
pub mod producer;
pub mod spawn;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

use crate::client::{Connection, Fleet};
use crate::measure::latency::Recorder;
use ackbench_ledger::Ledger;

/// Where a cell is in its life; workers read it before every step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Load runs, nothing is recorded.
    Warmup = 0,
    /// Load runs and latency is recorded.
    Measure = 1,
    /// Producers stop; consumers finish the backlog without stalling.
    Drain = 2,
    /// Everyone stops.
    Stop = 3,
}

/// Request and message counters (monotonic; the window's figures are deltas).
#[derive(Default)]
pub struct Counters {
    pub push_requests: AtomicU64,
    pub pushed_messages: AtomicU64,
    pub pop_requests: AtomicU64,
    pub popped_messages: AtomicU64,
    pub ack_requests: AtomicU64,
    pub acked_messages: AtomicU64,
    pub redeliveries: AtomicU64,
    pub refused_acks: AtomicU64,
    pub errors: AtomicU64,
}

/// A point-in-time copy of `Counters`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CounterValues {
    pub push_requests: f64,
    pub pushed_messages: f64,
    pub pop_requests: f64,
    pub popped_messages: f64,
    pub ack_requests: f64,
    pub acked_messages: f64,
    pub redeliveries: f64,
    pub refused_acks: f64,
    pub errors: f64,
}

impl Counters {
    pub fn bump(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn values(&self) -> CounterValues {
        let v = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
        CounterValues {
            push_requests: v(&self.push_requests),
            pushed_messages: v(&self.pushed_messages),
            pop_requests: v(&self.pop_requests),
            popped_messages: v(&self.popped_messages),
            ack_requests: v(&self.ack_requests),
            acked_messages: v(&self.acked_messages),
            redeliveries: v(&self.redeliveries),
            refused_acks: v(&self.refused_acks),
            errors: v(&self.errors),
        }
    }
}

impl CounterValues {
    pub fn since(&self, e: &CounterValues) -> CounterValues {
        CounterValues {
            push_requests: self.push_requests - e.push_requests,
            pushed_messages: self.pushed_messages - e.pushed_messages,
            pop_requests: self.pop_requests - e.pop_requests,
            popped_messages: self.popped_messages - e.popped_messages,
            ack_requests: self.ack_requests - e.ack_requests,
            acked_messages: self.acked_messages - e.acked_messages,
            redeliveries: self.redeliveries - e.redeliveries,
            refused_acks: self.refused_acks - e.refused_acks,
            errors: self.errors - e.errors,
        }
    }
}

pub struct CellContext {
    /// The brokers the HTTP workers talk to and how they spread their requests; `None` in a
    /// peer cell (its workers hold their own PostgreSQL connections).
    pub fleet: Option<Fleet>,
    pub ledger: Ledger,
    /// Every delivery to the consumers, for the guarantee checks.
    pub history: crate::history::History,
    pub latency: Recorder,
    pub counters: Counters,
    /// How the broker's answers departed from this workspace's wire.
    pub variants: answers::Variants,
    phase: AtomicU8,
    /// Pushes sent and not yet booked in the ledger: the drain waits for them, or a push
    /// answered after the ledger looked empty would be audited as lost.
    pushes_in_flight: AtomicU64,
    /// A `pause_consumers` fault: consumers neither pop nor ack while it is set.
    consumers_paused: AtomicBool,
    /// Errors counted by kind (`errors` counts them all).
    pub error_kinds: errors::ErrorKinds,
    /// The last error seen, for the progress line and the log.
    pub last_error: std::sync::Mutex<Option<String>>,
}

impl CellContext {
    pub fn new(fleet: Option<Fleet>, groups: usize) -> CellContext {
        CellContext {
            fleet,
            ledger: Ledger::new(groups),
            history: crate::history::History::default(),
            latency: Recorder::default(),
            counters: Counters::default(),
            variants: answers::Variants::default(),
            phase: AtomicU8::new(Phase::Warmup as u8),
            pushes_in_flight: AtomicU64::new(0),
            consumers_paused: AtomicBool::new(false),
            error_kinds: errors::ErrorKinds::default(),
            last_error: std::sync::Mutex::new(None),
        }
    }

    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Warmup,
            1 => Phase::Measure,
            2 => Phase::Drain,
            _ => Phase::Stop,
        }
    }

    pub fn set_phase(&self, p: Phase) {
        self.phase.store(p as u8, Ordering::SeqCst);
        self.latency.set_measuring(p == Phase::Measure);
    }

    /// Marks a push in flight until the returned guard is dropped (after its booking).
    pub fn push_in_flight(&self) -> InFlight<'_> {
        self.pushes_in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(&self.pushes_in_flight)
    }

    /// Whether no push is between its send and its booking.
    pub fn pushes_settled(&self) -> bool {
        self.pushes_in_flight.load(Ordering::SeqCst) == 0
    }

    /// Pauses (or resumes) every consumer: a paused consumer holds what it popped, unacked.
    pub fn pause_consumers(&self, paused: bool) {
        self.consumers_paused.store(paused, Ordering::SeqCst);
    }

    /// Waits while the consumers are paused (not past the workload's stop).
    pub async fn hold_while_consumers_paused(&self) {
        while self.consumers_paused.load(Ordering::SeqCst) && self.phase() != Phase::Stop {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The connection of HTTP worker `worker` (numbered among its kind) to the cell's brokers
    /// (HTTP workers run only in broker cells).
    pub fn connection(&self, worker: u32) -> Connection {
        self.fleet
            .as_ref()
            .expect("HTTP workers run only in broker cells")
            .connection(worker)
    }

    /// The cell's first broker, for the load generator's own requests (broker cells only).
    pub fn broker(&self) -> &crate::client::BrokerClient {
        self.fleet
            .as_ref()
            .expect("HTTP workers run only in broker cells")
            .first()
    }

    pub fn error(&self, what: String) {
        Counters::bump(&self.counters.errors, 1);
        self.error_kinds.count(&what);
        *self.last_error.lock().expect("error lock") = Some(what);
    }
}

/// A producer's send times: open loop, batch `seq` is due at `start + (seq + phase) ×
/// interval` (latency counts from then, so a stalled target cannot hide behind a slowed
/// client); closed loop, now. Producer `index` of `of` is offset by `index / of` of an
/// interval, so the producers together offer evenly spaced pushes rather than `of` at a time.
pub struct Schedule {
    start: std::time::Instant,
    interval: Option<std::time::Duration>,
    phase: f64,
}

impl Schedule {
    /// `rate` messages/s in batches of `batch` (`None`: closed loop), for producer `index` of
    /// `of`.
    pub fn new(rate: Option<f64>, batch: u32, index: u32, of: u32) -> Schedule {
        Schedule {
            start: std::time::Instant::now(),
            interval: rate.map(|r| std::time::Duration::from_secs_f64(batch as f64 / r)),
            phase: (index % of.max(1)) as f64 / of.max(1) as f64,
        }
    }

    pub fn open_loop(&self) -> bool {
        self.interval.is_some()
    }

    /// Waits until batch `seq` is due and returns its intended send time.
    pub async fn due(&self, seq: u64) -> std::time::Instant {
        match self.interval {
            Some(iv) => {
                let at = self.start + iv.mul_f64(seq as f64 + self.phase);
                tokio::time::sleep_until(at.into()).await;
                at
            }
            None => std::time::Instant::now(),
        }
    }

    /// Takes a push in flight for batch `seq` once it is due, unless the producers are to stop
    /// meanwhile: the guard is taken before the phase is read again, so the drain either sees
    /// this push or this producer sees the drain. Returns the intended send time with it.
    pub async fn next_push<'c>(
        &self,
        ctx: &'c CellContext,
        seq: u64,
    ) -> Option<(std::time::Instant, InFlight<'c>)> {
        let intended = self.due(seq).await;
        let in_flight = ctx.push_in_flight();
        matches!(ctx.phase(), Phase::Warmup | Phase::Measure).then_some((intended, in_flight))
    }
}

/// A push between its send and its booking (see `CellContext::push_in_flight`).
pub struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The runtime producers and consumers run on: one thread with its own event loop, apart from
/// the runtime that measures. On one thread a socket's readiness wakes the task that waits for
/// it directly, without handing it to another worker thread (a futex wake and a context switch
/// per answer on a multi-threaded runtime), which is most of what a request cost the load
/// generator. It also bounds the load generator to one core of a machine it shares with the
/// broker and PostgreSQL. Started on first use, it lives as long as the process.
pub fn runtime() -> tokio::runtime::Handle {
    static HANDLE: std::sync::OnceLock<tokio::runtime::Handle> = std::sync::OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("workload runtime");
            let handle = rt.handle().clone();
            std::thread::Builder::new()
                .name("ackbench-load".into())
                .spawn(move || rt.block_on(std::future::pending::<()>()))
                .expect("workload thread");
            handle
        })
        .clone()
}

/// Microseconds since the UNIX epoch (the timestamp producers put in payloads).
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}
