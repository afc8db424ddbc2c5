//! The results document of an `ackbench` run, and everything rendered from it.
//!
//! `results` is the contract between measuring and rendering: the load generator writes it,
//! and the report, the gates and any later tool read only it (OpenMessaging-Benchmark style:
//! a run is a JSON document any later tool can re-render). `stats` holds the statistics over
//! rounds and histograms that both sides share.

pub mod capacity;
pub mod charts;
pub mod figures;
pub mod html;
pub mod model;
pub mod results;
pub mod stats;

pub use html::{render_comparison, render_report, write_report};
