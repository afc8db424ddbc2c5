//! Bindings of `sql/procedures/lease.sql`: renewing the leases of a leaseId.

use std::time::SystemTime;

use deadpool_postgres::Object;
use uuid::Uuid;

use crate::storage::DbError;

/// What a renewal did: how many leases it renewed and the earliest new expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewed {
    pub renewed: i64,
    pub expires_at: Option<SystemTime>,
}

/// `log_renew_lease_v1` (no tenant), or `log_renew_lease_tenant_v1`, which renews only when
/// the lease's partition belongs to `tenant`.
pub async fn renew_lease(
    db: &Object,
    tenant: Option<Uuid>,
    lease_id: &str,
    seconds: i32,
) -> Result<Renewed, DbError> {
    let row = match tenant {
        None => {
            db.query_one(
                "SELECT renewed, expires_at FROM queen.log_renew_lease_v1($1, $2)",
                &[&lease_id, &seconds],
            )
            .await
        }
        Some(tenant) => {
            db.query_one(
                "SELECT renewed, expires_at FROM queen.log_renew_lease_tenant_v1($1, $2, $3)",
                &[&tenant, &lease_id, &seconds],
            )
            .await
        }
    }
    .map_err(|e| DbError::from_pg("log_renew_lease_v1", e))?;
    Ok(Renewed {
        renewed: row.get(0),
        expires_at: row.get(1),
    })
}
