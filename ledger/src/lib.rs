//! The ledger: what became of every message this cell pushed, per consumer group.
//!
//! Producers record each pushed transactionId; consumers record deliveries and the answers to
//! their acks. After the drain the ledger, reconciled against the broker's DLQ listing, is the
//! audit: every (message, group) obligation must be acked, dead-lettered or dropped by the
//! queue's explicit policy (exhausted retries with the DLQ disabled); anything else is lost.
//!
//! A message is booked as sent before its push goes out (a consumer may pop it before the push
//! is answered) and as failed when the push fails; a delivery of a message no push of this
//! process sent is unexpected: counted by the history's checks, never an obligation (a shard,
//! whose consumers pop what other shards pushed, owes every delivery instead).
//!
//! Messages are keyed by the xxh3_128 hash of their transactionId (`ackbench_wire::txn_hash`,
//! computed once per message by the worker that saw it), so booking a message copies 16 bytes,
//! not a `String`, and the map's hasher only folds the hash it is given.
//!
//! Settled obligations retire as the run goes: a (message, group) acked on its only delivery
//! leaves the map for the compact form of `retired` (by producer, push number and place), when
//! the workers named its origin and its push was booked with one. A retired pair delivered or
//! answered again comes back to the map as it was (acked once) and is judged from there, so the
//! audit's counts and the history's checks stay exact. Everything else (open obligations,
//! redeliveries, dead letters, drops, pushes that failed on the client) stays in the map; a
//! shard's ledger retires nothing (the merge reads every fate).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::sync::Mutex;

use ackbench_reports::results::Audit;
use ackbench_wire::TxnHash;

pub mod retired;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use retired::{Origin, PushOrigin, Retired};

/// Hashes keys that already are uniformly distributed hashes: folds their bytes, no mixing.
#[derive(Default)]
pub struct Prehashed(u64);

impl Hasher for Prehashed {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(word);
        }
    }

    fn write_usize(&mut self, _len: usize) {
        // The length prefix of a fixed-size key carries no information.
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Adds one to `counter` when `yes`. Every count of a condition in the ledger goes through this
/// branch rather than `counter += u64::from(yes)`: rustc 1.95 at opt-level 2 and above can drop
/// such an increment when the flag is used again after it (rust-lang/rust#158206; it did in
/// `retired`), and the audit's counts must be the same in a release build as in the tests.
fn count_if(counter: &mut u64, yes: bool) {
    if yes {
        *counter += 1;
    }
}

/// Makes `txn` an obligation of `fates` if it is not one yet; true when it is new.
fn owe(fates: &mut ByTxn<Fate>, txn: &TxnHash) -> bool {
    match fates.entry(*txn) {
        std::collections::hash_map::Entry::Occupied(_) => false,
        std::collections::hash_map::Entry::Vacant(v) => {
            v.insert(Fate::default());
            true
        }
    }
}

/// A map keyed by transactionId hash.
pub type ByTxn<V> = HashMap<TxnHash, V, BuildHasherDefault<Prehashed>>;

/// A set of transactionId hashes.
pub type TxnSet = HashSet<TxnHash, BuildHasherDefault<Prehashed>>;

/// The fate of one (message, group) as the client saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fate {
    pub deliveries: u32,
    pub acked: bool,
    /// The broker answered `dlq: true` for it (DLQ hand-off).
    pub dead_lettered: bool,
    /// The broker dropped it by policy (retries exhausted, DLQ disabled).
    pub dropped: bool,
}

impl Fate {
    fn resolved(&self) -> bool {
        self.acked || self.dead_lettered || self.dropped
    }

    /// Acked on its only delivery, nothing else: what retires.
    fn settled_clean(&self) -> bool {
        self.acked && !self.dead_lettered && !self.dropped && self.deliveries == 1
    }

    /// What a retired pair was: acked on its one delivery.
    const RETIRED: Fate = Fate {
        deliveries: 1,
        acked: true,
        dead_lettered: false,
        dropped: false,
    };
}

/// A booked push whose obligations have not all retired: its length, and how many of its
/// (message, group) obligations are still in the map.
struct OpenPush {
    len: u32,
    open: u64,
}

/// The first successful ack of a (message, group), with how many deliveries it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstAck {
    pub deliveries: u32,
}

impl FirstAck {
    /// Acked on the delivery it first got (no retry, no lease expiry before it).
    pub fn on_first_delivery(self) -> bool {
        self.deliveries <= 1
    }
}

/// A push not (yet) booked as queued: in flight, or failed on the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    InFlight,
    Failed,
}

#[derive(Default)]
struct Book {
    /// Pushes sent and not answered as queued: in flight, or failed on the client.
    sent: ByTxn<Sent>,
    /// Per group: messages delivered that no push sent (never obligations).
    unexpected: Vec<TxnSet>,
    /// Deliveries of messages no push of this process sent are owed (a shard's ledger).
    owe_unknown: bool,
    /// Per group (index into `groups`): transactionId hash -> fate.
    fates: Vec<ByTxn<Fate>>,
    /// Per group: the pairs retired from `fates`.
    retired: Vec<Retired>,
    /// Pushes booked with their origin, while some of their obligations are in `fates`.
    open_pushes: HashMap<PushOrigin, OpenPush>,
    pushed: u64,
    /// (message, group) obligations known: booked pushes, and messages delivered that no push
    /// booked (a push whose answer was lost, e.g. to a killed broker, but which was stored).
    owed: u64,
    resolved: u64,
    acked: u64,
    /// (message, group) pairs the broker answered dead-lettered, and dropped by policy.
    dead_lettered: u64,
    dropped: u64,
}

/// The ledger's running counts, read in one go (for the live metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SoFar {
    /// Messages pushed (not multiplied by groups).
    pub pushed: u64,
    /// Distinct (message, group) pairs acked.
    pub acked: u64,
    pub dead_lettered: u64,
    pub dropped: u64,
    /// (message, group) obligations not yet acked, dead-lettered or dropped.
    pub unresolved: u64,
}

/// What became of a delivered message's push, as the producers saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// A push answered that it queued it (or is still in flight, or another shard pushed it).
    Booked,
    /// Its push failed or timed out on the client.
    Failed,
    /// No push of this run sent it.
    Never,
}

pub struct Ledger {
    book: Mutex<Book>,
}

impl Ledger {
    pub fn new(groups: usize) -> Ledger {
        let book = Book {
            fates: vec![ByTxn::default(); groups],
            unexpected: vec![TxnSet::default(); groups],
            retired: (0..groups).map(|_| Retired::default()).collect(),
            ..Default::default()
        };
        Ledger {
            book: Mutex::new(book),
        }
    }

    /// Owes every delivery, even of a message no push of this process sent: for a shard, whose
    /// consumers pop what other shards pushed.
    pub fn owe_unknown_deliveries(&self) {
        self.book.lock().expect("ledger lock").owe_unknown = true;
    }

    /// Books messages whose push is about to be sent (a consumer may pop them before the push
    /// is answered).
    pub fn sending(&self, txns: &[TxnHash]) {
        let mut b = self.book.lock().expect("ledger lock");
        b.sent.extend(txns.iter().map(|t| (*t, Sent::InFlight)));
    }

    /// Books messages whose push failed or timed out: they may have been stored anyway.
    pub fn push_failed(&self, txns: &[TxnHash]) {
        let mut b = self.book.lock().expect("ledger lock");
        b.sent.extend(txns.iter().map(|t| (*t, Sent::Failed)));
    }

    /// Books pushed messages (every group owes each of them).
    pub fn pushed(&self, txns: &[TxnHash]) {
        self.pushed_from(None, txns)
    }

    /// Books pushed messages, naming the push they came in (`None`: unknown, they never
    /// retire): `txns[i]` is message `i` of push `origin`.
    pub fn pushed_from(&self, origin: Option<PushOrigin>, txns: &[TxnHash]) {
        let mut guard = self.book.lock().expect("ledger lock");
        let b = &mut *guard;
        book_pushed(b, txns);
        let Some(push) = origin.filter(|_| !b.owe_unknown) else {
            return;
        };
        let open = OpenPush {
            len: txns.len() as u32,
            open: (txns.len() * b.fates.len()) as u64,
        };
        b.open_pushes.insert(push, open);
        // A consumer may have acked some before the push was answered.
        for (i, t) in txns.iter().enumerate() {
            let o = Origin {
                producer: push.producer,
                seq: push.seq,
                index: i as u32,
            };
            for g in 0..b.fates.len() {
                retire_if_settled(b, g, t, Some(&o));
            }
        }
    }

    /// Pairs held in the map, over every group (the retired ones are not).
    pub fn live_entries(&self) -> usize {
        let b = self.book.lock().expect("ledger lock");
        b.fates.iter().map(|f| f.len()).sum::<usize>() + b.sent.len()
    }

    /// Pieces (ranges and partial pushes) of the retired form, over every group.
    pub fn retired_pieces(&self) -> usize {
        let b = self.book.lock().expect("ledger lock");
        b.retired.iter().map(Retired::pieces).sum()
    }
}

/// Books pushed messages into `b` (every group owes each of them).
fn book_pushed(b: &mut Book, txns: &[TxnHash]) {
    b.pushed += txns.len() as u64;
    for t in txns {
        b.sent.remove(t);
    }
    let mut owed = 0;
    for fates in &mut b.fates {
        fates.reserve(txns.len());
        for t in txns {
            count_if(&mut owed, owe(fates, t));
        }
    }
    b.owed += owed;
}

/// One ack answer for a (message, group), as the ledger books it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Answer {
    /// Acked (answered success, or settled before a resent ack).
    pub acked: bool,
    /// The broker answered `dlq: true`.
    pub dead_lettered: bool,
    /// The broker answered it dropped by policy.
    pub dropped: bool,
}

/// Books `answer` for `txn` in group `g` (owing it if it is not owed yet); returns the first
/// successful ack, if this is it.
fn book_answer(b: &mut Book, g: usize, txn: &TxnHash, answer: Answer) -> Option<FirstAck> {
    count_if(&mut b.owed, owe(&mut b.fates[g], txn));
    let f = b.fates[g].get_mut(txn).expect("owed above");
    let was_resolved = f.resolved();
    let first_ack = answer.acked && !f.acked;
    let first_dead_letter = answer.dead_lettered && !f.dead_lettered;
    let first_drop = answer.dropped && !f.dropped;
    f.acked |= answer.acked;
    f.dead_lettered |= answer.dead_lettered;
    f.dropped |= answer.dropped;
    let now_resolved = f.resolved();
    let deliveries = f.deliveries;
    count_if(&mut b.resolved, !was_resolved && now_resolved);
    count_if(&mut b.acked, first_ack);
    count_if(&mut b.dead_lettered, first_dead_letter);
    count_if(&mut b.dropped, first_drop);
    first_ack.then_some(FirstAck { deliveries })
}

/// Moves `txn`'s pair in group `g` to the retired form if it is acked on its only delivery
/// and its origin's push is booked (and the ledger retires at all).
fn retire_if_settled(b: &mut Book, g: usize, txn: &TxnHash, origin: Option<&Origin>) {
    let Some(o) = origin else { return };
    if b.owe_unknown || !b.fates[g].get(txn).is_some_and(Fate::settled_clean) {
        return;
    }
    let push = PushOrigin {
        producer: o.producer,
        seq: o.seq,
    };
    let Some(open) = b.open_pushes.get_mut(&push) else {
        return;
    };
    if o.index >= open.len {
        return;
    }
    b.fates[g].remove(txn);
    shrink_when_sparse(&mut b.fates[g]);
    b.retired[g].insert(o, open.len);
    open.open = open.open.saturating_sub(1);
    if open.open == 0 {
        b.open_pushes.remove(&push);
        shrink_when_sparse(&mut b.open_pushes);
    }
}

/// Slots a map keeps whatever it holds: shrinking below this gains too little to be worth a
/// rehash.
const KEPT_SLOTS: usize = 4096;

/// A map emptied after a backlog keeps the table it grew to (a soak that fell behind for a few
/// minutes held 185 000 open pairs, and 18 MiB more than before it for the rest of the run).
/// It is shrunk to twice what it holds (at least `KEPT_SLOTS`) once its table is more than four
/// times that: a shrunk table is at most twice the size asked for, so the next shrink waits
/// until the map has halved again, and the rehashes cost at most a few entries per removal.
fn shrink_when_sparse<K: Eq + Hash, V, S: BuildHasher>(map: &mut HashMap<K, V, S>) {
    let wanted = (map.len() * 2).max(KEPT_SLOTS);
    if map.capacity() > 4 * wanted {
        map.shrink_to(wanted);
    }
}

/// Takes a retired pair back into the map as it was (acked on one delivery), to be judged from
/// there; true when `origin` names a pair retired in group `g` and absent from the map.
fn revive(b: &mut Book, g: usize, txn: &TxnHash, origin: Option<&Origin>) -> bool {
    let retired = origin.is_some_and(|o| b.retired[g].contains(o));
    if !retired || b.fates[g].contains_key(txn) {
        return false;
    }
    b.fates[g].insert(*txn, Fate::RETIRED);
    b.retired[g].revive();
    true
}

impl Ledger {
    /// Records the deliveries of one popped batch; returns how many were redeliveries. A
    /// message no push sent is set apart as unexpected, not owed.
    pub fn delivered(&self, group: usize, txns: &[TxnHash]) -> u64 {
        self.delivered_from(group, txns, &[])
    }

    /// `delivered`, with each message's origin where the workers read one (`origins[i]` for
    /// `txns[i]`; missing or `None`: unknown): a retired message delivered again is found by it.
    pub fn delivered_from(
        &self,
        group: usize,
        txns: &[TxnHash],
        origins: &[Option<Origin>],
    ) -> u64 {
        let mut guard = self.book.lock().expect("ledger lock");
        let b = &mut *guard;
        let (mut again, mut owed) = (0, 0);
        for (i, t) in txns.iter().enumerate() {
            let origin = origins.get(i).and_then(Option::as_ref);
            revive(b, group, t, origin);
            if !b.fates[group].contains_key(t) && !b.owe_unknown && !b.sent.contains_key(t) {
                count_if(&mut again, !b.unexpected[group].insert(*t));
                continue;
            }
            count_if(&mut owed, owe(&mut b.fates[group], t));
            let f = b.fates[group].get_mut(t).expect("owed above");
            f.deliveries += 1;
            count_if(&mut again, f.deliveries > 1);
        }
        b.owed += owed;
        again
    }

    /// What the producers saw of `txn`'s push, for the history's checks.
    pub fn push_of(&self, txn: &TxnHash) -> Pushed {
        self.push_of_from(txn, None)
    }

    /// `push_of`, with the message's origin if known: a retired message is found by it.
    pub fn push_of_from(&self, txn: &TxnHash, origin: Option<&Origin>) -> Pushed {
        let b = self.book.lock().expect("ledger lock");
        let retired = |o: &Origin| b.retired.iter().any(|r| r.contains(o));
        match b.sent.get(txn) {
            Some(Sent::Failed) => Pushed::Failed,
            Some(Sent::InFlight) => Pushed::Booked,
            None if b.fates.iter().any(|f| f.contains_key(txn)) => Pushed::Booked,
            None if origin.is_some_and(retired) => Pushed::Booked,
            None => Pushed::Never,
        }
    }

    /// Records an ack answer; returns the first successful ack of the message, if this is it.
    pub fn answered(
        &self,
        group: usize,
        txn: &TxnHash,
        acked: bool,
        dead_lettered: bool,
        dropped: bool,
    ) -> Option<FirstAck> {
        let answer = Answer {
            acked,
            dead_lettered,
            dropped,
        };
        self.answered_from(group, txn, None, answer)
    }

    /// `answered`, with the message's origin if known: the pair retires once acked on its only
    /// delivery; an answer for a retired pair that only acks it again changes nothing.
    pub fn answered_from(
        &self,
        group: usize,
        txn: &TxnHash,
        origin: Option<&Origin>,
        answer: Answer,
    ) -> Option<FirstAck> {
        let mut guard = self.book.lock().expect("ledger lock");
        let b = &mut *guard;
        let live = b.fates[group].contains_key(txn);
        if !live && origin.is_some_and(|o| b.retired[group].contains(o)) {
            if !answer.dead_lettered && !answer.dropped {
                return None;
            }
            revive(b, group, txn, origin);
        } else if !live && b.unexpected[group].contains(txn) {
            return None;
        }
        let first = book_answer(b, group, txn, answer);
        retire_if_settled(b, group, txn, origin);
        first
    }

    /// Messages pushed so far (not multiplied by groups).
    pub fn pushed_count(&self) -> u64 {
        self.book.lock().expect("ledger lock").pushed
    }

    /// Distinct (message, group) pairs acked so far.
    pub fn acked_count(&self) -> u64 {
        self.book.lock().expect("ledger lock").acked
    }

    /// (message, group) obligations not yet acked, dead-lettered or dropped.
    pub fn backlog(&self) -> u64 {
        let b = self.book.lock().expect("ledger lock");
        b.owed.saturating_sub(b.resolved)
    }

    /// The running counts so far, under one lock.
    pub fn so_far(&self) -> SoFar {
        let b = self.book.lock().expect("ledger lock");
        SoFar {
            pushed: b.pushed,
            acked: b.acked,
            dead_lettered: b.dead_lettered,
            dropped: b.dropped,
            unresolved: b.owed.saturating_sub(b.resolved),
        }
    }

    /// Reconciles with the broker's DLQ listing (per group: the transactionId hashes it holds)
    /// and counts the audit. A message the client saw dead-lettered but the DLQ lacks is lost.
    /// Only a drained cell can prove a loss: without a finished drain, what is unresolved is
    /// counted apart as undrained (still in flight when the run was cut short).
    pub fn audit(&self, dlq: &[TxnSet], drained: bool) -> Audit {
        self.reconcile(Some(dlq), drained)
    }

    /// The audit when the broker's DLQ listing could not be read: a message the broker answered
    /// `dlq: true` for counts as dead-lettered but unconfirmed, not as lost, and the audit says
    /// it could not check the DLQ.
    pub fn audit_without_listing(&self, drained: bool) -> Audit {
        self.reconcile(None, drained)
    }

    fn reconcile(&self, dlq: Option<&[TxnSet]>, drained: bool) -> Audit {
        let b = self.book.lock().expect("ledger lock");
        let mut audit = reconcile(&b.fates, dlq, drained);
        // Each retired pair: owed, acked on exactly one delivery.
        let retired: u64 = b.retired.iter().map(Retired::count).sum();
        audit.pushed += retired;
        audit.acked += retired;
        audit.exactly_once += retired;
        audit
    }

    /// After a drain that did not finish: moves each unresolved obligation whose message the
    /// system's own storage still holds unfinished (`queued`, per group) from undrained to
    /// still queued. Such a message is neither delivered nor lost: it waits where it was put.
    pub fn count_still_queued(&self, audit: &mut Audit, queued: &[TxnSet]) {
        if audit.drained {
            return;
        }
        let b = self.book.lock().expect("ledger lock");
        for (fates, held) in b.fates.iter().zip(queued) {
            for (txn, f) in fates {
                if !f.resolved() && held.contains(txn) && audit.undrained > 0 {
                    audit.undrained -= 1;
                    audit.still_queued += 1;
                }
            }
        }
    }

    /// Every (message, group) obligation known and its fate, per group: what a shard leaves
    /// for the merge, which reconciles the shards' ledgers together.
    pub fn fates(&self) -> Vec<ByTxn<Fate>> {
        self.book.lock().expect("ledger lock").fates.clone()
    }
}

impl Fate {
    /// Adds what another ledger saw of the same (message, group): deliveries add up, and a
    /// resolution any ledger saw holds (a message one shard pushed may be acked by another).
    pub fn merge(&mut self, other: &Fate) {
        self.deliveries += other.deliveries;
        self.acked |= other.acked;
        self.dead_lettered |= other.dead_lettered;
        self.dropped |= other.dropped;
    }
}

/// Counts the audit of `fates` (per group) against the DLQ listing (`None`: it could not be
/// read); see `Ledger::audit`. Shared by a cell's own ledger and the merge of shards' ledgers.
pub fn reconcile(fates: &[ByTxn<Fate>], dlq: Option<&[TxnSet]>, drained: bool) -> Audit {
    let mut a = Audit {
        drained,
        ..Default::default()
    };
    for (g, fates) in fates.iter().enumerate() {
        let in_dlq = dlq.and_then(|d| d.get(g));
        for (txn, f) in fates {
            a.pushed += 1;
            a.duplicates += f.deliveries.saturating_sub(1) as u64;
            count_if(&mut a.exactly_once, f.deliveries == 1 && f.resolved());
            if in_dlq.is_some_and(|s| s.contains(txn)) {
                a.dead_lettered += 1;
            } else if dlq.is_none() && f.dead_lettered && !f.acked {
                a.dead_lettered += 1;
                a.dead_lettered_unconfirmed += 1;
            } else if f.acked {
                a.acked += 1;
            } else if f.dropped {
                a.dropped += 1;
            } else if drained {
                a.lost += 1;
            } else {
                a.undrained += 1;
            }
        }
    }
    a.dlq_unchecked = dlq.is_none();
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use ackbench_wire::txn_hash;

    fn h(t: &str) -> TxnHash {
        txn_hash(t)
    }

    #[test]
    fn an_undrained_message_its_queue_still_holds_is_still_queued_not_undrained() {
        let l = Ledger::new(1);
        l.pushed(&["a", "b", "c"].map(h));
        l.delivered(0, &[h("a")]);
        l.answered(0, &h("a"), true, false, false);
        let mut a = l.audit(&[TxnSet::default()], false);
        assert_eq!((a.acked, a.undrained, a.still_queued), (1, 2, 0));
        // The queue's table still holds b (and a, already acked: not counted again).
        let held: TxnSet = [h("a"), h("b")].into_iter().collect();
        l.count_still_queued(&mut a, std::slice::from_ref(&held));
        assert_eq!((a.acked, a.undrained, a.still_queued, a.lost), (1, 1, 1, 0));
        // A drained cell proves loss instead: nothing moves.
        let mut drained = l.audit(&[TxnSet::default()], true);
        l.count_still_queued(&mut drained, &[held]);
        assert_eq!((drained.lost, drained.still_queued), (2, 0));
    }

    #[test]
    fn every_obligation_is_accounted_for() {
        let l = Ledger::new(2);
        l.pushed(&["a", "b", "c", "d"].map(h));
        assert_eq!(l.backlog(), 8);
        assert_eq!(l.delivered(0, &[h("a")]), 0);
        assert_eq!(
            l.delivered(0, &[h("a"), h("b")]),
            1,
            "second delivery is a redelivery"
        );
        assert!(l.answered(0, &h("a"), true, false, false).is_some());
        assert!(
            l.answered(0, &h("a"), true, false, false).is_none(),
            "only the first ack counts"
        );
        l.answered(0, &h("b"), false, true, false);
        l.answered(0, &h("c"), false, false, true);
        for t in ["a", "b", "c", "d"] {
            l.answered(1, &h(t), true, false, false);
        }
        assert_eq!(l.backlog(), 1);
        let dlq = vec![TxnSet::from_iter([h("b")]), TxnSet::default()];
        let a = l.audit(&dlq, true);
        assert_eq!(
            a,
            Audit {
                pushed: 8,
                acked: 5,
                dead_lettered: 1,
                dropped: 1,
                lost: 1,
                undrained: 0,
                duplicates: 1,
                exactly_once: 1,
                drained: true,
                ..Default::default()
            }
        );
        assert!(!a.passed());
    }

    #[test]
    fn a_dlq_answer_without_a_dlq_row_is_lost() {
        let l = Ledger::new(1);
        l.pushed(&[h("x")]);
        l.answered(0, &h("x"), false, true, false);
        let a = l.audit(&[TxnSet::default()], true);
        assert_eq!(a.lost, 1);
    }

    #[test]
    fn without_a_dlq_listing_a_dlq_answer_is_unconfirmed_not_lost() {
        let l = Ledger::new(1);
        l.pushed(&["x", "y", "z"].map(h));
        l.answered(0, &h("x"), false, true, false);
        l.answered(0, &h("y"), true, false, false);
        let a = l.audit_without_listing(true);
        assert_eq!(
            (
                a.dead_lettered,
                a.dead_lettered_unconfirmed,
                a.acked,
                a.lost
            ),
            (1, 1, 1, 1),
            "z was never resolved: still lost"
        );
        assert!(a.dlq_unchecked);
        assert_eq!(
            a.unchecked_words(),
            "the DLQ listing could not be read, so 1 dead letters rest on the broker's dlq answers, unconfirmed"
        );
    }

    #[test]
    fn an_undrained_cell_counts_what_is_unresolved_apart_from_lost() {
        let l = Ledger::new(1);
        l.pushed(&["a", "b", "c"].map(h));
        l.answered(0, &h("a"), true, false, false);
        let a = l.audit(&[TxnSet::default()], false);
        assert_eq!((a.acked, a.lost, a.undrained), (1, 0, 2));
        assert!(a.passed(), "an undrained cell proves no loss");
        assert!(!a.proven(), "nor that nothing was lost");
    }

    /// A push whose answer was lost (e.g. to a killed broker) may have been stored: once
    /// delivered it is owed like any other.
    #[test]
    fn a_delivery_of_a_failed_push_is_owed_until_resolved() {
        let l = Ledger::new(1);
        l.pushed(&[h("a")]);
        l.sending(&[h("stored-but-unanswered")]);
        l.push_failed(&[h("stored-but-unanswered")]);
        assert_eq!(l.backlog(), 1, "a failed push owes nothing until delivered");
        l.delivered(0, &[h("a"), h("stored-but-unanswered")]);
        assert_eq!(l.push_of(&h("stored-but-unanswered")), Pushed::Failed);
        l.answered(0, &h("stored-but-unanswered"), true, false, false);
        assert_eq!(l.backlog(), 1, "`a` is still owed");
        l.answered(0, &h("a"), true, false, false);
        assert_eq!(l.backlog(), 0);
    }

    #[test]
    fn a_delivery_nobody_pushed_is_unexpected_and_owes_nothing() {
        let l = Ledger::new(1);
        l.pushed(&[h("a")]);
        l.sending(&[h("in-flight")]);
        assert_eq!(l.delivered(0, &[h("a"), h("invented"), h("in-flight")]), 0);
        assert_eq!(
            l.delivered(0, &[h("invented")]),
            1,
            "a redelivery all the same"
        );
        assert!(l.answered(0, &h("invented"), true, false, false).is_none());
        assert_eq!(l.push_of(&h("invented")), Pushed::Never);
        assert_eq!(
            l.push_of(&h("in-flight")),
            Pushed::Booked,
            "popped before its answer"
        );
        l.answered(0, &h("a"), true, false, false);
        l.answered(0, &h("in-flight"), true, false, false);
        assert_eq!(l.backlog(), 0, "the invented message is no obligation");
        let a = l.audit(&[TxnSet::default()], true);
        assert_eq!((a.pushed, a.acked, a.lost, a.exactly_once), (2, 2, 0, 2));
        let shard = Ledger::new(1);
        shard.owe_unknown_deliveries();
        shard.delivered(0, &[h("pushed-by-another-shard")]);
        assert_eq!(shard.backlog(), 1);
    }
}

/// The ledger retiring settled pairs: every anomaly injected after a message retired is still
/// caught by the audit (the history's checks on retired messages are the load generator's
/// `history::judging_retired`). Built at the release profile's optimisation even in tests (the
/// workspace's `Cargo.toml`), so they check the code the runs execute.
#[cfg(test)]
mod retiring_tests {
    use super::*;
    use crate::testing::{deliver, id, push, ACK, PREFIX};
    use ackbench_wire::txn_hash;

    fn answer(l: &Ledger, group: usize, t: &str, answer: Answer) -> Option<FirstAck> {
        l.answered_from(group, &txn_hash(t), Origin::of(t).as_ref(), answer)
    }

    /// Pushes `pushes` pushes of 10, delivers and acks each in `groups` groups: all retire.
    fn settled(groups: usize, pushes: u64) -> Ledger {
        let l = Ledger::new(groups);
        for seq in 0..pushes {
            let ids = push(&l, seq, 10);
            for g in 0..groups {
                assert_eq!(deliver(&l, g, &ids), 0);
                for t in &ids {
                    assert!(answer(&l, g, t, ACK).is_some());
                }
            }
        }
        l
    }

    #[test]
    fn a_backlog_that_settles_gives_its_tables_back() {
        let l = Ledger::new(1);
        // 200 000 messages in 20 000 pushes owed at once (a backlog), then delivered and acked.
        let pushes: Vec<Vec<String>> = (0..20_000u64).map(|seq| push(&l, seq, 10)).collect();
        let grown = {
            let b = l.book.lock().unwrap();
            (b.fates[0].capacity(), b.open_pushes.capacity())
        };
        assert!(grown.0 >= 200_000 && grown.1 >= 20_000, "{grown:?}");
        for ids in &pushes {
            assert_eq!(deliver(&l, 0, ids), 0);
            for t in ids {
                assert!(answer(&l, 0, t, ACK).is_some());
            }
        }
        assert_eq!(l.live_entries(), 0);
        let b = l.book.lock().unwrap();
        let left = (b.fates[0].capacity(), b.open_pushes.capacity());
        assert!(
            left.0 <= 4 * KEPT_SLOTS && left.1 <= 4 * KEPT_SLOTS,
            "grown to {grown:?}, left at {left:?}"
        );
    }

    #[test]
    fn a_long_stream_of_settled_messages_keeps_the_ledger_bounded() {
        let l = Ledger::new(2);
        let mut open = Vec::new();
        for seq in 0..20_000u64 {
            let ids = push(&l, seq, 10);
            // Acks arrive a few pushes late and out of order within a push.
            open.push(ids);
            if open.len() > 4 {
                let ids = open.remove(0);
                for g in 0..2 {
                    deliver(&l, g, &ids);
                    for t in ids.iter().rev() {
                        answer(&l, g, t, ACK);
                    }
                }
            }
            assert!(
                l.live_entries() <= 2 * 5 * 10,
                "push {seq}: {}",
                l.live_entries()
            );
            assert!(l.retired_pieces() <= 2 * 2, "push {seq}");
        }
        assert_eq!(l.backlog(), 2 * 4 * 10);
        let a = l.audit(&[TxnSet::default(), TxnSet::default()], true);
        assert_eq!((a.pushed, a.acked, a.lost), (400_000, 400_000 - 80, 80));
        assert_eq!((a.exactly_once, a.duplicates), (400_000 - 80, 0));
    }

    /// As in an open-loop run: several producers, each message popped alone and acked as soon
    /// as it came, in no particular order across pushes. The retired form stays a few pieces
    /// per push still open, whatever the run's length (run in a release build too: `.ci/run`).
    #[test]
    fn messages_retired_one_by_one_in_any_order_keep_the_retired_form_bounded() {
        let l = Ledger::new(1);
        let mut rng = fastrand::Rng::with_seed(3);
        let mut open: Vec<String> = Vec::new();
        for seq in 0..2_000u64 {
            for p in 0..8 {
                let prefix = format!("r1-{p}-");
                let ids: Vec<String> = (0..8).map(|i| format!("{prefix}{seq}-{i}")).collect();
                let hashes: Vec<TxnHash> = ids.iter().map(|t| txn_hash(t)).collect();
                l.sending(&hashes);
                l.pushed_from(Some(PushOrigin::new(&prefix, seq)), &hashes);
                open.extend(ids);
            }
            while open.len() > 300 {
                let t = open.swap_remove(rng.usize(..open.len()));
                assert_eq!(deliver(&l, 0, std::slice::from_ref(&t)), 0);
                assert!(answer(&l, 0, &t, ACK).is_some(), "{t}: a first ack");
            }
            // At most one piece per push with a message still open, and one range per producer.
            assert!(
                l.retired_pieces() <= 300 + 8,
                "push {seq}: {}",
                l.retired_pieces()
            );
        }
        let a = l.audit(&[TxnSet::default()], false);
        assert_eq!((a.pushed, a.acked), (2_000 * 64, 2_000 * 64 - 300));
    }

    #[test]
    fn the_audit_of_retired_messages_is_exact() {
        let l = settled(2, 3);
        assert_eq!(l.live_entries(), 0, "everything retired");
        // An open obligation among them is still lost.
        let open = push(&l, 3, 2);
        answer(&l, 0, &open[0], ACK);
        for t in &open {
            answer(&l, 1, t, ACK);
        }
        let a = l.audit(&[TxnSet::default(), TxnSet::default()], true);
        assert_eq!((a.pushed, a.acked, a.lost, a.exactly_once), (64, 63, 1, 60));
        assert!(!a.passed());
    }

    #[test]
    fn a_retired_message_delivered_again_is_a_redelivery_and_a_duplicate() {
        let l = settled(1, 2);
        assert_eq!(l.live_entries(), 0);
        assert_eq!(deliver(&l, 0, &[id(1, 3)]), 1, "a redelivery after its ack");
        assert!(answer(&l, 0, &id(1, 3), ACK).is_none(), "acked once only");
        assert_eq!(l.backlog(), 0);
        let a = l.audit(&[TxnSet::default()], true);
        assert_eq!(
            (a.pushed, a.acked, a.duplicates, a.exactly_once),
            (20, 20, 1, 19)
        );
        assert_eq!(deliver(&l, 0, &[id(1, 3)]), 1);
        assert_eq!(l.audit(&[TxnSet::default()], true).duplicates, 2);
    }

    #[test]
    fn a_retired_message_dead_lettered_afterwards_is_reconciled_with_the_dlq() {
        let l = settled(1, 1);
        let dlq = Answer {
            dead_lettered: true,
            ..Answer::default()
        };
        assert!(
            answer(&l, 0, &id(0, 4), ACK).is_none(),
            "an ack again: nothing"
        );
        assert_eq!(l.live_entries(), 0);
        answer(&l, 0, &id(0, 4), dlq);
        assert_eq!(l.so_far().dead_lettered, 1);
        let listing = [TxnSet::from_iter([txn_hash(&id(0, 4))])];
        let a = l.audit(&listing, true);
        assert_eq!((a.pushed, a.acked, a.dead_lettered), (10, 9, 1));
    }

    #[test]
    fn nothing_invented_passes_for_a_retired_message() {
        let l = settled(1, 2);
        // The same numbers written another way are another transactionId: invented.
        let forged = format!("{PREFIX}01-3");
        assert_eq!(Origin::of(&forged), None);
        assert_eq!(deliver(&l, 0, &[forged.clone(), id(7, 0)]), 0);
        assert_eq!(l.push_of(&txn_hash(&forged)), Pushed::Never);
        let retired = id(1, 3);
        assert_eq!(l.push_of(&txn_hash(&retired)), Pushed::Never, "no origin");
        assert_eq!(
            l.push_of_from(&txn_hash(&retired), Origin::of(&retired).as_ref()),
            Pushed::Booked
        );
        assert_eq!(
            l.push_of_from(&txn_hash(&id(7, 0)), Origin::of(&id(7, 0)).as_ref()),
            Pushed::Never,
            "a push never sent"
        );
        let a = l.audit(&[TxnSet::default()], true);
        assert_eq!(
            (a.pushed, a.acked),
            (20, 20),
            "invented messages owe nothing"
        );
    }

    #[test]
    fn a_shard_ledger_retires_nothing() {
        let l = Ledger::new(1);
        l.owe_unknown_deliveries();
        let ids = push(&l, 0, 3);
        deliver(&l, 0, &ids);
        for t in &ids {
            answer(&l, 0, t, ACK);
        }
        assert_eq!(l.fates()[0].len(), 3, "the merge reads every fate");
    }
}
