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

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

use ackbench_reports::results::Audit;
use ackbench_wire::TxnHash;

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
        let mut b = self.book.lock().expect("ledger lock");
        b.pushed += txns.len() as u64;
        for t in txns {
            b.sent.remove(t);
        }
        let mut owed = 0;
        for fates in &mut b.fates {
            fates.reserve(txns.len());
            for t in txns {
                owed += u64::from(owe(fates, t));
            }
        }
        b.owed += owed;
    }

    /// Records the deliveries of one popped batch; returns how many were redeliveries. A
    /// message no push sent is set apart as unexpected, not owed.
    pub fn delivered(&self, group: usize, txns: &[TxnHash]) -> u64 {
        let mut guard = self.book.lock().expect("ledger lock");
        let b = &mut *guard;
        let (mut again, mut owed) = (0, 0);
        for t in txns {
            if !b.fates[group].contains_key(t) && !b.owe_unknown && !b.sent.contains_key(t) {
                again += u64::from(!b.unexpected[group].insert(*t));
                continue;
            }
            owed += u64::from(owe(&mut b.fates[group], t));
            let f = b.fates[group].get_mut(t).expect("owed above");
            f.deliveries += 1;
            again += u64::from(f.deliveries > 1);
        }
        b.owed += owed;
        again
    }

    /// What the producers saw of `txn`'s push, for the history's checks.
    pub fn push_of(&self, txn: &TxnHash) -> Pushed {
        let b = self.book.lock().expect("ledger lock");
        match b.sent.get(txn) {
            Some(Sent::Failed) => Pushed::Failed,
            Some(Sent::InFlight) => Pushed::Booked,
            None if b.fates.iter().any(|f| f.contains_key(txn)) => Pushed::Booked,
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
        let mut b = self.book.lock().expect("ledger lock");
        if !b.fates[group].contains_key(txn) && b.unexpected[group].contains(txn) {
            return None;
        }
        b.owed += u64::from(owe(&mut b.fates[group], txn));
        let f = b.fates[group].get_mut(txn).expect("owed above");
        let was_resolved = f.resolved();
        let first_ack = acked && !f.acked;
        let first_dead_letter = dead_lettered && !f.dead_lettered;
        let first_drop = dropped && !f.dropped;
        f.acked |= acked;
        f.dead_lettered |= dead_lettered;
        f.dropped |= dropped;
        let now_resolved = f.resolved();
        let deliveries = f.deliveries;
        if !was_resolved && now_resolved {
            b.resolved += 1;
        }
        if first_ack {
            b.acked += 1;
        }
        b.dead_lettered += u64::from(first_dead_letter);
        b.dropped += u64::from(first_drop);
        first_ack.then_some(FirstAck { deliveries })
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
        reconcile(&self.book.lock().expect("ledger lock").fates, dlq, drained)
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
            a.exactly_once += u64::from(f.deliveries == 1 && f.resolved());
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
