//! Parked long-polls: pops with `wait=true` that found nothing wait here, holding no database
//! connection, until a push to their queue wakes them or their deadline passes.
//!
//! Waiters are kept per (scope, consumer group): the scope is the queue, or the whole tenant for
//! discovery pops (which match queues by namespace/task). A push of `n` messages wakes at most
//! `n` waiters of every group parked on its queue, one by one, so a push of one message does not
//! stampede every consumer into the database (each group consumes every message, so each group
//! gets its own wake-ups). A waiter registers interest before it queries, so a push landing
//! between its empty query and its wait is never missed. An ack that releases a lease wakes one
//! waiter of its group too: the rest of that partition became poppable without any push (the
//! partition's queue is learned from the pops that delivered it), and so do partitions a pop took
//! as candidates and gave back unexamined. Pushes and releases through another broker wake
//! waiters here too when peer notifications are on (`peers`); without them, and for whatever
//! a lost notification or an unobserved lease expiry leaves, the pop's periodic re-check finds
//! them. Deleting a queue closes the slots parked on it (and
//! on its named partitions) and wakes all their waiters, which answer empty at once; later pops
//! park on fresh slots.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use uuid::Uuid;

/// Which pushes a parked pop waits for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A pop of one named partition: (tenant, queue, partition).
    Partition(Uuid, String, String),
    Queue(Uuid, String),
    AnyQueueOf(Uuid),
}

/// The waiters of one (scope, group).
#[derive(Default)]
pub struct Slot {
    pub notify: Notify,
    parked: AtomicUsize,
    /// The queue was deleted: a waiter woken here answers empty instead of looking again.
    closed: AtomicBool,
}

impl Slot {
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// Counts a pop as parked on its slot for as long as it lives.
pub struct Parked(Arc<Slot>);

impl Parked {
    pub fn slot(&self) -> &Slot {
        &self.0
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.0.parked.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
pub struct LongPoll {
    slots: Mutex<HashMap<Scope, HashMap<String, Arc<Slot>>>>,
    /// partition id -> (tenant, queue name, partition name), learned from pops.
    queues: Mutex<HashMap<Uuid, (Uuid, String, String)>>,
}

impl LongPoll {
    /// Registers a waiting pop of `group` on `scope`.
    pub fn park(&self, scope: Scope, group: &str) -> Parked {
        let mut map = self.slots.lock().expect("long-poll lock");
        let slot = map
            .entry(scope)
            .or_default()
            .entry(group.to_string())
            .or_default()
            .clone();
        slot.parked.fetch_add(1, Ordering::SeqCst);
        Parked(slot)
    }

    /// A pop delivered from `partition` of `queue`: remembered so acks can wake its waiters.
    pub fn learn(&self, tenant: Uuid, partition: Uuid, queue: &str, name: &str) {
        let mut map = self.queues.lock().expect("long-poll lock");
        map.entry(partition)
            .or_insert_with(|| (tenant, queue.to_string(), name.to_string()));
    }

    /// An ack released the lease of `group` on `partition`: what follows its cursor may be
    /// poppable now, so one waiter of that group on the partition's queue is woken. `None`
    /// when no pop here delivered from the partition (its queue is not known here), else
    /// whether a waiter was woken.
    pub fn released(&self, partition: Uuid, group: &str) -> Option<bool> {
        let (tenant, queue, name) = self
            .queues
            .lock()
            .expect("long-poll lock")
            .get(&partition)
            .cloned()?;
        let map = self.slots.lock().expect("long-poll lock");
        let mut woke = false;
        for scope in [
            Scope::Partition(tenant, queue.clone(), name),
            Scope::Queue(tenant, queue),
            Scope::AnyQueueOf(tenant),
        ] {
            if let Some(slot) = map.get(&scope).and_then(|groups| groups.get(group)) {
                if slot.parked.load(Ordering::SeqCst) > 0 {
                    slot.notify.notify_one();
                    woke = true;
                }
            }
        }
        Some(woke)
    }

    /// `n` partitions of `queue` were listed again for `group` without a push or a release (a
    /// pop took them as candidates and gave them back unexamined): wakes up to `n` waiters of
    /// that group parked on the queue or the tenant's discovery scope, so the partitions do not
    /// wait for a re-check.
    pub fn relisted(&self, tenant: Uuid, queue: &str, group: &str, n: usize) {
        if n == 0 {
            return;
        }
        let map = self.slots.lock().expect("long-poll lock");
        for scope in [
            Scope::Queue(tenant, queue.to_string()),
            Scope::AnyQueueOf(tenant),
        ] {
            if let Some(slot) = map.get(&scope).and_then(|groups| groups.get(group)) {
                let waiting = slot.parked.load(Ordering::SeqCst);
                for _ in 0..waiting.min(n) {
                    slot.notify.notify_one();
                }
            }
        }
    }

    /// The tenant's `queue` was deleted: the slots parked on it and on its named partitions
    /// are closed and every one of their waiters is woken.
    pub fn queue_deleted(&self, tenant: Uuid, queue: &str) {
        let mut map = self.slots.lock().expect("long-poll lock");
        let gone: Vec<Scope> = map
            .keys()
            .filter(|scope| match scope {
                Scope::Queue(t, q) | Scope::Partition(t, q, _) => *t == tenant && q == queue,
                Scope::AnyQueueOf(_) => false,
            })
            .cloned()
            .collect();
        for scope in gone {
            for slot in map.remove(&scope).into_iter().flat_map(|g| g.into_values()) {
                slot.closed.store(true, Ordering::SeqCst);
                slot.notify.notify_waiters();
            }
        }
        drop(map);
        let mut learned = self.queues.lock().expect("long-poll lock");
        learned.retain(|_, (t, q, _)| !(*t == tenant && q == queue));
    }

    /// Wakes every parked pop, on every scope, to look again (not closing anything): what
    /// they wait for may have happened unnoticed.
    pub fn wake_all(&self) {
        let map = self.slots.lock().expect("long-poll lock");
        for slot in map.values().flat_map(|groups| groups.values()) {
            slot.notify.notify_waiters();
        }
    }

    /// `messages` were pushed to `queue` of `tenant` (to `partition`, when one is named):
    /// wakes up to that many waiters of every group parked on the partition, on the queue, and
    /// on the tenant's discovery scope. Answers how many it woke.
    pub fn pushed(
        &self,
        tenant: Uuid,
        queue: &str,
        partition: Option<&str>,
        messages: usize,
    ) -> usize {
        let mut woken = 0;
        let map = self.slots.lock().expect("long-poll lock");
        let named = partition.map(|p| Scope::Partition(tenant, queue.to_string(), p.to_string()));
        for scope in named.into_iter().chain([
            Scope::Queue(tenant, queue.to_string()),
            Scope::AnyQueueOf(tenant),
        ]) {
            for slot in map
                .get(&scope)
                .into_iter()
                .flat_map(|groups| groups.values())
            {
                let waiting = slot.parked.load(Ordering::SeqCst);
                for _ in 0..waiting.min(messages) {
                    slot.notify.notify_one();
                }
                woken += waiting.min(messages);
            }
        }
        woken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_push_wakes_as_many_waiters_as_messages_per_group() {
        let lp = Arc::new(LongPoll::default());
        let tenant = Uuid::nil();
        let woken = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for group in ["a", "a", "a", "b"] {
            let (lp, woken) = (lp.clone(), woken.clone());
            tasks.push(tokio::spawn(async move {
                let parked = lp.park(Scope::Queue(tenant, "q".into()), group);
                let notified = parked.slot().notify.notified();
                if tokio::time::timeout(Duration::from_millis(300), notified)
                    .await
                    .is_ok()
                {
                    woken.fetch_add(1, Ordering::SeqCst);
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        lp.pushed(tenant, "q", None, 1);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(
            woken.load(Ordering::SeqCst),
            2,
            "one waiter of group a, one of group b"
        );
    }
}
