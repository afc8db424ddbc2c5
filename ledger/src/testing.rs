//! Booking messages as the load generator's producers and consumers do, for the tests of the
//! ledger and of what reads it (the history's checks on retired messages). Built for this
//! crate's tests and, with the `testing` feature, for other crates' tests.

use ackbench_wire::{txn_hash, TxnHash};

use crate::retired::{Origin, PushOrigin};
use crate::{Answer, Ledger};

/// The transactionId prefix of producer 1 of a run (`t-1-`), as the producers write it.
pub const PREFIX: &str = "t-1-";

/// An ack, as a consumer answers it.
pub const ACK: Answer = Answer {
    acked: true,
    dead_lettered: false,
    dropped: false,
};

/// The transactionId of message `index` of push `seq`.
pub fn id(seq: u64, index: u32) -> String {
    format!("{PREFIX}{seq}-{index}")
}

/// Books push `seq` of `len` messages as the producer does; returns their transactionIds.
pub fn push(l: &Ledger, seq: u64, len: u32) -> Vec<String> {
    let ids: Vec<String> = (0..len).map(|i| id(seq, i)).collect();
    let hashes: Vec<TxnHash> = ids.iter().map(|t| txn_hash(t)).collect();
    l.sending(&hashes);
    l.pushed_from(Some(PushOrigin::new(PREFIX, seq)), &hashes);
    ids
}

/// Delivers `ids` to `group` as a consumer does; returns the redeliveries.
pub fn deliver(l: &Ledger, group: usize, ids: &[String]) -> u64 {
    let hashes: Vec<TxnHash> = ids.iter().map(|t| txn_hash(t)).collect();
    let origins: Vec<Option<Origin>> = ids.iter().map(|t| Origin::of(t)).collect();
    l.delivered_from(group, &hashes, &origins)
}
