//! `GET /health` and `GET /metrics`.

use std::time::Duration;

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::json;

use crate::ack::stats::AckSnapshot;
use crate::app::App;
use crate::http::{self, Answer, ApiError};
use crate::metrics::Sections;
use crate::pop::stats::PopSnapshot;

/// 200 once PostgreSQL answers and the schema is applied; 503 otherwise.
pub async fn health(app: &App) -> Result<Answer, ApiError> {
    let probe = async {
        let db = app.db("health").await.map_err(|e| e.to_string())?;
        crate::storage::migrations::recorded_count(&db)
            .await
            .map_err(|e| e.to_string())
    };
    match tokio::time::timeout(Duration::from_secs(2), probe).await {
        Ok(Ok(_)) => Ok(http::json(StatusCode::OK, &json!({"status": "healthy"}))),
        Ok(Err(e)) => Ok(http::json(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "unhealthy", "error": e}),
        )),
        Err(_) => Ok(http::json(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "unhealthy", "error": "database did not answer within 2 s"}),
        )),
    }
}

/// The Prometheus text exposition.
pub fn metrics(app: &App) -> Answer {
    let sections = Sections {
        ack: AckSnapshot::of(app.registry.as_ref(), app.fusion.as_ref()),
        pop: PopSnapshot::of(
            &app.pop_stats,
            app.ready.hotlist.is_some(),
            app.pop_fusion.as_ref(),
            &app.segments,
        ),
        peers: app.ready.peer_stats.counts(),
        push_fusion: app.push_fusion.as_ref().map(|f| f.stats.as_ref()),
        config: &app.config,
    };
    let text = app.metrics.render(&sections);
    http::with_type(
        StatusCode::OK,
        Bytes::from(text),
        "text/plain; version=0.0.4",
    )
}
