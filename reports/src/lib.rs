//! The results document of an `ackbench` run, and everything rendered from it.
//!
//! `results` is the contract between measuring and rendering: the load generator writes it,
//! and the report, the gates and any later tool read only it (OpenMessaging-Benchmark style:
//! a run is a JSON document any later tool can re-render). `stats` holds the statistics over
//! rounds and histograms that both sides share.

pub mod capacity;
pub mod charts;
pub mod figures;
pub mod model;
pub mod page;
pub mod recovery;
pub mod results;
pub mod stats;
pub mod sweep;

pub use page::{render_comparison, render_report, write_report};

/// The page module's former name, kept so existing callers (`html::esc`) still build.
pub mod html {
    pub use crate::page::{esc, render_model};
}
