//! What is measured: client latency, PostgreSQL's counters, the broker's `/metrics`, and the
//! figures derived from their deltas over the window; `vacuum`, the database's vacuum state while
//! `hold_xmin` holds its horizon back.

pub mod broker_metrics;
pub mod figures;
pub mod host_cpu;
pub mod latency;
pub mod minutes;
pub mod pg_counters;
pub mod process_tree;
pub mod vacuum;
