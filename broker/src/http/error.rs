//! The one error type every handler returns, and how it becomes an answer.
//!
//! Client mistakes are 4xx with `{"error": "..."}` naming what is wrong; they are never logged
//! as failures. Infrastructure failures are logged with their context and answered 503 (the
//! database could not be reached) or 500 (anything else), never swallowed.

use hyper::StatusCode;

use crate::storage::DbError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// For a bad queue option: the option's name (`"invalid": "<option>"`).
    pub invalid: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            invalid: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

impl From<DbError> for ApiError {
    fn from(e: DbError) -> ApiError {
        tracing::error!(context = e.context, error = %e.message, "database failure");
        let status = if e.code.is_none() {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        ApiError::new(status, format!("{}: database failure", e.context))
    }
}
