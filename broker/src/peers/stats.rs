//! The peer notifications' counters: what this broker sent its peers, what it received from
//! them, applied, and dropped. A leaf; `metrics.rs` renders them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::counters::counters;

counters! {
    /// The peer notifications' counters.
    PeerStats,
    /// The peer notifications' counters at one instant.
    PeerCounts {
        notifications_sent: "queen_peer_notifications_sent_total", "NOTIFY payloads sent to the other brokers (each a batch of events).";
        events_sent: "queen_peer_events_sent_total", "Events those payloads carried.";
        events_lost: "queen_peer_events_lost_total", "Events that could not be sent (no connection, or too many waiting); only delays, the reseed finds them.";
        events_alone: "queen_peer_events_alone_total", "Events not sent because no other broker was heard from lately (a broker alone sends only its heartbeat).";
        notifications_received: "queen_peer_notifications_received_total", "Notifications received from other brokers (this broker's own excluded).";
        events_applied: "queen_peer_events_applied_total", "Events from other brokers fed into the hotlist, the pending gate and the parked long-polls.";
        notifications_dropped: "queen_peer_notifications_dropped_total", "Notifications refused (malformed, unknown kind or version); nothing of them is applied.";
        listener_connects: "queen_peer_listener_connects_total", "Times the listening connection was (re)established, each followed by a reseed.";
        holds: "queen_peer_holds_total", "Pushes and releases that woke a pop here, held for that pop's lease before the other brokers hear of them.";
        holds_met: "queen_peer_holds_met_total", "Holds ended by the woken pop's lease (the rest ran out, 5 ms, or went with an earlier send).";
        deliveries_sent: "queen_peer_deliveries_sent_total", "Leases' delivered hashes sealed and sent, so that another broker's ack registry answers their ack.";
        deliveries_adopted: "queen_peer_deliveries_adopted_total", "Delivered hashes from other brokers whose seal verified, taken into the ack registry.";
        deliveries_refused: "queen_peer_deliveries_refused_total", "Delivered hashes refused: a seal that does not verify under the deployment's key, or unreadable hashes; nothing of them is used.";
    }
}

impl PeerStats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }
}
