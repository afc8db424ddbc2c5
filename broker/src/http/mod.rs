//! The HTTP layer: accepting connections, reading a request into a `Request`, routing it to its
//! handler in `routes/`, and turning the handler's result into an answer.
//!
//! Handlers see a fully read body (bounded by `QUEEN_MAX_BODY_BYTES`), the decoded path
//! parameters, the query string and the caller's tenant; they return JSON or an `ApiError`.

pub mod error;
pub mod json;
pub mod router;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{HeaderMap, Method, Response, StatusCode};
use serde::Serialize;
use uuid::Uuid;

use crate::app::App;
pub use error::ApiError;
pub use router::Route;

/// An answer body.
pub type Answer = Response<Full<Bytes>>;

/// A request as handlers see it.
pub struct Request {
    pub method: Method,
    pub route: Route,
    pub query: HashMap<String, String>,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub tenant: Uuid,
}

impl Request {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }
}

/// A JSON answer.
pub fn json<T: Serialize + ?Sized>(status: StatusCode, body: &T) -> Answer {
    let bytes = serde_json::to_vec(body).expect("answer bodies serialise");
    with_type(status, Bytes::from(bytes), "application/json")
}

/// An answer with no body (204).
pub fn empty(status: StatusCode) -> Answer {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = status;
    r
}

/// A body of the given content type.
pub fn with_type(status: StatusCode, body: Bytes, content_type: &'static str) -> Answer {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn error_answer(e: &ApiError) -> Answer {
    let body = ackbench_wire::ErrorBody {
        error: e.message.clone(),
        invalid: e.invalid.clone(),
    };
    json(e.status, &body)
}

/// Serves one HTTP request end to end; never fails (errors become answers).
pub async fn serve(app: Arc<App>, req: hyper::Request<Incoming>) -> Result<Answer, Infallible> {
    let (route_name, answer) = match read(&app, req).await {
        Ok(request) => {
            let name = request.route.name();
            // The handler runs as its own task so that a bug that panics answers 500 (and is
            // logged) instead of tearing down the client's connection.
            let handler_app = app.clone();
            let handled =
                tokio::spawn(async move { crate::routes::dispatch(&handler_app, request).await })
                    .await;
            let answer = match handled {
                Ok(answer) => answer.unwrap_or_else(|e| error_answer(&e)),
                Err(e) => {
                    tracing::error!(route = name, error = %e, "request handler panicked");
                    error_answer(&ApiError::internal(format!("{name}: internal error")))
                }
            };
            (name, answer)
        }
        Err((name, e)) => (name, error_answer(&e)),
    };
    app.metrics
        .count_request(route_name, answer.status().as_u16());
    Ok(answer)
}

async fn read(
    app: &App,
    req: hyper::Request<Incoming>,
) -> Result<Request, (&'static str, ApiError)> {
    let (parts, body) = req.into_parts();
    let route = router::route(&parts.method, parts.uri.path()).map_err(|e| ("unrouted", e))?;
    let name = route.name();
    let query = parts
        .uri
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let tenant = tenant_of(app, &parts.headers).map_err(|e| (name, e))?;
    let body = Limited::new(body, app.config.max_body_bytes)
        .collect()
        .await
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                let limit = app.config.max_body_bytes;
                (
                    name,
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("body is larger than {limit} bytes"),
                    ),
                )
            } else {
                (
                    name,
                    ApiError::bad_request(format!("could not read the body: {e}")),
                )
            }
        })?
        .to_bytes();
    Ok(Request {
        method: parts.method,
        route,
        query,
        headers: parts.headers,
        body,
        tenant,
    })
}

/// The caller's tenant: the `x-queen-tenant` header when tenancy is on, else the default.
fn tenant_of(app: &App, headers: &HeaderMap) -> Result<Uuid, ApiError> {
    let default = app.default_tenant;
    if !app.config.tenancy_header {
        return Ok(default);
    }
    match headers.get("x-queen-tenant") {
        None => Ok(default),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| Uuid::parse_str(s.trim()).ok())
            .ok_or_else(|| ApiError::bad_request("header x-queen-tenant must be a UUID")),
    }
}
