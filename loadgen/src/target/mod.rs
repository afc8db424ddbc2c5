//! What a run targets: the PostgreSQL measured (`postgres`), the broker under test (`broker`),
//! the broker binary it starts, found or built (`broker_binary`), and what kind of broker it is
//! (`profile`).

pub mod broker;
pub mod broker_binary;
pub mod postgres;
pub mod profile;
