//! Bindings of `sql/procedures/transaction.sql`: the transaction wire in one call.

use deadpool_postgres::Object;
use serde_json::Value;

use crate::storage::DbError;

/// `log_transaction_wire_v2`: the pushes and acks of `payload` in one transaction; its answer
/// is one JSON object, its refusals raised errors (`DbError::detail`).
pub async fn transaction_wire(db: &Object, payload: &Value) -> Result<Value, DbError> {
    let stmt = db
        .prepare_cached("SELECT queen.log_transaction_wire_v2($1)")
        .await
        .map_err(|e| DbError::from_pg("log_transaction_wire_v2", e))?;
    let row = db
        .query_one(&stmt, &[payload])
        .await
        .map_err(|e| DbError::from_pg("log_transaction_wire_v2", e))?;
    Ok(row.get(0))
}
