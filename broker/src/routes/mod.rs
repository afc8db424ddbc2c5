//! One module per route family; `dispatch` sends a routed request to its handler.

pub mod ack;
pub mod configure;
pub mod dlq;
pub mod lease;
pub mod operations;
pub mod pop;
pub mod push;
pub mod transaction;

use crate::app::App;
use crate::http::{Answer, ApiError, Request, Route};

pub async fn dispatch(app: &App, req: Request) -> Result<Answer, ApiError> {
    match &req.route {
        Route::Health => operations::health(app).await,
        Route::Metrics => Ok(operations::metrics(app)),
        Route::Configure => configure::handle(app, &req).await,
        Route::Push => push::handle(app, &req).await,
        Route::PopPartition { .. } | Route::PopQueue { .. } | Route::PopDiscover => {
            pop::handle(app, &req).await
        }
        Route::LeaseExtend { .. } => lease::handle(app, &req).await,
        Route::DlqList => dlq::list(app, &req).await,
        Route::MessageRetry { .. } => dlq::retry(app, &req).await,
        Route::MessageDelete { .. } => dlq::delete(app, &req).await,
        Route::Ack | Route::AckBatch => ack::handle(app, &req).await,
        Route::Transaction => transaction::handle(app, &req).await,
    }
}

/// Unpacks the one frame at `offset` of a partition (a duplicate's original, a DLQ payload);
/// `None` when retention removed its segment.
pub async fn frame_at(
    db: &deadpool_postgres::Object,
    partition_id: uuid::Uuid,
    offset: i64,
) -> Result<Option<crate::segment::Frame>, ApiError> {
    let row = db
        .query_opt(
            "SELECT base_offset, blob FROM queen.log_segment_at_v1($1, $2)",
            &[&partition_id, &offset],
        )
        .await
        .map_err(|e| crate::storage::DbError::from_pg("log_segment_at_v1", e))?;
    let Some(row) = row else { return Ok(None) };
    let base: i64 = row.get(0);
    let mut frames = crate::segment::unpack(row.get(1)).map_err(|e| {
        tracing::error!(%partition_id, offset, error = %e, "stored segment cannot be unpacked");
        ApiError::internal(format!(
            "segment of partition {partition_id} at {offset}: {e}"
        ))
    })?;
    let k = (offset - base) as usize;
    Ok((k < frames.len()).then(|| frames.swap_remove(k)))
}

/// A leasing pop delivered these spans under `worker`: each becomes a registry entry.
pub fn on_leased(
    app: &App,
    tenant: uuid::Uuid,
    group: &str,
    worker: &str,
    spans: &[pop::LeasedSpan],
) {
    let Some(registry) = &app.registry else {
        return;
    };
    for span in spans.iter().filter(|s| !s.frames.is_empty()) {
        let lease = span
            .lease_expires_at
            .and_then(|t| t.duration_since(std::time::SystemTime::now()).ok())
            .unwrap_or_default();
        registry.born(&crate::ack::registry::Delivered {
            tenant,
            partition_id: span.partition_id,
            group,
            worker,
            queue: &span.queue,
            partition: &span.partition,
            batch_end: span.span_end,
            frames: &span.frames,
            lease,
        });
    }
}
