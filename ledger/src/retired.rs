//! The ledger's retired obligations: (message, group) pairs acked on their only delivery, kept
//! in a compact form keyed by where the message came from (its producer, push number and place
//! in the push) rather than one map entry each, so a long run's ledger stays bounded while the
//! audit still knows every one of them.
//!
//! Per group and producer, pushes whose every message retired are ranges of push numbers;
//! a push partly retired is a bitset of its messages. Producers push in order and consumers
//! settle roughly in order, so the ranges stay few: their count follows the open obligations,
//! not the run's length.

use std::collections::{BTreeMap, HashMap};

use xxhash_rust::xxh3::xxh3_64;

/// Where a message came from: its producer (`xxh3_64` of the transactionId's `{tag}-{id}`
/// prefix, never 0, as the history names it), its push number and its place in that push.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Origin {
    pub producer: u64,
    pub seq: u64,
    pub index: u32,
}

impl Origin {
    /// The origin of a transactionId this load generator writes (`{tag}-{id}-{seq}-{index}`,
    /// numbers in their canonical decimal form, so one origin stands for one transactionId);
    /// `None` for any other.
    pub fn of(transaction_id: &str) -> Option<Origin> {
        let mut parts = transaction_id.rsplitn(3, '-');
        let (index, seq, prefix) = (parts.next()?, parts.next()?, parts.next()?);
        if prefix.is_empty() || !canonical(index) || !canonical(seq) {
            return None;
        }
        let producer = producer_key(prefix);
        Some(Origin {
            producer,
            seq: seq.parse().ok()?,
            index: index.parse().ok()?,
        })
    }
}

/// The key of a producer whose transactionIds start with `prefix` (`{tag}-{id}`, a trailing
/// `-` left out).
pub fn producer_key(prefix: &str) -> u64 {
    let prefix = prefix.strip_suffix('-').unwrap_or(prefix);
    xxh3_64(prefix.as_bytes()).max(1)
}

/// Decimal digits without a leading zero (but "0" itself).
fn canonical(number: &str) -> bool {
    !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit())
        && (number.len() == 1 || !number.starts_with('0'))
}

/// One push as the producer sent it: its producer's key and number, for the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PushOrigin {
    pub producer: u64,
    pub seq: u64,
}

impl PushOrigin {
    /// Push `seq` of the producer whose transactionIds start with `prefix` (`{tag}-{id}-`).
    pub fn new(prefix: &str, seq: u64) -> PushOrigin {
        PushOrigin {
            producer: producer_key(prefix),
            seq,
        }
    }
}

/// Push numbers as disjoint half-open ranges, adjacent ones merged.
#[derive(Default)]
struct Ranges(BTreeMap<u64, u64>);

impl Ranges {
    fn contains(&self, n: u64) -> bool {
        self.0
            .range(..=n)
            .next_back()
            .is_some_and(|(_, &end)| n < end)
    }

    fn insert(&mut self, n: u64) {
        if self.contains(n) {
            return;
        }
        let mut start = n;
        let mut end = n + 1;
        if let Some((&s, &e)) = self.0.range(..n).next_back() {
            if e == n {
                start = s;
            }
        }
        if let Some(e) = self.0.remove(&(n + 1)) {
            end = e;
        }
        self.0.insert(start, end);
    }
}

/// A push some of whose messages retired: which ones, out of how many.
struct Partial {
    len: u32,
    count: u32,
    bits: Vec<u64>,
}

impl Partial {
    fn new(len: u32) -> Partial {
        Partial {
            len,
            count: 0,
            bits: vec![0; (len as usize).div_ceil(64)],
        }
    }

    fn contains(&self, index: u32) -> bool {
        let i = index as usize;
        self.bits
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Sets message `index`; true when it was not set yet. The count grows in a branch, not as
    /// `count += u32::from(new)` with `new` returned: rustc 1.95 at opt-level 2 and above
    /// dropped that increment here (rust-lang/rust#158206), so no push ever completed and a
    /// release build's retired form grew by a piece per push.
    fn insert(&mut self, index: u32) -> bool {
        if self.contains(index) {
            return false;
        }
        let i = index as usize;
        self.bits[i / 64] |= 1u64 << (i % 64);
        self.count += 1;
        true
    }
}

/// One producer's retired messages in one group.
#[derive(Default)]
struct ProducerRetired {
    whole: Ranges,
    partial: HashMap<u64, Partial>,
}

/// The retired (message, group) pairs of one group, by origin.
#[derive(Default)]
pub struct Retired {
    producers: HashMap<u64, ProducerRetired>,
    /// Retired pairs, less those revived (delivered or answered again after retiring).
    count: u64,
}

impl Retired {
    /// Whether `o` retired in this group.
    pub fn contains(&self, o: &Origin) -> bool {
        self.producers.get(&o.producer).is_some_and(|p| {
            p.whole.contains(o.seq) || p.partial.get(&o.seq).is_some_and(|x| x.contains(o.index))
        })
    }

    /// Retires message `o` of a push of `len` messages.
    pub fn insert(&mut self, o: &Origin, len: u32) {
        if o.index >= len {
            return;
        }
        let p = self.producers.entry(o.producer).or_default();
        if p.whole.contains(o.seq) {
            return;
        }
        let partial = p.partial.entry(o.seq).or_insert_with(|| Partial::new(len));
        if !partial.insert(o.index) {
            return;
        }
        self.count += 1;
        if partial.count == partial.len {
            p.partial.remove(&o.seq);
            p.whole.insert(o.seq);
        }
    }

    /// One retired pair taken back into the live ledger: it stays in the ranges (the live
    /// entry is looked up first) but no longer counts here.
    pub fn revive(&mut self) {
        self.count = self.count.saturating_sub(1);
    }

    /// Retired pairs not revived: acked, on exactly one delivery each.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// How many ranges and partial pushes hold them (what the retired form costs).
    pub fn pieces(&self) -> usize {
        self.producers
            .values()
            .map(|p| p.whole.0.len() + p.partial.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_stands_for_one_transaction_id() {
        let o = Origin::of("none_t1_r1-3-17-4").expect("ours");
        assert_eq!((o.seq, o.index), (17, 4));
        assert_eq!(o.producer, PushOrigin::new("none_t1_r1-3-", 17).producer);
        for other in [
            "none_t1_r1-3-017-4",
            "x-3-+17-4",
            "x-3-17-",
            "a-b",
            "-1-2",
            "x-1-2-3e",
        ] {
            assert_eq!(Origin::of(other), None, "{other}");
        }
        assert!(Origin::of("x-3-0-0").is_some());
    }

    #[test]
    fn pushes_retired_in_order_collapse_into_one_range() {
        let mut r = Retired::default();
        let producer = producer_key("t-1-");
        for seq in (0..1000).rev() {
            for index in 0..3 {
                r.insert(
                    &Origin {
                        producer,
                        seq,
                        index,
                    },
                    3,
                );
            }
        }
        assert_eq!((r.count(), r.pieces()), (3000, 1));
        assert!(r.contains(&Origin {
            producer,
            seq: 999,
            index: 2
        }));
        assert!(!r.contains(&Origin {
            producer,
            seq: 1000,
            index: 0
        }));
        r.insert(
            &Origin {
                producer,
                seq: 2000,
                index: 1,
            },
            3,
        );
        assert!(!r.contains(&Origin {
            producer,
            seq: 2000,
            index: 0
        }));
        assert_eq!(r.pieces(), 2);
    }
}
