//! One module per route family, each parsing its requests and writing its answers over the
//! domains (`ack`, `pop`, `push`, `storage`); `dispatch` sends a routed request to its handler,
//! and `errors` turns the domains' errors into answers.

pub mod ack;
pub mod configure;
pub mod dlq;
pub mod errors;
pub mod lease;
pub mod operations;
pub mod pop;
pub mod push;
pub mod queues;
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
        Route::QueueList => queues::list(app, &req).await,
        Route::QueueGet { .. } => queues::get(app, &req).await,
        Route::QueueDelete { .. } => queues::delete(app, &req).await,
        Route::Ack | Route::AckBatch => ack::handle(app, &req).await,
        Route::Transaction => transaction::handle(app, &req).await,
    }
}
