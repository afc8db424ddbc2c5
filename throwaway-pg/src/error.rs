//! The crate's single error type: a kind plus a message meant for a person.

use std::fmt;

/// What went wrong, for callers that want to react differently (for example,
/// fall back to a database URL when PostgreSQL is not installed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No usable `initdb`/`pg_ctl`/`postgres` (version 14 or newer) was found.
    BinariesNotFound,
    /// Running as root, but there is no `postgres` OS user to run the server as.
    ServerUser,
    /// A caller-supplied value (setting, database name) was rejected.
    InvalidInput,
    /// A filesystem operation failed.
    Io,
    /// An external command (initdb, pg_ctl, psql, ...) failed or could not run.
    Command,
}

/// Error returned by every fallible operation of this crate.
///
/// The [`Display`](fmt::Display) text is complete on its own: it names the
/// command that failed and includes its output (or the tail of the server log).
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn io(context: impl fmt::Display, err: std::io::Error) -> Self {
        Error::new(ErrorKind::Io, format!("{context}: {err}"))
    }

    /// The category of the failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The human-readable message (same as the `Display` output).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
