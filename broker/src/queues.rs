//! Queue resources: listing the tenant's queues, one queue's partitions and cursors, and
//! deleting a queue with everything of it (`log_queue_delete_v1`), after which nothing
//! this broker holds about the queue may grant anything: the option hints, the named
//! partitions' ids, the hotlist, the segment cache and the parked long-polls (woken, they
//! answer empty) are cleared. PostgreSQL stays the authority: a cache entry that survived
//! would only name partitions the procedures no longer find.

use uuid::Uuid;

use crate::app::App;
use crate::peers::message::Event;
use crate::storage::procs::{self, queues::PartitionRow, queues::QueueListRow};
use crate::storage::DbError;
use ackbench_wire::{GroupCursor, PartitionDetail, QueueDetail, QueueSummary, QUEUE_MODE_GROUP};

/// The tenant's queues (only `name` when given), by name.
pub async fn list(
    app: &App,
    tenant: Uuid,
    name: Option<&str>,
) -> Result<Vec<(Uuid, QueueSummary)>, DbError> {
    let db = app.db("queues").await?;
    let rows = procs::queues::queues_list(&db, tenant, name).await?;
    Ok(rows.into_iter().map(|r| (r.queue.id, summary(r))).collect())
}

/// One queue with its partitions; `None` when the tenant has no such queue.
pub async fn detail(app: &App, tenant: Uuid, name: &str) -> Result<Option<QueueDetail>, DbError> {
    let Some((id, q)) = list(app, tenant, Some(name)).await?.into_iter().next() else {
        return Ok(None);
    };
    let db = app.db("queues").await?;
    let rows = procs::queues::queue_partitions(&db, id).await?;
    Ok(Some(QueueDetail {
        id: q.id,
        name: q.name,
        namespace: q.namespace,
        task: q.task,
        options: q.options,
        depth: q.depth,
        created_at: q.created_at,
        partitions: partitions(rows),
    }))
}

/// Deletes the tenant's queue `name`; `false` when there was none. Then forgets it everywhere
/// in this broker and answers its parked long-polls.
pub async fn delete(app: &App, tenant: Uuid, name: &str) -> Result<bool, DbError> {
    let db = app.db("queue_delete").await?;
    let pids = procs::queues::queue_delete(&db, tenant, name).await?;
    drop(db);
    let Some(pids) = pids else {
        return Ok(false);
    };
    forget(app, tenant, name, &pids);
    Ok(true)
}

/// Clears what this broker holds about a deleted queue, wakes its long-polls and tells the
/// other brokers.
fn forget(app: &App, tenant: Uuid, name: &str, pids: &[Uuid]) {
    app.segments.forget_partitions(pids);
    forget_hints(app, tenant, name);
    app.ready.publish(Event::QueueDeleted {
        tenant,
        queue: name.to_string(),
    });
}

/// Clears the option hints, named partitions' ids and candidate lists of a deleted queue and
/// answers its parked long-polls. (A broker told by a peer does this much; the deleted
/// partitions' decoded segments age out of its cache, no pop asking for them again.)
pub fn forget_hints(app: &App, tenant: Uuid, name: &str) {
    app.queue_metas.forget(tenant, name);
    app.partition_ids.forget_queue(tenant, name);
    if let Some(hot) = &app.ready.hotlist {
        hot.forget(&(tenant, name.to_string()));
    }
    app.ready.long_poll.queue_deleted(tenant, name);
}

fn summary(row: QueueListRow) -> QueueSummary {
    let q = row.queue;
    QueueSummary {
        id: q.id.to_string(),
        name: q.name,
        namespace: q.namespace,
        task: q.task,
        options: q.options,
        partitions: row.partitions,
        depth: row.depth,
        created_at: humantime::format_rfc3339_micros(q.created_at).to_string(),
    }
}

/// Rows of `log_queue_partitions_v1` (one per partition and consumer row, by partition name)
/// folded into partitions with their cursors.
fn partitions(rows: Vec<PartitionRow>) -> Vec<PartitionDetail> {
    let mut out: Vec<PartitionDetail> = Vec::new();
    for r in rows {
        let id = r.id.to_string();
        if out.last().is_none_or(|p| p.id != id) {
            out.push(PartitionDetail {
                name: r.name,
                id,
                last_offset: r.last_offset,
                depth: r.depth,
                consumers: Vec::new(),
            });
        }
        if let Some(group) = r.consumer_group {
            let p = out.last_mut().expect("pushed above");
            p.consumers.push(GroupCursor {
                consumer_group: (group != QUEUE_MODE_GROUP).then_some(group),
                committed: r.committed.unwrap_or(-1),
                leased: r.leased.unwrap_or(false),
            });
        }
    }
    out
}
