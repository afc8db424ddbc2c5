//! `ackbench`, the load generator: declarative scenarios (`scenario`) driven against the systems
//! under test (`driver`: our broker, an external Queen, the PGMQ and PgQ peers, behind one
//! interface; `target`: the processes and PostgreSQL they run on; `client`, `workload`) with each
//! accelerator on and off (`run`), measured from the client, PostgreSQL and the broker
//! (`measure`), audited, and written as one results document. `lifecycle` is one cell's life
//! (the run's environment, phases, measured window), shared by `run` and `capacity`; `options`
//! holds the command-line options both take, turned into plain settings by `cli`; `shard` splits
//! a run over many processes (`--shard I/N`) and merges their results back into one
//! (`ackbench merge`); `trend` keeps the figures of runs over time and finds the runs that
//! changed them (`ackbench history`); `live` serves a run's figures to Prometheus while it
//! runs.

pub mod calibrate;
pub mod capacity;
pub mod cli;
pub mod client;
pub mod driver;
pub mod duration_arg;
pub mod gates;
pub mod history;
pub mod lifecycle;
pub mod live;
pub mod measure;
pub mod meta;
pub mod options;
pub mod progress;
pub mod run;
pub mod scenario;
pub mod shard;
pub mod sweep;
pub mod target;
pub mod trend;
pub mod workload;
