//! Bindings of `sql/procedures/ack.sql`: the hash-resolved ack, the positional advance and the
//! fused advance of many rows.

use deadpool_postgres::Object;
use serde::Deserialize;
use serde_json::Value;
use tokio_postgres::{Client, Statement};
use uuid::Uuid;

use crate::storage::DbError;

/// What `log_ack_by_hash_v1` answered (see its header in `sql/procedures/ack.sql`):
/// the JSON object `ack_by_hash` returns, parsed by the caller.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct HashOutcome {
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
    pub acked: i64,
    #[serde(default)]
    pub committed: Option<i64>,
    pub lease_released: bool,
    pub dlq: bool,
    #[serde(default)]
    pub dlq_offset: Option<i64>,
    #[serde(default)]
    pub signal: Option<String>,
    #[serde(default)]
    pub signal_offset: Option<i64>,
    pub branch: String,
    #[serde(rename = "noopHashes")]
    pub noop_hashes: Vec<String>,
    #[serde(rename = "staleHashes")]
    pub stale_hashes: Vec<String>,
    #[serde(rename = "unresolvedHashes")]
    pub unresolved_hashes: Vec<String>,
    /// Per input (the group's items in order): the offset it resolved to in the span, if any.
    pub offsets: Vec<Option<i64>>,
}

/// `log_ack_by_hash_v1`, gated on the partition belonging to `tenant`: `None` (the procedure
/// is not called) when the partition is unknown or another tenant's. The procedure's answer is
/// one JSON object (its header in `sql/procedures/ack.sql` names the fields).
pub async fn ack_by_hash(
    db: &Object,
    tenant: Uuid,
    partition_id: Uuid,
    group: &str,
    lease_id: &str,
    hashes: &[&[u8]],
    statuses: &[&str],
) -> Result<Option<Value>, DbError> {
    let stmt = db
        .prepare_cached(
            "SELECT queen.log_ack_by_hash_v1(p.id, $2, $3, $4, $5) \
             FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id \
             WHERE p.id = $1 AND q.tenant_id = $6",
        )
        .await
        .map_err(|e| DbError::from_pg("log_ack_by_hash_v1", e))?;
    let row = db
        .query_opt(
            &stmt,
            &[
                &partition_id,
                &group,
                &lease_id,
                &hashes,
                &statuses,
                &tenant,
            ],
        )
        .await
        .map_err(|e| DbError::from_pg("log_ack_by_hash_v1", e))?;
    Ok(row.map(|r| r.get(0)))
}

/// What `log_ack_at_v1` answered: the JSON object `ack_at` returns, parsed by the caller.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct PositionalOutcome {
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
    pub acked: i64,
    #[serde(default)]
    pub committed: Option<i64>,
    pub lease_released: bool,
}

/// The arguments of one positional advance (`log_ack_at_v1`).
pub struct AckAt<'a> {
    pub partition_id: Uuid,
    pub group: &'a str,
    /// The lease the batch was delivered under; empty for a lease-less (auto-ack) batch.
    pub lease_id: &'a str,
    /// The last offset committed by the advance.
    pub upto: i64,
    /// `false` releases the lease without advancing.
    pub ok: bool,
    /// Advisory to the procedure.
    pub count: i32,
}

/// `log_ack_at_v1`: the positional advance; its answer is one JSON object.
pub async fn ack_at(db: &Object, a: &AckAt<'_>) -> Result<Value, DbError> {
    let stmt = db
        .prepare_cached("SELECT queen.log_ack_at_v1($1, $2, $3, $4, $5, $6)")
        .await
        .map_err(|e| DbError::from_pg("log_ack_at_v1", e))?;
    let row = db
        .query_one(
            &stmt,
            &[
                &a.partition_id,
                &a.group,
                &a.lease_id,
                &a.upto,
                &a.ok,
                &a.count,
            ],
        )
        .await
        .map_err(|e| DbError::from_pg("log_ack_at_v1", e))?;
    Ok(row.get(0))
}

/// The columns of one fused advance (`log_ack_multi_v1`): row i is
/// (`partitions[i]`, `groups[i]`, `batch_ends[i]`, `lease_ids[i]`, `counts[i]`).
pub struct AckMulti<'a> {
    pub partitions: &'a [Uuid],
    pub groups: &'a [&'a str],
    pub batch_ends: &'a [i64],
    pub lease_ids: &'a [&'a str],
    pub counts: &'a [i32],
}

/// One verdict row of `log_ack_multi_v1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckMultiRow {
    /// The 1-based position of the input row it answers.
    pub ordinal: i32,
    pub ok: bool,
    /// The refusal, when not `ok`.
    pub error: Option<String>,
    /// Offsets the cursor moved and whether the lease ended, when `ok`.
    pub acked: Option<i64>,
    pub lease_released: Option<bool>,
}

/// The fused ack statement, prepared (once per connection) on `db`.
pub async fn prepare_ack_multi(db: &Object) -> Result<Statement, DbError> {
    db.prepare_cached(
        "SELECT ordinal, ok, error, acked, lease_released \
         FROM queen.log_ack_multi_v1($1, $2, $3, $4, $5)",
    )
    .await
    .map_err(|e| DbError::from_pg("log_ack_multi_v1", e))
}

/// Runs the prepared `log_ack_multi_v1` (one transaction for every row). Its first poll sends
/// the query, so a joint flush can pipeline it.
pub async fn ack_multi(
    db: &Client,
    stmt: &Statement,
    a: &AckMulti<'_>,
) -> Result<Vec<AckMultiRow>, DbError> {
    let rows = db
        .query(
            stmt,
            &[
                &a.partitions,
                &a.groups,
                &a.batch_ends,
                &a.lease_ids,
                &a.counts,
            ],
        )
        .await
        .map_err(|e| DbError::from_pg("log_ack_multi_v1", e))?;
    Ok(rows
        .iter()
        .map(|r| AckMultiRow {
            ordinal: r.get("ordinal"),
            ok: r.get("ok"),
            error: r.get("error"),
            acked: r.get("acked"),
            lease_released: r.get("lease_released"),
        })
        .collect())
}
