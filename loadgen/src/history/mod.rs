//! The history of one cell round: a compact record per delivery (who popped which message of
//! which producer, under which lease, when the pop and its ack were sent and answered, and what
//! the ack's answer said), kept beside the ledger so the guarantee checkers (`check`) can judge
//! order, lease exclusivity, fencing and ack durability after the drain, and so a run can export
//! it as JSON lines (`export`) for independent checkers.
//!
//! A record holds hashes, small integers and microsecond offsets from the history's start (a
//! monotonic clock), 112 bytes per delivery. Records are appended in the order pops are
//! answered. A long run judges them as it goes and drops the ones no later check needs
//! (`rolling`), so the history holds about a lease time's worth of deliveries, not the run's.

pub mod blocks;
pub mod check;
pub mod export;
pub mod rolling;

use std::sync::Mutex;
use std::time::Instant;

use ackbench_reports::results::{Audit, Promises};
use ackbench_wire::TxnHash;
use xxhash_rust::xxh3::xxh3_64;

use ackbench_ledger::retired::Origin;
use ackbench_ledger::Ledger;

/// Microseconds since the history's start; `NEVER` when the event did not happen.
pub type Micros = u64;

/// The time of an event that did not happen (an ack never sent, or never answered).
pub const NEVER: Micros = u64::MAX;

/// What a consumer answered for a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    Completed,
    Failed,
    Retry,
    Dlq,
}

impl Status {
    pub fn of(status: &str) -> Status {
        match status {
            "completed" => Status::Completed,
            "retry" => Status::Retry,
            "dlq" => Status::Dlq,
            _ => Status::Failed,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Retry => "retry",
            Status::Dlq => "dlq",
        }
    }
}

/// What the broker answered to the ack of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Verdict {
    /// No ack answer was read (not acked yet, the request failed, or the run stopped).
    Unanswered,
    /// Success that changed something: the broker took the ack.
    Accepted,
    /// Success as a no-op: the ack had already been applied.
    Noop,
    /// Refused (an invalid or expired lease, or another error).
    Refused,
    /// An ack sent again after an attempt without an answer, answered as a no-op or a refused
    /// lease: the client assumes the lost attempt settled it (it cannot tell).
    AssumedSettled,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Unanswered => "unanswered",
            Verdict::Accepted => "accepted",
            Verdict::Noop => "noop",
            Verdict::Refused => "refused",
            Verdict::AssumedSettled => "assumed_settled",
        }
    }
}

/// One delivery of one message to one consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    pub txn: TxnHash,
    /// `xxh3_64` of the partitionId.
    pub partition: u64,
    /// `xxh3_64` of the leaseId; 0 when the message came without one.
    pub lease: u64,
    /// `xxh3_64` of the producer's transactionId prefix (`{tag}-{producer}-`); 0 when the
    /// transactionId is not one this load generator writes.
    pub producer: u64,
    /// The producer's push number and the message's place in that push: the producer's order.
    pub seq: u64,
    pub index: u32,
    pub consumer: u32,
    /// The pop answer it came in (numbered across the cell) and its place in that answer.
    pub answer: u64,
    pub position: u32,
    pub group: u16,
    pub status: Status,
    /// The ack carried no leaseId (a lease-less ack).
    pub lease_less: bool,
    pub verdict: Verdict,
    /// The lease the consumer asked for or the queue grants, in milliseconds.
    pub lease_ms: u32,
    pub pop_sent: Micros,
    pub pop_answered: Micros,
    pub ack_sent: Micros,
    pub ack_answered: Micros,
}

/// What a consumer knows of one pop answer, for `History::popped`.
pub struct Pop {
    pub consumer: u32,
    pub group: u16,
    pub lease_ms: u32,
    pub sent: Instant,
    pub answered: Instant,
}

/// One message of a pop answer, for `History::popped`.
pub struct Popped<'a> {
    pub txn: TxnHash,
    pub transaction_id: &'a str,
    pub partition_id: &'a str,
    pub lease_id: Option<&'a str>,
}

/// An ack's answer for one delivery, for `History::answered`.
pub struct AckOutcome {
    pub status: Status,
    pub lease_less: bool,
    pub verdict: Verdict,
    pub sent: Instant,
    pub answered: Instant,
}

/// The deliveries of one cell round, appended as pops are answered.
pub struct History {
    start: Instant,
    records: Mutex<Records>,
    /// What the rolling judge found in the records it judged, and what it keeps of them.
    rolled: Mutex<rolling::Rolled>,
}

#[derive(Default)]
struct Records {
    /// The records not dropped, in record-number order.
    deliveries: blocks::Blocks,
    /// The record number of `deliveries[0]`: the records below it were judged and dropped.
    base: usize,
    answers: u64,
}

impl Records {
    fn get_mut(&mut self, record: usize) -> Option<&mut Delivery> {
        let i = record.checked_sub(self.base)?;
        self.deliveries.get_mut(i)
    }
}

impl Default for History {
    fn default() -> History {
        History {
            start: Instant::now(),
            records: Mutex::new(Records::default()),
            rolled: Mutex::new(rolling::Rolled::default()),
        }
    }
}

impl History {
    /// `at` as an offset from the history's start.
    pub fn micros(&self, at: Instant) -> Micros {
        at.saturating_duration_since(self.start).as_micros() as Micros
    }

    /// Records the messages of one pop answer; returns the record number of the first, the
    /// rest following in order (what `answered` takes).
    pub fn popped<'m>(&self, pop: &Pop, messages: impl Iterator<Item = Popped<'m>>) -> usize {
        let (sent, answered) = (self.micros(pop.sent), self.micros(pop.answered));
        let mut r = self.records.lock().expect("history lock");
        let answer = r.answers;
        r.answers += 1;
        let first = r.base + r.deliveries.len();
        for (i, m) in messages.enumerate() {
            let (producer, seq, index) = producer_order(m.transaction_id);
            r.deliveries.push(Delivery {
                txn: m.txn,
                partition: xxh3_64(m.partition_id.as_bytes()),
                lease: m.lease_id.map_or(0, |l| xxh3_64(l.as_bytes()).max(1)),
                producer,
                seq,
                index,
                consumer: pop.consumer,
                answer,
                position: i as u32,
                group: pop.group,
                status: Status::Completed,
                lease_less: false,
                verdict: Verdict::Unanswered,
                lease_ms: pop.lease_ms,
                pop_sent: sent,
                pop_answered: answered,
                ack_sent: NEVER,
                ack_answered: NEVER,
            });
        }
        first
    }

    /// Records the ack of record `record` (as numbered by `popped`).
    pub fn answered(&self, record: usize, ack: &AckOutcome) {
        let (sent, answered) = (self.micros(ack.sent), self.micros(ack.answered));
        let mut r = self.records.lock().expect("history lock");
        if let Some(d) = r.get_mut(record) {
            d.status = ack.status;
            d.lease_less = ack.lease_less;
            d.verdict = ack.verdict;
            d.ack_sent = d.ack_sent.min(sent);
            d.ack_answered = answered;
        }
    }

    /// Records that the ack of records `first ..` (one per status) was sent, before its
    /// answer (which may never come): the earliest moment the broker could release the lease.
    pub fn ack_sent(&self, first: usize, statuses: &[&str], lease_less: bool, sent: Instant) {
        let sent = self.micros(sent);
        let mut r = self.records.lock().expect("history lock");
        for (i, status) in statuses.iter().enumerate() {
            let Some(d) = r.get_mut(first + i) else {
                continue;
            };
            d.status = Status::of(status);
            d.lease_less = lease_less;
            d.ack_sent = d.ack_sent.min(sent);
        }
    }

    /// Runs `f` over every record not dropped, in the order pops were answered (a copy, taken
    /// under the lock).
    pub fn inspect<R>(&self, f: impl FnOnce(&[Delivery]) -> R) -> R {
        let r = self.records.lock().expect("history lock");
        let all: Vec<Delivery> = r.deliveries.iter().copied().collect();
        f(&all)
    }

    /// How many records are held, and how many were judged and dropped.
    pub fn held_and_dropped(&self) -> (usize, usize) {
        let r = self.records.lock().expect("history lock");
        (r.deliveries.len(), r.base)
    }
}

/// Checks the cell round's history against what the ledger saw of the pushes and writes the
/// findings into `audit` (with those the rolling judge found in the records it dropped), judged
/// by what the target `promises`; `queue_lease_ms` is the queue's lease time (no pop's lease
/// is assumed longer: a broker may grant it whatever a pop asks).
pub fn judge(
    history: &History,
    ledger: &Ledger,
    audit: &mut Audit,
    promises: Promises,
    queue_lease_ms: u32,
) {
    let pushed = |d: &Delivery| ledger.push_of_from(&d.txn, origin(d).as_ref());
    let found = history.judge_the_rest(&pushed, queue_lease_ms);
    audit.add_guarantees(&found);
    audit.promises = promises;
}

/// The producer, push number and place in the push of a transactionId this load generator
/// wrote (`{tag}-{producer}-{seq}-{index}`, numbers in canonical form); `(0, 0, 0)` for any
/// other.
pub fn producer_order(transaction_id: &str) -> (u64, u64, u32) {
    Origin::of(transaction_id).map_or((0, 0, 0), |o| (o.producer, o.seq, o.index))
}

/// The origin of a delivery's message, as the ledger knows it (`None`: no producer of ours).
pub fn origin(d: &Delivery) -> Option<Origin> {
    (d.producer != 0).then_some(Origin {
        producer: d.producer,
        seq: d.seq,
        index: d.index,
    })
}

#[cfg(test)]
mod judging_retired;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_stays_compact() {
        assert!(std::mem::size_of::<Delivery>() <= 112);
    }

    #[test]
    fn the_producer_and_its_order_come_from_the_transaction_id() {
        let (p, seq, i) = producer_order("none_t1_r1-3-17-4");
        assert_eq!((seq, i), (17, 4));
        assert_eq!(p, producer_order("none_t1_r1-3-0-0").0, "one producer");
        assert_ne!(p, producer_order("none_t1_r1-pre-3-0-0").0, "prefill apart");
        assert_eq!(producer_order("invented"), (0, 0, 0));
        assert_eq!(producer_order("a-b-c"), (0, 0, 0));
    }

    #[test]
    fn an_ack_is_recorded_on_its_delivery() {
        let h = History::default();
        let now = Instant::now();
        let pop = Pop {
            consumer: 2,
            group: 1,
            lease_ms: 3000,
            sent: now,
            answered: now,
        };
        let m = |t: &'static str| Popped {
            txn: ackbench_wire::txn_hash(t),
            transaction_id: t,
            partition_id: "P",
            lease_id: Some("L"),
        };
        let first = h.popped(&pop, [m("x-1-0-0"), m("x-1-0-1")].into_iter());
        h.answered(
            first + 1,
            &AckOutcome {
                status: Status::Retry,
                lease_less: false,
                verdict: Verdict::Accepted,
                sent: now,
                answered: now,
            },
        );
        let d = h.inspect(|d| d.to_vec());
        assert_eq!(
            (d[0].verdict, d[1].verdict),
            (Verdict::Unanswered, Verdict::Accepted)
        );
        assert_eq!(
            (d[1].status, d[1].position, d[1].index),
            (Status::Retry, 1, 1)
        );
        assert_eq!(d[0].ack_sent, NEVER);
        assert_ne!(d[0].lease, 0);
    }
}
