//! Readiness: where the broker learns that a pop may now find something, and wakes whoever
//! waits for it. Push, pop and ack all notify here; the hotlist (candidate partitions per queue
//! and group) and the parked long-polls are its two halves, and the pending gate reads the
//! hotlist before parking a pop without database work. With `QUEEN_PEER_NOTIFY`, what happens
//! here is also told to the other brokers of the database (`peers`), and what they tell is fed
//! in here the same way.
//!
//! Every notification is a hint: PostgreSQL decides what a woken pop gets.

use std::sync::Arc;

use uuid::Uuid;

use crate::longpoll::LongPoll;
use crate::peers::message::Event;
use crate::peers::outbox::Outbox;
use crate::peers::stats::PeerStats;
use crate::pop::hotlist::{Hotlist, Release};

/// The hotlist (when `QUEEN_HOTLIST` is on), the parked long-polls, and the outbox to the
/// other brokers (when `QUEEN_PEER_NOTIFY` is on).
pub struct Readiness {
    /// Candidate partitions per (queue, group), when `QUEEN_HOTLIST` is on.
    pub hotlist: Option<Hotlist>,
    pub long_poll: LongPoll,
    /// Events for the other brokers, when `QUEEN_PEER_NOTIFY` is on.
    pub peers: Option<Arc<Outbox>>,
    pub peer_stats: Arc<PeerStats>,
}

impl Readiness {
    pub fn new(
        hotlist: Option<Hotlist>,
        peers: Option<Arc<Outbox>>,
        peer_stats: Arc<PeerStats>,
    ) -> Readiness {
        Readiness {
            hotlist,
            long_poll: LongPoll::default(),
            peers,
            peer_stats,
        }
    }

    /// A push committed offsets up to `end_offset` of `pid`: the partition becomes a candidate
    /// for every group of the queue. (The long-polls are woken separately, once everything a
    /// woken pop needs is in place.)
    pub fn list_pushed(&self, tenant: Uuid, queue: &str, pid: Uuid, end_offset: i64) {
        if let Some(hot) = &self.hotlist {
            hot.pushed(&(tenant, queue.to_string()), pid, end_offset);
        }
    }

    /// `group`'s lease on `pid` was released (`r`: what this broker knows of it): wakes a
    /// parked pop of the group when the rest of the partition may be poppable. With the
    /// hotlist, only when it lists the partition: not when nothing was written after the span
    /// (as far as this broker knows), nor when a handed-off pop already claimed it. True when
    /// a pop parked here was woken for it.
    pub fn released(&self, pid: Uuid, group: &str, r: Release) -> bool {
        let poppable = self
            .hotlist
            .as_ref()
            .and_then(|hot| hot.released(pid, group, r));
        self.wake_released(pid, group, poppable)
    }

    /// Another broker released `group`'s lease on `pid`: as `released`, but with the hotlist
    /// the partition is listed (and a pop woken) only when it surely has something to deliver
    /// (`Hotlist::released_by_peer`), so a release through one broker does not send every
    /// other broker's pops to claim a drained partition.
    pub fn released_by_peer(&self, pid: Uuid, group: &str, r: Release) {
        let poppable = self
            .hotlist
            .as_ref()
            .and_then(|hot| hot.released_by_peer(pid, group, r));
        self.wake_released(pid, group, poppable);
    }

    /// Wakes a parked pop of `group` unless the hotlist said the release left nothing listed;
    /// true when a pop parked on the partition's queue was woken.
    fn wake_released(&self, pid: Uuid, group: &str, poppable: Option<bool>) -> bool {
        if poppable == Some(false) {
            return false;
        }
        if let Some(woke) = self.long_poll.released(pid, group) {
            return woke;
        }
        // No pop here delivered from it (a release through another broker): the queue may
        // still be known from pushes and seeds.
        let queue = self.hotlist.as_ref().and_then(|hot| hot.queue_of(pid));
        if let Some((tenant, queue)) = queue {
            self.long_poll.relisted(tenant, &queue, group, 1);
        }
        false
    }

    /// Tells the other brokers about `event`, when peer notifications are on.
    pub fn publish(&self, event: Event) {
        if let Some(outbox) = &self.peers {
            outbox.publish(event);
        }
    }

    /// Tells the other brokers about a push or a release; when it `woke_here` a pop parked on
    /// this broker, which will likely claim the partition, once that pop's claim is known or a
    /// short hold has passed (`Outbox::publish_held`), so that they hear of it with its lease.
    pub fn publish_after_wake(&self, event: Event, woke_here: bool) {
        if let Some(outbox) = &self.peers {
            if woke_here {
                outbox.publish_held(event);
            } else {
                outbox.publish(event);
            }
        }
    }

    /// A pop here leased `group` the span of `pid` up to `end` as `lease`, for `left`: tells
    /// the other brokers, so that their pops leave the partition alone until the release.
    pub fn publish_leased(
        &self,
        queue: &(Uuid, String),
        group: &str,
        pid: Uuid,
        lease: &str,
        end: i64,
        left: std::time::Duration,
    ) {
        self.publish(Event::Leased {
            tenant: queue.0,
            queue: queue.1.clone(),
            pid,
            group: group.to_string(),
            lease: lease.to_string(),
            end,
            lease_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
        });
    }

    /// Whatever the other brokers said may have been missed (the listening connection was
    /// down): every candidate list reseeds on its next pop and every parked pop looks again.
    pub fn reseed_all(&self) {
        if let Some(hot) = &self.hotlist {
            hot.invalidate_all();
        }
        self.long_poll.wake_all();
    }
}
