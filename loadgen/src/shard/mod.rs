//! Sharded load generation: `ackbench run SCENARIO --shard I/N --run-id ID` runs one slice of a
//! scenario against a broker given by URL, and `ackbench merge DIR...` puts the slices back
//! together. This module owns the `--shard` value, the slicing (which workers, partitions and
//! how much offered rate a shard owns) and the run id every shard shares; `drain` the drain a
//! shard can judge (the queue's cursors, not its own ledger), `ledger_file` the ledger a shard
//! leaves for the merge, `merge` the merge itself.
//!
//! Slicing follows k6's execution segments: shard `I` of `N` owns the items
//! `floor(total·I/N) .. floor(total·(I+1)/N)` of every list, so the shares are disjoint and add
//! up exactly to the whole, whatever `total` and `N` are (a shard may own none). Workers keep
//! their index in the whole run (producer 5 is producer 5 in whichever shard runs it), and with
//! it their seed, their first partition and their transactionIds: the union of the shards is
//! the whole scenario, worker for worker. The open-loop rate is per producer, so a shard offers
//! `rate × its producers / producers`.

pub mod drain;
pub mod ledger_file;
pub mod merge;

use std::ops::Range;
use std::str::FromStr;

/// One slice of a sharded run: shard `index` of `count`, from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// The whole run in one process.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Whether this is a real slice (more than one shard).
    pub fn is_sharded(&self) -> bool {
        self.count > 1
    }

    /// The indices of `total` items this shard owns (k6's execution segment).
    pub fn slice(&self, total: u32) -> Range<u32> {
        let edge = |i: u32| (total as u64 * i as u64 / self.count as u64) as u32;
        edge(self.index)..edge(self.index + 1)
    }

    /// The offered rate (msg/s) this shard's producers carry, of `rate` over `producers`.
    pub fn rate_share(&self, rate: f64, producers: u32) -> f64 {
        let mine = self.slice(producers).len() as f64;
        rate * mine / producers.max(1) as f64
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// `I/N`: `I` from 0 to `N - 1`.
    fn from_str(s: &str) -> Result<Shard, String> {
        let not_a_shard = || {
            format!("`{s}` is not I/N (this shard's index from 0, a slash, the shard count: 0/3)")
        };
        let (i, n) = s.split_once('/').ok_or_else(not_a_shard)?;
        let index: u32 = i.trim().parse().map_err(|_| not_a_shard())?;
        let count: u32 = n.trim().parse().map_err(|_| not_a_shard())?;
        if count == 0 {
            return Err(format!("`{s}`: the shard count must be at least 1"));
        }
        if index >= count {
            return Err(format!(
                "`{s}`: shard index {index} is out of range for {count} shards (0 to {})",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }
}

/// Checks a `--run-id`: it names the queues and transactionIds every shard shares, inside
/// database-safe tags, so 1 to 24 lower-case letters or digits.
pub fn check_run_id(id: &str) -> Result<(), String> {
    let ok = (1..=24).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    match ok {
        true => Ok(()),
        false => Err(format!(
            "--run-id `{id}`: use 1 to 24 lower-case letters or digits (it names the queues every shard shares)"
        )),
    }
}

/// The seed of a sharded run given none: derived from the run id, so every shard agrees on it
/// without being told.
pub fn seed_of_run(run_id: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(run_id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(count: u32) -> impl Iterator<Item = Shard> {
        (0..count).map(move |index| Shard { index, count })
    }

    /// For every total and shard count, the slices tile `0..total` in order: disjoint,
    /// contiguous, adding up exactly; and the rate shares add up to the whole rate.
    #[test]
    fn shares_over_n_shards_add_up_exactly_to_the_whole() {
        for count in 1..=9u32 {
            for total in 0..=40u32 {
                let mut next = 0;
                for s in all(count) {
                    let r = s.slice(total);
                    assert_eq!(r.start, next, "{total} over {s}: contiguous");
                    next = r.end;
                    let width = r.len() as u32;
                    assert!(
                        width == total / count || width == total / count + 1,
                        "{total} over {s}: balanced ({width})"
                    );
                }
                assert_eq!(next, total, "{total} over {count}: adds up");
                let rate: f64 = all(count).map(|s| s.rate_share(1234.5, total)).sum();
                let whole = if total == 0 { 0.0 } else { 1234.5 };
                assert!((rate - whole).abs() < 1e-9, "{total} over {count}: {rate}");
            }
        }
    }

    #[test]
    fn a_single_shard_is_the_whole_run() {
        assert_eq!(Shard::WHOLE.slice(7), 0..7);
        assert!(!Shard::WHOLE.is_sharded());
        assert_eq!("0/1".parse::<Shard>().unwrap(), Shard::WHOLE);
    }

    #[test]
    fn bad_shards_are_refused_naming_what_is_wrong() {
        assert_eq!(
            "2/3".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 3 }
        );
        let e = |s: &str| s.parse::<Shard>().unwrap_err();
        assert!(e("3/3").contains("shard index 3 is out of range for 3 shards (0 to 2)"));
        assert!(e("4/3").contains("out of range"));
        assert!(e("0/0").contains("the shard count must be at least 1"));
        for bad in ["x", "1", "a/3", "1/b", "-1/3", ""] {
            assert!(e(bad).contains("is not I/N"), "{bad}: {}", e(bad));
        }
    }

    #[test]
    fn run_ids_must_be_safe_in_names() {
        assert!(check_run_id("bench7").is_ok());
        for bad in ["", "Upper", "with space", "a_b", "a-b", &"x".repeat(25)] {
            assert!(check_run_id(bad).is_err(), "{bad}");
        }
        assert_eq!(seed_of_run("a"), seed_of_run("a"));
        assert_ne!(seed_of_run("a"), seed_of_run("b"));
    }
}
