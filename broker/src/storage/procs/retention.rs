//! Bindings of `sql/procedures/retention.sql`: one retention pass.

use deadpool_postgres::Object;

use crate::storage::DbError;

/// What a retention pass did; `ran` is false when another broker held the pass's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPass {
    pub ran: bool,
    pub txns_purged: i64,
    pub segments_deleted: i64,
}

/// `log_retention_v1`: purges the hash sidecar older than `txns_floor_seconds` (on its own
/// clock) and the segments past their queues' retention.
pub async fn retention(db: &Object, txns_floor_seconds: i32) -> Result<RetentionPass, DbError> {
    let row = db
        .query_one(
            "SELECT ran, txns_purged, segments_deleted FROM queen.log_retention_v1($1)",
            &[&txns_floor_seconds],
        )
        .await
        .map_err(|e| DbError::from_pg("log_retention_v1", e))?;
    Ok(RetentionPass {
        ran: row.get(0),
        txns_purged: row.get(1),
        segments_deleted: row.get(2),
    })
}
