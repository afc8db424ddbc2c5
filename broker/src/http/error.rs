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
