//! The HTTP vocabulary, a leaf that knows no domain: the route table (`router`), the `Request`
//! handlers see, answer builders, `ApiError` and its answer, and the field reader for JSON
//! bodies (`json`). `server` reads requests into these types; `routes` answers them.
//!
//! Handlers see a fully read body (bounded by `QUEEN_MAX_BODY_BYTES`), the decoded path
//! parameters, the query string and the caller's tenant; they return JSON or an `ApiError`.

pub mod error;
pub mod json;
pub mod limits;
pub mod router;
pub mod write;

use std::collections::HashMap;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use hyper::{HeaderMap, Method, Response, StatusCode};
use serde::Serialize;
use uuid::Uuid;

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

/// Seconds a client is told to wait before retrying a 503.
pub const RETRY_AFTER_SECONDS: &str = "1";

/// The answer of an error: its status and `{"error", "invalid"?}`. A 503 (the database is
/// unreachable: retry later) carries `Retry-After`, which tells it apart from a refusal.
pub fn error_answer(e: &ApiError) -> Answer {
    let body = ackbench_wire::ErrorBody {
        error: e.message.clone(),
        invalid: e.invalid.clone(),
        queue_full: e.queue_full.clone(),
    };
    let mut answer = json(e.status, &body);
    if e.status == StatusCode::SERVICE_UNAVAILABLE {
        answer
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_SECONDS));
    }
    answer
}
