//! The guarantee checkers: a history of deliveries in, findings out, nothing else read. Each
//! judges with the client's own clock and only what the client can prove, so a correct broker,
//! however its answers are timed, is never accused:
//!
//! - a broker grants a lease somewhere between the pop's send and its answer, and cannot
//!   release it before the consumer's first ack under it was sent nor expire it before the pop's
//!   send plus the lease time (less `CLOCK_SLACK`), taken as the shorter of the lease the pop
//!   asked for and the queue's lease time (a broker may grant the queue's whatever a pop asks:
//!   Queen's servers ignore `leaseSeconds`);
//! - a broker applies an ack somewhere between its send and its answer.
//!
//! Every check works within one (group, partition) window or one (group, message), and counts
//! a finding against one record (the later pop, the accepted ack, the redelivery), so a part of
//! a history can be judged on its own (`check_part`): only the findings of the pop answers it
//! owns count, the records around them are context (see `rolling`).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use ackbench_reports::results::{Audit, EXAMPLES_KEPT};
use ackbench_wire::TxnHash;

use super::{Delivery, Micros, Status, Verdict, NEVER};
use ackbench_ledger::{ByTxn, Pushed, TxnSet};

/// How much earlier than the client's bound a correct broker may expire a lease: its clock
/// (PostgreSQL's `now()`, the transaction's start) and the client's monotonic clock differ by
/// scheduling delays and clock adjustments.
pub const CLOCK_SLACK: Micros = 100_000;

/// The guarantee counts of one history and a few first examples of each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    pub unexpected: u64,
    pub recovered: u64,
    pub order_violations: u64,
    pub reorderings_across_leases: u64,
    pub lease_overlaps: u64,
    pub stale_acks_accepted: u64,
    pub ack_regressions: u64,
    pub examples: BTreeMap<String, Vec<String>>,
}

impl Findings {
    /// The findings as an audit's guarantee counts and examples (a checked history's; its
    /// ledger counts left at zero), to be added with `Audit::add_guarantees`.
    pub fn audit(self) -> Audit {
        Audit {
            history_checked: true,
            unexpected: self.unexpected,
            recovered: self.recovered,
            order_violations: self.order_violations,
            reorderings_across_leases: self.reorderings_across_leases,
            lease_overlaps: self.lease_overlaps,
            stale_acks_accepted: self.stale_acks_accepted,
            ack_regressions: self.ack_regressions,
            examples: self.examples,
            ..Audit::default()
        }
    }

    fn count(&mut self, name: &'static str, example: impl FnOnce() -> String) {
        let counter = match name {
            "unexpected" => &mut self.unexpected,
            "recovered" => &mut self.recovered,
            "order_violations" => &mut self.order_violations,
            "reorderings_across_leases" => &mut self.reorderings_across_leases,
            "lease_overlaps" => &mut self.lease_overlaps,
            "stale_acks_accepted" => &mut self.stale_acks_accepted,
            "ack_regressions" => &mut self.ack_regressions,
            _ => unreachable!("unknown finding {name}"),
        };
        *counter += 1;
        let kept = self.examples.entry(name.to_string()).or_default();
        if kept.len() < EXAMPLES_KEPT {
            kept.push(example());
        }
    }
}

/// The pop answers (by number) whose findings a check counts; the other records it is given
/// are context, judged before or to be judged later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned(pub Range<u64>);

impl Owned {
    pub fn all() -> Owned {
        Owned(0..u64::MAX)
    }

    fn owns(&self, answer: u64) -> bool {
        self.0.contains(&answer)
    }
}

/// The (group, message) pairs already counted by the findings counted once per pair, kept
/// across the parts of a history judged one after another (anomalies only: it stays small).
#[derive(Debug, Clone, Default)]
pub struct Counted {
    pushes: HashMap<u16, TxnSet>,
    regressions: HashMap<u16, TxnSet>,
}

/// Checks `history` (records in any order); `pushed` says what became of a message's push;
/// `queue_lease_ms` is the queue's lease time, the longest lease the checks assume a pop got.
pub fn check(
    history: &[Delivery],
    pushed: &dyn Fn(&TxnHash) -> Pushed,
    queue_lease_ms: u32,
) -> Findings {
    check_deliveries(history, &|d: &Delivery| pushed(&d.txn), queue_lease_ms)
}

/// `check`, asking what became of a message's push by its delivery (whose origin finds a
/// message the ledger retired).
pub fn check_deliveries(
    history: &[Delivery],
    pushed: &dyn Fn(&Delivery) -> Pushed,
    queue_lease_ms: u32,
) -> Findings {
    let mut counted = Counted::default();
    check_part(history, &Owned::all(), &mut counted, pushed, queue_lease_ms)
}

/// `check_deliveries` counting only the findings of the pop answers `owned` names, and of the
/// pairs `counted` does not hold yet (which it then holds).
pub fn check_part(
    history: &[Delivery],
    owned: &Owned,
    counted: &mut Counted,
    pushed: &dyn Fn(&Delivery) -> Pushed,
    queue_lease_ms: u32,
) -> Findings {
    let mut f = Findings::default();
    check_pushes(history, owned, &mut counted.pushes, pushed, &mut f);
    check_regressions(history, owned, &mut counted.regressions, &mut f);
    for window in windows(history).values() {
        let holds = holds(window, queue_lease_ms);
        check_order(window, owned, pushed, &mut f);
        check_overlaps(&holds, owned, &mut f);
        check_stale_acks(window, &holds, owned, &mut f);
    }
    f
}

/// A message as the examples name it.
fn message(d: &Delivery) -> String {
    let hash: String = d.txn[..6].iter().map(|b| format!("{b:02x}")).collect();
    match d.producer {
        0 => format!("message {hash}"),
        p => format!(
            "message {hash} (push {} #{} of producer {:04x})",
            d.seq,
            d.index,
            p & 0xffff
        ),
    }
}

fn secs(t: Micros) -> String {
    format!("{:.3} s", t as f64 / 1e6)
}

/// `unexpected` and `recovered`: distinct (group, message) pairs delivered that no push sent,
/// or whose push failed on the client; each counted against its first delivery.
fn check_pushes(
    history: &[Delivery],
    owned: &Owned,
    counted: &mut HashMap<u16, TxnSet>,
    pushed: &dyn Fn(&Delivery) -> Pushed,
    f: &mut Findings,
) {
    let mut seen: HashMap<u16, TxnSet> = HashMap::new();
    for d in history {
        if !seen.entry(d.group).or_default().insert(d.txn) || !owned.owns(d.answer) {
            continue;
        }
        let pushed = pushed(d);
        if pushed == Pushed::Booked || !counted.entry(d.group).or_default().insert(d.txn) {
            continue;
        }
        match pushed {
            Pushed::Booked => {}
            Pushed::Never => f.count("unexpected", || {
                format!(
                    "{} delivered to consumer {} at {} was never pushed",
                    message(d),
                    d.consumer,
                    secs(d.pop_answered)
                )
            }),
            Pushed::Failed => f.count("recovered", || {
                format!("{} was delivered though its push failed", message(d))
            }),
        }
    }
}

/// `ack_regressions`: (group, message) pairs delivered by a pop sent after an ack of theirs
/// (`completed`, answered success that changed something) was answered: the broker had
/// committed the ack before that pop reached it. Acks the client sent again and assumed
/// settled are not the broker's word, and count nothing; nor do `completed` items placed after
/// a nack of their partition in the same request (`lowest_signals`). Counted against the
/// redelivery.
fn check_regressions(
    history: &[Delivery],
    owned: &Owned,
    counted: &mut HashMap<u16, TxnSet>,
    f: &mut Findings,
) {
    let signals = lowest_signals(history);
    let mut acked: HashMap<(u16, TxnHash), Micros> = HashMap::new();
    for d in history {
        let request = (d.answer, d.partition, d.ack_sent);
        let clamped = signals.get(&request).is_some_and(|&p| p < d.position);
        if d.status == Status::Completed && d.verdict == Verdict::Accepted && !clamped {
            let at = acked.entry((d.group, d.txn)).or_insert(NEVER);
            *at = (*at).min(d.ack_answered);
        }
    }
    for d in history {
        let Some(&at) = acked.get(&(d.group, d.txn)) else {
            continue;
        };
        if d.pop_sent > at
            && owned.owns(d.answer)
            && counted.entry(d.group).or_default().insert(d.txn)
        {
            f.count("ack_regressions", || {
                format!(
                    "{} acked with success (answered at {}) was delivered again to consumer {} by a pop sent at {}",
                    message(d),
                    secs(at),
                    d.consumer,
                    secs(d.pop_sent)
                )
            });
        }
    }
}

/// Per ack request (its pop answer, partition and send time), the lowest place of a `failed`,
/// `retry` or `dlq` item: the ack contract clamps the cursor below that signal, so `completed`
/// items placed after it in the same request redeliver though answered success.
fn lowest_signals(history: &[Delivery]) -> HashMap<(u64, u64, Micros), u32> {
    let mut signals: HashMap<(u64, u64, Micros), u32> = HashMap::new();
    for d in history {
        if d.status != Status::Completed && d.ack_sent != NEVER {
            let lowest = signals
                .entry((d.answer, d.partition, d.ack_sent))
                .or_insert(d.position);
            *lowest = (*lowest).min(d.position);
        }
    }
    signals
}

/// The history's records by (group, partition): their numbers, in the history's order.
fn windows(history: &[Delivery]) -> HashMap<(u16, u64), Vec<&Delivery>> {
    let mut w: HashMap<(u16, u64), Vec<&Delivery>> = HashMap::new();
    for d in history {
        w.entry((d.group, d.partition)).or_default().push(d);
    }
    w
}

/// One consumer's hold of a (group, partition): one pop answer's messages of it.
#[derive(Debug, Clone, Copy)]
struct Hold {
    consumer: u32,
    answer: u64,
    lease: u64,
    pop_sent: Micros,
    pop_answered: Micros,
    /// Until when the broker certainly kept the lease: the first ack sent under it, or the
    /// pop's send plus the lease time (the shorter of the one asked for and the queue's) less
    /// `CLOCK_SLACK`, whichever is earlier.
    certain_until: Micros,
}

/// The holds of one window, by pop send time; no lease is assumed longer than `queue_lease_ms`.
fn holds(window: &[&Delivery], queue_lease_ms: u32) -> Vec<Hold> {
    let mut by_answer: BTreeMap<u64, Hold> = BTreeMap::new();
    for d in window {
        let lease = d.lease_ms.min(queue_lease_ms) as Micros * 1000;
        let expiry = (d.pop_sent + lease).saturating_sub(CLOCK_SLACK);
        let h = by_answer.entry(d.answer).or_insert(Hold {
            consumer: d.consumer,
            answer: d.answer,
            lease: d.lease,
            pop_sent: d.pop_sent,
            pop_answered: d.pop_answered,
            certain_until: expiry,
        });
        h.certain_until = h.certain_until.min(d.ack_sent);
    }
    let mut holds: Vec<Hold> = by_answer.into_values().collect();
    holds.sort_by_key(|h| (h.pop_sent, h.answer));
    holds
}

/// `lease_overlaps`: a pop by another consumer that was sent after a hold's pop was answered
/// and answered before the hold could have ended: the broker granted it while the first lease
/// was certainly live. Each such pop counts once.
fn check_overlaps(holds: &[Hold], owned: &Owned, f: &mut Findings) {
    let mut live: Vec<&Hold> = Vec::new();
    for b in holds {
        live.retain(|a| a.certain_until > b.pop_sent);
        let overlapped = live.iter().find(|a| {
            a.consumer != b.consumer
                && a.pop_answered <= b.pop_sent
                && b.pop_answered < a.certain_until
        });
        if let Some(a) = overlapped.filter(|_| owned.owns(b.answer)) {
            f.count("lease_overlaps", || {
                format!(
                    "consumer {} took the partition by a pop sent at {} and answered at {}, while consumer {} held it from {} until at least {}",
                    b.consumer,
                    secs(b.pop_sent),
                    secs(b.pop_answered),
                    a.consumer,
                    secs(a.pop_answered),
                    secs(a.certain_until)
                )
            });
        }
        live.push(b);
    }
}

/// `stale_acks_accepted`: an ack carrying its lease, answered success that changed something,
/// sent after another consumer's pop under another lease was answered, that pop having been sent
/// after this delivery's pop was answered: the lease had certainly passed before the ack
/// reached the broker. Each such ack of a message counts once.
fn check_stale_acks(window: &[&Delivery], holds: &[Hold], owned: &Owned, f: &mut Findings) {
    for d in window {
        if d.verdict != Verdict::Accepted || d.lease_less || d.lease == 0 || !owned.owns(d.answer) {
            continue;
        }
        // Holds are sorted by pop send: only those sent between this pop's answer and the ack's
        // send can qualify.
        let from = holds.partition_point(|b| b.pop_sent < d.pop_answered);
        let successor = holds[from..]
            .iter()
            .take_while(|b| b.pop_sent < d.ack_sent)
            .find(|b| {
                b.consumer != d.consumer
                    && b.lease != d.lease
                    && b.lease != 0
                    && b.pop_answered < d.ack_sent
            });
        if let Some(b) = successor {
            f.count("stale_acks_accepted", || {
                format!(
                    "consumer {}'s ack of {} sent at {} was accepted, though consumer {} had taken the partition under another lease by {}",
                    d.consumer,
                    message(d),
                    secs(d.ack_sent),
                    b.consumer,
                    secs(b.pop_answered)
                )
            });
        }
    }
}

/// `order_violations` and `reorderings_across_leases`, over the first deliveries of one window
/// (a message's deliveries all fall in its partition's window) by producer. Messages of a
/// failed push, or of no known producer, are not judged.
fn check_order(
    window: &[&Delivery],
    owned: &Owned,
    pushed: &dyn Fn(&Delivery) -> Pushed,
    f: &mut Findings,
) {
    let mut firsts: ByTxn<&Delivery> = ByTxn::default();
    for d in window {
        let first = firsts.entry(d.txn).or_insert(d);
        if (d.pop_answered, d.answer) < (first.pop_answered, first.answer) {
            *first = d;
        }
    }
    let mut by_producer: HashMap<u64, Vec<&Delivery>> = HashMap::new();
    for d in firsts.into_values() {
        if d.producer != 0 && pushed(d) == Pushed::Booked {
            by_producer.entry(d.producer).or_default().push(d);
        }
    }
    for deliveries in by_producer.values_mut() {
        order_within_answers(deliveries, owned, f);
        order_across_answers(deliveries, owned, f);
    }
}

/// Within one pop answer, a message placed after one of the same producer pushed later.
fn order_within_answers(deliveries: &mut [&Delivery], owned: &Owned, f: &mut Findings) {
    deliveries.sort_by_key(|d| (d.answer, d.position));
    let mut highest: Option<&Delivery> = None;
    for d in deliveries.iter() {
        match highest {
            Some(h) if h.answer == d.answer && (h.seq, h.index) > (d.seq, d.index) => {
                if !owned.owns(d.answer) {
                    continue;
                }
                f.count("order_violations", || {
                    format!(
                        "{} came after {} in one pop answer to consumer {}",
                        message(d),
                        message(h),
                        d.consumer
                    )
                });
            }
            _ => highest = Some(d),
        }
    }
}

/// Across pop answers, a message first delivered by a pop sent after a later message of the
/// same producer had been answered: counted apart, allowed.
fn order_across_answers(deliveries: &mut [&Delivery], owned: &Owned, f: &mut Findings) {
    deliveries.sort_by_key(|d| std::cmp::Reverse((d.seq, d.index)));
    let mut earliest_later: Option<&Delivery> = None;
    for d in deliveries.iter() {
        if let Some(l) = earliest_later {
            if l.pop_answered < d.pop_sent && owned.owns(d.answer) {
                f.count("reorderings_across_leases", || {
                    format!(
                        "{} was first delivered by a pop sent at {}, after {} had been delivered at {}",
                        message(d),
                        secs(d.pop_sent),
                        message(l),
                        secs(l.pop_answered)
                    )
                });
            }
        }
        if earliest_later.is_none_or(|l| d.pop_answered < l.pop_answered) {
            earliest_later = Some(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ackbench_wire::txn_hash;

    const MS: Micros = 1000;
    /// The lease every test delivery asks for, and the queue's lease time in the tests that do
    /// not set one apart.
    const LEASE_MS: u32 = 1000;

    /// Message `seq` of producer 7 (one message per push), popped by `consumer` in answer
    /// `answer` at `position`, the pop sent at `sent` and answered at `answered` (ms), under
    /// lease `lease` of 1 s; not acked.
    fn d(
        seq: u64,
        consumer: u32,
        answer: u64,
        position: u32,
        sent: u64,
        answered: u64,
    ) -> Delivery {
        Delivery {
            txn: txn_hash(&format!("m{seq}")),
            partition: 1,
            lease: 100 + answer,
            producer: 7,
            seq,
            index: 0,
            consumer,
            answer,
            position,
            group: 0,
            status: Status::Completed,
            lease_less: false,
            verdict: Verdict::Unanswered,
            lease_ms: LEASE_MS,
            pop_sent: sent * MS,
            pop_answered: answered * MS,
            ack_sent: NEVER,
            ack_answered: NEVER,
        }
    }

    /// `d` acked with `verdict`, the ack sent at `sent` and answered at `answered` (ms).
    fn acked(mut d: Delivery, verdict: Verdict, sent: u64, answered: u64) -> Delivery {
        d.verdict = verdict;
        d.ack_sent = sent * MS;
        d.ack_answered = answered * MS;
        d
    }

    fn booked(_: &TxnHash) -> Pushed {
        Pushed::Booked
    }

    fn clean(f: &Findings) -> bool {
        *f == Findings::default()
    }

    #[test]
    fn a_correct_broker_with_adversarial_timing_is_not_accused() {
        let ok = Verdict::Accepted;
        let history = [
            // Consumer 1 holds answer 0 from 100 ms and acks at 500 ms; consumer 2's long poll,
            // sent before that ack and answered after it, may have been granted after it.
            acked(d(0, 1, 0, 0, 0, 100), ok, 500, 520),
            acked(d(1, 1, 0, 1, 0, 100), ok, 500, 520),
            acked(d(2, 2, 1, 0, 200, 600), ok, 700, 720),
            // Consumer 3's pop sent before consumer 2's was answered: it may have been granted
            // first, so neither holds the partition for certain against the other.
            acked(d(3, 3, 2, 0, 590, 800), ok, 810, 820),
            // Consumer 1 stalls past its lease (pop at 1000 ms, 1 s lease); consumer 2 pops
            // within the clock slack of the expiry; consumer 1's late ack is refused.
            acked(d(4, 1, 3, 0, 1000, 1010), Verdict::Refused, 2100, 2110),
            acked(d(4, 2, 4, 0, 1950, 1960), ok, 1970, 1980),
            // An ack sent just before another consumer's pop was answered may be accepted.
            acked(d(5, 1, 5, 0, 3000, 3010), ok, 4000, 4050),
            acked(d(5, 2, 6, 0, 3990, 4010), Verdict::Noop, 4020, 4030),
            // A pop sent before an ack was answered may see the message again.
            acked(d(6, 3, 7, 0, 5000, 5010), ok, 5500, 5700),
            acked(d(6, 2, 8, 0, 5600, 5650), Verdict::Noop, 5660, 5670),
            // A retry accepted, and a resent ack assumed settled, redeliver without regression.
            acked(d(7, 3, 9, 0, 6000, 6010), ok, 6020, 6030),
            acked(
                d(7, 3, 10, 0, 7100, 7110),
                Verdict::AssumedSettled,
                7120,
                7130,
            ),
            d(7, 2, 11, 0, 8300, 8310),
        ];
        let mut history = history.to_vec();
        history[10].status = Status::Retry;
        let f = check(&history, &booked, LEASE_MS);
        assert!(clean(&f), "{f:#?}");
    }

    #[test]
    fn concurrent_pops_prove_no_reordering_and_a_failed_push_is_not_judged() {
        // Answer 1 (message 1) overlaps answer 0 (message 0) in time: no order is proven.
        let history = [d(1, 2, 1, 0, 0, 50), d(0, 1, 0, 0, 10, 60)];
        assert!(clean(&check(&history, &booked, LEASE_MS)));
        // Messages of a failed push out of order are not judged (only counted recovered).
        let swapped = [d(1, 1, 0, 0, 0, 10), d(0, 1, 0, 1, 0, 10)];
        let failed = txn_hash("m0");
        let pushed = |t: &TxnHash| match *t == failed {
            true => Pushed::Failed,
            false => Pushed::Booked,
        };
        let f = check(&swapped, &pushed, LEASE_MS);
        assert_eq!((f.order_violations, f.recovered), (0, 1), "{f:#?}");
    }

    #[test]
    fn a_swap_within_one_answer_is_an_order_violation() {
        let history = [
            d(1, 1, 0, 0, 0, 10),
            d(0, 1, 0, 1, 0, 10),
            d(2, 1, 0, 2, 0, 10),
        ];
        let f = check(&history, &booked, LEASE_MS);
        assert_eq!(f.order_violations, 1, "{f:#?}");
        assert!(f.examples["order_violations"][0].contains("came after"));
        // A redelivery out of order is no first delivery.
        let again = [
            d(0, 1, 0, 0, 0, 10),
            d(1, 1, 0, 1, 0, 10),
            d(0, 1, 1, 0, 20, 30),
        ];
        assert_eq!(check(&again, &booked, LEASE_MS).order_violations, 0);
    }

    #[test]
    fn a_later_message_answered_before_an_earlier_was_asked_for_is_a_reordering() {
        let history = [d(1, 2, 1, 0, 0, 10), d(0, 1, 0, 0, 20, 30)];
        let f = check(&history, &booked, LEASE_MS);
        assert_eq!(
            (f.reorderings_across_leases, f.order_violations),
            (1, 0),
            "{f:#?}"
        );
    }

    #[test]
    fn a_shared_answer_is_a_lease_overlap() {
        let a = acked(d(0, 1, 0, 0, 0, 10), Verdict::Accepted, 300, 310);
        let mut b = acked(d(0, 2, 1, 0, 50, 60), Verdict::Noop, 320, 330);
        b.lease = a.lease;
        let f = check(&[a, b], &booked, LEASE_MS);
        assert_eq!(f.lease_overlaps, 1, "{f:#?}");
        assert_eq!(
            f.stale_acks_accepted, 0,
            "one lease, so no fencing to judge"
        );
        // The same consumer popping again overlaps nothing.
        let mut same = b;
        same.consumer = 1;
        assert_eq!(check(&[a, same], &booked, LEASE_MS).lease_overlaps, 0);
    }

    #[test]
    fn a_pop_granted_the_queues_shorter_lease_is_judged_by_it() {
        // Consumer 1 asks for a 4 s lease and stalls; the broker grants the queue's 1 s (as
        // Queen's servers do, ignoring leaseSeconds) and hands the partition to consumer 2 at
        // 1.2 s; consumer 1's late ack is refused. Correct for a 1 s queue lease.
        let mut stalled = acked(d(0, 1, 0, 0, 0, 10), Verdict::Refused, 5000, 5010);
        stalled.lease_ms = 4 * LEASE_MS;
        let mut taker = acked(d(0, 2, 1, 0, 1200, 1210), Verdict::Accepted, 1220, 1230);
        taker.lease_ms = 4 * LEASE_MS;
        let history = [stalled, taker];
        let f = check(&history, &booked, LEASE_MS);
        assert!(clean(&f), "{f:#?}");
        // With a queue lease as long as the one asked for, the same take-over is an overlap.
        let f = check(&history, &booked, 4 * LEASE_MS);
        assert_eq!(f.lease_overlaps, 1, "{f:#?}");
    }

    #[test]
    fn an_ack_accepted_after_the_lease_passed_is_stale() {
        let a = acked(d(0, 1, 0, 0, 0, 10), Verdict::Accepted, 1500, 1510);
        let b = acked(d(0, 2, 1, 0, 1200, 1210), Verdict::Accepted, 1220, 1230);
        let f = check(&[a, b], &booked, LEASE_MS);
        assert_eq!((f.stale_acks_accepted, f.lease_overlaps), (1, 0), "{f:#?}");
        let mut lease_less = a;
        lease_less.lease_less = true;
        assert!(
            clean(&check(&[lease_less, b], &booked, LEASE_MS)),
            "lease-less acks are not fenced"
        );
    }

    #[test]
    fn a_delivery_after_an_accepted_ack_is_a_regression() {
        let a = acked(d(0, 1, 0, 0, 0, 10), Verdict::Accepted, 20, 30);
        let b = acked(d(0, 2, 1, 0, 1200, 1210), Verdict::Accepted, 1220, 1230);
        let again = d(0, 3, 2, 0, 1300, 1310);
        let f = check(&[a, b, again], &booked, LEASE_MS);
        assert_eq!(f.ack_regressions, 1, "one message, counted once: {f:#?}");
    }

    #[test]
    fn completed_items_after_a_nack_in_one_request_redeliver_without_regression() {
        let ok = Verdict::Accepted;
        let mut nack = acked(d(0, 1, 0, 0, 0, 10), ok, 20, 30);
        nack.status = Status::Dlq;
        let after = acked(d(1, 1, 0, 1, 0, 10), ok, 20, 30);
        let again = acked(d(1, 1, 1, 0, 40, 50), ok, 60, 70);
        assert!(clean(&check(&[nack, after, again], &booked, LEASE_MS)));
        // The same items acked in separate requests: the completed one's success is its own.
        let alone = acked(d(1, 1, 0, 1, 0, 10), ok, 25, 30);
        let f = check(&[nack, alone, again], &booked, LEASE_MS);
        assert_eq!(f.ack_regressions, 1, "{f:#?}");
    }

    #[test]
    fn a_delivery_nobody_pushed_is_unexpected_once_per_group() {
        let mut other_group = d(0, 2, 1, 0, 0, 10);
        other_group.group = 1;
        let history = [d(0, 1, 0, 0, 0, 10), d(0, 1, 2, 0, 20, 30), other_group];
        let f = check(&history, &|_| Pushed::Never, LEASE_MS);
        assert_eq!(f.unexpected, 2, "{f:#?}");
        assert_eq!(f.examples["unexpected"].len(), 2);
    }

    /// A peer's deliveries: one partition, no lease ids, lease-less acks, several consumers
    /// reading at once.
    fn peer(mut d: Delivery) -> Delivery {
        d.lease = 0;
        d.lease_less = true;
        d
    }

    #[test]
    fn a_peer_history_is_judged_for_durable_acks_and_never_for_stale_acks() {
        let ok = Verdict::Accepted;
        // Two consumers read the queue at once, each acking its own rows: no lease, so no
        // stale ack, whatever the timing.
        let a = peer(acked(d(0, 1, 0, 0, 0, 10), ok, 500, 510));
        let b = peer(acked(d(1, 2, 1, 0, 20, 30), ok, 600, 610));
        let f = check(&[a, b], &booked, LEASE_MS);
        assert_eq!(f.stale_acks_accepted, 0, "{f:#?}");
        assert_eq!(f.ack_regressions + f.unexpected, 0, "{f:#?}");
        // A row handed out again after its delete was answered: a regression.
        let again = peer(d(0, 2, 2, 0, 700, 710));
        let f = check(&[a, b, again], &booked, LEASE_MS);
        assert_eq!(f.ack_regressions, 1, "{f:#?}");
    }
}
