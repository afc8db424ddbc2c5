//! The edge between the domains and HTTP: each domain error becomes an `ApiError`.
//!
//! Infrastructure failures are logged here with their context and answered 503 (the database
//! could not be reached or went away: `DbError::is_unavailable`; the answer carries
//! `Retry-After`, see `http::error_answer`) or 500 (anything else), never swallowed; the answer
//! names the context but not the database's words.

use hyper::StatusCode;

use crate::ack::AckError;
use crate::http::ApiError;
use crate::pop::PopError;
use crate::storage::DbError;

impl From<DbError> for ApiError {
    fn from(e: DbError) -> ApiError {
        tracing::error!(context = e.context, error = %e.message, code = ?e.code, "database failure");
        let status = if e.is_unavailable() {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        ApiError::new(status, format!("{}: database failure", e.context))
    }
}

impl From<AckError> for ApiError {
    fn from(e: AckError) -> ApiError {
        match e {
            AckError::Db(e) => e.into(),
            AckError::Unavailable(why) => {
                tracing::warn!(error = %why, "ack: commit failed as a whole");
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("ack: {why}"))
            }
            AckError::Shape(why) => {
                tracing::error!(error = %why, "ack: unexpected procedure answer");
                ApiError::internal(why)
            }
        }
    }
}

impl From<PopError> for ApiError {
    fn from(e: PopError) -> ApiError {
        match e {
            PopError::Db(e) => e.into(),
            PopError::Flush(why) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("pop: {why}"))
            }
            PopError::Corrupt(why) => ApiError::internal(why),
        }
    }
}
