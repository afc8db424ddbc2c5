//! A simulated lane: the engine's `Core` driven by a virtual clock, seeded arrivals and a model
//! database whose commit latency depends on the rows of a flush and on how many commits it can
//! run at once. It shows, without PostgreSQL, that the adaptive concurrency converges to one
//! flush where commits serialise (a small host: one WAL sync at a time) and to several where
//! they parallelise (a large host), and that a linger never holds work past its bound.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use super::control::{ConcurrencyMode, Linger};
use super::core::{Core, CoreSettings, Kind, Step};

/// The model database: a flush costs `fixed + per_item x items` of one of `servers` servers;
/// a flush finding every server busy waits for the first to free up.
#[derive(Clone, Copy)]
struct Database {
    servers: usize,
    fixed: Duration,
    per_item: Duration,
}

/// Where the work comes from.
#[derive(Clone, Copy)]
enum Load {
    /// Independent arrivals, exponential gaps at `rate` items a second, acks and pops in turn.
    Open { rate: f64 },
    /// `clients` each submit one item, wait for its commit, think (exponentially distributed
    /// with mean `think`), and submit again: consumers that always find work (a drain).
    Closed { clients: usize, think: Duration },
    /// Pushes of `push` messages at `rate` messages a second to random ones of `partitions`
    /// partitions, each partition's messages delivered one at a time: a pop (woken by the
    /// push), then `think` (mean) after its commit the ack, which carries the partition's next
    /// pop in the same flush while messages remain (the ack hand-off). Consumers wait for
    /// messages between pushes.
    Partitions {
        rate: f64,
        push: u32,
        partitions: usize,
        think: Duration,
    },
}

impl Load {
    /// Whether consumers wait for messages (the signal an adaptive linger reads).
    fn consumers_wait(&self) -> bool {
        !matches!(self, Load::Closed { .. })
    }
}

/// What a simulated run measured.
#[derive(Debug, Default)]
struct Outcome {
    completed: u64,
    /// The concurrency limit at each epoch's end (sampled every 200 ms).
    limits: Vec<usize>,
    /// Longest wait from arrival to flush start of an item that arrived at an idle engine.
    idle_arrival_wait: Duration,
    /// Longest wait from arrival to flush start of any item, and the longest flush.
    max_wait: Duration,
    longest_flush: Duration,
    flushes: u64,
    /// Flushes that carried at least one ack, and the acks they carried.
    ack_flushes: u64,
    acks: u64,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        // xorshift64*: deterministic, good enough for gaps and keys.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An exponential gap of mean `mean`.
    fn gap(&mut self, mean: Duration) -> Duration {
        mean.mul_f64(-(1.0 - self.next()).ln())
    }

    fn below(&mut self, n: usize) -> usize {
        ((self.next() * n as f64) as usize).min(n - 1)
    }
}

/// An item: who submitted it (a client, or a partition), whether it is an ack, when it
/// arrived, and whether the engine was idle then.
struct Item {
    client: usize,
    ack: bool,
    arrived: Instant,
    at_idle: bool,
}

/// Something due at a time.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// An item of `client` arrives.
    Submit { client: usize, ack: bool },
    /// The open stream's next item, or the next push.
    Stream,
    /// A partition's ack is sent (with its hand-off pop while messages remain).
    AckDue { partition: usize },
}

/// The simulation's state besides the engine.
struct World {
    load: Load,
    rng: Rng,
    due: BinaryHeap<Reverse<(Instant, u64, Event)>>,
    seq: u64,
    /// Partitions: messages not yet acked, and whether a pop/ack chain runs.
    queued: Vec<u32>,
    active: Vec<bool>,
    emitted: usize,
}

impl World {
    fn at(&mut self, when: Instant, event: Event) {
        self.seq += 1;
        self.due.push(Reverse((when, self.seq, event)));
    }

    fn mean_gap(rate: f64) -> Duration {
        Duration::from_secs_f64(1.0 / rate)
    }

    fn start(&mut self, t0: Instant) {
        match self.load {
            Load::Open { .. } | Load::Partitions { .. } => self.at(t0, Event::Stream),
            Load::Closed { clients, .. } => {
                for c in 0..clients {
                    let when = t0 + Duration::from_micros(c as u64 * 10);
                    self.at(
                        when,
                        Event::Submit {
                            client: c,
                            ack: c.is_multiple_of(2),
                        },
                    );
                }
            }
        }
    }

    /// An event is due: the items it submits now.
    fn fire(&mut self, now: Instant, event: Event) -> Vec<(usize, bool)> {
        match (event, self.load) {
            (Event::Submit { client, ack }, _) => vec![(client, ack)],
            (Event::Stream, Load::Open { rate }) => {
                let gap = self.rng.gap(Self::mean_gap(rate));
                self.at(now + gap, Event::Stream);
                self.emitted += 1;
                vec![(self.emitted, self.emitted.is_multiple_of(2))]
            }
            (
                Event::Stream,
                Load::Partitions {
                    rate,
                    push,
                    partitions,
                    ..
                },
            ) => {
                let gap = self.rng.gap(Self::mean_gap(rate / push as f64));
                self.at(now + gap, Event::Stream);
                let p = self.rng.below(partitions);
                self.queued[p] += push;
                if self.active[p] {
                    return vec![];
                }
                self.active[p] = true;
                vec![(p, false)]
            }
            (Event::AckDue { partition }, _) => {
                let mut items = vec![(partition, true)];
                if self.queued[partition] > 1 {
                    items.push((partition, false));
                }
                items
            }
            (Event::Stream, Load::Closed { .. }) => vec![],
        }
    }

    /// An item's flush committed.
    fn done(&mut self, now: Instant, client: usize, ack: bool) {
        match self.load {
            Load::Closed { think, .. } => {
                let when = now + self.rng.gap(think);
                self.at(when, Event::Submit { client, ack });
            }
            Load::Partitions { think, .. } if !ack => {
                let when = now + self.rng.gap(think);
                self.at(when, Event::AckDue { partition: client });
            }
            Load::Partitions { .. } => {
                self.queued[client] -= 1;
                if self.queued[client] == 0 {
                    self.active[client] = false;
                }
            }
            Load::Open { .. } => {}
        }
    }
}

/// A flush in flight: the slots it holds and its items' (client, ack).
type Running = (Vec<usize>, Vec<(usize, bool)>);

fn simulate(db: Database, load: Load, settings: CoreSettings, secs: f64) -> Outcome {
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(secs);
    let partitions = match load {
        Load::Partitions { partitions, .. } => partitions,
        _ => 0,
    };
    let mut world = World {
        load,
        rng: Rng(0x9E37_79B9_7F4A_7C15),
        due: BinaryHeap::new(),
        seq: 0,
        queued: vec![0; partitions],
        active: vec![false; partitions],
        emitted: 0,
    };
    world.start(t0);
    let mut core: Core<Item> = Core::new(settings, t0);
    let mut out = Outcome::default();
    // (completion time, flush number) -> its slots and items' (client, ack)
    let mut running: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
    let mut flushes: Vec<Running> = Vec::new();
    let mut servers_free: Vec<Instant> = vec![t0; db.servers];
    let mut next_sample = t0 + Duration::from_millis(200);
    let mut now = t0;
    while now < end {
        // Start what may start.
        let wait_until = loop {
            match core.step(now) {
                Step::Flush(batch) => {
                    let cost = db.fixed + db.per_item * batch.items() as u32;
                    let server = (0..db.servers).min_by_key(|&s| servers_free[s]).unwrap();
                    let done = servers_free[server].max(now) + cost;
                    servers_free[server] = done;
                    out.longest_flush = out.longest_flush.max(done - now);
                    let mut items = Vec::new();
                    for item in batch.acks.iter().chain(&batch.pops) {
                        let waited = now - item.arrived;
                        out.max_wait = out.max_wait.max(waited);
                        if item.at_idle {
                            out.idle_arrival_wait = out.idle_arrival_wait.max(waited);
                        }
                        items.push((item.client, item.ack));
                    }
                    out.flushes += 1;
                    if !batch.acks.is_empty() {
                        out.ack_flushes += 1;
                        out.acks += batch.acks.len() as u64;
                    }
                    running.push(Reverse((done, flushes.len())));
                    flushes.push((batch.slots, items));
                }
                Step::WaitUntil(t) => break Some(t),
                Step::Idle => break None,
            }
        };
        // The next event.
        let next_done = running.peek().map(|Reverse((t, _))| *t);
        let next_due = world.due.peek().map(|Reverse((t, _, _))| *t);
        now = [next_done, next_due, wait_until, Some(next_sample)]
            .into_iter()
            .flatten()
            .min()
            .unwrap()
            .max(now);
        if now >= next_sample {
            out.limits.push(core.limit());
            next_sample += Duration::from_millis(200);
        }
        while running.peek().is_some_and(|Reverse((t, _))| *t <= now) {
            let Reverse((_, n)) = running.pop().unwrap();
            let (slots, items) = std::mem::take(&mut flushes[n]);
            core.completed(now, &slots, items.len());
            out.completed += items.len() as u64;
            for (client, ack) in items {
                world.done(now, client, ack);
            }
        }
        while world.due.peek().is_some_and(|Reverse((t, _, _))| *t <= now) {
            let Reverse((_, _, event)) = world.due.pop().unwrap();
            for (client, ack) in world.fire(now, event) {
                let at_idle = core.pending() == 0 && running.is_empty();
                // A partition's items share its slot; other loads spread over the slots.
                let key = if partitions > 0 {
                    client as u64
                } else {
                    world.rng.below(1 << 30) as u64
                };
                let kind = if ack {
                    Kind::Ack { fold: key }
                } else {
                    Kind::Pop
                };
                let item = Item {
                    client,
                    ack,
                    arrived: now,
                    at_idle,
                };
                core.arrive(now, load.consumers_wait(), key, kind, item);
            }
        }
    }
    out
}

fn adaptive(hold_ms: u64) -> CoreSettings {
    CoreSettings {
        concurrency: ConcurrencyMode::Adaptive { max: 8 },
        linger: Linger::Adaptive {
            hold: Duration::from_millis(hold_ms),
        },
        max_acks: usize::MAX,
        max_pops: 64,
    }
}

/// This machine's kind: one commit at a time (a WAL sync each), 0.5 ms a flush plus 20 µs an
/// item.
const SERIAL: Database = Database {
    servers: 1,
    fixed: Duration::from_micros(500),
    per_item: Duration::from_micros(20),
};

/// This machine's kind when busy: one commit at a time, each slowed to 4 ms by the work
/// around it.
const BUSY: Database = Database {
    servers: 1,
    fixed: Duration::from_millis(4),
    per_item: Duration::from_micros(20),
};

/// A large host: eight commits at once, each as costly.
const PARALLEL: Database = Database {
    servers: 8,
    ..SERIAL
};

/// 64 consumers that always find work and come back 200 µs (mean) after each commit.
fn drain() -> Load {
    Load::Closed {
        clients: 64,
        think: Duration::from_micros(200),
    }
}

/// The adaptive settings with the concurrency fixed at `n`.
fn fixed(n: usize) -> CoreSettings {
    CoreSettings {
        concurrency: ConcurrencyMode::Fixed(n),
        ..adaptive(3)
    }
}

/// The share of `limits` for which `holds` is true.
fn share(limits: &[usize], holds: impl Fn(usize) -> bool) -> f64 {
    limits.iter().filter(|&&l| holds(l)).count() as f64 / limits.len() as f64
}

fn tail(limits: &[usize]) -> &[usize] {
    &limits[limits.len() / 2..]
}

#[test]
fn where_commits_serialise_it_converges_to_one_flush_at_a_time() {
    let load = drain();
    let out = simulate(SERIAL, load, adaptive(3), 60.0);
    let late = tail(&out.limits);
    let at_one = share(late, |l| l == 1);
    // Probes are allowed (one epoch each, backing off to a minute apart).
    assert!(
        at_one >= 0.97,
        "one flush {at_one:.3} of the time: {late:?}"
    );
    // Against a fixed eight flushes at once on the same database, one is not slower.
    let eight = simulate(SERIAL, load, fixed(8), 60.0);
    assert!(
        out.completed as f64 >= eight.completed as f64 * 0.98,
        "adaptive {} against 8 fixed {}",
        out.completed,
        eight.completed
    );
}

#[test]
fn where_commits_parallelise_it_converges_to_several_and_gains() {
    let load = drain();
    let out = simulate(PARALLEL, load, adaptive(3), 60.0);
    let late = tail(&out.limits);
    // Probe epochs (one fewer, one more) are sampled now and then.
    let several = share(late, |l| l >= 3);
    assert!(several >= 0.95, "several flushes at once: {late:?}");
    let single = simulate(PARALLEL, load, fixed(1), 60.0);
    assert!(
        out.completed as f64 >= single.completed as f64 * 1.5,
        "adaptive {} against one flush {}",
        out.completed,
        single.completed
    );
}

#[test]
fn the_limit_stays_put_under_a_steady_load() {
    // No oscillation: once settled, the limit changes only for probes (one epoch each).
    let load = drain();
    for db in [SERIAL, PARALLEL] {
        let out = simulate(db, load, adaptive(3), 60.0);
        let late = tail(&out.limits);
        let changes = late.windows(2).filter(|w| w[0] != w[1]).count();
        // 30 s of 200 ms epochs: a probe every >= 2 s backing off to 60 s is at most a
        // handful of up-and-back pairs.
        assert!(changes <= 10, "{changes} changes: {late:?}");
    }
}

#[test]
fn a_linger_never_holds_work_past_its_bound() {
    for rate in [100.0, 800.0, 2_000.0, 6_000.0] {
        for hold_ms in [1, 3, 10] {
            let bound = Duration::from_millis(hold_ms);
            for load in [Load::Open { rate }, partitions(rate / 2.0)] {
                let out = simulate(SERIAL, load, adaptive(hold_ms), 5.0);
                // Work arriving at an idle lane waits at most the linger; work arriving during
                // a flush waits for that flush, then at most the linger.
                assert!(
                    out.idle_arrival_wait <= bound,
                    "rate {rate}, hold {hold_ms} ms: held {:?}",
                    out.idle_arrival_wait
                );
                assert!(
                    out.max_wait <= bound + out.longest_flush,
                    "rate {rate}, hold {hold_ms} ms: waited {:?}, longest flush {:?}",
                    out.max_wait,
                    out.longest_flush
                );
            }
        }
    }
}

/// tiny-batches' shape: 256 partitions, pushes of 8, pops of one, the ack hand-off.
fn partitions(rate: f64) -> Load {
    Load::Partitions {
        rate,
        push: 8,
        partitions: 256,
        think: Duration::from_micros(500),
    }
}

#[test]
fn light_load_pays_no_linger_and_a_linger_grows_with_the_flush_time() {
    let light = simulate(SERIAL, Load::Open { rate: 100.0 }, adaptive(3), 10.0);
    // At 100 items a second a linger would gather nothing: every flush goes at once.
    assert!(
        light.idle_arrival_wait < Duration::from_micros(1),
        "{:?}",
        light.idle_arrival_wait
    );
    let mut at_once = adaptive(3);
    at_once.linger = Linger::Fixed {
        linger: Duration::ZERO,
        min_rate: 0,
    };
    let acks_per_flush = |o: &Outcome| o.acks as f64 / o.ack_flushes as f64;
    // A quick database: a linger is at most `FLUSH_SHARE` of a flush, far below the bound.
    let quick = simulate(SERIAL, partitions(3_000.0), adaptive(3), 10.0);
    let share = |o: &Outcome| o.longest_flush.mul_f64(Linger::FLUSH_SHARE);
    assert!(
        quick.idle_arrival_wait <= share(&quick),
        "{:?} lingered, flushes up to {:?}",
        quick.idle_arrival_wait,
        quick.longest_flush
    );
    // A busy one (4 ms a flush): the linger grows to the bound, and flushes carry more than
    // what arrives during one. Measured on this model: 21 acks per ack flush lingering, 12 at
    // once.
    let busy_at_once = simulate(BUSY, partitions(3_000.0), at_once, 10.0);
    let busy = simulate(BUSY, partitions(3_000.0), adaptive(3), 10.0);
    assert!(
        busy.idle_arrival_wait > 2 * quick.idle_arrival_wait,
        "busy {:?}, quick {:?}",
        busy.idle_arrival_wait,
        quick.idle_arrival_wait
    );
    assert!(
        acks_per_flush(&busy) >= 1.3 * acks_per_flush(&busy_at_once),
        "{:.1} acks per ack flush lingering, {:.1} at once",
        acks_per_flush(&busy),
        acks_per_flush(&busy_at_once)
    );
    // The bound holds here too (`a_linger_never_holds_work_past_its_bound` checks the wait of
    // work that arrives during a flush, on the quick database).
    assert!(busy.idle_arrival_wait <= Duration::from_millis(3));
}

#[test]
fn consumers_that_always_find_work_are_not_made_to_wait() {
    // A closed loop (a drain): the lane never lingers, so throughput is fire-on-idle's.
    let load = Load::Closed {
        clients: 32,
        think: Duration::from_micros(300),
    };
    let out = simulate(SERIAL, load, adaptive(3), 20.0);
    assert_eq!(out.idle_arrival_wait, Duration::ZERO);
}
