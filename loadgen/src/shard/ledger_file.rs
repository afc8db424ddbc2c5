//! The ledger a shard leaves beside its results for `ackbench merge`: per cell round, every
//! (message, group) obligation the shard knew and its fate, and the DLQ listing it read. A
//! shard alone cannot audit: a message it pushed may have been acked by another shard, and a
//! message it answered `retry` may have been acked elsewhere later. The merge adds the shards'
//! ledgers up (`Fate::merge`) and audits the union the way one process audits its own.
//!
//! File `ledger-<round tag>.bin`, deflated; inside, little-endian:
//! `ACKLEDG1`, u32 groups, per group u64 entries of (16-byte transactionId hash, u32
//! deliveries, u8 flags: 1 acked, 2 dead-lettered, 4 dropped); then u8 1 when the DLQ listing
//! was read, followed per group by u64 hashes of 16 bytes (u8 0 when it was not).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;

use ackbench_ledger::{ByTxn, Fate, TxnSet};

const MAGIC: &[u8; 8] = b"ACKLEDG1";

/// What one shard knew of one cell round when it ended.
#[derive(Debug, Default, PartialEq)]
pub struct ShardLedger {
    /// Per consumer group: every obligation this shard knew and its fate.
    pub fates: Vec<ByTxn<Fate>>,
    /// The DLQ listing per group, when it could be read.
    pub dlq: Option<Vec<TxnSet>>,
}

/// The ledger file of the round tagged `tag` in a shard's output directory.
pub fn path(dir: &Path, tag: &str) -> PathBuf {
    dir.join(format!("ledger-{tag}.bin"))
}

/// Writes `ledger` to `path`, naming the file in an error.
pub fn write(path: &Path, ledger: &ShardLedger) -> Result<(), String> {
    let mut out = DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    out.write_all(&encode(ledger))
        .and_then(|_| out.finish())
        .and_then(|bytes| std::fs::write(path, bytes))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads a ledger file written by `write`, naming the file in an error.
pub fn read(path: &Path) -> Result<ShardLedger, String> {
    let name = path.display();
    let packed = std::fs::read(path).map_err(|e| format!("{name}: {e}"))?;
    let mut bytes = Vec::new();
    DeflateDecoder::new(packed.as_slice())
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{name}: not a shard ledger ({e})"))?;
    decode(&bytes).map_err(|e| format!("{name}: not a shard ledger ({e})"))
}

fn encode(ledger: &ShardLedger) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.extend((ledger.fates.len() as u32).to_le_bytes());
    for group in &ledger.fates {
        b.extend((group.len() as u64).to_le_bytes());
        for (txn, f) in group {
            b.extend(txn);
            b.extend(f.deliveries.to_le_bytes());
            b.push(f.acked as u8 | (f.dead_lettered as u8) << 1 | (f.dropped as u8) << 2);
        }
    }
    match &ledger.dlq {
        None => b.push(0),
        Some(groups) => {
            b.push(1);
            for set in groups {
                b.extend((set.len() as u64).to_le_bytes());
                set.iter().for_each(|t| b.extend(t));
            }
        }
    }
    b
}

/// A cursor over the decoded bytes; every read says when the file ends early.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        if self.0.len() < N {
            return Err("it ends early".into());
        }
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        Ok(head.try_into().expect("N bytes"))
    }

    fn u64(&mut self) -> Result<u64, String> {
        self.take::<8>().map(u64::from_le_bytes)
    }
}

fn decode(bytes: &[u8]) -> Result<ShardLedger, String> {
    let mut b = Bytes(bytes);
    if &b.take::<8>()? != MAGIC {
        return Err("wrong magic".into());
    }
    let groups = u32::from_le_bytes(b.take()?) as usize;
    let mut fates = Vec::with_capacity(groups);
    for _ in 0..groups {
        let mut group = ByTxn::default();
        for _ in 0..b.u64()? {
            let txn = b.take::<16>()?;
            let deliveries = u32::from_le_bytes(b.take()?);
            let [flags] = b.take::<1>()?;
            let fate = Fate {
                deliveries,
                acked: flags & 1 != 0,
                dead_lettered: flags & 2 != 0,
                dropped: flags & 4 != 0,
            };
            group.insert(txn, fate);
        }
        fates.push(group);
    }
    let dlq = match b.take::<1>()? {
        [0] => None,
        _ => Some(
            (0..groups)
                .map(|_| (0..b.u64()?).map(|_| b.take::<16>()).collect())
                .collect::<Result<Vec<TxnSet>, String>>()?,
        ),
    };
    match b.0.is_empty() {
        true => Ok(ShardLedger { fates, dlq }),
        false => Err("trailing bytes".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ackbench_wire::txn_hash;

    #[test]
    fn a_ledger_round_trips_through_its_file() {
        let fate = |deliveries, acked, dead_lettered, dropped| Fate {
            deliveries,
            acked,
            dead_lettered,
            dropped,
        };
        let mut g0 = ByTxn::default();
        g0.insert(txn_hash("a"), fate(1, true, false, false));
        g0.insert(txn_hash("b"), fate(3, false, true, false));
        let mut g1 = ByTxn::default();
        g1.insert(txn_hash("a"), fate(0, false, false, true));
        let ledger = ShardLedger {
            fates: vec![g0, g1],
            dlq: Some(vec![TxnSet::from_iter([txn_hash("b")]), TxnSet::default()]),
        };
        let dir = std::env::temp_dir().join(format!("ackbench-ledger-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = path(&dir, "none_t1_r1");
        write(&file, &ledger).unwrap();
        assert_eq!(read(&file).unwrap(), ledger);
        let unlisted = ShardLedger {
            dlq: None,
            ..ledger
        };
        write(&file, &unlisted).unwrap();
        assert_eq!(read(&file).unwrap(), unlisted);
        std::fs::write(&file, b"garbage").unwrap();
        let e = read(&file).unwrap_err();
        assert!(e.contains("not a shard ledger"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
