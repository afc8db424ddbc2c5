//! Which history of the database the broker's connections reach: the WAL timeline of the
//! primary, read on every new connection. A promotion (a failover) starts a new timeline, and
//! with asynchronous replication the new primary may lack the old one's last commits, so the
//! same partition offsets can come to hold other messages. What the broker keeps in memory
//! about stored data (the segment cache above all, whose entries are immutable only within one
//! history) is then dropped before the connection that saw the change is used, and the
//! generation counter lets a request that started before the change tell it ran across one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// The current timeline, with its own generation counter.
#[derive(Default)]
pub struct Timeline {
    /// The timeline last seen (0: none yet). The lock also orders a change's forgetting
    /// before any other new connection is handed out.
    seen: Mutex<u32>,
    generation: AtomicU64,
    forget: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

/// The primary's current WAL timeline (0 on a standby, which the broker never writes to).
pub const CURRENT_TIMELINE_SQL: &str = "SELECT CASE WHEN pg_is_in_recovery() THEN 0 \
     ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END";

impl Timeline {
    /// What to drop when the timeline changes (set once, when the broker's state exists).
    pub fn on_change(&self, forget: impl Fn() + Send + Sync + 'static) {
        let _ = self.forget.set(Box::new(forget));
    }

    /// How many timeline changes the broker has seen.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Records the timeline a new connection reached; a change from a known one forgets the
    /// old history's hints, then counts a generation.
    pub fn observe(&self, timeline: u32) {
        if timeline == 0 {
            return;
        }
        let mut seen = self.seen.lock().expect("timeline lock");
        let before = std::mem::replace(&mut *seen, timeline);
        if before == 0 || before == timeline {
            return;
        }
        tracing::warn!(
            before,
            timeline,
            "the database's WAL timeline changed (a failover): dropping what the broker held from the old history"
        );
        if let Some(forget) = self.forget.get() {
            forget();
        }
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn only_a_change_from_a_known_timeline_forgets_and_counts() {
        let t = Timeline::default();
        let forgotten = Arc::new(AtomicUsize::new(0));
        let f = forgotten.clone();
        t.on_change(move || {
            f.fetch_add(1, Ordering::SeqCst);
        });
        t.observe(1);
        t.observe(0);
        t.observe(1);
        assert_eq!((t.generation(), forgotten.load(Ordering::SeqCst)), (0, 0));
        t.observe(2);
        assert_eq!((t.generation(), forgotten.load(Ordering::SeqCst)), (1, 1));
        t.observe(2);
        assert_eq!(t.generation(), 1);
    }
}
