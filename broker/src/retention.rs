//! The retention loop: every `QUEEN_RETENTION_INTERVAL_MS` one pass of
//! `log_retention_v1` (hash-sidecar purge on its own clock, segment retention).
//!
//! Several brokers may share a database: the procedure takes an advisory lock and a pass that
//! cannot get it does nothing, so passes never overlap. A failed pass is logged and retried on
//! the next tick.

use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::metrics::Metrics;
use crate::storage::procs;

/// Runs passes until the task is aborted.
pub async fn run(app: Arc<App>) {
    let mut tick = tokio::time::interval(Duration::from_millis(app.config.retention_interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        if let Err(e) = pass(&app).await {
            tracing::warn!(target: "retention", error = %e, "retention pass failed; retrying next tick");
        }
    }
}

/// One retention pass.
pub async fn pass(app: &App) -> Result<(), String> {
    let db = app.db("retention").await.map_err(|e| e.to_string())?;
    let floor = app.config.txns_min_retention_seconds.min(i32::MAX as u64) as i32;
    let pass = procs::retention::retention(&db, floor)
        .await
        .map_err(|e| e.to_string())?;
    if pass.ran {
        let (txns, segments) = (pass.txns_purged, pass.segments_deleted);
        Metrics::add(&app.metrics.counters.retention_passes, 1);
        Metrics::add(&app.metrics.counters.retention_txns_purged, txns as u64);
        Metrics::add(
            &app.metrics.counters.retention_segments_deleted,
            segments as u64,
        );
        if txns > 0 || segments > 0 {
            tracing::info!(target: "retention", txns_purged = txns, segments_deleted = segments, "retention pass");
        }
    }
    Ok(())
}
