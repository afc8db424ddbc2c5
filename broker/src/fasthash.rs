//! The hasher of the maps a request touches once per message (the ack registry's delivered
//! hashes, the per-request grouping of pushed and acked items): a seeded multiply-fold over
//! 8-byte words, a few instructions per key where the standard SipHash spent hundreds.
//!
//! Each map gets its own seed, the next of a per-thread sequence that starts from the standard
//! library's random keys (a splitmix64 step: a few instructions, where drawing from
//! `RandomState` and hashing cost a few hundred for every map a request made), so bucket
//! positions are not predictable from the keys alone. The keys of the long-lived maps are xxh3 hashes of
//! transactionIds: colliding there takes 64-bit collisions of xxh3, not of this fold.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};

/// A `HashMap` with the fold hasher.
pub type FastMap<K, V> = HashMap<K, V, FoldState>;
/// A `HashSet` with the fold hasher.
pub type FastSet<T> = HashSet<T, FoldState>;

/// Builds `Fold` hashers with one random seed.
#[derive(Clone, Copy, Debug)]
pub struct FoldState {
    seed: u64,
}

thread_local! {
    /// Where this thread's sequence of seeds is: a random start, stepped once per map.
    static SEEDS: Cell<u64> = Cell::new(RandomState::new().hash_one(0x5eed_u64));
}

impl Default for FoldState {
    fn default() -> FoldState {
        let step = SEEDS.with(|s| {
            let next = s.get().wrapping_add(MULTIPLIER);
            s.set(next);
            next
        });
        FoldState {
            seed: splitmix(step),
        }
    }
}

/// splitmix64's output function: consecutive steps give unrelated seeds.
fn splitmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl BuildHasher for FoldState {
    type Hasher = Fold;

    fn build_hasher(&self) -> Fold {
        Fold(self.seed)
    }
}

/// The fold: each word xored in and multiplied; `finish` avalanches the state.
pub struct Fold(u64);

const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

impl Fold {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(MULTIPLIER).rotate_left(29);
    }
}

impl Hasher for Fold {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.mix(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 61));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The 64-bit finaliser of MurmurHash3: every input bit reaches every output bit.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_equal_and_near_keys_spread() {
        let state = FoldState::default();
        assert_eq!(state.hash_one("p-1"), state.hash_one("p-1"));
        assert_ne!(state.hash_one(("q", "p")), state.hash_one(("qp", "")));
        // The low bits (a table's bucket) of keys one bit apart differ for most keys.
        let low = |k: u64| state.hash_one(k) & 0xff;
        let spread: HashSet<u64> = (0..256u64).map(low).collect();
        assert!(spread.len() > 140, "{} buckets of 256", spread.len());
    }

    #[test]
    fn every_map_gets_a_seed_of_its_own() {
        let seeds: HashSet<u64> = (0..1000).map(|_| FoldState::default().seed).collect();
        assert_eq!(seeds.len(), 1000);
        let (a, b) = (FoldState::default(), FoldState::default());
        assert_ne!(a.hash_one("p-1"), b.hash_one("p-1"));
    }

    #[test]
    fn maps_find_what_they_hold() {
        let mut m: FastMap<[u8; 16], i64> = FastMap::default();
        for i in 0..1000u32 {
            let mut k = [0u8; 16];
            k[..4].copy_from_slice(&i.to_le_bytes());
            m.insert(k, i64::from(i));
        }
        assert_eq!(m.len(), 1000);
        let mut k = [0u8; 16];
        k[..4].copy_from_slice(&777u32.to_le_bytes());
        assert_eq!(m.get(&k), Some(&777));
    }
}
