//! `POST /api/v1/lease/:leaseId/extend`: lease renewal.
//!
//! Renews every live lease the leaseId (shared by every partition one pop leased)
//! still holds, never shortening one, through `log_renew_lease_v1`; with tenancy on,
//! through `log_renew_lease_tenant_v1`, whose single statement renews only when the lease
//! sits on a partition of the caller's tenant. Renewal is best-effort: a well-formed request
//! always answers 200, and an unknown, expired or foreign lease answers `success: false,
//! renewed: 0, expiresAt: null` alike. Only a malformed body is refused (400).

use std::time::SystemTime;

use hyper::StatusCode;
use uuid::Uuid;

use crate::app::App;
use crate::http::json::read_body;
use crate::http::{self, Answer, ApiError, Request, Route};
use crate::storage::procs;
use ackbench_wire::{LeaseExtendBody, LeaseExtendResponse};

/// Renewal length when the body does not say.
const DEFAULT_SECONDS: i64 = 60;
/// Longest renewal accepted: 30 days, the same bound as a pop's `leaseSeconds`.
const MAX_SECONDS: i64 = 30 * 86_400;

pub async fn handle(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let Route::LeaseExtend { lease_id } = &req.route else {
        return Err(ApiError::internal(
            "lease handler reached for another route",
        ));
    };
    let seconds = seconds_of(&req.body)?;
    let tenant = app.config.tenancy_header.then_some(req.tenant);
    let (renewed, expires_at) = renew(app, tenant, lease_id, seconds).await?;
    let answer = LeaseExtendResponse {
        lease_id: lease_id.clone(),
        success: renewed > 0,
        renewed,
        expires_at: expires_at.map(|t| humantime::format_rfc3339_micros(t).to_string()),
    };
    Ok(http::json(StatusCode::OK, &answer))
}

/// The renewal length: `{"seconds": n}` with n a whole number in 1..=30 days; an empty body
/// (or an object without `seconds`) means 60.
fn seconds_of(body: &[u8]) -> Result<i32, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(DEFAULT_SECONDS as i32);
    }
    let parsed: LeaseExtendBody = read_body(body, |root| {
        root.opt_i64("seconds", 1, MAX_SECONDS).map(drop)
    })?;
    match parsed.seconds {
        None => Ok(DEFAULT_SECONDS as i32),
        Some(n) if (1..=MAX_SECONDS).contains(&n) => Ok(n as i32),
        Some(_) => Err(ApiError::bad_request(format!(
            "seconds must be a whole number in 1..={MAX_SECONDS}"
        ))),
    }
}

/// Calls the renewal procedure (the tenant-gated form when `tenant` is given); returns how many
/// leases were renewed and the earliest new expiry.
async fn renew(
    app: &App,
    tenant: Option<Uuid>,
    lease_id: &str,
    seconds: i32,
) -> Result<(i64, Option<SystemTime>), ApiError> {
    let db = app.db("lease_extend").await?;
    let r = procs::lease::renew_lease(&db, tenant, lease_id, seconds).await?;
    Ok((r.renewed, r.expires_at))
}
