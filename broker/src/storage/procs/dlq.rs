//! Bindings of `sql/procedures/dlq.sql`: filing a poison offset (`log_dlq_head_v3`), listing,
//! fetching and deleting dead-lettered rows.

use std::time::SystemTime;

use deadpool_postgres::Object;
use serde_json::Value;
use uuid::Uuid;

use crate::storage::DbError;

/// The arguments of `log_dlq_head_v3`: the frame at `offset` filed under the lease it was
/// delivered with.
pub struct DlqHead<'a> {
    pub partition_id: Uuid,
    pub group: &'a str,
    pub lease_id: &'a str,
    pub offset: i64,
    pub message_id: Option<Uuid>,
    pub transaction_id: &'a str,
    /// The payload's JSON text (a JSON string of hex when `sealed`).
    pub payload: &'a str,
    pub sealed: bool,
    pub error: &'a str,
}

/// `log_dlq_head_v3`: files the row, steps the cursor past the poison frame and releases the
/// lease; its answer is one JSON object (`ok`, `error`, `acked`, `lease_released`, `dlq_id`).
pub async fn dlq_head(db: &Object, h: &DlqHead<'_>) -> Result<Value, DbError> {
    let stmt = db
        .prepare_cached(
            "SELECT queen.log_dlq_head_v3($1, $2, $3, $4, $5, $6, $7::text::json, $8, $9)",
        )
        .await
        .map_err(|e| DbError::from_pg("log_dlq_head_v3", e))?;
    let row = db
        .query_one(
            &stmt,
            &[
                &h.partition_id,
                &h.group,
                &h.lease_id,
                &h.offset,
                &h.message_id,
                &h.transaction_id,
                &h.payload,
                &h.sealed,
                &h.error,
            ],
        )
        .await
        .map_err(|e| DbError::from_pg("log_dlq_head_v3", e))?;
    Ok(row.get(0))
}

/// The filters of a DLQ listing (`None`: any).
pub struct DlqFilter<'a> {
    pub tenant: Uuid,
    pub queue: Option<&'a str>,
    pub group: Option<&'a str>,
    pub partition: Option<&'a str>,
    pub limit: i32,
    pub offset: i64,
}

/// One row of a DLQ listing: `total` counts every match; a page past the end comes back as one
/// row without an entry, carrying only the total.
#[derive(Debug, Clone, PartialEq)]
pub struct DlqListRow {
    pub entry: Option<DlqEntry>,
    pub total: i64,
}

/// One listed DLQ row.
#[derive(Debug, Clone, PartialEq)]
pub struct DlqEntry {
    pub id: i64,
    pub queue_name: String,
    pub partition_name: String,
    pub partition_id: Uuid,
    pub consumer_group: String,
    pub offset: i64,
    pub message_id: Uuid,
    pub transaction_id: String,
    /// The stored payload's JSON text.
    pub payload: Option<String>,
    pub sealed: bool,
    pub error: Option<String>,
    pub retry_count: i32,
    pub failed_at: SystemTime,
}

/// `log_dlq_list_v2`: one page of the tenant's DLQ rows.
pub async fn dlq_list(db: &Object, f: &DlqFilter<'_>) -> Result<Vec<DlqListRow>, DbError> {
    let rows = db
        .query(
            "SELECT id, queue_name, partition_name, partition_id, consumer_group, \"offset\", \
             message_id, transaction_id, payload::text AS payload, sealed, error, retry_count, \
             failed_at, total FROM queen.log_dlq_list_v2($1, $2, $3, $4, $5, $6)",
            &[
                &f.tenant,
                &f.queue,
                &f.group,
                &f.partition,
                &f.limit,
                &f.offset,
            ],
        )
        .await
        .map_err(|e| DbError::from_pg("log_dlq_list_v2", e))?;
    Ok(rows
        .iter()
        .map(|r| DlqListRow {
            entry: r.get::<_, Option<i64>>("id").map(|id| DlqEntry {
                id,
                queue_name: r.get("queue_name"),
                partition_name: r.get("partition_name"),
                partition_id: r.get("partition_id"),
                consumer_group: r.get("consumer_group"),
                offset: r.get("offset"),
                message_id: r.get("message_id"),
                transaction_id: r.get("transaction_id"),
                payload: r.get("payload"),
                sealed: r.get("sealed"),
                error: r.get("error"),
                retry_count: r.get("retry_count"),
                failed_at: r.get("failed_at"),
            }),
            total: r.get("total"),
        })
        .collect())
}

/// One DLQ row of a (partition, transactionId), as a replay needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct DlqFetchRow {
    pub id: i64,
    pub queue_name: String,
    pub partition_name: String,
    pub offset: i64,
    /// The stored payload's JSON text, as pushed.
    pub payload: String,
    pub message_id: Uuid,
    pub sealed: bool,
}

/// `log_dlq_fetch_v2`: the DLQ rows of (partition, transactionId) in the tenant, offset order.
pub async fn dlq_fetch(
    db: &Object,
    tenant: Uuid,
    partition_id: Uuid,
    transaction_id: &str,
    group: Option<&str>,
) -> Result<Vec<DlqFetchRow>, DbError> {
    let rows = db
        .query(
            "SELECT id, queue_name, partition_name, \"offset\", payload::text, message_id, sealed \
             FROM queen.log_dlq_fetch_v2($1, $2, $3, $4)",
            &[&tenant, &partition_id, &transaction_id, &group],
        )
        .await
        .map_err(|e| DbError::from_pg("log_dlq_fetch_v2", e))?;
    Ok(rows
        .iter()
        .map(|r| DlqFetchRow {
            id: r.get(0),
            queue_name: r.get(1),
            partition_name: r.get(2),
            offset: r.get(3),
            payload: r.get(4),
            message_id: r.get(5),
            sealed: r.get(6),
        })
        .collect())
}

/// `log_dlq_delete_ids_v1`: deletes these rows of the partition; how many were deleted.
pub async fn dlq_delete_ids(
    db: &Object,
    tenant: Uuid,
    partition_id: Uuid,
    ids: &[i64],
) -> Result<i64, DbError> {
    let row = db
        .query_one(
            "SELECT queen.log_dlq_delete_ids_v1($1, $2, $3)",
            &[&tenant, &partition_id, &ids],
        )
        .await
        .map_err(|e| DbError::from_pg("log_dlq_delete_ids_v1", e))?;
    Ok(row.get(0))
}

/// `log_dlq_delete_v1`: deletes the rows of (partition, transactionId); how many were deleted.
pub async fn dlq_delete(
    db: &Object,
    tenant: Uuid,
    partition_id: Uuid,
    transaction_id: &str,
    group: Option<&str>,
) -> Result<i64, DbError> {
    let row = db
        .query_one(
            "SELECT queen.log_dlq_delete_v1($1, $2, $3, $4)",
            &[&tenant, &partition_id, &transaction_id, &group],
        )
        .await
        .map_err(|e| DbError::from_pg("log_dlq_delete_v1", e))?;
    Ok(row.get(0))
}
