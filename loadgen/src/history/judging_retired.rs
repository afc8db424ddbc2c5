//! The history's checks on messages the ledger retired (acked on their only delivery, kept in
//! its compact form): acks that stay acked, order within an answer and nothing invented are
//! still judged once the pairs left the ledger's map.

use std::time::{Duration, Instant};

use ackbench_ledger::retired::Origin;
use ackbench_ledger::testing::{self, id, push, ACK};
use ackbench_ledger::Ledger;
use ackbench_reports::results::{Audit, Promises};
use ackbench_wire::txn_hash;

use super::{AckOutcome, History, Pop, Popped, Status, Verdict};

/// Delivers `ids` to group 0, as a consumer does.
fn deliver(l: &Ledger, ids: &[String]) {
    testing::deliver(l, 0, ids);
}

/// Answers each of `ids` in group 0 with an ack.
fn ack(l: &Ledger, ids: &[String]) {
    for t in ids {
        l.answered_from(0, &txn_hash(t), Origin::of(t).as_ref(), ACK);
    }
}

/// The history of `ids` popped by `consumer` in one answer, acked as given.
fn popped(h: &History, consumer: u32, ids: &[String], at: Instant) -> usize {
    let pop = Pop {
        consumer,
        group: 0,
        lease_ms: 1000,
        sent: at,
        answered: at + Duration::from_millis(5),
    };
    let lease = format!("lease-{consumer}-{at:?}");
    let messages = ids.iter().map(|t| Popped {
        txn: txn_hash(t),
        transaction_id: t,
        partition_id: "P",
        lease_id: Some(&lease),
    });
    h.popped(&pop, messages)
}

fn ack_all(h: &History, first: usize, n: usize, at: Instant) {
    for r in first..first + n {
        let outcome = AckOutcome {
            status: Status::Completed,
            lease_less: false,
            verdict: Verdict::Accepted,
            sent: at,
            answered: at + Duration::from_millis(5),
        };
        h.answered(r, &outcome);
    }
}

fn judged(h: &History, l: &Ledger) -> Audit {
    let mut audit = Audit::default();
    super::judge(h, l, &mut audit, Promises::default(), 1000);
    audit
}

#[test]
fn the_history_checks_still_judge_retired_messages() {
    let h = History::default();
    let l = Ledger::new(1);
    let t0 = Instant::now();
    let ids = push(&l, 0, 3);
    let first = popped(&h, 1, &ids, t0);
    deliver(&l, &ids);
    ack_all(&h, first, 3, t0 + Duration::from_millis(10));
    ack(&l, &ids);
    assert_eq!(l.live_entries(), 0, "retired");
    let clean = judged(&h, &l);
    assert_eq!((clean.unexpected, clean.ack_regressions), (0, 0));
    // Delivered again by a pop sent after the ack was answered: acks must stay acked.
    let again = vec![ids[1].clone()];
    popped(&h, 2, &again, t0 + Duration::from_millis(100));
    deliver(&l, &again);
    let a = judged(&h, &l);
    assert_eq!((a.ack_regressions, a.unexpected), (1, 0));
    // Out of order within one answer, after both retired: still an order violation.
    let swapped = push(&l, 1, 2);
    let order = vec![swapped[1].clone(), swapped[0].clone()];
    let at = t0 + Duration::from_millis(200);
    let first = popped(&h, 1, &order, at);
    deliver(&l, &order);
    ack_all(&h, first, 2, at + Duration::from_millis(10));
    ack(&l, &order);
    assert_eq!(l.live_entries(), 1, "only the redelivered message is held");
    let a = judged(&h, &l);
    assert_eq!((a.order_violations, a.unexpected), (1, 0), "{a:?}");
    // A message nobody pushed, shaped like ours: unexpected.
    popped(&h, 1, &[id(9, 0)], t0 + Duration::from_millis(300));
    assert_eq!(judged(&h, &l).unexpected, 1);
}
