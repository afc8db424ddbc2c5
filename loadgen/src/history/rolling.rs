//! The rolling judge: a long run's history judged as the run goes, so it holds about a lease
//! time's worth of deliveries instead of the whole run's.
//!
//! Every `ROLL_EVERY` a thread (`Roller`) judges the pop answers whose every record has settled
//! (its ack answered, or its lease passed with no ack answered) at least `SETTLE_WAIT` ago. The
//! checks count a finding against one record, so those answers are judged with the records
//! around them as context: before them, every record that settled within `context` of their
//! earliest pop (a hold not acked lasts until its lease ends, so a lease overlap or a stale ack
//! always finds the hold it involves); after them, the later pops a stale ack can be compared
//! with. A record is dropped once it is judged and settled more than `context` before the
//! earliest pop still to judge.
//!
//! What the horizon changes: lease overlaps, stale acks, order within an answer, unexpected and
//! recovered messages are judged as the whole history would judge them. An ack regression (a
//! message delivered again after its ack was accepted) and a reordering across leases are seen
//! when the first settled within `context` (35 s) of the second's pop; a later redelivery of a
//! settled message is still counted by the ledger, as a duplicate delivery. The run's `--history`
//! export keeps every record, so a run that exports its history is judged whole at the end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ackbench_reports::results::Audit;

use super::check::{self, Counted, Owned, CLOCK_SLACK};
use super::{origin, Delivery, History, Micros, NEVER};
use crate::workload::CellContext;
use ackbench_ledger::Pushed;

/// How often the roller judges and drops.
pub const ROLL_EVERY: Duration = Duration::from_secs(10);

/// How long after a record settled it waits before it is judged: a late answer of a request
/// the client gave up on lands on a record not yet judged.
pub const SETTLE_WAIT: Micros = 10_000_000;

/// How long before the earliest pop still to judge a record that settled is kept as context:
/// how far back an ack regression or a reordering across leases is looked for, with 5 s for the
/// client's pop times not being quite in the order the records were appended.
pub const CONTEXT: Micros = 35_000_000 + CLOCK_SLACK;

/// What the rolling judge keeps between rolls.
#[derive(Debug, Default)]
pub struct Rolled {
    /// Pop answers below this number have been judged.
    judged: u64,
    /// The guarantee counts and examples found so far.
    found: Audit,
    counted: Counted,
    /// The records of the part being judged, kept from roll to roll so the copy's memory is
    /// held, not taken and given back each time.
    part: Vec<Delivery>,
}

/// When a record's last event happened or can be taken to have: its ack's answer, else the end
/// of its lease (the ack, if one was sent, counts no earlier than its send).
fn settled_at(d: &Delivery, queue_lease: Micros) -> Micros {
    if d.ack_answered != NEVER {
        return d.ack_answered;
    }
    let lease_end = d.pop_sent + (d.lease_ms as Micros * 1000).min(queue_lease);
    let ack_sent = if d.ack_sent == NEVER { 0 } else { d.ack_sent };
    d.pop_answered.max(lease_end).max(ack_sent)
}

impl History {
    /// Judges the answers settled `SETTLE_WAIT` before `now` (micros on the history's clock)
    /// and drops the records no later judgement needs; returns how many records it dropped.
    pub fn roll(
        &self,
        pushed: &dyn Fn(&Delivery) -> Pushed,
        queue_lease_ms: u32,
        now: Micros,
    ) -> usize {
        let lease = queue_lease_ms as Micros * 1000;
        let mut guard = self.rolled.lock().expect("rolled lock");
        let rolled = &mut *guard;
        if let Some(owned) = self.part_to_judge(rolled.judged, lease, now, &mut rolled.part) {
            let found = check::check_part(
                &rolled.part,
                &owned,
                &mut rolled.counted,
                pushed,
                queue_lease_ms,
            );
            rolled.found.add_guarantees(&found.audit());
            rolled.judged = owned.0.end;
        }
        self.drop_judged(rolled.judged, lease, now)
    }

    /// Judges every record not judged yet and returns the findings of the whole history,
    /// those of the dropped records included (as often as asked: it changes nothing).
    pub fn judge_the_rest(
        &self,
        pushed: &dyn Fn(&Delivery) -> Pushed,
        queue_lease_ms: u32,
    ) -> Audit {
        let rolled = self.rolled.lock().expect("rolled lock");
        let owned = Owned(rolled.judged..u64::MAX);
        let mut counted = rolled.counted.clone();
        let found = self.inspect(|records| {
            check::check_part(records, &owned, &mut counted, pushed, queue_lease_ms)
        });
        let mut total = rolled.found.clone();
        total.add_guarantees(&found.audit());
        total
    }

    /// The answers from `judged` on whose records all settled `SETTLE_WAIT` before `now`;
    /// `None` when there is none. Their records and their context are copied into `part`
    /// under the lock (the consumers wait on it; the checks run after it is released).
    fn part_to_judge(
        &self,
        judged: u64,
        lease: Micros,
        now: Micros,
        part: &mut Vec<Delivery>,
    ) -> Option<Owned> {
        let r = self.records.lock().expect("history lock");
        let records = &r.deliveries;
        let start = records.partition_point(|d| d.answer < judged);
        let settled = records
            .iter_from(start)
            .take_while(|d| settled_at(d, lease).saturating_add(SETTLE_WAIT) <= now)
            .count();
        let mut end = start + settled;
        if let Some(unsettled) = records.get(end) {
            // Whole answers only.
            let whole = records.iter_from(start).take(end - start);
            end = start + whole.take_while(|d| d.answer < unsettled.answer).count();
        }
        if end == start {
            return None;
        }
        let answer = |i: usize| records.get(i).map(|d| d.answer);
        let owned_start = answer(start).unwrap_or(0);
        let owned_end = answer(end).unwrap_or_else(|| answer(end - 1).unwrap_or(0) + 1);
        let earliest = records
            .iter_from(start)
            .take(end - start)
            .map(|d| d.pop_sent)
            .min();
        let context_from = earliest.unwrap_or(0).saturating_sub(CONTEXT);
        let before = records
            .iter()
            .take(start)
            .filter(|d| settled_at(d, lease) >= context_from);
        // Every later record: a few seconds' worth, since the owned ones settled.
        part.clear();
        // Room for every record held and an eighth more: the buffer follows what is held (up
        // after a burst, down after it), instead of doubling and staying.
        let room = records.len() + records.len() / 8;
        if part.capacity() > room + room / 2 {
            part.shrink_to(room);
        }
        part.reserve_exact(room);
        part.extend(before.chain(records.iter_from(start)));
        Some(Owned(owned_start..owned_end))
    }

    /// Drops the judged records (answers below `judged`), oldest first, that no record still
    /// to judge can need: those that settled `CONTEXT` before the earliest pop still to judge.
    fn drop_judged(&self, judged: u64, lease: Micros, now: Micros) -> usize {
        let mut r = self.records.lock().expect("history lock");
        let earliest_open = r
            .deliveries
            .iter()
            .rev()
            .take_while(|d| d.answer >= judged)
            .map(|d| d.pop_sent)
            .min()
            .unwrap_or(now);
        let before = earliest_open.saturating_sub(CONTEXT);
        let mut dropped = 0;
        while let Some(d) = r.deliveries.get(0) {
            if d.answer >= judged || settled_at(d, lease) >= before {
                break;
            }
            r.deliveries.pop_front();
            dropped += 1;
        }
        r.base += dropped;
        dropped
    }
}

/// A thread that rolls a cell round's history every `ROLL_EVERY` until stopped (or dropped).
pub struct Roller {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Roller {
    /// Starts rolling `ctx`'s history; `queue_lease_ms` is the queue's lease time.
    pub fn start(ctx: Arc<CellContext>, queue_lease_ms: u32) -> Roller {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ackbench-history".into())
            .spawn(move || {
                let tick = Duration::from_millis(200);
                let mut waited = Duration::ZERO;
                while !stopping.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    waited += tick;
                    if waited < ROLL_EVERY {
                        continue;
                    }
                    waited = Duration::ZERO;
                    let pushed = |d: &Delivery| ctx.ledger.push_of_from(&d.txn, origin(d).as_ref());
                    let now = ctx.history.micros(std::time::Instant::now());
                    ctx.history.roll(&pushed, queue_lease_ms, now);
                }
            })
            .expect("history roller thread");
        Roller {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Roller {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                eprintln!("ackbench: WARNING: the history roller panicked; the history is judged whole at the end");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Status, Verdict};
    use ackbench_wire::txn_hash;

    const S: Micros = 1_000_000;
    const LEASE_MS: u32 = 5_000;

    /// Message `seq` of producer 7 on `partition`, popped alone by `consumer` in answer
    /// `answer` (sent at `at` µs, answered 1 ms later) under its own lease, acked 2 ms after.
    fn delivery(seq: u64, partition: u64, consumer: u32, answer: u64, at: Micros) -> Delivery {
        Delivery {
            txn: txn_hash(&format!("t-7-{seq}-0")),
            partition,
            lease: 1000 + answer,
            producer: 7,
            seq,
            index: 0,
            consumer,
            answer,
            position: 0,
            group: 0,
            status: Status::Completed,
            lease_less: false,
            verdict: Verdict::Accepted,
            lease_ms: LEASE_MS,
            pop_sent: at,
            pop_answered: at + 1_000,
            ack_sent: at + 2_000,
            ack_answered: at + 3_000,
        }
    }

    fn history_of(records: &[Delivery]) -> History {
        let h = History::default();
        {
            let mut r = h.records.lock().unwrap();
            for d in records {
                r.deliveries.push(*d);
            }
            r.answers = records.len() as u64;
        }
        h
    }

    /// 400 s of a clean workload over 4 partitions, one delivery every 10 ms (in answer order),
    /// with anomalies injected at given times: the answer numbers follow the pop order.
    fn workload_with_anomalies() -> Vec<Delivery> {
        let mut out: Vec<Delivery> = Vec::new();
        let mut seq = [0u64; 4];
        let mut at = 0;
        let (mut overlapped, mut redelivered, mut invented) = (false, false, false);
        while at < 400 * S {
            let p = (out.len() % 4) as u64;
            let n = out.len() as u64;
            // Producer 7's messages of partition p in order: seq counts per partition, spaced
            // so partitions never share a number.
            let mut d = delivery(seq[p as usize] * 4 + p, p, (n % 3) as u32, n, at);
            seq[p as usize] += 1;
            let t = at / S;
            if t == 50 && p == 1 && !std::mem::replace(&mut overlapped, true) {
                // Not acked: its lease stays live while another consumer takes the partition.
                d.verdict = Verdict::Unanswered;
                d.ack_sent = NEVER;
                d.ack_answered = NEVER;
                out.push(d);
                let mut b = delivery(9_000_001, 1, d.consumer + 1, n + 1, at + 2_000);
                b.txn = txn_hash("overlap");
                b.producer = 0;
                out.push(b);
                at += 10_000;
                // The next records take the answer numbers after both.
                renumber(&mut out);
                continue;
            }
            if t == 120 && p == 2 && !std::mem::replace(&mut redelivered, true) {
                // The message delivered again 20 s later (within the lease and context), after
                // its ack was accepted: a regression counted once.
                out.push(d);
                let mut again = d;
                again.pop_sent = at + 20 * S;
                again.pop_answered = again.pop_sent + 1_000;
                again.ack_sent = again.pop_sent + 2_000;
                again.ack_answered = again.pop_sent + 3_000;
                again.lease = 77;
                pending_push(again);
                at += 10_000;
                continue;
            }
            if t == 200 && p == 3 && !std::mem::replace(&mut invented, true) {
                // An invented message, delivered now (its ack refused) and again 100 s later:
                // unexpected once.
                d.txn = txn_hash("invented");
                d.producer = 0;
                d.verdict = Verdict::Refused;
                let mut later = d;
                later.pop_sent = at + 100 * S;
                later.pop_answered = later.pop_sent + 1_000;
                later.ack_sent = later.pop_sent + 2_000;
                later.ack_answered = later.pop_sent + 3_000;
                pending_push(later);
            }
            out.push(d);
            at += 10_000;
            take_due(&mut out, at);
        }
        renumber(&mut out);
        out
    }

    thread_local! {
        static PENDING: std::cell::RefCell<Vec<Delivery>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    fn pending_push(d: Delivery) {
        PENDING.with(|p| p.borrow_mut().push(d));
    }

    /// Appends the pending deliveries whose pop has been answered by `at`.
    fn take_due(out: &mut Vec<Delivery>, at: Micros) {
        PENDING.with(|p| {
            let mut p = p.borrow_mut();
            let (due, later): (Vec<Delivery>, Vec<Delivery>) =
                p.drain(..).partition(|d| d.pop_answered <= at);
            *p = later;
            out.extend(due);
        });
    }

    /// Answer numbers in append order, as the history gives them.
    fn renumber(out: &mut [Delivery]) {
        for (i, d) in out.iter_mut().enumerate() {
            d.answer = i as u64;
        }
    }

    fn pushed(d: &Delivery) -> Pushed {
        if d.producer == 0 && d.txn == txn_hash("invented") {
            Pushed::Never
        } else {
            Pushed::Booked
        }
    }

    #[test]
    fn a_history_judged_as_it_goes_finds_what_the_whole_history_finds() {
        let records = workload_with_anomalies();
        let whole = check::check_deliveries(&records, &pushed, LEASE_MS);
        assert!(
            whole.lease_overlaps > 0 && whole.ack_regressions == 1 && whole.unexpected == 1,
            "the anomalies are there to find: {whole:?}"
        );
        let h = History::default();
        let mut dropped = 0;
        let mut next = 0;
        for now in (10..=420).step_by(10).map(|t| t * S) {
            {
                let mut r = h.records.lock().unwrap();
                while next < records.len() && records[next].pop_answered <= now {
                    r.deliveries.push(records[next]);
                    next += 1;
                }
            }
            dropped += h.roll(&pushed, LEASE_MS, now);
            let (held, _) = h.held_and_dropped();
            assert!(
                held <= 7_000,
                "the history holds a lease's worth (and the waits), not the run: {held} at {now}"
            );
        }
        assert!(dropped > 30_000, "most records were dropped: {dropped}");
        let rolled = h.judge_the_rest(&pushed, LEASE_MS);
        assert_eq!(rolled.lease_overlaps, whole.lease_overlaps);
        assert_eq!(rolled.ack_regressions, whole.ack_regressions);
        assert_eq!(rolled.unexpected, whole.unexpected);
        assert_eq!(rolled, whole.audit());
    }

    #[test]
    fn a_record_not_settled_holds_back_the_judgement_and_the_drop() {
        let mut open = delivery(1, 0, 0, 0, 0);
        open.verdict = Verdict::Unanswered;
        open.ack_sent = NEVER;
        open.ack_answered = NEVER;
        open.lease_ms = 60_000;
        let later: Vec<Delivery> = (1..100)
            .map(|i| delivery(i + 1, 0, 1, i, i * S / 10))
            .collect();
        let h = history_of(&[vec![open], later].concat());
        // 30 s on, the first record's 60 s lease has not passed: nothing is judged or dropped.
        assert_eq!(h.roll(&pushed, 60_000, 30 * S), 0);
        assert_eq!(h.rolled.lock().unwrap().judged, 0);
        // Well after its lease, everything is judged and dropped.
        assert_eq!(h.roll(&pushed, 60_000, 200 * S), 100);
        assert_eq!(h.held_and_dropped(), (0, 100));
        // An answer to a dropped record changes nothing.
        let now = std::time::Instant::now();
        h.answered(
            3,
            &crate::history::AckOutcome {
                status: Status::Completed,
                lease_less: false,
                verdict: Verdict::Accepted,
                sent: now,
                answered: now,
            },
        );
        assert_eq!(h.held_and_dropped(), (0, 100));
    }
}
