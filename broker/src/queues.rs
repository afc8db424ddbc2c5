//! Queue resources: listing the tenant's queues, one queue's partitions and cursors, and
//! deleting a queue with everything of it (`queen.log_queue_delete_v1`), after which nothing
//! this broker holds about the queue may grant anything: the option hints, the named
//! partitions' ids, the hotlist, the segment cache and the parked long-polls (woken, they
//! answer empty) are cleared. PostgreSQL stays the authority: a cache entry that survived
//! would only name partitions the procedures no longer find.

use std::time::SystemTime;

use tokio_postgres::Row;
use uuid::Uuid;

use crate::app::App;
use crate::storage::DbError;
use ackbench_wire::{
    GroupCursor, PartitionDetail, QueueDetail, QueueOptions, QueueSummary, QUEUE_MODE_GROUP,
};

/// The tenant's queues (only `name` when given), by name.
pub async fn list(
    app: &App,
    tenant: Uuid,
    name: Option<&str>,
) -> Result<Vec<(Uuid, QueueSummary)>, DbError> {
    let db = app.db("queues").await?;
    let rows = db
        .query(
            "SELECT (l.queue).*, l.partitions, l.depth FROM queen.log_queues_list_v1($1, $2) l",
            &[&tenant, &name],
        )
        .await
        .map_err(|e| DbError::from_pg("log_queues_list_v1", e))?;
    Ok(rows.iter().map(|r| (r.get("id"), summary(r))).collect())
}

/// One queue with its partitions; `None` when the tenant has no such queue.
pub async fn detail(app: &App, tenant: Uuid, name: &str) -> Result<Option<QueueDetail>, DbError> {
    let Some((id, q)) = list(app, tenant, Some(name)).await?.into_iter().next() else {
        return Ok(None);
    };
    let db = app.db("queues").await?;
    let rows = db
        .query(
            "SELECT name, id, last_offset, depth, consumer_group, committed, leased \
             FROM queen.log_queue_partitions_v1($1)",
            &[&id],
        )
        .await
        .map_err(|e| DbError::from_pg("log_queue_partitions_v1", e))?;
    Ok(Some(QueueDetail {
        id: q.id,
        name: q.name,
        namespace: q.namespace,
        task: q.task,
        options: q.options,
        depth: q.depth,
        created_at: q.created_at,
        partitions: partitions(&rows),
    }))
}

/// Deletes the tenant's queue `name`; `false` when there was none. Then forgets it everywhere
/// in this broker and answers its parked long-polls.
pub async fn delete(app: &App, tenant: Uuid, name: &str) -> Result<bool, DbError> {
    let db = app.db("queue_delete").await?;
    let pids: Option<Vec<Uuid>> = db
        .query_one(
            "SELECT queen.log_queue_delete_v1($1, $2)",
            &[&tenant, &name],
        )
        .await
        .map_err(|e| DbError::from_pg("log_queue_delete_v1", e))?
        .get(0);
    drop(db);
    let Some(pids) = pids else {
        return Ok(false);
    };
    forget(app, tenant, name, &pids);
    Ok(true)
}

/// Clears what this broker holds about a deleted queue and wakes its long-polls.
fn forget(app: &App, tenant: Uuid, name: &str, pids: &[Uuid]) {
    app.queue_metas.forget(tenant, name);
    app.partition_ids.forget_queue(tenant, name);
    if let Some(hot) = &app.hotlist {
        hot.forget(&(tenant, name.to_string()));
    }
    app.segments.forget_partitions(pids);
    app.long_poll.queue_deleted(tenant, name);
}

/// The queue's options as the wire names them, from a `queen.queues` row.
pub fn options_of(row: &Row) -> QueueOptions {
    QueueOptions {
        lease_time: row.get("lease_time"),
        retry_limit: row.get("retry_limit"),
        dead_letter_queue: row.get("dead_letter_queue"),
        dlq_after_max_retries: row.get("dlq_after_max_retries"),
        dedup_window_seconds: row.get("dedup_window_seconds"),
        completed_retention_seconds: row.get("completed_retention_seconds"),
        retention_seconds: row.get("retention_seconds"),
        delayed_processing: row.get("delayed_processing"),
        window_buffer: row.get("window_buffer"),
        max_size: row.get("max_size"),
        priority: row.get("priority"),
        encryption_enabled: row.get("encryption_enabled"),
        retention_enabled: row.get("retention_enabled"),
        ttl: row.get("ttl"),
        retry_delay: row.get("retry_delay"),
        max_wait_time_seconds: row.get("max_wait_time_seconds"),
    }
}

fn summary(row: &Row) -> QueueSummary {
    let created: SystemTime = row.get("created_at");
    QueueSummary {
        id: row.get::<_, Uuid>("id").to_string(),
        name: row.get("name"),
        namespace: row.get("namespace"),
        task: row.get("task"),
        options: options_of(row),
        partitions: row.get("partitions"),
        depth: row.get("depth"),
        created_at: humantime::format_rfc3339_micros(created).to_string(),
    }
}

/// Rows of `log_queue_partitions_v1` (one per partition and consumer row, by partition name)
/// folded into partitions with their cursors.
fn partitions(rows: &[Row]) -> Vec<PartitionDetail> {
    let mut out: Vec<PartitionDetail> = Vec::new();
    for r in rows {
        let id = r.get::<_, Uuid>("id").to_string();
        if out.last().is_none_or(|p| p.id != id) {
            out.push(PartitionDetail {
                name: r.get("name"),
                id,
                last_offset: r.get("last_offset"),
                depth: r.get("depth"),
                consumers: Vec::new(),
            });
        }
        if let Some(group) = r.get::<_, Option<String>>("consumer_group") {
            let p = out.last_mut().expect("pushed above");
            p.consumers.push(GroupCursor {
                consumer_group: (group != QUEUE_MODE_GROUP).then_some(group),
                committed: r.get("committed"),
                leased: r.get::<_, Option<bool>>("leased").unwrap_or(false),
            });
        }
    }
    out
}
