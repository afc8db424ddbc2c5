//! The route table: (method, path) to a `Route` with its decoded path parameters.

use std::borrow::Cow;

use hyper::{Method, StatusCode};
use percent_encoding::percent_decode_str;

use super::{limits, ApiError};

/// Every route of the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Health,
    Metrics,
    Configure,
    Push,
    PopPartition {
        queue: String,
        partition: String,
    },
    PopQueue {
        queue: String,
    },
    PopDiscover,
    Ack,
    AckBatch,
    LeaseExtend {
        lease_id: String,
    },
    Transaction,
    DlqList,
    MessageRetry {
        partition_id: String,
        transaction_id: String,
    },
    MessageDelete {
        partition_id: String,
        transaction_id: String,
    },
    QueueList,
    QueueGet {
        queue: String,
    },
    QueueDelete {
        queue: String,
    },
}

impl Route {
    /// The label used in metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Route::Health => "health",
            Route::Metrics => "metrics",
            Route::Configure => "configure",
            Route::Push => "push",
            Route::PopPartition { .. } => "pop_partition",
            Route::PopQueue { .. } => "pop_queue",
            Route::PopDiscover => "pop_discover",
            Route::Ack => "ack",
            Route::AckBatch => "ack_batch",
            Route::LeaseExtend { .. } => "lease_extend",
            Route::Transaction => "transaction",
            Route::DlqList => "dlq",
            Route::MessageRetry { .. } => "dlq_retry",
            Route::MessageDelete { .. } => "dlq_delete",
            Route::QueueList => "queues",
            Route::QueueGet { .. } => "queue_get",
            Route::QueueDelete { .. } => "queue_delete",
        }
    }
}

/// Maps a request line to its route: 404 for an unknown path, 405 for a known path with the
/// wrong method.
pub fn route(method: &Method, path: &str) -> Result<Route, ApiError> {
    // Segments borrow the path unless percent-decoding changed them.
    let mut segs: Vec<Cow<str>> = Vec::with_capacity(8);
    for s in path.trim_end_matches('/').split('/').skip(1) {
        let decoded = percent_decode_str(s)
            .decode_utf8()
            .map_err(|_| ApiError::bad_request(format!("path segment `{s}` is not valid UTF-8")))?;
        segs.push(decoded);
    }
    let s: Vec<&str> = segs.iter().map(|seg| seg.as_ref()).collect();
    let (allowed, route) = match s.as_slice() {
        ["health"] => (Method::GET, Route::Health),
        ["metrics"] => (Method::GET, Route::Metrics),
        ["api", "v1", "configure"] => (Method::POST, Route::Configure),
        ["api", "v1", "push"] => (Method::POST, Route::Push),
        ["api", "v1", "pop", "queue", q, "partition", p] => (
            Method::GET,
            Route::PopPartition {
                queue: q.to_string(),
                partition: p.to_string(),
            },
        ),
        ["api", "v1", "pop", "queue", q] => (
            Method::GET,
            Route::PopQueue {
                queue: q.to_string(),
            },
        ),
        ["api", "v1", "pop"] => (Method::GET, Route::PopDiscover),
        ["api", "v1", "ack"] => (Method::POST, Route::Ack),
        ["api", "v1", "ack", "batch"] => (Method::POST, Route::AckBatch),
        ["api", "v1", "lease", l, "extend"] => (
            Method::POST,
            Route::LeaseExtend {
                lease_id: l.to_string(),
            },
        ),
        ["api", "v1", "transaction"] => (Method::POST, Route::Transaction),
        ["api", "v1", "dlq"] => (Method::GET, Route::DlqList),
        ["api", "v1", "messages", p, t, "retry"] => (
            Method::POST,
            Route::MessageRetry {
                partition_id: p.to_string(),
                transaction_id: t.to_string(),
            },
        ),
        ["api", "v1", "messages", p, t] => (
            Method::DELETE,
            Route::MessageDelete {
                partition_id: p.to_string(),
                transaction_id: t.to_string(),
            },
        ),
        ["api", "v1", "resources", "queues"] => (Method::GET, Route::QueueList),
        ["api", "v1", "resources", "queues", q] if *method == Method::DELETE => (
            Method::DELETE,
            Route::QueueDelete {
                queue: q.to_string(),
            },
        ),
        ["api", "v1", "resources", "queues", q] => (
            Method::GET,
            Route::QueueGet {
                queue: q.to_string(),
            },
        ),
        _ => return Err(ApiError::not_found(format!("no route for {path}"))),
    };
    if *method != allowed {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{path} answers {allowed}, not {method}"),
        ));
    }
    check_params(&route)?;
    Ok(route)
}

/// Holds the path parameters to the bounds of `limits`.
fn check_params(route: &Route) -> Result<(), ApiError> {
    match route {
        Route::PopPartition { queue, partition } => {
            limits::name(queue, "queue")?;
            limits::name(partition, "partition")
        }
        Route::PopQueue { queue } | Route::QueueGet { queue } | Route::QueueDelete { queue } => {
            limits::name(queue, "queue")
        }
        Route::LeaseExtend { lease_id } => limits::name(lease_id, "leaseId"),
        Route::MessageRetry {
            partition_id,
            transaction_id,
        }
        | Route::MessageDelete {
            partition_id,
            transaction_id,
        } => {
            limits::name(partition_id, "partitionId")?;
            limits::transaction_id(transaction_id, "transactionId")
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_decode_parameters() {
        let r = route(&Method::GET, "/api/v1/pop/queue/my%20q/partition/p-1").unwrap();
        assert_eq!(
            r,
            Route::PopPartition {
                queue: "my q".into(),
                partition: "p-1".into()
            }
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/ack/batch").unwrap(),
            Route::AckBatch
        );
    }

    #[test]
    fn unknown_is_404_wrong_method_is_405() {
        assert_eq!(
            route(&Method::GET, "/nope").unwrap_err().status,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            route(&Method::GET, "/api/v1/push").unwrap_err().status,
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            route(&Method::POST, "/health").unwrap_err().status,
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
