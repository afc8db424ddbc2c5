//! Parked long-polls: pops with `wait=true` that found nothing wait here, holding no database
//! connection, until a push to their queue wakes them or their deadline passes.
//!
//! One `Notify` per (tenant, queue), plus one per tenant for discovery pops (which match queues
//! by namespace/task and so wake on any push of their tenant). A waiter registers interest
//! before it queries, so a push landing between the empty query and the wait is never missed.
//! Pushes through another broker and lease expiries are picked up by a periodic re-check.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use uuid::Uuid;

/// What a parked pop waits for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WaitKey {
    Queue(Uuid, String),
    AnyQueueOf(Uuid),
}

#[derive(Default)]
pub struct LongPoll {
    signals: Mutex<HashMap<WaitKey, Arc<Notify>>>,
}

impl LongPoll {
    /// The signal a waiter on `key` listens to.
    pub fn signal(&self, key: &WaitKey) -> Arc<Notify> {
        let mut map = self.signals.lock().expect("long-poll lock");
        map.entry(key.clone()).or_default().clone()
    }

    /// Wakes every pop parked on `queue` of `tenant`, and the tenant's discovery pops.
    pub fn pushed(&self, tenant: Uuid, queue: &str) {
        let map = self.signals.lock().expect("long-poll lock");
        if let Some(n) = map.get(&WaitKey::Queue(tenant, queue.to_string())) {
            n.notify_waiters();
        }
        if let Some(n) = map.get(&WaitKey::AnyQueueOf(tenant)) {
            n.notify_waiters();
        }
    }
}
