//! A private, throwaway PostgreSQL cluster for integration tests and the load
//! generator.
//!
//! # What this crate owns
//!
//! Everything about running a short-lived PostgreSQL server: finding the
//! server binaries, `initdb` into a fresh temp directory, writing the
//! configuration, starting the server on a free port of `127.0.0.1`,
//! installing `pg_stat_statements`, running SQL through `psql`, and removing
//! every trace of it afterwards.
//!
//! # Real PostgreSQL, no mocks
//!
//! Tests and benchmarks run against the real server binaries (PostgreSQL 14
//! or newer, found on `PATH`, via `pg_config --bindir`, or in
//! `/usr/lib/postgresql/*/bin`), so what they measure is what production
//! does. The defaults are production-like: `fsync` and `synchronous_commit`
//! stay on; a caller may override any setting with
//! [`ClusterBuilder::setting`]. SQL runs through the `psql` binary next to
//! the server, so this crate needs no Rust PostgreSQL client.
//!
//! # Why processes run as `postgres`
//!
//! `initdb` and `postgres` refuse to run as root. When this process is root,
//! every server command (`initdb`, `pg_ctl`, hence `postgres`) runs as the
//! `postgres` OS user and the temp directory is chowned to it; `psql` runs as
//! the caller. Non-root callers run everything as themselves.
//!
//! # Cleanup strategy
//!
//! * **Drop** (including unwinding panics): `pg_ctl stop -m fast` (falling
//!   back to `immediate`), then the temp directory is removed.
//! * **Ctrl-C**: the server is started in its own process group, so the
//!   terminal's SIGINT does not reach it before the owning program decides.
//! * **The owner dies without dropping** (SIGINT/SIGKILL, `process::exit`, a
//!   cluster in a `static` like [`shared`]): a watchdog shell, started with
//!   the cluster in its own process group with stdio on `/dev/null`, polls
//!   the owner's pid every second; once the owner is gone it runs
//!   `pg_ctl stop -m immediate` and removes the temp directory. After a
//!   normal drop the watchdog is killed.
//!
//! # Replication and crash-like faults
//!
//! [`ClusterBuilder::start_standby_of`] clones a running cluster into a streaming standby
//! (`pg_basebackup`), [`Cluster::require_sync_standby`] makes the primary wait for it, and
//! [`Cluster::promote`] turns it into a primary. [`Cluster::kill_processes`] SIGKILLs a server's
//! every process (a crash), [`Cluster::stop_processes`] and [`Cluster::continue_processes`]
//! freeze and thaw it; [`Cluster::seed_as_standby_of`] makes a crashed former primary a
//! standby again.
//!
//! # Example
//!
//! ```no_run
//! let cluster = throwaway_pg::Cluster::builder()
//!     .setting("work_mem", "8MB")
//!     .start()?;
//! let url = cluster.create_database("bench")?;
//! assert_eq!(cluster.psql("bench", "SELECT 1")?, "1");
//! println!("connect to {url}");
//! # Ok::<(), throwaway_pg::Error>(())
//! ```

mod binaries;
mod cluster;
mod command;
mod config;
mod error;
mod user;
mod watchdog;

use std::sync::OnceLock;

pub use binaries::{find_server_binaries, BinarySearch, ServerBinaries, MIN_MAJOR_VERSION};
pub use cluster::{Cluster, ClusterBuilder, STANDBY_NAME};
pub use error::{Error, ErrorKind};

/// One cluster per process, started on first use with the default settings
/// and never dropped (the watchdog removes it after the process exits).
/// Meant for test binaries whose tests each create their own database.
///
/// # Panics
///
/// If the cluster cannot start; the panic message is the [`Error`] text.
pub fn shared() -> &'static Cluster {
    static SHARED: OnceLock<Cluster> = OnceLock::new();
    SHARED.get_or_init(|| Cluster::start().unwrap_or_else(|e| panic!("{e}")))
}
