//! Trend: the figures of a series of runs kept over time, and the change points in them.
//! `record` is what one run contributes (per cell its gated and headline figures), `store`
//! keeps records in a directory or a PostgreSQL table, `stats` finds change points in one
//! series (no I/O), `analysis` applies it per cell and gated figure and writes the findings,
//! `chart` draws each figure's history, and `cli` is `ackbench history`.

pub mod analysis;
pub mod chart;
pub mod cli;
pub mod record;
pub mod stats;
pub mod store;
