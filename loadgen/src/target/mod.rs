//! What a run targets: the PostgreSQL measured (`postgres`), the broker under test (`broker`)
//! and the broker binary it starts, found or built (`broker_binary`).

pub mod broker;
pub mod broker_binary;
pub mod postgres;
