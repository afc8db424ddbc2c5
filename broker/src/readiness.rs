//! Readiness: where the broker learns that a pop may now find something, and wakes whoever
//! waits for it. Push, pop and ack all notify here; the hotlist (candidate partitions per queue
//! and group) and the parked long-polls are its two halves, and the pending gate reads the
//! hotlist before parking a pop without database work.
//!
//! Every notification is a hint: PostgreSQL decides what a woken pop gets.

use uuid::Uuid;

use crate::longpoll::LongPoll;
use crate::pop::hotlist::Hotlist;

/// The hotlist (when `QUEEN_HOTLIST` is on) and the parked long-polls.
pub struct Readiness {
    /// Candidate partitions per (queue, group), when `QUEEN_HOTLIST` is on.
    pub hotlist: Option<Hotlist>,
    pub long_poll: LongPoll,
}

impl Readiness {
    pub fn new(hotlist: Option<Hotlist>) -> Readiness {
        Readiness {
            hotlist,
            long_poll: LongPoll::default(),
        }
    }

    /// A push through this broker committed offsets up to `end_offset` of `pid`: the partition
    /// becomes a candidate for every group of the queue. (The long-polls are woken separately,
    /// once everything a woken pop needs is in place.)
    pub fn list_pushed(&self, tenant: Uuid, queue: &str, pid: Uuid, end_offset: i64) {
        if let Some(hot) = &self.hotlist {
            hot.pushed(&(tenant, queue.to_string()), pid, end_offset);
        }
    }
}
