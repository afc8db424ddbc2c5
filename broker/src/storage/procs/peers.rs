//! Bindings of `sql/procedures/peers.sql`: the key peer notifications are signed with.

use tokio_postgres::Client;

use crate::storage::DbError;

/// `peer_secret_v1`: the deployment's peer key, storing `candidate` when there is none yet.
pub async fn peer_secret(db: &Client, candidate: &[u8]) -> Result<Vec<u8>, DbError> {
    let row = db
        .query_one("SELECT queen.peer_secret_v1($1)", &[&candidate])
        .await
        .map_err(|e| DbError::from_pg("peer_secret_v1", e))?;
    Ok(row.get(0))
}
