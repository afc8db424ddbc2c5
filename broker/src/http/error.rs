//! The one error type every handler returns: a status and a message, answered as
//! `{"error": "..."}`.
//!
//! Client mistakes are 4xx naming what is wrong; they are never logged as failures. The
//! domains' errors become `ApiError`s in `routes::errors` (logged there, 503 or 500).

use hyper::StatusCode;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// For a bad queue option: the option's name (`"invalid": "<option>"`).
    pub invalid: Option<String>,
    /// For a push refused by a queue's `maxSize` (409): the facts answered beside `error`.
    pub queue_full: Option<ackbench_wire::QueueFull>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            invalid: None,
            queue_full: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// A push that would take `full.queue` above its `maxSize`: 409 naming the queue, the limit
    /// and the depth.
    pub fn queue_full(full: ackbench_wire::QueueFull) -> ApiError {
        let mut e = ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "queue `{}` is full: maxSize {}, {} unconsumed messages, this push adds {}",
                full.queue, full.max_size, full.depth, full.pushing
            ),
        );
        e.queue_full = Some(full);
        e
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}
