//! Bindings of `sql/procedures/push.sql`: a request's push (`log_push_v2`), the fused push of
//! many requests (`log_push_multi_v2`) and reading the segment that holds an offset
//! (`log_segment_at_v1`).

use std::time::SystemTime;

use deadpool_postgres::Object;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::segment::{self, Frame};
use crate::storage::DbError;

/// The columns of one `log_push_v2` call: segment i goes to (`queues[i]`, `partitions[i]`)
/// with the 16-byte transaction hashes of its frames concatenated in `hashes[i]`.
pub struct Push<'a> {
    pub tenant: Uuid,
    pub queues: &'a [String],
    pub partitions: &'a [String],
    pub hashes: &'a [Vec<u8>],
    pub blobs: &'a [Vec<u8>],
}

/// The duplicates a segment held back instead of writing: frame `index[k]` duplicates the
/// stored offset `offset[k]` (when `>= 0`) or the earlier frame `first[k]` of the same call.
/// Empty for a written segment (the procedures answer NULL there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicates {
    pub index: Vec<i32>,
    pub offset: Vec<i64>,
    pub first: Vec<i32>,
}

impl Duplicates {
    fn of(row: &Row) -> Duplicates {
        Duplicates {
            index: row
                .get::<_, Option<Vec<i32>>>("dup_index")
                .unwrap_or_default(),
            offset: row
                .get::<_, Option<Vec<i64>>>("dup_offset")
                .unwrap_or_default(),
            first: row
                .get::<_, Option<Vec<i32>>>("dup_first")
                .unwrap_or_default(),
        }
    }
}

/// One row of `log_push_v2`: a segment of the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRow {
    /// The 1-based position of the segment it answers.
    pub ordinal: i32,
    pub partition_id: Uuid,
    /// The written segment's first offset; `None` when it was not written.
    pub base_offset: Option<i64>,
    pub written: bool,
    pub duplicates: Duplicates,
}

/// `log_push_v2`: every segment of the call in one transaction (a maxSize refusal raises and
/// rolls back the call whole).
pub async fn push(db: &Object, p: &Push<'_>) -> Result<Vec<PushRow>, DbError> {
    let stmt = db
        .prepare_cached(
            "SELECT ordinal, partition_id, base_offset, written, dup_index, dup_offset, \
             dup_first FROM queen.log_push_v2($1, $2, $3, $4, $5)",
        )
        .await
        .map_err(|e| DbError::from_pg("log_push_v2", e))?;
    let rows = db
        .query(
            &stmt,
            &[&p.tenant, &p.queues, &p.partitions, &p.hashes, &p.blobs],
        )
        .await
        .map_err(|e| DbError::from_pg("log_push_v2", e))?;
    Ok(rows
        .iter()
        .map(|r| PushRow {
            ordinal: r.get("ordinal"),
            partition_id: r.get("partition_id"),
            base_offset: r.get("base_offset"),
            written: r.get("written"),
            duplicates: Duplicates::of(r),
        })
        .collect())
}

/// The columns of one `log_push_multi_v2` call: as `Push`, with a tenant per segment.
pub struct PushMulti<'a> {
    pub tenants: &'a [Uuid],
    pub queues: &'a [&'a str],
    pub partitions: &'a [&'a str],
    pub hashes: &'a [Vec<u8>],
    pub blobs: &'a [Vec<u8>],
}

/// One row of `log_push_multi_v2`: a segment written, held back by duplicates, or refused by
/// its queue's maxSize (the refusal's JSON object; the other segments still commit).
#[derive(Debug, Clone, PartialEq)]
pub struct PushMultiRow {
    pub ordinal: i32,
    pub partition_id: Uuid,
    pub written: bool,
    pub base_offset: Option<i64>,
    pub created_at: Option<SystemTime>,
    pub duplicates: Duplicates,
    pub full_refusal: Option<serde_json::Value>,
}

/// `log_push_multi_v2`: the segments of many requests in one transaction.
pub async fn push_multi(db: &Object, p: &PushMulti<'_>) -> Result<Vec<PushMultiRow>, DbError> {
    let stmt = db
        .prepare_cached(
            "SELECT ordinal, partition_id, written, base_offset, created_at, dup_index, \
             dup_offset, dup_first, full_refusal FROM queen.log_push_multi_v2($1, $2, $3, $4, $5)",
        )
        .await
        .map_err(|e| DbError::from_pg("log_push_multi_v2", e))?;
    let rows = db
        .query(
            &stmt,
            &[&p.tenants, &p.queues, &p.partitions, &p.hashes, &p.blobs],
        )
        .await
        .map_err(|e| DbError::from_pg("log_push_multi_v2", e))?;
    Ok(rows
        .iter()
        .map(|r| PushMultiRow {
            ordinal: r.get("ordinal"),
            partition_id: r.get("partition_id"),
            written: r.get("written"),
            base_offset: r.get("base_offset"),
            created_at: r.get("created_at"),
            duplicates: Duplicates::of(r),
            full_refusal: r.get("full_refusal"),
        })
        .collect())
}

/// `log_segment_at_v1`, unpacked: the one frame at `offset` of a partition (a duplicate's
/// original, a DLQ payload); `None` when retention removed its segment.
pub async fn frame_at(
    db: &Object,
    partition_id: Uuid,
    offset: i64,
) -> Result<Option<Frame>, DbError> {
    let row = db
        .query_opt(
            "SELECT base_offset, blob FROM queen.log_segment_at_v1($1, $2)",
            &[&partition_id, &offset],
        )
        .await
        .map_err(|e| DbError::from_pg("log_segment_at_v1", e))?;
    let Some(row) = row else { return Ok(None) };
    let base: i64 = row.get(0);
    let mut frames = segment::unpack(row.get(1)).map_err(|e| {
        tracing::error!(%partition_id, offset, error = %e, "stored segment cannot be unpacked");
        DbError::corrupt(
            "log_segment_at_v1",
            format!("segment of partition {partition_id} at {offset}: {e}"),
        )
    })?;
    let k = (offset - base) as usize;
    Ok((k < frames.len()).then(|| frames.swap_remove(k)))
}
