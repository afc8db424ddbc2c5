//! Recently written or read segments, held decoded so a pop of k messages moves and decodes k
//! frames, not the whole segment.
//!
//! A segment is immutable once written, so a cached copy can never be stale: at worst retention
//! has deleted the stored one, and then the pop's claim (the authority) never points into it.
//! That holds within one history of the database: a failover to a standby that lacked the
//! last commits hands their offsets out again, so the cache is cleared when the WAL timeline
//! changes (`storage::timeline`), and a pop that ran across the change is answered 503.
//! The push path writes through (the frames it just committed), pops fill what they had to
//! fetch, and the pop procedure ships a blob only for segments the broker did not list as held.
//! A decoded segment is one buffer (the uncompressed blob) plus an index of its frames with
//! their transactionId hashes precomputed: delivering a frame allocates nothing and hashes
//! nothing. Bounded by bytes, least recently used first out.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use lru::LruCache;
use uuid::Uuid;

use ackbench_wire::{txn_hash, TxnHash};

/// Where one frame's parts sit in the segment's buffer.
struct FrameIndex {
    id_at: u32,
    txn: (u32, u32),
    payload: (u32, u32),
    hash: TxnHash,
}

/// One frame, borrowed from its decoded segment.
pub struct FrameView<'a> {
    pub message_id: Uuid,
    pub transaction_id: &'a str,
    /// JSON text, checked UTF-8 when the segment was decoded (handed out as bytes: the pop
    /// answer copies them as they are, so delivering a frame does not check them again).
    pub payload: &'a [u8],
    pub hash: TxnHash,
}

/// A segment's frames, decoded once.
pub struct DecodedSegment {
    pub base: i64,
    /// `created_at` as RFC 3339 with microseconds, formatted once.
    pub created_at: String,
    raw: Vec<u8>,
    frames: Vec<FrameIndex>,
}

impl DecodedSegment {
    /// Decodes a stored blob (see `segment`), opening sealed payloads with `sealer`.
    pub fn decode(
        base: i64,
        created: SystemTime,
        blob: &[u8],
        sealer: Option<&crate::crypto::Sealer>,
    ) -> Result<DecodedSegment, String> {
        let raw = crate::segment::decode_raw(blob, sealer)?;
        DecodedSegment::from_raw(base, created, raw)
    }

    /// Indexes an uncompressed segment buffer (what `segment::pack_raw` builds).
    pub fn from_raw(
        base: i64,
        created: SystemTime,
        raw: Vec<u8>,
    ) -> Result<DecodedSegment, String> {
        let frames = index_frames(&raw)?;
        Ok(DecodedSegment {
            base,
            created_at: humantime::format_rfc3339_micros(created).to_string(),
            raw,
            frames,
        })
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Inclusive last offset.
    pub fn end(&self) -> i64 {
        self.base + self.frames.len() as i64 - 1
    }

    /// The frame at `offset`, when this segment holds it.
    pub fn frame_at(&self, offset: i64) -> Option<FrameView<'_>> {
        let k = usize::try_from(offset.checked_sub(self.base)?).ok()?;
        let f = self.frames.get(k)?;
        let slice = |(at, len): (u32, u32)| &self.raw[at as usize..(at + len) as usize];
        let id: [u8; 16] = self.raw[f.id_at as usize..f.id_at as usize + 16]
            .try_into()
            .expect("16 bytes");
        Some(FrameView {
            message_id: Uuid::from_bytes(id),
            // Both were checked to be UTF-8 by `index_frames`.
            transaction_id: std::str::from_utf8(slice(f.txn)).unwrap_or_default(),
            payload: slice(f.payload),
            hash: f.hash,
        })
    }

    fn bytes(&self) -> usize {
        self.raw.len() + self.frames.len() * std::mem::size_of::<FrameIndex>() + 96
    }
}

/// Walks the uncompressed layout once: positions, UTF-8 checks, transactionId hashes.
fn index_frames(raw: &[u8]) -> Result<Vec<FrameIndex>, String> {
    let mut r = crate::segment::Cursor::new(raw);
    r.header()?;
    let count = r.u32()? as usize;
    let mut frames = Vec::with_capacity(count.min(1 << 16));
    for _ in 0..count {
        let id_at = r.pos() as u32;
        r.take(16)?;
        let txn_len = r.u32()? as usize;
        let txn_at = r.pos() as u32;
        let txn = std::str::from_utf8(r.take(txn_len)?)
            .map_err(|_| "segment holds a transactionId that is not UTF-8".to_string())?;
        let hash = txn_hash(txn);
        let payload_len = r.u32()? as usize;
        let payload_at = r.pos() as u32;
        std::str::from_utf8(r.take(payload_len)?)
            .map_err(|_| "segment holds a payload that is not UTF-8".to_string())?;
        frames.push(FrameIndex {
            id_at,
            txn: (txn_at, txn_len as u32),
            payload: (payload_at, payload_len as u32),
            hash,
        });
    }
    Ok(frames)
}

type Key = (Uuid, i64);

struct State {
    lru: LruCache<Key, Arc<DecodedSegment>>,
    /// partition -> base offset -> end offset, for range look-ups.
    by_partition: HashMap<Uuid, BTreeMap<i64, i64>>,
    bytes: usize,
}

/// The cache, shared by the push and pop paths.
pub struct SegmentCache {
    max_bytes: usize,
    state: Mutex<State>,
}

impl SegmentCache {
    /// A cache of at most `max_mb` MiB (0 keeps nothing).
    pub fn new(max_mb: usize) -> SegmentCache {
        SegmentCache {
            max_bytes: max_mb << 20,
            state: Mutex::new(State {
                lru: LruCache::unbounded(),
                by_partition: HashMap::new(),
                bytes: 0,
            }),
        }
    }

    pub fn enabled(&self) -> bool {
        self.max_bytes > 0
    }

    /// Keeps `segment` of `partition`, evicting the least recently used beyond the bound.
    pub fn insert(&self, partition: Uuid, segment: Arc<DecodedSegment>) {
        let size = segment.bytes();
        if size > self.max_bytes {
            return;
        }
        let mut s = self.state.lock().expect("segment cache lock");
        let key = (partition, segment.base);
        s.by_partition
            .entry(partition)
            .or_default()
            .insert(segment.base, segment.end());
        if let Some(old) = s.lru.put(key, segment) {
            s.bytes -= old.bytes();
        }
        s.bytes += size;
        while s.bytes > self.max_bytes {
            let Some(((pid, base), old)) = s.lru.pop_lru() else {
                break;
            };
            s.bytes -= old.bytes();
            if let Some(bases) = s.by_partition.get_mut(&pid) {
                bases.remove(&base);
                if bases.is_empty() {
                    s.by_partition.remove(&pid);
                }
            }
        }
    }

    /// Drops every held segment (the database failed over to another history).
    pub fn clear(&self) {
        let mut s = self.state.lock().expect("segment cache lock");
        s.lru.clear();
        s.by_partition.clear();
        s.bytes = 0;
    }

    /// Drops every held segment of these partitions (their queue was deleted).
    pub fn forget_partitions(&self, partitions: &[Uuid]) {
        let mut s = self.state.lock().expect("segment cache lock");
        for pid in partitions {
            let Some(bases) = s.by_partition.remove(pid) else {
                continue;
            };
            for base in bases.keys() {
                if let Some(old) = s.lru.pop(&(*pid, *base)) {
                    s.bytes -= old.bytes();
                }
            }
        }
    }

    /// The held segments of `partition` overlapping offsets `from..=to`, at most `limit`
    /// (the earliest first).
    pub fn overlapping(
        &self,
        partition: Uuid,
        from: i64,
        to: i64,
        limit: usize,
    ) -> Vec<Arc<DecodedSegment>> {
        let mut s = self.state.lock().expect("segment cache lock");
        let bases: Vec<i64> = match s.by_partition.get(&partition) {
            None => return Vec::new(),
            Some(map) => {
                // The segment holding `from` starts at or before it.
                let first = map.range(..=from).next_back().map(|(b, _)| *b);
                let start = first.unwrap_or(from);
                map.range(start..=to)
                    .filter(|(_, end)| **end >= from)
                    .map(|(b, _)| *b)
                    .take(limit)
                    .collect()
            }
        };
        bases
            .into_iter()
            .filter_map(|b| s.lru.get(&(partition, b)).cloned())
            .collect()
    }

    /// The latest `limit` held segments of `partition`.
    pub fn latest(&self, partition: Uuid, limit: usize) -> Vec<Arc<DecodedSegment>> {
        let mut s = self.state.lock().expect("segment cache lock");
        let bases: Vec<i64> = match s.by_partition.get(&partition) {
            None => return Vec::new(),
            Some(map) => map.keys().rev().take(limit).copied().collect(),
        };
        bases
            .into_iter()
            .filter_map(|b| s.lru.get(&(partition, b)).cloned())
            .collect()
    }

    /// Segments and bytes held.
    pub fn usage(&self) -> (usize, usize) {
        let s = self.state.lock().expect("segment cache lock");
        (s.lru.len(), s.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::{pack, pack_raw, FrameRef};

    fn frames(n: usize) -> (Vec<Uuid>, Vec<String>) {
        let ids = (0..n).map(|_| Uuid::now_v7()).collect();
        let txns = (0..n).map(|i| format!("t-{i}")).collect();
        (ids, txns)
    }

    fn refs<'a>(ids: &[Uuid], txns: &'a [String]) -> Vec<FrameRef<'a>> {
        ids.iter()
            .zip(txns)
            .map(|(id, t)| FrameRef {
                message_id: *id,
                transaction_id: t,
                payload: br#"{"k":"v"}"#,
            })
            .collect()
    }

    #[test]
    fn decoded_frames_match_what_was_packed() {
        let (ids, txns) = frames(3);
        let seg =
            DecodedSegment::decode(10, SystemTime::now(), &pack(&refs(&ids, &txns)), None).unwrap();
        assert_eq!((seg.base, seg.end(), seg.len()), (10, 12, 3));
        let f = seg.frame_at(11).unwrap();
        assert_eq!(f.message_id, ids[1]);
        assert_eq!(f.transaction_id, "t-1");
        assert_eq!(f.payload, br#"{"k":"v"}"#);
        assert_eq!(f.hash, txn_hash("t-1"));
        assert!(seg.frame_at(9).is_none() && seg.frame_at(13).is_none());
        let same = DecodedSegment::from_raw(10, SystemTime::now(), pack_raw(&refs(&ids, &txns)));
        assert_eq!(same.unwrap().frame_at(12).unwrap().message_id, ids[2]);
    }

    #[test]
    fn overlapping_finds_the_segment_holding_the_start_and_those_after() {
        let cache = SegmentCache::new(16);
        let p = Uuid::now_v7();
        for base in [0, 5, 10] {
            let (ids, txns) = frames(5);
            let raw = pack_raw(&refs(&ids, &txns));
            let seg = DecodedSegment::from_raw(base, SystemTime::now(), raw).unwrap();
            cache.insert(p, Arc::new(seg));
        }
        let bases = |v: Vec<Arc<DecodedSegment>>| v.iter().map(|s| s.base).collect::<Vec<_>>();
        assert_eq!(bases(cache.overlapping(p, 7, 7, 8)), vec![5]);
        assert_eq!(bases(cache.overlapping(p, 7, 11, 8)), vec![5, 10]);
        assert_eq!(bases(cache.overlapping(p, 15, 20, 8)), Vec::<i64>::new());
        assert_eq!(bases(cache.latest(p, 2)), vec![10, 5]);
    }

    #[test]
    fn the_byte_bound_evicts_least_recently_used() {
        let cache = SegmentCache::new(1);
        let p = Uuid::now_v7();
        let big = "x".repeat(300 << 10);
        for base in 0..4 {
            let raw = pack_raw(&[FrameRef {
                message_id: Uuid::now_v7(),
                transaction_id: "t",
                payload: format!("\"{big}\"").as_bytes(),
            }]);
            let seg = DecodedSegment::from_raw(base, SystemTime::now(), raw).unwrap();
            cache.insert(p, Arc::new(seg));
        }
        let (n, bytes) = cache.usage();
        assert!(n < 4 && bytes <= 1 << 20, "{n} segments, {bytes} bytes");
        assert_eq!(cache.latest(p, 8)[0].base, 3, "the newest stays");
    }
}
