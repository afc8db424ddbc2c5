//! The ack registry: a process-local map of live leases, so that the overwhelmingly common ack
//! (a client acking, all `completed`, exactly the batch it was just given) becomes one positional
//! cursor advance instead of a hash resolution.
//!
//! Keyed (partition id, consumer group); per live lease it holds the leaseId, the
//! inclusive `batch_end` and the *distinct* set of delivered xxh3_128 hashes. An entry is born on
//! every leasing pop that delivered something and dies on a fast-path hit, on any SQL-path
//! outcome owned by its lease, on TTL (lease length + 10 s; swept opportunistically on insert
//! at most every 5 s, so no background task), or by LRU eviction under the memory bound. Every
//! death degrades to the SQL path, which is the authority; and `log_ack_at_v1` re-validates the
//! lease under the consumer row lock, so the registry can never grant an ack PostgreSQL would
//! refuse. One global mutex, deliberately: the work under it is a lookup, one set comparison
//! against a set built off-lock, and a removal.

use crate::fasthash::{FastMap, FastSet, FoldState};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::counters::counters;
use ackbench_wire::TxnHash;
use lru::LruCache;
use uuid::Uuid;

const TTL_MARGIN: Duration = Duration::from_secs(10);
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// Bookkeeping bytes of an entry besides its hashes (key, leaseId, map slots).
const ENTRY_OVERHEAD: usize = 160;

type Key = (Uuid, String);

/// One live lease as the pop that granted it saw it.
struct Entry {
    tenant: Uuid,
    lease_id: String,
    batch_end: i64,
    /// Distinct delivered hashes, each with the lowest offset it was delivered at (the offset
    /// the hash path's `MIN` resolution would pick).
    hashes: FastMap<TxnHash, i64>,
    queue: String,
    partition: String,
    /// The first delivered offset (the cursor sat just below it when the pop leased).
    span_start: i64,
    expires: Instant,
    bytes: usize,
}

/// What a pop delivered in one partition under one lease: the registry's birth certificate.
pub struct Delivered<'a> {
    pub tenant: Uuid,
    pub partition_id: Uuid,
    pub group: &'a str,
    pub lease_id: &'a str,
    pub queue: &'a str,
    pub partition: &'a str,
    pub batch_end: i64,
    /// (hash, offset) of every delivered frame.
    pub frames: &'a [(TxnHash, i64)],
    pub lease: Duration,
}

/// Where acked transactionIds sit in a live lease (the transaction wire's positional form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Positions {
    pub queue: String,
    pub partition: String,
    /// The highest offset among the acked hashes.
    pub upto: i64,
    pub count: i32,
}

/// What a fast-path hit hands to the positional advance `log_ack_at_v1(upto, count)`.
///
/// `upto` is what the hash path would commit for the same all-completed ack: the highest of the
/// acked hashes' lowest delivered offsets, which is `batch_end` unless a transactionId was
/// delivered twice in the batch. `count` = offsets from the span start through `upto`, so the
/// procedure can check the cursor has not moved since the pop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FullBatch {
    pub upto: i64,
    pub count: i32,
}

pub struct AckRegistry {
    max_bytes: usize,
    /// Test only (`QUEEN_TEST_REGISTRY_MISS`): every lookup misses, as a broken registry would.
    miss_every_lookup: bool,
    state: Mutex<State>,
    pub counters: RegistryCounters,
    /// Told whenever an entry is born from another broker's delivery (`born_from_peer`).
    peer_born: tokio::sync::Notify,
}

counters! {
    /// What the ack registry counts.
    RegistryCounters,
    /// The registry's counters at one instant.
    RegistryCounts {
        hits: "queen_ack_registry_hits_total", "Ack groups answered by a registry hit.";
        misses: "queen_ack_registry_misses_total", "Ack groups that took the SQL path.";
        evictions: "queen_ack_registry_evictions_total", "Entries evicted by the memory bound.";
        expirations: "queen_ack_registry_expirations_total", "Entries swept by TTL.";
        peer_entries: "queen_ack_registry_peer_entries_total", "Entries born from another broker's sealed delivery (its pop leased the batch).";
        peer_waits: "queen_ack_registry_peer_waits_total", "Acks of a lease the registry did not know, waiting briefly for another broker's delivery.";
        peer_waits_met: "queen_ack_registry_peer_waits_met_total", "Those waits that the delivery met in time.";
    }
}

struct State {
    entries: LruCache<Key, Entry>,
    bytes: usize,
    last_sweep: Instant,
}

impl AckRegistry {
    /// A registry bounded to `max_mb` MiB of entries.
    pub fn new(max_mb: usize) -> AckRegistry {
        AckRegistry {
            max_bytes: max_mb.saturating_mul(1 << 20),
            miss_every_lookup: false,
            state: Mutex::new(State {
                entries: LruCache::unbounded(),
                bytes: 0,
                last_sweep: Instant::now(),
            }),
            counters: RegistryCounters::default(),
            peer_born: tokio::sync::Notify::new(),
        }
    }

    /// The registry, missing every lookup when `miss` (a test-only regression: every ack then
    /// takes the hash path, the entries still born and counted).
    pub fn missing_every_lookup(self, miss: bool) -> AckRegistry {
        AckRegistry {
            miss_every_lookup: miss,
            ..self
        }
    }

    /// A leasing pop delivered frames of (partition, group) up to `batch_end` under `lease_id`.
    /// Replaces whatever the key held (a new lease on the key means the old one is gone).
    pub fn born(&self, d: &Delivered<'_>) {
        let mut hashes: FastMap<TxnHash, i64> =
            FastMap::with_capacity_and_hasher(d.frames.len(), FoldState::default());
        for (h, off) in d.frames {
            let slot = hashes.entry(*h).or_insert(*off);
            *slot = (*slot).min(*off);
        }
        let bytes = ENTRY_OVERHEAD
            + d.group.len()
            + d.lease_id.len()
            + d.queue.len()
            + d.partition.len()
            + hashes.capacity() * (16 + 8 + 8);
        let entry = Entry {
            tenant: d.tenant,
            lease_id: d.lease_id.to_string(),
            batch_end: d.batch_end,
            hashes,
            queue: d.queue.to_string(),
            partition: d.partition.to_string(),
            span_start: d.frames.iter().map(|f| f.1).min().unwrap_or(d.batch_end),
            expires: Instant::now() + d.lease + TTL_MARGIN,
            bytes,
        };
        let mut s = self.state.lock().expect("registry lock");
        self.sweep_if_due(&mut s);
        if let Some(old) = s.entries.put((d.partition_id, d.group.to_string()), entry) {
            s.bytes -= old.bytes;
        }
        s.bytes += bytes;
        while s.bytes > self.max_bytes {
            match s.entries.pop_lru() {
                Some((_, gone)) => {
                    s.bytes -= gone.bytes;
                    self.counters.evictions.fetch_add(1, Relaxed);
                }
                None => break,
            }
        }
    }

    /// `born` for a lease another broker's pop granted (its sealed `Delivered`); wakes the acks
    /// waiting for it (`await_lease`).
    pub fn born_from_peer(&self, d: &Delivered<'_>) {
        self.born(d);
        self.counters.peer_entries.fetch_add(1, Relaxed);
        self.peer_born.notify_waiters();
    }

    /// Whether the entry of (partition, group) is `lease_id`'s.
    pub fn knows_lease(&self, partition: Uuid, group: &str, lease_id: &str) -> bool {
        let key = (partition, group.to_string());
        let s = self.state.lock().expect("registry lock");
        s.entries.peek(&key).is_some_and(|e| e.lease_id == lease_id)
    }

    /// Waits until the entry of (partition, group) is `lease_id`'s, at most until `until`
    /// (another broker leased the batch and its delivery is on its way); counted.
    pub async fn await_lease(
        &self,
        partition: Uuid,
        group: &str,
        lease_id: &str,
        until: Instant,
    ) -> bool {
        self.counters.peer_waits.fetch_add(1, Relaxed);
        loop {
            let born = self.peer_born.notified();
            if self.knows_lease(partition, group, lease_id) {
                self.counters.peer_waits_met.fetch_add(1, Relaxed);
                return true;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(until.into()) => return false,
                _ = born => {}
            }
        }
    }

    /// The fast-path test: when the live entry of (partition, group) belongs to `lease_id` and
    /// its delivered set equals `acked` (set equality: order and repeats do not matter), the
    /// entry dies and its batch is returned; otherwise a miss, and the entry stays for the SQL
    /// path's outcome to decide.
    pub fn take_if_full_batch(
        &self,
        tenant: Uuid,
        partition: Uuid,
        group: &str,
        lease_id: &str,
        acked: &FastSet<TxnHash>,
    ) -> Option<FullBatch> {
        let key = (partition, group.to_string());
        let mut s = self.state.lock().expect("registry lock");
        let hit = match s.entries.peek(&key) {
            Some(_) if self.miss_every_lookup => false,
            Some(e) => {
                e.tenant == tenant
                    && e.lease_id == lease_id
                    && e.expires > Instant::now()
                    && e.hashes.len() == acked.len()
                    && acked.iter().all(|h| e.hashes.contains_key(h))
            }
            None => false,
        };
        if !hit {
            drop(s);
            self.counters.misses.fetch_add(1, Relaxed);
            return None;
        }
        let e = s.entries.pop(&key).expect("present under the lock");
        s.bytes -= e.bytes;
        drop(s);
        self.counters.hits.fetch_add(1, Relaxed);
        let upto = e.hashes.values().copied().max().unwrap_or(e.batch_end);
        Some(FullBatch {
            upto,
            count: (upto - e.span_start + 1) as i32,
        })
    }

    /// Where `acked` sit in the live lease of (partition, group) held by `lease_id`, when every
    /// one of them was delivered under it; the entry stays (the caller's SQL decides its fate).
    pub fn positions(
        &self,
        tenant: Uuid,
        partition: Uuid,
        group: &str,
        lease_id: &str,
        acked: &[TxnHash],
    ) -> Option<Positions> {
        let key = (partition, group.to_string());
        let s = self.state.lock().expect("registry lock");
        let e = s.entries.peek(&key).filter(|e| {
            !self.miss_every_lookup
                && e.tenant == tenant
                && e.lease_id == lease_id
                && e.expires > Instant::now()
        })?;
        let mut upto = i64::MIN;
        for h in acked {
            upto = upto.max(*e.hashes.get(h)?);
        }
        let distinct: FastSet<&TxnHash> = acked.iter().collect();
        Some(Positions {
            queue: e.queue.clone(),
            partition: e.partition.clone(),
            upto,
            count: distinct.len() as i32,
        })
    }

    /// An SQL-path outcome for (partition, group) by `lease_id`: its entry dies. A late ack from
    /// an older lease never evicts the current holder's entry.
    pub fn forget(&self, partition: Uuid, group: &str, lease_id: &str) {
        let key = (partition, group.to_string());
        let mut s = self.state.lock().expect("registry lock");
        if s.entries.peek(&key).is_some_and(|e| e.lease_id == lease_id) {
            let e = s.entries.pop(&key).expect("present under the lock");
            s.bytes -= e.bytes;
        }
    }

    pub fn entries(&self) -> usize {
        self.state.lock().expect("registry lock").entries.len()
    }

    pub fn bytes(&self) -> usize {
        self.state.lock().expect("registry lock").bytes
    }

    /// Drops expired entries, at most every `SWEEP_EVERY` (called under the lock on insert).
    fn sweep_if_due(&self, s: &mut State) {
        let now = Instant::now();
        if now.duration_since(s.last_sweep) < SWEEP_EVERY {
            return;
        }
        s.last_sweep = now;
        let expired: Vec<Key> = s
            .entries
            .iter()
            .filter(|(_, e)| e.expires <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in expired {
            if let Some(e) = s.entries.pop(&k) {
                s.bytes -= e.bytes;
                self.counters.expirations.fetch_add(1, Relaxed);
            }
        }
    }

    /// Test hook: pretend every entry's TTL ran out and the next insert sweeps.
    #[doc(hidden)]
    pub fn expire_all_for_test(&self) {
        let mut s = self.state.lock().expect("registry lock");
        let past = Instant::now() - Duration::from_secs(1);
        for (_, e) in s.entries.iter_mut() {
            e.expires = past;
        }
        s.last_sweep = past - SWEEP_EVERY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ackbench_wire::txn_hash;

    fn hashes(ids: &[&str]) -> Vec<TxnHash> {
        ids.iter().map(|s| txn_hash(s)).collect()
    }

    const T: Uuid = Uuid::nil();

    fn born(r: &AckRegistry, p: Uuid, g: &str, w: &str, end: i64, ids: &[&str]) {
        let frames: Vec<(TxnHash, i64)> = hashes(ids)
            .into_iter()
            .zip(end - ids.len() as i64 + 1..)
            .collect();
        r.born(&Delivered {
            tenant: T,
            partition_id: p,
            group: g,
            lease_id: w,
            queue: "q",
            partition: "p",
            batch_end: end,
            frames: &frames,
            lease: LEASE,
        });
    }

    fn set(ids: &[&str]) -> FastSet<TxnHash> {
        hashes(ids).into_iter().collect()
    }

    const LEASE: Duration = Duration::from_secs(30);

    #[test]
    fn hit_needs_same_lease_and_set_equality() {
        let r = AckRegistry::new(64);
        let p = Uuid::now_v7();
        born(&r, p, "g", "w1", 9, &["a", "b", "c"]);
        assert_eq!(
            r.take_if_full_batch(T, p, "g", "w2", &set(&["a", "b", "c"])),
            None,
            "other lease"
        );
        assert_eq!(
            r.take_if_full_batch(T, p, "g", "w1", &set(&["a", "b"])),
            None,
            "partial"
        );
        assert_eq!(
            r.take_if_full_batch(T, p, "g", "w1", &set(&["a", "b", "c", "d"])),
            None,
            "superset"
        );
        assert_eq!(
            r.take_if_full_batch(T, p, "h", "w1", &set(&["a", "b", "c"])),
            None,
            "other group"
        );
        assert_eq!(
            r.take_if_full_batch(Uuid::max(), p, "g", "w1", &set(&["a", "b", "c"])),
            None,
            "other tenant"
        );
        let pos = r
            .positions(T, p, "g", "w1", &hashes(&["b", "a", "b"]))
            .unwrap();
        assert_eq!((pos.upto, pos.count, pos.queue.as_str()), (8, 2, "q"));
        assert_eq!(
            r.positions(T, p, "g", "w1", &hashes(&["z"])),
            None,
            "not delivered under this lease"
        );
        let hit = r.take_if_full_batch(T, p, "g", "w1", &set(&["c", "a", "b"]));
        assert_eq!(hit, Some(FullBatch { upto: 9, count: 3 }));
        assert_eq!(
            r.take_if_full_batch(T, p, "g", "w1", &set(&["a", "b", "c"])),
            None,
            "an entry dies on a hit"
        );
        assert_eq!(r.counters.hits.load(Relaxed), 1);
        assert_eq!(r.counters.misses.load(Relaxed), 6);
    }

    #[test]
    fn a_registry_told_to_miss_misses_every_lookup_and_counts_it() {
        let r = AckRegistry::new(64).missing_every_lookup(true);
        let p = Uuid::from_u128(1);
        born(&r, p, "g", "w1", 2, &["a", "b"]);
        assert_eq!(r.entries(), 1, "entries are still born");
        assert!(r
            .positions(Uuid::nil(), p, "g", "w1", &hashes(&["a"]))
            .is_none());
        assert!(r
            .take_if_full_batch(Uuid::nil(), p, "g", "w1", &set(&["a", "b"]))
            .is_none());
        assert_eq!(r.counters.misses.load(Relaxed), 1);
        assert_eq!(r.counters.hits.load(Relaxed), 0);
    }

    #[test]
    fn duplicate_delivered_ids_collapse_to_one_member() {
        let r = AckRegistry::new(64);
        let p = Uuid::now_v7();
        born(&r, p, "g", "w", 4, &["a", "b", "a"]); // offsets 2, 3, 4
        let hit = r
            .take_if_full_batch(T, p, "g", "w", &set(&["a", "b"]))
            .unwrap();
        assert_eq!(
            hit,
            FullBatch { upto: 3, count: 2 },
            "`a` resolves to its lowest offset, as in SQL"
        );
    }

    #[test]
    fn forget_only_evicts_its_own_lease() {
        let r = AckRegistry::new(64);
        let p = Uuid::now_v7();
        born(&r, p, "g", "new", 5, &["x"]);
        r.forget(p, "g", "old");
        assert_eq!(
            r.entries(),
            1,
            "a late ack from an old lease keeps the current entry"
        );
        r.forget(p, "g", "new");
        assert_eq!(r.entries(), 0);
        assert_eq!(r.bytes(), 0);
    }

    #[test]
    fn memory_bound_evicts_least_recently_used() {
        let r = AckRegistry::new(0); // every insert is over the bound
        let p = Uuid::now_v7();
        born(&r, p, "g", "w", 1, &["a"]);
        assert_eq!(r.entries(), 0);
        assert_eq!(r.counters.evictions.load(Relaxed), 1);
        assert_eq!(r.take_if_full_batch(T, p, "g", "w", &set(&["a"])), None);
    }

    #[test]
    fn ttl_sweep_on_insert() {
        let r = AckRegistry::new(64);
        let (p, q) = (Uuid::now_v7(), Uuid::now_v7());
        born(&r, p, "g", "w", 1, &["a"]);
        r.expire_all_for_test();
        born(&r, q, "g", "w", 1, &["b"]);
        assert_eq!(r.entries(), 1);
        assert_eq!(r.counters.expirations.load(Relaxed), 1);
        assert_eq!(r.take_if_full_batch(T, p, "g", "w", &set(&["a"])), None);
    }
}
