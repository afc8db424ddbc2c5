//! The typed bindings of the procedures in `sql/procedures/`: one Rust function per SQL function
//! the broker calls, one file per procedure family (`ack`, `pop`, `push`, `dlq`, `lease`,
//! `transaction`, `queues`, `retention`, `peers`), typed arguments and one struct per result row. Every
//! `queen.*` call of the broker is written here and nowhere else; domains and routes call these
//! functions and never compose SQL text.
//!
//! Statement text is part of the contract: `pg_stat_statements` groups by it, and the
//! statements a binding prepares with `prepare_cached` stay cached per connection. A binding
//! whose caller pipelines it (the fused ack and pop flushes) comes as a pair: `prepare_*` on a
//! pooled connection, then the call on the bare client with the prepared statement.
//!
//! Failures come back as `DbError` with the procedure's name as context.

pub mod ack;
pub mod dlq;
pub mod lease;
pub mod peers;
pub mod pop;
pub mod push;
pub mod queues;
pub mod retention;
pub mod transaction;
