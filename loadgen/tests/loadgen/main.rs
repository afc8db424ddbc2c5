//! The load generator's integration tests, one binary: scenario files (`scenario_parsing`),
//! gates on known results (`gates`), capacity's verdicts, report and a short real run
//! (`capacity`), whole runs through the binary against a throwaway PostgreSQL and the
//! workspace's broker (`end_to_end`), fault steps in such runs (`faults`), and Queen MQ's wire
//! from its recorded answers (`queen_target`), several brokers per cell (`topology`), and a run
//! split into shards and merged back (`shards`), runs kept in a history and searched for change
//! points (`trend`), live metrics scraped by Prometheus (`live`) and pushed to it
//! (`remote_write`), the endurance fault that holds back the xmin horizon (`endurance`), a gate
//! calibration (`calibrate`) and more rounds for an inconclusive gate (`confirm`). Shared
//! helpers live in `tests/common`.

#[path = "../common/mod.rs"]
mod common;

mod calibrate;
mod capacity;
mod cli;
mod confirm;
mod end_to_end;
mod endurance;
mod external_cells;
mod faults;
mod faults_db;
mod gates;
mod guarantees;
mod house;
mod live;
mod queen_target;
mod remote_write;
mod scenario_parsing;
mod shards;
mod sweep;
mod topology;
mod trend;
