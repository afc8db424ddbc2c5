//! The hotlist: for every (queue, consumer group) this broker serves, the partitions that may
//! have something to pop, so a wildcard pop claims from a few likely partitions instead of
//! scanning all of them, and a long-poll with nothing listed parks without any database work
//! (the pending gate).
//!
//! It is a hint, never the authority: the claim re-checks every candidate under the consumer
//! row lock, and a candidate that turns out empty or taken is simply dropped. What feeds it:
//! - pushes through this broker list their partition for every group known on the queue, and so
//!   do pushes through the other brokers of the database when peer notifications tell of them
//!   (`peers`), as do their releases and lease expiries when the partition surely has more;
//! - a claim takes its candidates off the list (so concurrent pops of one broker never collide)
//!   and remembers the lease; the ack that releases it, or the lease's expiry, lists the
//!   partition again when more may follow;
//! - another broker's lease (a peer notification) takes the partition off the list until that
//!   lease's release, at most `PEER_LEASE_HINT_MAX`, so a push the pushing broker's own pop
//!   claimed does not send every other broker's pops to find it taken;
//! - a (re)seed from PostgreSQL (`log_pop_candidates_v3`) when a group is first seen,
//!   every `QUEEN_HOTLIST_RESEED_MS`, and, while pops are parked with nothing listed, once per
//!   long-poll re-check for the whole group (not once per parked pop). That is how pushes
//!   through other brokers (without peer notifications, or when one was lost), renewed-then-
//!   expired leases, restarts, and partitions whose `delayedProcessing` or `windowBuffer` has
//!   passed are picked up (a push lists its partition at once; a claim that finds it held back
//!   drops it, and the seed leaves it out until then).
//!
//! Order: oldest waiting first. Each listed partition carries the instant its current stretch
//! of pending messages began (its first listing since it was last found drained), and pops take
//! the oldest. A partition released with more to deliver keeps its instant, so a burst pushed
//! into one partition drains at the pace of its pop-and-ack round trips instead of going to the
//! back behind every partition listed since (with pops of one message that made the last of a
//! push of eight wait eight trips round the whole list).

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::fasthash::FastMap;
use crate::peers::message::Event;

/// The longest a peer's lease keeps a partition off this broker's lists: acks come within
/// milliseconds, and if its release is lost (or the notification forged) the partition
/// returns at the latest this long after, or with the next seed.
pub const PEER_LEASE_HINT_MAX: Duration = Duration::from_secs(5);

/// What this broker knows of a lease an ack (or an expiry) ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Release<'a> {
    /// The whole span was committed (a nack or an expiry redelivers it).
    pub completed: bool,
    /// The released span's last offset, when known (the registry's fast path knows it).
    pub end: Option<i64>,
    /// The group's cursor after the release, when known (the hash path answers it): nothing
    /// at or below it is poppable.
    pub committed: Option<i64>,
    /// The lease's id, when the ack named one.
    pub lease: Option<&'a str>,
}

impl Release<'_> {
    /// The peer notification of this release of `group`'s lease on `pid`.
    pub fn event(&self, pid: Uuid, group: &str) -> Event {
        Event::Released {
            pid,
            group: group.to_string(),
            completed: self.completed,
            end: self.end,
            lease: self.lease.map(str::to_string),
            committed: self.committed,
        }
    }

    /// Whether something surely follows: the span redelivers, or more was written after what
    /// was acked (`known`, the last offset written as this broker knows it).
    fn surely_more(&self, known: Option<i64>) -> bool {
        let acked = self.end.or(self.committed);
        !self.completed || matches!((acked, known), (Some(end), Some(last)) if last > end)
    }
}

/// A queue of a tenant.
pub type QueueKey = (Uuid, String);

/// What a pop should do next.
#[derive(Debug, PartialEq, Eq)]
pub enum Take {
    /// Claim from these partitions (taken off the list).
    Candidates(Vec<Uuid>),
    /// Nothing listed and the list is stale: this pop (re)seeds it from PostgreSQL first.
    Seed,
    /// Nothing listed and the list is fresh (or another pop is seeding it).
    Nothing,
}

/// One group's candidates on one queue.
#[derive(Default)]
struct GroupHot {
    /// Listed partitions, oldest pending first: (pending since, listing sequence, partition).
    ring: BTreeSet<(Instant, u64, Uuid)>,
    /// Each listed partition's key in `ring`.
    listed: FastMap<Uuid, (Instant, u64)>,
    /// When each partition's current stretch of pending messages began.
    pending_since: FastMap<Uuid, Instant>,
    sequence: u64,
    /// Partitions this broker leased to the group: (span start, span end, lease expiry).
    leased: FastMap<Uuid, (i64, i64, Instant)>,
    /// Partitions another broker said it leased to the group. Kept apart from `leased`:
    /// nothing here is this broker's to expire or release.
    peer_leased: FastMap<Uuid, PeerLease>,
    /// Other brokers' leases whose release came before their `Leased` (an ack through this
    /// broker, or another's notification, overtaking the notification of the lease).
    ended: EndedLeases,
    /// Per partition, the highest offset a completed release said the group consumed (its
    /// span's end, or the cursor the hash path answered): a push notified after the ack that
    /// consumed it lists nothing. Until a seed finds the partition poppable.
    consumed: FastMap<Uuid, i64>,
    expiries: BinaryHeap<Reverse<(Instant, Uuid)>>,
    /// Partitions listed by a hand-off, with the acked span's end, until its commit's release
    /// (which then leaves the listing to whoever takes it) or a pop that took it found nothing.
    handed_off: FastMap<Uuid, i64>,
    /// The last span delivered per partition, to guess which cached segments a pop will need.
    last_span: FastMap<Uuid, (i64, i64)>,
    seeded_at: Option<Instant>,
    /// When a partition the last seed left out as held back (delayed, in its window) becomes
    /// ready: the list is due for a reseed then.
    ready_at: Option<Instant>,
    seeding: bool,
}

impl GroupHot {
    /// Lists `pid` (unless it is leased or listed already) at its pending stretch's start, or
    /// `now` when it has none.
    fn list(&mut self, pid: Uuid, now: Instant) {
        if !self.leased.contains_key(&pid) && !self.peer_holds(pid, now) {
            self.list_even_if_leased(pid, now);
        }
    }

    /// Whether another broker holds a lease on `pid`, as its notification said, and the hint
    /// has not run out (one that has is forgotten here).
    fn peer_holds(&mut self, pid: Uuid, now: Instant) -> bool {
        match self.peer_leased.get(&pid) {
            Some(l) if l.until > now => true,
            Some(_) => {
                self.peer_leased.remove(&pid);
                false
            }
            None => false,
        }
    }

    /// A completed release says the group consumed `pid` through its end or cursor.
    fn note_consumed(&mut self, pid: Uuid, r: &Release) {
        if let (true, Some(through)) = (r.completed, r.end.or(r.committed)) {
            let c = self.consumed.entry(pid).or_insert(through);
            *c = (*c).max(through);
        }
    }

    /// Ends the lease another broker said it holds on `pid` (see `Hotlist::released`); `None`
    /// when no such lease is recorded, else whether the partition is listed now. A release of
    /// another lease (another `lease` id; without one, another span's end) is an older lease's,
    /// and leaves the newer one alone. A release whose lease is not recorded is remembered, so
    /// that its `Leased`, arriving after it, is not taken for a lease still held.
    fn end_peer_lease(&mut self, pid: Uuid, r: &Release, known: Option<i64>) -> Option<bool> {
        let now = Instant::now();
        let same = match (self.peer_leased.get(&pid), r.lease) {
            (None, _) => false,
            (Some(l), Some(id)) => l.lease == id,
            (Some(l), None) => r.end.is_none_or(|a| a == l.end),
        };
        if !same {
            if let Some(id) = r.lease {
                self.ended.note(pid, id, now);
            }
            return self.peer_leased.contains_key(&pid).then_some(false);
        }
        let end = self.peer_leased.remove(&pid).expect("matched above").end;
        let more = !r.completed || known.is_some_and(|last| last > end);
        if more {
            self.list(pid, now);
        } else {
            self.pending_since.remove(&pid);
        }
        Some(more)
    }

    /// Lists `pid` unless it is listed already; true when it was not.
    fn list_even_if_leased(&mut self, pid: Uuid, now: Instant) -> bool {
        if self.listed.contains_key(&pid) {
            return false;
        }
        let since = *self.pending_since.entry(pid).or_insert(now);
        self.sequence += 1;
        self.listed.insert(pid, (since, self.sequence));
        self.ring.insert((since, self.sequence, pid));
        true
    }

    /// A push wrote to `pid` up to `end`: a partition neither listed nor leased had nothing
    /// pending as far as this list knows, so its stretch starts now. A push the group is known
    /// to have consumed already (its notification came after the ack's) lists nothing.
    fn list_pushed(&mut self, pid: Uuid, end: i64, now: Instant) {
        if self.consumed.get(&pid).is_some_and(|&c| c >= end) {
            return;
        }
        let taken = self.leased.contains_key(&pid) || self.peer_leased.contains_key(&pid);
        if !taken && !self.listed.contains_key(&pid) {
            self.pending_since.insert(pid, now);
        }
        self.list(pid, now);
    }

    /// Takes the `n` oldest listed partitions off the list.
    fn take_oldest(&mut self, n: usize) -> Vec<Uuid> {
        let mut out = Vec::with_capacity(n.min(self.ring.len()));
        while out.len() < n {
            let Some((_, _, pid)) = self.ring.pop_first() else {
                break;
            };
            self.listed.remove(&pid);
            out.push(pid);
        }
        out
    }

    /// Lists again the partitions whose lease has expired; returns them.
    fn expire(&mut self, now: Instant) -> Vec<Uuid> {
        let mut expired = Vec::new();
        while let Some(Reverse((at, pid))) = self.expiries.peek().copied() {
            if at > now {
                break;
            }
            self.expiries.pop();
            if self.leased.get(&pid).is_some_and(|l| l.2 == at) {
                self.leased.remove(&pid);
                self.list(pid, now);
                expired.push(pid);
            }
        }
        expired
    }
}

/// A lease another broker said it holds.
struct PeerLease {
    lease: String,
    /// The leased span's last offset.
    end: i64,
    /// Until when the hint holds (`PEER_LEASE_HINT_MAX` at most).
    until: Instant,
}

/// Leases released before this broker heard of them, for as long as a `Leased` can still
/// arrive (`PEER_LEASE_HINT_MAX`): bounded by the release rate over that time.
#[derive(Default)]
struct EndedLeases {
    order: VecDeque<(Instant, Uuid, String)>,
    set: HashSet<(Uuid, String)>,
}

impl EndedLeases {
    fn note(&mut self, pid: Uuid, lease: &str, now: Instant) {
        while let Some((at, ..)) = self.order.front() {
            if now.duration_since(*at) < PEER_LEASE_HINT_MAX {
                break;
            }
            let (_, p, l) = self.order.pop_front().expect("peeked");
            self.set.remove(&(p, l));
        }
        if !lease.is_empty() && self.set.insert((pid, lease.to_string())) {
            self.order.push_back((now, pid, lease.to_string()));
        }
    }

    fn contains(&self, pid: Uuid, lease: &str) -> bool {
        self.set.contains(&(pid, lease.to_string()))
    }
}

#[derive(Default)]
struct QueueHot {
    /// Highest offset known written per partition (from pushes and claims).
    last_offset: FastMap<Uuid, i64>,
    groups: HashMap<String, GroupHot>,
}

#[derive(Default)]
struct State {
    queues: HashMap<QueueKey, QueueHot>,
    queue_of: FastMap<Uuid, QueueKey>,
}

/// Told of each lease expiry the hotlist observes: (partition, group).
pub type ExpiryReport = Box<dyn Fn(Uuid, &str) + Send + Sync>;

pub struct Hotlist {
    reseed_every: Duration,
    state: Mutex<State>,
    on_expired: Option<ExpiryReport>,
}

impl Hotlist {
    pub fn new(reseed_every: Duration) -> Hotlist {
        Hotlist {
            reseed_every,
            state: Mutex::new(State::default()),
            on_expired: None,
        }
    }

    /// The same list, reporting every lease expiry it observes to `report` (called under the
    /// list's lock: it must not call back into the hotlist).
    pub fn reporting_expiries(mut self, report: ExpiryReport) -> Hotlist {
        self.on_expired = Some(report);
        self
    }

    /// Takes up to `n` candidates of `group` on `queue`. `stale_after` is how old the list may
    /// be before an empty one is reseeded (the reseed period, or the long-poll re-check).
    pub fn take(&self, queue: &QueueKey, group: &str, n: usize, stale_after: Duration) -> Take {
        let now = Instant::now();
        let mut s = self.state.lock().expect("hotlist lock");
        let g = group_entry(&mut s, queue, group);
        let expired = g.expire(now);
        if let Some(report) = &self.on_expired {
            for pid in expired {
                report(pid, group);
            }
        }
        let age = g.seeded_at.map(|t| now.duration_since(t));
        let due = age.is_none_or(|a| a >= self.reseed_every)
            || (g.ring.is_empty() && age.is_none_or(|a| a >= stale_after))
            || g.ready_at.is_some_and(|at| now >= at);
        if due && !g.seeding {
            g.seeding = true;
            return Take::Seed;
        }
        if g.ring.is_empty() {
            return Take::Nothing;
        }
        Take::Candidates(g.take_oldest(n))
    }

    /// The seed answered: lists `pids` (with what was listed meanwhile); `ready_at` is when a
    /// partition it left out as held back becomes ready (the list is due again then).
    pub fn seeded(&self, queue: &QueueKey, group: &str, pids: &[Uuid], ready_at: Option<Instant>) {
        let mut s = self.state.lock().expect("hotlist lock");
        for pid in pids {
            s.queue_of.insert(*pid, queue.clone());
        }
        let g = group_entry(&mut s, queue, group);
        g.seeding = false;
        g.seeded_at = Some(Instant::now());
        g.ready_at = ready_at;
        let now = Instant::now();
        for pid in pids {
            // PostgreSQL found it poppable: whatever a peer said of it is older.
            g.peer_leased.remove(pid);
            g.consumed.remove(pid);
            g.list(*pid, now);
        }
    }

    /// The seed failed: the next pop tries again.
    pub fn seed_failed(&self, queue: &QueueKey, group: &str) {
        let mut s = self.state.lock().expect("hotlist lock");
        group_entry(&mut s, queue, group).seeding = false;
    }

    /// Candidates a pop took but did not get to examine: listed again where they were (their
    /// pending stretch is unchanged).
    pub fn put_back(&self, queue: &QueueKey, group: &str, pids: &[Uuid]) {
        let mut s = self.state.lock().expect("hotlist lock");
        let g = group_entry(&mut s, queue, group);
        let now = Instant::now();
        for pid in pids {
            g.list(*pid, now);
        }
    }

    /// A claim delivered `span` of `pid` to `group`; `lease` is its expiry (none with auto
    /// ack, when the partition stays listed if more follows).
    pub fn claimed(
        &self,
        queue: &QueueKey,
        group: &str,
        pid: Uuid,
        span: (i64, i64),
        last_offset: i64,
        lease: Option<Instant>,
    ) {
        let mut s = self.state.lock().expect("hotlist lock");
        s.queue_of.insert(pid, queue.clone());
        let q = s.queues.entry(queue.clone()).or_default();
        let known = q.last_offset.entry(pid).or_insert(last_offset);
        *known = (*known).max(last_offset);
        let more = *known > span.1;
        let g = q.groups.entry(group.to_string()).or_default();
        g.last_span.insert(pid, span);
        match lease {
            Some(at) => {
                // Listed meanwhile (a hand-off's release, racing this claim's answer): leased
                // now, so no pop should take it.
                if let Some((since, seq)) = g.listed.remove(&pid) {
                    g.ring.remove(&(since, seq, pid));
                }
                g.leased.insert(pid, (span.0, span.1, at));
                g.expiries.push(Reverse((at, pid)));
            }
            None if more => g.list(pid, Instant::now()),
            None => {
                g.pending_since.remove(&pid);
            }
        }
    }

    /// The last span delivered from `pid` to `group`, if this broker delivered one.
    pub fn last_span(&self, queue: &QueueKey, group: &str, pid: Uuid) -> Option<(i64, i64)> {
        let s = self.state.lock().expect("hotlist lock");
        s.queues
            .get(queue)?
            .groups
            .get(group)?
            .last_span
            .get(&pid)
            .copied()
    }

    /// A push through this broker wrote up to `end_offset` of `pid`: listed for every group.
    pub fn pushed(&self, queue: &QueueKey, pid: Uuid, end_offset: i64) {
        let mut s = self.state.lock().expect("hotlist lock");
        s.queue_of.entry(pid).or_insert_with(|| queue.clone());
        let q = s.queues.entry(queue.clone()).or_default();
        let known = q.last_offset.entry(pid).or_insert(end_offset);
        *known = (*known).max(end_offset);
        let now = Instant::now();
        for g in q.groups.values_mut() {
            g.list_pushed(pid, end_offset, now);
        }
    }

    /// A full-batch ack of `group`'s lease on `pid`, whose span ends at `acked_end`, is
    /// enqueued in a joint lane ahead of its commit (the hand-off): when more was written after
    /// the span, the partition is listed now, keeping its pending stretch, so a pop can take it
    /// into the same flush, where it runs after the ack and claims what the ack releases. The
    /// lease stays recorded: if the ack fails, the pop finds the partition taken (a stale
    /// candidate) and the lease's expiry lists it again. True when it was listed.
    pub fn releasing(&self, pid: Uuid, group: &str, acked_end: i64) -> bool {
        let mut s = self.state.lock().expect("hotlist lock");
        let Some((known, g)) = known_group(&mut s, pid, group) else {
            return false;
        };
        let more = known.is_some_and(|last| last > acked_end);
        let this_lease = g.leased.get(&pid).is_some_and(|l| l.1 == acked_end);
        if !(more && this_lease && g.list_even_if_leased(pid, Instant::now())) {
            return false;
        }
        g.handed_off.insert(pid, acked_end);
        true
    }

    /// A claim of `pids` found nothing in them: any that a hand-off listed was claimed before
    /// its ack committed (a pop on another lane), so the ack's release lists it again.
    pub fn missed(&self, queue: &QueueKey, group: &str, pids: &[Uuid]) {
        let mut s = self.state.lock().expect("hotlist lock");
        if let Some(g) = s
            .queues
            .get_mut(queue)
            .and_then(|q| q.groups.get_mut(group))
        {
            for pid in pids {
                g.handed_off.remove(pid);
            }
        }
    }

    /// An ack released `group`'s lease on `pid`; `r.completed` says the whole span was
    /// committed (then the partition is listed only if more was written after it; a nack lists
    /// it again since the span redelivers). `r.end`, when known, is the end of the released
    /// span: after a hand-off of that span the partition was listed already (and a pop may be
    /// claiming it right now), and a lease recorded with another end is a newer one; either
    /// way the listing is left alone. `None` when the partition or group is unknown here;
    /// otherwise whether this release left the partition listed for a pop (so a parked pop is
    /// worth waking).
    pub fn released(&self, pid: Uuid, group: &str, r: Release) -> Option<bool> {
        let mut s = self.state.lock().expect("hotlist lock");
        let (known, g) = known_group(&mut s, pid, group)?;
        let recorded = g.leased.get(&pid).map(|l| l.1);
        let acked_end = r.end;
        g.note_consumed(pid, &r);
        if recorded.is_none() {
            // An ack through this broker of a lease another broker granted.
            if let Some(listed) = g.end_peer_lease(pid, &r, known) {
                return Some(listed);
            }
        }
        let handed_off = g.handed_off.remove(&pid);
        if acked_end.is_some() && handed_off == acked_end {
            if recorded == acked_end {
                g.leased.remove(&pid);
            }
            return Some(false);
        }
        if recorded.is_some() && acked_end.is_some() && recorded != acked_end {
            return Some(false);
        }
        g.leased.remove(&pid);
        let more = match (recorded.or(acked_end).or(r.committed), known) {
            (Some(end), Some(last)) => !r.completed || last > end,
            _ => true,
        };
        if more {
            g.list(pid, Instant::now());
            Some(true)
        } else {
            g.pending_since.remove(&pid);
            Some(false)
        }
    }

    /// Another broker released `group`'s lease on `pid` (`released`'s arguments, as it knew
    /// them). A lease this broker recorded is released as if locally. Otherwise the partition
    /// is listed only when it surely has something to deliver: the span redelivers (a nack or
    /// an expiry), or more was written after the released span's end as this broker knows it.
    /// A completed ack of a span whose end is not known lists nothing here: the broker that
    /// leased the span knows, and lists it. `None` when the partition or group is unknown.
    pub fn released_by_peer(&self, pid: Uuid, group: &str, r: Release) -> Option<bool> {
        let recorded = {
            let mut s = self.state.lock().expect("hotlist lock");
            let (_, g) = known_group(&mut s, pid, group)?;
            g.leased.contains_key(&pid)
        };
        if recorded {
            return self.released(pid, group, r);
        }
        let mut s = self.state.lock().expect("hotlist lock");
        let (known, g) = known_group(&mut s, pid, group)?;
        g.note_consumed(pid, &r);
        if let Some(listed) = g.end_peer_lease(pid, &r, known) {
            return Some(listed);
        }
        let more = r.surely_more(known);
        if more {
            g.list(pid, Instant::now());
        }
        Some(more)
    }

    /// Another broker leased `pid` to `group` through offset `span_end`, for `hold` (its lease's
    /// time, at most `PEER_LEASE_HINT_MAX`): the partition leaves the group's list, and no push
    /// lists it again, until that lease's release, the hint's end, or a seed that finds it
    /// poppable. So a push that the pushing broker's own parked pop claimed sends no pop here
    /// to PostgreSQL to find it taken. Nothing is recorded for a group no pop here has served.
    pub fn leased_by_peer(
        &self,
        queue: &QueueKey,
        group: &str,
        pid: Uuid,
        lease: &str,
        span_end: i64,
        hold: Duration,
    ) {
        let mut s = self.state.lock().expect("hotlist lock");
        let Some(q) = s.queues.get_mut(queue) else {
            return;
        };
        let known = q.last_offset.entry(pid).or_insert(span_end);
        *known = (*known).max(span_end);
        let Some(g) = q.groups.get_mut(group) else {
            return;
        };
        if g.ended.contains(pid, lease) {
            return; // released already (the release overtook this notification)
        }
        if let Some((since, seq)) = g.listed.remove(&pid) {
            g.ring.remove(&(since, seq, pid));
        }
        let until = Instant::now() + hold.min(PEER_LEASE_HINT_MAX);
        let lease = lease.to_string();
        g.peer_leased.insert(
            pid,
            PeerLease {
                lease,
                end: span_end,
                until,
            },
        );
        s.queue_of.entry(pid).or_insert_with(|| queue.clone());
    }

    /// Something changed on `queue` that the broker cannot name partition by partition (a
    /// push through the transaction wire): every group's next pop reseeds its list.
    pub fn invalidate(&self, queue: &QueueKey) {
        let mut s = self.state.lock().expect("hotlist lock");
        if let Some(q) = s.queues.get_mut(queue) {
            for g in q.groups.values_mut() {
                g.seeded_at = None;
            }
        }
    }

    /// Everything the other brokers said may have been missed: every group's next pop on
    /// every queue reseeds its list.
    pub fn invalidate_all(&self) {
        let mut s = self.state.lock().expect("hotlist lock");
        for q in s.queues.values_mut() {
            for g in q.groups.values_mut() {
                g.seeded_at = None;
            }
        }
    }

    /// `queue` was deleted: everything held about it and its partitions goes.
    pub fn forget(&self, queue: &QueueKey) {
        let mut s = self.state.lock().expect("hotlist lock");
        if let Some(q) = s.queues.remove(queue) {
            for pid in q.last_offset.keys() {
                s.queue_of.remove(pid);
            }
        }
        s.queue_of.retain(|_, k| k != queue);
    }

    /// The queue `pid` belongs to, when this broker has seen it pushed, seeded or claimed.
    pub fn queue_of(&self, pid: Uuid) -> Option<QueueKey> {
        let s = self.state.lock().expect("hotlist lock");
        s.queue_of.get(&pid).cloned()
    }

    /// Candidates listed for `group` on `queue` (for tests and metrics).
    pub fn listed(&self, queue: &QueueKey, group: &str) -> usize {
        let s = self.state.lock().expect("hotlist lock");
        s.queues
            .get(queue)
            .and_then(|q| q.groups.get(group))
            .map_or(0, |g| g.ring.len())
    }
}

/// The highest offset known written to `pid` and `group`'s entry on its queue, when this
/// broker knows both (unlike `group_entry`, nothing is created).
fn known_group<'a>(
    s: &'a mut State,
    pid: Uuid,
    group: &str,
) -> Option<(Option<i64>, &'a mut GroupHot)> {
    let queue = s.queue_of.get(&pid)?.clone();
    let q = s.queues.get_mut(&queue)?;
    let known = q.last_offset.get(&pid).copied();
    Some((known, q.groups.get_mut(group)?))
}

fn group_entry<'a>(s: &'a mut State, queue: &QueueKey, group: &str) -> &'a mut GroupHot {
    let q = s.queues.entry(queue.clone()).or_default();
    if !q.groups.contains_key(group) {
        // A group first seen here starts with every partition pushed through this broker.
        let mut g = GroupHot::default();
        let now = Instant::now();
        for pid in q.last_offset.keys() {
            g.list(*pid, now);
        }
        q.groups.insert(group.to_string(), g);
    }
    q.groups.get_mut(group).expect("inserted above")
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(3600);

    fn rel(completed: bool, end: Option<i64>, lease: Option<&str>) -> Release<'_> {
        Release {
            completed,
            end,
            committed: None,
            lease,
        }
    }

    fn key() -> QueueKey {
        (Uuid::nil(), "q".into())
    }

    #[test]
    fn a_new_group_seeds_once_then_parks_on_an_empty_list() {
        let h = Hotlist::new(LONG);
        assert_eq!(h.take(&key(), "g", 2, LONG), Take::Seed);
        assert_eq!(
            h.take(&key(), "g", 2, LONG),
            Take::Nothing,
            "one seeder at a time"
        );
        h.seeded(&key(), "g", &[], None);
        assert_eq!(
            h.take(&key(), "g", 2, LONG),
            Take::Nothing,
            "the gate: no SQL"
        );
        assert_eq!(
            h.take(&key(), "g", 2, Duration::ZERO),
            Take::Seed,
            "a re-check reseeds"
        );
    }

    #[test]
    fn pushes_list_partitions_and_claims_take_them_off() {
        let h = Hotlist::new(LONG);
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        assert_eq!(h.take(&key(), "g", 2, LONG), Take::Seed);
        h.seeded(&key(), "g", &[], None);
        h.pushed(&key(), a, 0);
        h.pushed(&key(), b, 0);
        h.pushed(&key(), a, 1);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        let lease = Instant::now() + LONG;
        h.claimed(&key(), "g", a, (0, 0), 1, Some(lease));
        h.pushed(&key(), a, 2);
        assert_eq!(
            h.take(&key(), "g", 5, LONG),
            Take::Candidates(vec![b]),
            "a leased partition is not listed"
        );
        assert_eq!(h.released(a, "g", rel(true, None, None)), Some(true));
        assert_eq!(h.take(&key(), "g", 5, LONG), Take::Candidates(vec![a]));
    }

    #[test]
    fn a_completed_release_with_nothing_after_lists_nothing_but_a_nack_does() {
        let h = Hotlist::new(LONG);
        let a = Uuid::now_v7();
        h.seeded(&key(), "g", &[a], None);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        h.claimed(&key(), "g", a, (0, 4), 4, Some(Instant::now() + LONG));
        h.released(a, "g", rel(true, None, None));
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Nothing);
        h.claimed(&key(), "g", a, (5, 5), 5, Some(Instant::now() + LONG));
        h.released(a, "g", rel(false, None, None));
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
    }

    #[test]
    fn an_expired_lease_lists_its_partition_again() {
        let h = Hotlist::new(LONG);
        let a = Uuid::now_v7();
        h.seeded(&key(), "g", &[a], None);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        h.claimed(&key(), "g", a, (0, 0), 3, Some(Instant::now()));
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
    }

    #[test]
    fn a_partition_released_with_more_goes_before_partitions_listed_after_it() {
        let h = Hotlist::new(LONG);
        let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        h.seeded(&key(), "g", &[], None);
        h.pushed(&key(), a, 7);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        h.claimed(&key(), "g", a, (0, 0), 7, Some(Instant::now() + LONG));
        h.pushed(&key(), b, 7);
        h.pushed(&key(), c, 7);
        h.released(a, "g", rel(true, None, None));
        assert_eq!(
            h.take(&key(), "g", 3, LONG),
            Take::Candidates(vec![a, b, c]),
            "a has waited since before b and c were pushed"
        );
        h.put_back(&key(), "g", &[c, b]);
        assert_eq!(
            h.take(&key(), "g", 1, LONG),
            Take::Candidates(vec![b]),
            "put back where they were"
        );
    }

    #[test]
    fn a_drained_partition_starts_a_new_stretch_when_pushed_again() {
        let h = Hotlist::new(LONG);
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        h.seeded(&key(), "g", &[], None);
        h.pushed(&key(), a, 0);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        h.claimed(&key(), "g", a, (0, 0), 0, Some(Instant::now() + LONG));
        h.released(a, "g", rel(true, None, None));
        h.pushed(&key(), b, 0);
        h.pushed(&key(), a, 1);
        assert_eq!(
            h.take(&key(), "g", 2, LONG),
            Take::Candidates(vec![b, a]),
            "a was drained, so its new message is younger than b's"
        );
    }

    #[test]
    fn a_hand_off_lists_the_partition_before_the_commit_and_the_release_then_stays_quiet() {
        let h = Hotlist::new(LONG);
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        h.seeded(&key(), "g", &[], None);
        h.pushed(&key(), a, 7);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        h.claimed(&key(), "g", a, (0, 0), 7, Some(Instant::now() + LONG));
        h.pushed(&key(), b, 7);
        assert!(
            !h.releasing(a, "g", 3),
            "not this lease's span: no hand-off"
        );
        assert!(h.releasing(a, "g", 0), "more after the span: listed ahead");
        assert!(!h.releasing(a, "g", 0), "listed once");
        assert_eq!(
            h.take(&key(), "g", 1, LONG),
            Take::Candidates(vec![a]),
            "a keeps its place before b"
        );
        assert_eq!(
            h.released(a, "g", rel(true, Some(0), None)),
            Some(false),
            "the commit of the handed-off ack does not list a again while its pop claims it"
        );
        h.claimed(&key(), "g", a, (1, 1), 7, Some(Instant::now() + LONG));
        assert_eq!(h.take(&key(), "g", 5, LONG), Take::Candidates(vec![b]));
        assert_eq!(
            h.released(a, "g", rel(true, Some(1), None)),
            Some(true),
            "the newer lease's own release lists a"
        );
    }

    #[test]
    fn a_hand_off_whose_pop_found_the_partition_taken_is_listed_again_at_the_release() {
        let h = Hotlist::new(LONG);
        let a = Uuid::now_v7();
        h.seeded(&key(), "g", &[], None);
        h.pushed(&key(), a, 2);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        h.claimed(&key(), "g", a, (0, 0), 2, Some(Instant::now() + LONG));
        assert!(h.releasing(a, "g", 0));
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        // That pop's claim ran before the ack committed and found the lease: nothing claimed.
        h.missed(&key(), "g", &[a]);
        assert_eq!(h.released(a, "g", rel(true, Some(0), None)), Some(true));
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
    }

    #[test]
    fn nothing_after_the_span_is_no_hand_off() {
        let h = Hotlist::new(LONG);
        let a = Uuid::now_v7();
        h.seeded(&key(), "g", &[], None);
        h.pushed(&key(), a, 0);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        h.claimed(&key(), "g", a, (0, 0), 0, Some(Instant::now() + LONG));
        assert!(!h.releasing(a, "g", 0));
        assert_eq!(h.released(a, "g", rel(true, Some(0), None)), Some(false));
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Nothing);
    }

    #[test]
    fn a_peers_release_lists_only_what_surely_has_more() {
        let h = Hotlist::new(LONG);
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        h.seeded(&key(), "g", &[], None);
        h.pushed(&key(), a, 9);
        h.pushed(&key(), b, 9);
        assert_eq!(h.take(&key(), "g", 2, LONG), Take::Candidates(vec![a, b]));
        assert_eq!(
            h.released_by_peer(a, "g", rel(true, None, None)),
            Some(false),
            "a completed span of unknown end: the broker that leased it lists it"
        );
        assert_eq!(
            h.released_by_peer(a, "g", rel(true, Some(9), None)),
            Some(false)
        );
        assert_eq!(
            h.released_by_peer(a, "g", rel(true, Some(4), None)),
            Some(true)
        );
        assert_eq!(
            h.released_by_peer(b, "g", rel(false, None, None)),
            Some(true),
            "a nack or an expiry redelivers"
        );
        h.claimed(&key(), "g", a, (0, 4), 9, Some(Instant::now() + LONG));
        assert_eq!(
            h.released_by_peer(a, "g", rel(true, None, None)),
            Some(true),
            "a lease recorded here is released as if locally"
        );
        assert_eq!(
            h.released_by_peer(Uuid::now_v7(), "g", rel(false, None, None)),
            None
        );
    }

    #[test]
    fn a_peers_lease_keeps_its_partition_off_the_list_until_its_release() {
        let h = Hotlist::new(LONG);
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        h.seeded(&key(), "g", &[], None);
        h.seeded(&key(), "h", &[], None);
        h.pushed(&key(), a, 9);
        h.leased_by_peer(&key(), "g", a, "L", 9, LONG);
        assert_eq!(h.take(&key(), "g", 2, LONG), Take::Nothing, "taken off");
        assert_eq!(
            h.take(&key(), "h", 2, LONG),
            Take::Candidates(vec![a]),
            "another group's list is its own"
        );
        h.pushed(&key(), a, 12);
        h.pushed(&key(), b, 3);
        assert_eq!(
            h.take(&key(), "g", 2, LONG),
            Take::Candidates(vec![b]),
            "a push does not list a partition a peer holds"
        );
        assert_eq!(
            h.released_by_peer(a, "g", rel(true, Some(4), None)),
            Some(false),
            "an older span's release leaves the newer lease alone"
        );
        assert_eq!(h.take(&key(), "g", 2, LONG), Take::Nothing);
        assert_eq!(
            h.released_by_peer(a, "g", rel(true, Some(9), None)),
            Some(true),
            "released, with 10-12 written after the span"
        );
        assert_eq!(h.take(&key(), "g", 2, LONG), Take::Candidates(vec![a]));
    }

    #[test]
    fn a_peers_lease_released_through_this_broker_or_with_nothing_after_it() {
        let h = Hotlist::new(LONG);
        let a = Uuid::now_v7();
        h.seeded(&key(), "g", &[], None);
        h.pushed(&key(), a, 9);
        h.leased_by_peer(&key(), "g", a, "L", 9, LONG);
        assert_eq!(
            h.released(a, "g", rel(true, None, None)),
            Some(false),
            "an ack here of the peer's lease, nothing written after it"
        );
        h.pushed(&key(), a, 10);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        h.leased_by_peer(&key(), "g", a, "L", 10, LONG);
        assert_eq!(
            h.released(a, "g", rel(false, Some(10), None)),
            Some(true),
            "a nack"
        );
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
    }

    #[test]
    fn a_release_that_overtakes_the_notification_of_its_lease_is_not_undone_by_it() {
        let h = Hotlist::new(LONG);
        let a = Uuid::now_v7();
        h.seeded(&key(), "g", &[], None);
        h.pushed(&key(), a, 9);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        // Another broker leased 0-9 as L1; its consumer acked L1 through this broker (or a
        // third) before L1's `Leased` arrived here.
        assert_eq!(h.released(a, "g", rel(true, None, Some("L1"))), Some(true));
        h.leased_by_peer(&key(), "g", a, "L1", 9, LONG);
        h.pushed(&key(), a, 12);
        assert_eq!(
            h.take(&key(), "g", 1, LONG),
            Take::Candidates(vec![a]),
            "L1 is over: 10-12 are poppable"
        );
        h.leased_by_peer(&key(), "g", a, "L2", 12, LONG);
        assert_eq!(
            h.released_by_peer(a, "g", rel(true, None, Some("L1"))),
            Some(false),
            "an older lease's release leaves L2 alone"
        );
        h.pushed(&key(), a, 13);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Nothing);
        assert_eq!(
            h.released_by_peer(a, "g", rel(true, None, Some("L2"))),
            Some(true)
        );
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
    }

    #[test]
    fn a_release_that_names_the_cursor_lists_only_what_follows_it() {
        let h = Hotlist::new(LONG);
        let a = Uuid::now_v7();
        h.seeded(&key(), "g", &[], None);
        h.pushed(&key(), a, 9);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        let through = |c| Release {
            completed: true,
            end: None,
            committed: Some(c),
            lease: Some("L"),
        };
        assert_eq!(
            h.released(a, "g", through(9)),
            Some(false),
            "an ack through the hash path here, of another broker's lease, drained it"
        );
        assert_eq!(h.released_by_peer(a, "g", through(9)), Some(false));
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Nothing);
        assert_eq!(
            h.released_by_peer(a, "g", through(7)),
            Some(true),
            "8-9 follow"
        );
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
    }

    #[test]
    fn a_push_notified_after_the_ack_that_consumed_it_lists_nothing() {
        let h = Hotlist::new(LONG);
        let a = Uuid::now_v7();
        h.seeded(&key(), "g", &[], None);
        h.pushed(&key(), a, 4);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        // Another broker's pop leased 5-9 and its consumer acked it through a third broker,
        // whose release arrives here before the push and the lease.
        let acked = Release {
            completed: true,
            end: None,
            committed: Some(9),
            lease: Some("L"),
        };
        assert_eq!(h.released_by_peer(a, "g", acked), Some(false));
        h.leased_by_peer(&key(), "g", a, "L", 9, LONG);
        h.pushed(&key(), a, 9);
        assert_eq!(
            h.take(&key(), "g", 1, LONG),
            Take::Nothing,
            "consumed already"
        );
        h.pushed(&key(), a, 10);
        assert_eq!(
            h.take(&key(), "g", 1, LONG),
            Take::Candidates(vec![a]),
            "10 is new"
        );
        let nack = Release {
            completed: false,
            committed: Some(20),
            ..acked
        };
        assert_eq!(h.released_by_peer(a, "g", nack), Some(true), "redelivers");
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        h.pushed(&key(), a, 12);
        assert_eq!(
            h.take(&key(), "g", 1, LONG),
            Take::Candidates(vec![a]),
            "a nack consumed nothing"
        );
    }

    #[test]
    fn a_peers_lease_is_a_hint_that_runs_out_and_that_a_seed_overrides() {
        let h = Hotlist::new(LONG);
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        h.seeded(&key(), "g", &[], None);
        h.pushed(&key(), a, 9);
        h.pushed(&key(), b, 9);
        h.leased_by_peer(&key(), "g", a, "L", 9, Duration::ZERO);
        h.leased_by_peer(&key(), "g", b, "L", 9, LONG);
        h.pushed(&key(), a, 10);
        assert_eq!(
            h.take(&key(), "g", 2, LONG),
            Take::Candidates(vec![a]),
            "a lapsed hint (a lost or forged notification) lists again"
        );
        h.seeded(&key(), "g", &[b], None);
        assert_eq!(
            h.take(&key(), "g", 2, LONG),
            Take::Candidates(vec![b]),
            "PostgreSQL found it poppable"
        );
        let unseen = (Uuid::nil(), "other".to_string());
        h.leased_by_peer(&unseen, "g", a, "L", 9, LONG);
        assert!(
            h.queue_of(a) == Some(key()),
            "a queue never served here is not recorded"
        );
        assert!(PEER_LEASE_HINT_MAX < LONG);
    }

    #[test]
    fn groups_are_independent() {
        let h = Hotlist::new(LONG);
        let a = Uuid::now_v7();
        h.seeded(&key(), "g", &[], None);
        h.seeded(&key(), "h", &[], None);
        h.pushed(&key(), a, 0);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        assert_eq!(h.take(&key(), "h", 1, LONG), Take::Candidates(vec![a]));
    }

    #[test]
    fn a_held_back_partition_makes_the_list_due_when_it_becomes_ready() {
        let h = Hotlist::new(LONG);
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        h.seeded(&key(), "g", &[a], Some(Instant::now() + LONG));
        h.pushed(&key(), b, 0);
        assert_eq!(h.take(&key(), "g", 1, LONG), Take::Candidates(vec![a]));
        h.seeded(&key(), "g", &[], Some(Instant::now()));
        assert_eq!(
            h.take(&key(), "g", 1, LONG),
            Take::Seed,
            "ready: due although b is listed and the list is fresh"
        );
    }
}
