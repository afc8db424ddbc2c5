//! The queue resources routes: `GET /api/v1/resources/queues`, `GET
//! /api/v1/resources/queues/:queue` (404 when unknown) and `DELETE
//! /api/v1/resources/queues/:queue` (`{"deleted": true, "queue"}`, 404 when unknown), always
//! within the caller's tenant. The work is `crate::queues`'.

use hyper::StatusCode;

use crate::app::App;
use crate::http::{self, Answer, ApiError, Request, Route};
use ackbench_wire::{QueueDeleted, QueueList};

/// `GET /api/v1/resources/queues`.
pub async fn list(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let queues = crate::queues::list(app, req.tenant, None).await?;
    let queues = queues.into_iter().map(|(_, q)| q).collect();
    Ok(http::json(StatusCode::OK, &QueueList { queues }))
}

/// `GET /api/v1/resources/queues/:queue`.
pub async fn get(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let name = queue_of(req)?;
    match crate::queues::detail(app, req.tenant, name).await? {
        Some(detail) => Ok(http::json(StatusCode::OK, &detail)),
        None => Err(unknown(name)),
    }
}

/// `DELETE /api/v1/resources/queues/:queue`.
pub async fn delete(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let name = queue_of(req)?;
    if !crate::queues::delete(app, req.tenant, name).await? {
        return Err(unknown(name));
    }
    tracing::info!(tenant = %req.tenant, queue = %name, "queue deleted");
    let answer = QueueDeleted {
        deleted: true,
        queue: name.to_string(),
    };
    Ok(http::json(StatusCode::OK, &answer))
}

fn queue_of(req: &Request) -> Result<&str, ApiError> {
    match &req.route {
        Route::QueueGet { queue } | Route::QueueDelete { queue } => Ok(queue),
        _ => Err(ApiError::internal(
            "queue resource handler reached for another route",
        )),
    }
}

fn unknown(name: &str) -> ApiError {
    ApiError::not_found(format!("no queue named `{name}`"))
}
