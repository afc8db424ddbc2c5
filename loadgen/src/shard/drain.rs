//! The end of a shard's drain. One process knows every message it pushed and ends its drain
//! when its ledger owes nothing; a shard cannot: what it pushed may be acked by another shard,
//! and what it answered `retry` may be acked elsewhere later. So a shard's drain ends on the
//! queue's own state, read from the broker (`GET /api/v1/resources/queues/:queue`): for every
//! consumer group, every partition's cursor has reached the partition's last offset and no
//! lease is live, and this shard has no push between its send and its booking. A shard whose
//! producers stopped keeps consuming until then, so it also drains what slower shards push.

use ackbench_wire::{PartitionDetail, QUEUE_MODE_GROUP};

/// Whether the queue is drained for every group of `groups` (`None` or `__QUEUE_MODE__`: the
/// queue mode): each partition that holds messages has, for each group, a cursor at its last
/// offset with no live lease.
pub fn queue_drained(partitions: &[PartitionDetail], groups: &[Option<String>]) -> bool {
    partitions.iter().filter(|p| p.last_offset >= 0).all(|p| {
        groups.iter().all(|g| {
            p.consumers.iter().any(|c| {
                same_group(c.consumer_group.as_deref(), g.as_deref())
                    && c.committed >= p.last_offset
                    && !c.leased
            })
        })
    })
}

fn same_group(listed: Option<&str>, ours: Option<&str>) -> bool {
    named(listed) == named(ours)
}

/// A group's name; `None` for the queue mode, however it is written.
fn named(group: Option<&str>) -> Option<&str> {
    group.filter(|g| *g != QUEUE_MODE_GROUP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ackbench_wire::GroupCursor;

    fn detail(partitions: Vec<PartitionDetail>) -> Vec<PartitionDetail> {
        partitions
    }

    fn partition(last_offset: i64, cursors: &[(Option<&str>, i64, bool)]) -> PartitionDetail {
        PartitionDetail {
            name: "p".into(),
            id: "id".into(),
            last_offset,
            depth: 0,
            consumers: cursors
                .iter()
                .map(|(g, committed, leased)| GroupCursor {
                    consumer_group: g.map(String::from),
                    committed: *committed,
                    leased: *leased,
                })
                .collect(),
        }
    }

    #[test]
    fn drained_when_every_groups_cursor_is_at_the_end_without_a_lease() {
        let groups = [Some("a".to_string()), None];
        let done = partition(9, &[(Some("a"), 9, false), (None, 9, false)]);
        let empty = partition(-1, &[]);
        assert!(queue_drained(&detail(vec![done.clone(), empty]), &groups));
        let behind = partition(9, &[(Some("a"), 8, false), (None, 9, false)]);
        assert!(!queue_drained(&detail(vec![done.clone(), behind]), &groups));
        let leased = partition(9, &[(Some("a"), 9, true), (None, 9, false)]);
        assert!(!queue_drained(&detail(vec![leased]), &groups));
        let unread = partition(9, &[(None, 9, false)]);
        assert!(
            !queue_drained(&detail(vec![unread]), &groups),
            "group a never read it"
        );
        let listed_as_queue_mode = partition(4, &[(Some(QUEUE_MODE_GROUP), 4, false)]);
        assert!(queue_drained(
            &detail(vec![listed_as_queue_mode]),
            &[Some(QUEUE_MODE_GROUP.to_string())]
        ));
    }
}
