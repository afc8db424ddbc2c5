//! `ackbench`, the load generator: declarative scenarios (`scenario`) driven against the broker
//! (`target`, `client`, `workload`) with each accelerator on and off (`run`), measured from the
//! client, PostgreSQL and the broker (`measure`), audited, and written as one results document.
//! `lifecycle` is one cell's life (target, phases, measured window), shared by `run` and
//! `capacity`; `options` holds the command-line options both take; `peer` drives the queues compared
//! against (PGMQ, PgQ) over SQL; `shard` splits a run over many processes (`--shard I/N`) and
//! merges their results back into one (`ackbench merge`).

pub mod capacity;
pub mod cli;
pub mod client;
pub mod gates;
pub mod history;
pub mod lifecycle;
pub mod measure;
pub mod meta;
pub mod options;
pub mod peer;
pub mod progress;
pub mod run;
pub mod scenario;
pub mod shard;
pub mod target;
pub mod workload;
