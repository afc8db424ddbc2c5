//! The crate's integration tests, one binary: finding the server binaries, a cluster's life
//! (start, SQL helpers, settings, teardown), and the watchdog that removes a cluster whose
//! owner died.

mod binaries;
mod cluster;
mod replication;
mod watchdog;
