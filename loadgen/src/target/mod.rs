//! What a run targets: the PostgreSQL measured and the broker under test.

pub mod broker;
pub mod postgres;
