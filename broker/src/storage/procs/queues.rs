//! Bindings of `sql/procedures/queues.sql`: configuring a queue, listing queues and one
//! queue's partitions, deleting a queue, and the options a push needs.

use std::time::SystemTime;

use deadpool_postgres::Object;
use serde_json::Value;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::storage::DbError;
use ackbench_wire::QueueOptions;

/// One `queen.queues` row, its options as the wire names them.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueRow {
    pub id: Uuid,
    pub name: String,
    pub namespace: String,
    pub task: String,
    pub created_at: SystemTime,
    pub options: QueueOptions,
}

impl QueueRow {
    fn of(row: &Row) -> QueueRow {
        QueueRow {
            id: row.get("id"),
            name: row.get("name"),
            namespace: row.get("namespace"),
            task: row.get("task"),
            created_at: row.get("created_at"),
            options: options_of(row),
        }
    }
}

fn options_of(row: &Row) -> QueueOptions {
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

/// The arguments of `configure_queue_v2`; `options` holds only validated, known options.
pub struct Configure<'a> {
    pub tenant: Uuid,
    pub queue: &'a str,
    pub namespace: Option<&'a str>,
    pub task: Option<&'a str>,
    pub options: &'a Value,
}

/// `configure_queue_v2`: creates or updates the queue; its row after the change.
pub async fn configure_queue(db: &Object, c: &Configure<'_>) -> Result<QueueRow, DbError> {
    let row = db
        .query_one(
            "SELECT * FROM queen.configure_queue_v2($1, $2, $3, $4, $5)",
            &[&c.tenant, &c.queue, &c.namespace, &c.task, c.options],
        )
        .await
        .map_err(|e| DbError::from_pg("configure_queue_v2", e))?;
    Ok(QueueRow::of(&row))
}

/// One row of `log_queues_list_v1`: a queue with its partition count and queue-mode depth.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueListRow {
    pub queue: QueueRow,
    pub partitions: i64,
    pub depth: i64,
}

/// `log_queues_list_v1`: the tenant's queues (only `name` when given), by name.
pub async fn queues_list(
    db: &Object,
    tenant: Uuid,
    name: Option<&str>,
) -> Result<Vec<QueueListRow>, DbError> {
    let rows = db
        .query(
            "SELECT (l.queue).*, l.partitions, l.depth FROM queen.log_queues_list_v1($1, $2) l",
            &[&tenant, &name],
        )
        .await
        .map_err(|e| DbError::from_pg("log_queues_list_v1", e))?;
    Ok(rows
        .iter()
        .map(|r| QueueListRow {
            queue: QueueRow::of(r),
            partitions: r.get("partitions"),
            depth: r.get("depth"),
        })
        .collect())
}

/// One row of `log_queue_partitions_v1`: a partition, with one consumer row's cursor when it
/// has one (rows by partition name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRow {
    pub name: String,
    pub id: Uuid,
    pub last_offset: i64,
    pub depth: i64,
    pub consumer_group: Option<String>,
    pub committed: Option<i64>,
    pub leased: Option<bool>,
}

/// `log_queue_partitions_v1`: the partitions of a queue and their cursors.
pub async fn queue_partitions(db: &Object, queue_id: Uuid) -> Result<Vec<PartitionRow>, DbError> {
    let rows = db
        .query(
            "SELECT name, id, last_offset, depth, consumer_group, committed, leased \
             FROM queen.log_queue_partitions_v1($1)",
            &[&queue_id],
        )
        .await
        .map_err(|e| DbError::from_pg("log_queue_partitions_v1", e))?;
    Ok(rows
        .iter()
        .map(|r| PartitionRow {
            name: r.get("name"),
            id: r.get("id"),
            last_offset: r.get("last_offset"),
            depth: r.get("depth"),
            consumer_group: r.get("consumer_group"),
            committed: r.get("committed"),
            leased: r.get("leased"),
        })
        .collect())
}

/// `log_queue_delete_v1`: deletes the tenant's queue with everything of it; the ids of its
/// partitions, `None` when there was no such queue.
pub async fn queue_delete(
    db: &Object,
    tenant: Uuid,
    name: &str,
) -> Result<Option<Vec<Uuid>>, DbError> {
    let row = db
        .query_one(
            "SELECT queen.log_queue_delete_v1($1, $2)",
            &[&tenant, &name],
        )
        .await
        .map_err(|e| DbError::from_pg("log_queue_delete_v1", e))?;
    Ok(row.get(0))
}

/// One row of `queue_meta_v1`: the options a push needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMetaRow {
    pub name: String,
    pub max_size: i64,
    pub encryption_enabled: bool,
}

/// `queue_meta_v1`: the push-relevant options of the tenant's queues among `names`.
pub async fn queue_meta(
    db: &Object,
    tenant: Uuid,
    names: &[&str],
) -> Result<Vec<QueueMetaRow>, DbError> {
    let rows = db
        .query(
            "SELECT name, max_size, encryption_enabled FROM queen.queue_meta_v1($1, $2)",
            &[&tenant, &names],
        )
        .await
        .map_err(|e| DbError::from_pg("queue_meta_v1", e))?;
    Ok(rows
        .iter()
        .map(|r| QueueMetaRow {
            name: r.get("name"),
            max_size: r.get("max_size"),
            encryption_enabled: r.get("encryption_enabled"),
        })
        .collect())
}
