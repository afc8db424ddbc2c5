//! The history's records in fixed blocks: appended at the back, dropped from the front, read by
//! place. Each block holds `BLOCK` records (1.8 MB, a mapping of its own), so the memory follows
//! the records held, one block at a time, instead of a buffer that doubles and keeps its size.

use std::collections::VecDeque;

use super::Delivery;

/// Records per block: 16 384 of 112 bytes, above the 1 MiB from which the load generator's
/// allocations are mappings of their own, returned to the system when the block is dropped.
pub const BLOCK: usize = 16_384;

/// Records in order, numbered from 0 at the front.
#[derive(Default)]
pub struct Blocks {
    /// Every block but the last is full.
    blocks: VecDeque<Vec<Delivery>>,
    /// Records already dropped from the first block.
    front: usize,
    len: usize,
}

impl Blocks {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, d: Delivery) {
        if self.blocks.back().is_none_or(|b| b.len() == BLOCK) {
            self.blocks.push_back(Vec::with_capacity(BLOCK));
        }
        self.blocks.back_mut().expect("a block with room").push(d);
        self.len += 1;
    }

    /// Drops the first record; returns it.
    pub fn pop_front(&mut self) -> Option<Delivery> {
        let d = *self.get(0)?;
        self.front += 1;
        self.len -= 1;
        if self.front == BLOCK || self.len == 0 {
            self.blocks.pop_front();
            self.front = 0;
        }
        Some(d)
    }

    fn place(&self, i: usize) -> (usize, usize) {
        let j = self.front + i;
        (j / BLOCK, j % BLOCK)
    }

    pub fn get(&self, i: usize) -> Option<&Delivery> {
        if i >= self.len {
            return None;
        }
        let (b, k) = self.place(i);
        self.blocks[b].get(k)
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut Delivery> {
        if i >= self.len {
            return None;
        }
        let (b, k) = self.place(i);
        self.blocks[b].get_mut(k)
    }

    /// The records from place `from` on, in order.
    pub fn iter_from(&self, from: usize) -> impl DoubleEndedIterator<Item = &Delivery> {
        let (first, offset) = self.place(from.min(self.len));
        self.blocks
            .iter()
            .enumerate()
            .skip(first)
            .flat_map(move |(b, block)| match b == first {
                true => &block[offset.min(block.len())..],
                false => &block[..],
            })
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Delivery> {
        self.iter_from(0)
    }

    /// The place of the first record for which `pred` is false, the records being partitioned
    /// by it (true first), as `slice::partition_point`.
    pub fn partition_point(&self, pred: impl Fn(&Delivery) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match pred(self.get(mid).expect("within len")) {
                true => lo = mid + 1,
                false => hi = mid,
            }
        }
        lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Status, Verdict};

    fn record(n: u64) -> Delivery {
        Delivery {
            txn: [n as u8; 16],
            partition: 0,
            lease: 0,
            producer: 0,
            seq: n,
            index: 0,
            consumer: 0,
            answer: n,
            position: 0,
            group: 0,
            status: Status::Completed,
            lease_less: false,
            verdict: Verdict::Unanswered,
            lease_ms: 0,
            pop_sent: n,
            pop_answered: n,
            ack_sent: n,
            ack_answered: n,
        }
    }

    #[test]
    fn records_are_read_by_place_across_blocks_as_the_front_is_dropped() {
        let mut b = Blocks::default();
        let n = 3 * BLOCK as u64 + 5;
        for i in 0..n {
            b.push(record(i));
        }
        assert_eq!((b.len(), b.blocks.len()), (n as usize, 4));
        for _ in 0..BLOCK + 7 {
            b.pop_front();
        }
        assert_eq!(b.blocks.len(), 3, "an emptied block is given back");
        let first = BLOCK as u64 + 7;
        assert_eq!(b.get(0).unwrap().seq, first);
        assert_eq!(b.get(BLOCK).unwrap().seq, first + BLOCK as u64);
        assert!(b.get(b.len()).is_none());
        b.get_mut(1).unwrap().seq = 0;
        assert_eq!(b.iter().nth(1).unwrap().seq, 0);
        let seqs: Vec<u64> = b.iter_from(BLOCK - 8).take(3).map(|d| d.seq).collect();
        let at = first + BLOCK as u64 - 8;
        assert_eq!(seqs, [at, at + 1, at + 2]);
        assert_eq!(b.iter().next_back().unwrap().seq, n - 1);
        assert_eq!(b.iter().count(), b.len());
        assert_eq!(b.iter_from(b.len()).count(), 0);
        assert_eq!(b.partition_point(|d| d.answer < at), BLOCK - 8);
        while b.pop_front().is_some() {}
        assert!(b.is_empty() && b.blocks.is_empty());
        b.push(record(9));
        assert_eq!(b.get(0).unwrap().seq, 9);
    }
}
