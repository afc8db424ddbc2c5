//! The sending half of peer notifications: events are collected here from the push, ack and
//! pop paths (after their commits, never inside a data transaction), coalesced (one event per
//! pushed partition per send), and sent, at most one send per `MIN_GAP`, by one task on a
//! dedicated connection as one autocommitted `SELECT pg_notify(channel, payload)` over a send's
//! payloads, each payload a batch of events. `NOTIFY` serialises committing transactions that notified on a global lock,
//! so batching a send's events into one statement keeps that lock off the data path and its
//! cost per event small; the connection commits without waiting for the WAL flush
//! (`synchronous_commit = off`: a notification lost in a crash only delays).
//!
//! Events are sent only while another broker was heard from within `PEER_TTL`: every broker
//! says it is here once per `HEARTBEAT` (and at once to a broker it had not heard lately), so a
//! broker alone costs its database one small commit a second, not one per burst of traffic.
//!
//! Losing events only delays: the receiving brokers' reseed (`QUEEN_HOTLIST_RESEED_MS`) and
//! their long-polls' re-checks find the partitions in PostgreSQL anyway.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_postgres::NoTls;
use uuid::Uuid;

use super::message::{pack, Event};
use super::seal::PeerKey;
use super::stats::PeerStats;

/// The channel every broker of one database listens on (NOTIFY is scoped to the database,
/// which holds one `queen` schema).
pub const CHANNEL: &str = "queen_peer_ready";

/// The sending connection's `application_name` (as `pg_stat_activity` shows it) when the
/// database configuration names none (else it keeps the broker's, so that whatever finds the
/// broker's sessions by name finds this one too).
pub const SENDER_NAME: &str = "ackbench-peer-sender";

/// The least time between two sends: an event after a quiet spell goes at once, and under
/// traffic each send carries what arrived since the last, so a broker commits at most 100
/// notifications a second however busy it is.
pub const MIN_GAP: Duration = Duration::from_millis(10);

/// One statement, one commit, for every payload of a batch.
const NOTIFY_ALL: &str = "SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload";

/// How often a broker says it is here (`Event::Present`), whatever else it sends.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// How long after the last word from another broker events are still sent.
pub const PEER_TTL: Duration = Duration::from_secs(3);

/// Events held while the sender cannot send; past this, new events are counted lost.
const MAX_WAITING: usize = 100_000;

/// How long the sender waits before connecting again after a failure.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Waiting {
    events: Vec<Event>,
    /// Index in `events` of the pending `Pushed` of each partition (coalesced).
    pushed_at: HashMap<Uuid, usize>,
    /// Pushed partitions a pop parked here was woken for, until when the send waits for that
    /// pop's `Leased` (see `publish_held`).
    held: HashMap<Uuid, Instant>,
    /// A `Delivered` waits: the send goes as soon as the previous one is done, holds or not
    /// (`wait_to_send`).
    urgent: bool,
}

impl Waiting {
    /// Adds `event`, folding a push into its partition's waiting `Pushed` (the highest end,
    /// the messages added). False when `MAX_WAITING` events already wait (the event is lost).
    fn add(&mut self, event: Event) -> bool {
        if let Event::Pushed {
            pid, end, messages, ..
        } = &event
        {
            if let Some(&i) = self.pushed_at.get(pid) {
                if let Event::Pushed {
                    end: e,
                    messages: m,
                    ..
                } = &mut self.events[i]
                {
                    *e = (*e).max(*end);
                    *m = m.saturating_add(*messages);
                    return true;
                }
            }
        }
        if self.events.len() >= MAX_WAITING {
            return false;
        }
        if let Event::Pushed { pid, .. } = &event {
            self.pushed_at.insert(*pid, self.events.len());
        }
        self.events.push(event);
        true
    }
}

/// Events waiting for the sender.
pub struct Outbox {
    /// This broker's instance id, carried by every notification it sends.
    pub instance: Uuid,
    waiting: Mutex<Waiting>,
    arrived: Notify,
    pub stats: Arc<PeerStats>,
    /// When another broker was last heard from, in ms since `born` (0: never).
    peer_heard_ms: AtomicU64,
    born: Instant,
    /// How long a held event waits for its pop's `Leased` (`publish_held`).
    hold: Duration,
    /// The deployment's key (`queen.peer_secret`), once read: `Delivered` events are sealed
    /// with it, and without it none is sent or accepted.
    key: OnceLock<PeerKey>,
    /// Told when a `Delivered` arrives (the sender stops waiting out the gap and the holds).
    hurry: Notify,
    /// Told when the last held partition's `Leased` arrives.
    unheld: Notify,
    /// Set when a broker not heard from lately speaks: the sender answers with a heartbeat at
    /// once, so that two brokers find each other without waiting a heartbeat period.
    greet: Notify,
}

impl Outbox {
    pub fn new(stats: Arc<PeerStats>, hold: Duration) -> Outbox {
        Outbox {
            hold,
            key: OnceLock::new(),
            hurry: Notify::new(),
            instance: Uuid::now_v7(),
            waiting: Mutex::new(Waiting::default()),
            arrived: Notify::new(),
            stats,
            peer_heard_ms: AtomicU64::new(0),
            born: Instant::now(),
            greet: Notify::new(),
            unheld: Notify::new(),
        }
    }

    /// Another broker spoke (the listener calls this for every notification not this broker's).
    pub fn heard_peer(&self) {
        let was_present = self.peers_present();
        let now = self.born.elapsed().as_millis() as u64 + 1;
        self.peer_heard_ms.store(now, Ordering::Relaxed);
        if !was_present {
            self.greet.notify_one();
        }
    }

    /// Whether another broker was heard from within `PEER_TTL`.
    pub fn peers_present(&self) -> bool {
        let heard = self.peer_heard_ms.load(Ordering::Relaxed);
        heard > 0
            && self.born.elapsed().as_millis() as u64 + 1 - heard <= PEER_TTL.as_millis() as u64
    }

    /// Queues a `Pushed` or a `Released` that woke a pop parked on this broker: the send waits
    /// up to `hold` for that pop's claim, so that its `Leased` travels with it and the other
    /// brokers do not send their own parked pops to find the partition taken (in a round-robin
    /// deployment every push woke a pop on each broker and two of three claims found nothing).
    /// If the pop took something else, the other brokers hear of it `hold` later.
    pub fn publish_held(&self, event: Event) {
        self.queue(event, true);
    }

    /// Sets the deployment's key (read once at start; later calls change nothing).
    pub fn set_key(&self, key: PeerKey) {
        let _ = self.key.set(key);
    }

    /// The deployment's key, once read.
    pub fn key(&self) -> Option<&PeerKey> {
        self.key.get()
    }

    /// Seals and queues a `Delivered`, sent as soon as the previous send is done: its batch's ack
    /// may reach another broker within a millisecond or two. Nothing is sent without the key.
    pub fn publish_delivered(&self, mut event: Event) {
        let Some(key) = self.key.get() else {
            return;
        };
        let Some(body) = event.sealed_body() else {
            return;
        };
        if let Event::Delivered { seal, .. } = &mut event {
            *seal = key.seal(&body);
        }
        if self.queue(event, false) {
            PeerStats::add(&self.stats.deliveries_sent, 1);
        }
    }

    /// Queues `event` for the next batch; a push to a partition already waiting is folded into
    /// its event (the highest end, the messages added). A `Leased` ends its partition's hold.
    /// False when no other broker is listening (nothing is queued).
    pub fn publish(&self, event: Event) -> bool {
        self.queue(event, false)
    }

    /// `publish`, starting the event's partition's hold when `hold` is set. One lock section,
    /// so that a `Leased` published meanwhile cannot slip in between the event and its hold.
    fn queue(&self, event: Event, hold: bool) -> bool {
        if !self.peers_present() {
            PeerStats::add(&self.stats.events_alone, 1);
            return false;
        }
        let mut w = self.waiting.lock().expect("outbox lock");
        let was_empty = w.events.is_empty();
        let held = match &event {
            Event::Pushed { pid, .. } | Event::Released { pid, .. } if hold => Some(*pid),
            _ => None,
        };
        if let Event::Leased { pid, .. } = &event {
            self.end_hold(&mut w, pid);
        }
        let urgent = matches!(event, Event::Delivered { .. });
        if !w.add(event) {
            PeerStats::add(&self.stats.events_lost, 1);
            return false;
        }
        if let Some(pid) = held {
            if let std::collections::hash_map::Entry::Vacant(e) = w.held.entry(pid) {
                e.insert(Instant::now() + self.hold);
                PeerStats::add(&self.stats.holds, 1);
            }
        }
        w.urgent |= urgent;
        drop(w);
        if was_empty {
            self.arrived.notify_one();
        }
        if urgent {
            self.hurry.notify_waiters();
        }
        true
    }

    /// Waits until the next send may go: `MIN_GAP` after `last_send` and every running hold
    /// ended, or at once when a `Delivered` waits. Its ack may already be on its way to another
    /// broker, which waits for it (`fast_path`). Sends never overlap (one task, one
    /// connection), so what arrives during a send goes in the next: under load deliveries
    /// batch themselves, as commits do in PostgreSQL's group commit. (A 2 ms gap before a
    /// delivery made round robin's ack p99 5.5-6.2 ms against 4.1.)
    async fn wait_to_send(&self, last_send: Instant) {
        let hurried = self.hurry.notified();
        if self.waiting.lock().expect("outbox lock").urgent {
            return;
        }
        let patient = async {
            tokio::time::sleep_until((last_send + MIN_GAP).into()).await;
            self.wait_for_holds().await;
        };
        tokio::select! {
            _ = patient => {}
            _ = hurried => {}
        }
    }

    /// Whether deliveries are exchanged now: the deployment's key is read and another broker
    /// is listening (a delivery is sent, and an ack of an unknown lease waits for one, only
    /// then).
    pub fn delivering(&self) -> bool {
        self.key.get().is_some() && self.peers_present()
    }

    /// A `Leased` came for `pid`: its hold, if one runs, is met.
    fn end_hold(&self, w: &mut Waiting, pid: &Uuid) {
        if w.held.remove(pid).is_some() {
            PeerStats::add(&self.stats.holds_met, 1);
            if w.held.is_empty() {
                self.unheld.notify_one();
            }
        }
    }

    /// The latest hold of the waiting events, if one is still running.
    fn held_until(&self) -> Option<Instant> {
        let w = self.waiting.lock().expect("outbox lock");
        w.held
            .values()
            .max()
            .copied()
            .filter(|&t| t > Instant::now())
    }

    /// Waits until every hold running now has ended or its `Leased` came (holds that begin
    /// meanwhile are not waited for, so steady traffic cannot put a send off).
    async fn wait_for_holds(&self) {
        let Some(until) = self.held_until() else {
            return;
        };
        loop {
            let unheld = self.unheld.notified();
            if self.waiting.lock().expect("outbox lock").held.is_empty() {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(until.into()) => return,
                _ = unheld => {}
            }
        }
    }

    /// Takes every waiting event.
    fn take(&self) -> Vec<Event> {
        let mut w = self.waiting.lock().expect("outbox lock");
        w.pushed_at.clear();
        w.held.clear();
        w.urgent = false;
        std::mem::take(&mut w.events)
    }
}

/// Sends the outbox's batches until the broker stops, connecting again after any failure.
pub async fn send_forever(outbox: Arc<Outbox>, database: tokio_postgres::Config) {
    loop {
        if let Err(e) = send_on_one_connection(&outbox, &database).await {
            tracing::warn!(target: "peers", error = %e, "peer notifications: sending connection failed; connecting again");
        }
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}

/// One connection's life: waits for a first event, waits out the gap since the last send, sends what arrived meanwhile.
async fn send_on_one_connection(
    outbox: &Outbox,
    database: &tokio_postgres::Config,
) -> Result<(), String> {
    let mut database = database.clone();
    if database.get_application_name().is_none() {
        database.application_name(SENDER_NAME);
    }
    let (client, connection) = database.connect(NoTls).await.map_err(|e| e.to_string())?;
    // Dropping the client (here, or when this task is aborted) ends the connection's future.
    let driver = tokio::spawn(connection);
    let outcome = async {
        // A notification is a hint: its commit need not wait for the WAL flush (NOTIFY gives
        // the transaction an id, so each would otherwise cost a flush).
        client
            .batch_execute("SET synchronous_commit = off")
            .await
            .map_err(|e| e.to_string())?;
        // Prepared once: an unprepared statement costs each send a second round trip (and a
        // second transaction, as PostgreSQL counts them).
        let notify_all = client
            .prepare(NOTIFY_ALL)
            .await
            .map_err(|e| e.to_string())?;
        let mut heartbeat = tokio::time::interval(HEARTBEAT);
        let mut last_send = Instant::now() - MIN_GAP;
        loop {
            let events = tokio::select! {
                _ = outbox.arrived.notified() => {
                    outbox.wait_to_send(last_send).await;
                    outbox.take()
                }
                _ = heartbeat.tick() => vec![Event::Present],
                _ = outbox.greet.notified() => vec![Event::Present],
            };
            if events.is_empty() {
                continue;
            }
            let (payloads, oversized) = pack(outbox.instance, &events);
            PeerStats::add(&outbox.stats.events_lost, oversized as u64);
            let carried: usize = payloads.iter().map(|(_, n)| n).sum();
            let texts: Vec<&str> = payloads.iter().map(|(p, _)| p.as_str()).collect();
            if let Err(e) = client.execute(&notify_all, &[&CHANNEL, &texts]).await {
                PeerStats::add(&outbox.stats.events_lost, carried as u64);
                return Err(e.to_string());
            }
            last_send = Instant::now();
            PeerStats::add(&outbox.stats.notifications_sent, payloads.len() as u64);
            PeerStats::add(&outbox.stats.events_sent, carried as u64);
        }
    }
    .await;
    driver.abort();
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pushed(pid: Uuid) -> Event {
        Event::Pushed {
            tenant: Uuid::nil(),
            queue: "q".into(),
            partition: "p".into(),
            pid,
            end: 9,
            messages: 1,
        }
    }

    fn leased(pid: Uuid) -> Event {
        Event::Leased {
            tenant: Uuid::nil(),
            queue: "q".into(),
            pid,
            group: "g".into(),
            lease: "L".into(),
            end: 9,
            lease_ms: 30_000,
        }
    }

    /// A hold no test outlasts, and one short enough to wait out.
    const LONG: Duration = Duration::from_secs(30);
    const SHORT: Duration = Duration::from_millis(20);

    fn listening(hold: Duration) -> Outbox {
        let o = Outbox::new(Arc::new(PeerStats::default()), hold);
        o.heard_peer();
        o
    }

    #[tokio::test]
    async fn a_held_push_waits_for_its_lease_and_goes_with_it() {
        let o = Arc::new(listening(LONG));
        let pid = Uuid::now_v7();
        o.publish_held(pushed(pid));
        let started = Instant::now();
        let waiter = {
            let o = o.clone();
            tokio::spawn(async move { o.wait_for_holds().await })
        };
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(!waiter.is_finished(), "held");
        o.publish(leased(pid));
        waiter.await.unwrap();
        assert!(started.elapsed() < LONG, "{:?}", started.elapsed());
        assert_eq!(o.take(), vec![pushed(pid), leased(pid)]);
        let counts = |o: &Outbox| {
            (
                o.stats.holds.load(Ordering::Relaxed),
                o.stats.holds_met.load(Ordering::Relaxed),
            )
        };
        assert_eq!(counts(&o), (1, 1));
    }

    #[tokio::test]
    async fn a_held_push_whose_pop_claimed_elsewhere_goes_after_the_hold() {
        let o = listening(SHORT);
        o.publish_held(pushed(Uuid::now_v7()));
        o.publish(pushed(Uuid::now_v7()));
        let started = Instant::now();
        o.wait_for_holds().await;
        assert!(started.elapsed() >= SHORT - Duration::from_millis(1));
        assert_eq!(o.take().len(), 2);
        o.publish(pushed(Uuid::now_v7()));
        let started = Instant::now();
        o.wait_for_holds().await;
        assert!(started.elapsed() < SHORT, "nothing held: at once");
    }

    fn delivered(pid: Uuid) -> Event {
        Event::Delivered {
            tenant: Uuid::nil(),
            queue: "q".into(),
            partition: "p".into(),
            pid,
            group: "g".into(),
            lease: "L".into(),
            end: 9,
            lease_ms: 30_000,
            frames: vec![("00".repeat(16), 9)],
            seal: String::new(),
        }
    }

    #[tokio::test]
    async fn a_delivery_is_sealed_and_goes_past_the_gap_and_the_holds() {
        let o = Arc::new(listening(LONG));
        o.publish_delivered(delivered(Uuid::now_v7()));
        assert!(o.take().is_empty(), "without the key nothing is sent");
        let key = PeerKey::candidate();
        o.set_key(PeerKey::new(key.clone()).unwrap());
        o.publish_held(pushed(Uuid::now_v7()));
        let started = Instant::now();
        let waiter = {
            let o = o.clone();
            tokio::spawn(async move { o.wait_to_send(Instant::now()).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "held, and the gap not yet out");
        o.publish_delivered(delivered(Uuid::now_v7()));
        waiter.await.unwrap();
        assert!(started.elapsed() < LONG / 2, "{:?}", started.elapsed());
        let events = o.take();
        assert_eq!(events.len(), 2);
        let body = events[1].sealed_body().unwrap();
        let Event::Delivered { seal, .. } = &events[1] else {
            panic!("{events:?}");
        };
        assert!(PeerKey::new(key).unwrap().verifies(&body, seal));
        assert_eq!(o.stats.deliveries_sent.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn alone_nothing_is_queued_or_held() {
        let o = Outbox::new(Arc::new(PeerStats::default()), LONG);
        o.publish_held(pushed(Uuid::now_v7()));
        assert!(o.take().is_empty());
        assert!(o.held_until().is_none());
    }
}
