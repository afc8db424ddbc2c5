//! The broker's HTTP/JSON wire (shared spec `wire.md`), as types both sides use.
//!
//! The broker serialises its answers with these types and the load generator parses them with
//! the same ones; the broker reads its requests into the request types and the load generator
//! sends bodies that read into them, so a change to the wire is one change. Plus the
//! transactionId hash that both the broker and the audit need.

pub mod borrowed;
pub mod hash;
pub mod requests;
pub mod scan;
pub mod types;

pub use borrowed::*;
pub use hash::{hash_hex, parse_hash_hex, txn_hash, TxnHash};
pub use requests::*;
pub use types::*;

/// The consumer group name that queue mode (no `consumerGroup`) uses on the wire and in storage.
pub const QUEUE_MODE_GROUP: &str = "__QUEUE_MODE__";

/// The tenant every request belongs to when tenancy is off or no tenant header is sent.
pub const DEFAULT_TENANT: &str = "00000000-0000-0000-0000-000000000001";
