//! `POST /api/v1/configure`: create or update a queue and its options.

use hyper::StatusCode;
use serde_json::{Map, Value};

use crate::app::App;
use crate::http::json::{nonempty, read_body, Fields};
use crate::http::limits;
use crate::http::{self, Answer, ApiError, Request};
use crate::storage::DbError;
use ackbench_wire::{ConfigureBody, ConfigureResponse, QueueOptions};

/// Every option this broker implements, with its accepted range (booleans have none).
const OPTIONS: &[(&str, Option<(i64, i64)>)] = &[
    ("leaseTime", Some((1, 30 * 86_400))),
    ("retryLimit", Some((0, 1_000_000))),
    ("deadLetterQueue", None),
    ("dlqAfterMaxRetries", None),
    ("dedupWindowSeconds", Some((0, 10 * 365 * 86_400))),
    ("completedRetentionSeconds", Some((0, 100 * 365 * 86_400))),
    ("retentionSeconds", Some((0, 100 * 365 * 86_400))),
];

pub async fn handle(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let body: ConfigureBody = read_body(&req.body, explain)?;
    let queue = nonempty(Some(&body.queue), || "queue".into())?.unwrap_or_default();
    let (namespace, task) = (body.namespace.as_deref(), body.task.as_deref());
    limits::name(queue, "queue")?;
    limits::name(namespace.unwrap_or_default(), "namespace")?;
    limits::name(task.unwrap_or_default(), "task")?;
    let options = match &body.options {
        Some(o) => validated_options(o)?,
        None => Map::new(),
    };
    let db = app.db("configure").await?;
    let row = db
        .query_one(
            "SELECT id, name, namespace, task, lease_time, retry_limit, dead_letter_queue, \
             dlq_after_max_retries, dedup_window_seconds, completed_retention_seconds, retention_seconds \
             FROM queen.configure_queue_v1($1, $2, $3, $4, $5)",
            &[&req.tenant, &queue, &namespace, &task, &Value::Object(options)],
        )
        .await
        .map_err(|e| DbError::from_pg("configure_queue_v1", e))?;
    let answer = ConfigureResponse {
        configured: true,
        queue_id: row.get::<_, uuid::Uuid>(0).to_string(),
        queue: row.get(1),
        namespace: row.get(2),
        task: row.get(3),
        options: QueueOptions {
            lease_time: row.get(4),
            retry_limit: row.get(5),
            dead_letter_queue: row.get(6),
            dlq_after_max_retries: row.get(7),
            dedup_window_seconds: row.get(8),
            completed_retention_seconds: row.get(9),
            retention_seconds: row.get(10),
        },
    };
    Ok(http::json(StatusCode::OK, &answer))
}

/// Checks every option's name, type and range; an unknown option is refused by name.
fn validated_options(options: &Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    for (name, value) in options {
        let Some((_, range)) = OPTIONS.iter().find(|(known, _)| known == name) else {
            return Err(invalid(
                name,
                format!("options.{name} is not an option this broker implements"),
            ));
        };
        let ok = match range {
            Some((min, max)) => value.as_i64().is_some_and(|n| (*min..=*max).contains(&n)),
            None => value.is_boolean(),
        };
        if !ok {
            let expected = match range {
                Some((min, max)) => format!("a whole number in {min}..={max}"),
                None => "true or false".to_string(),
            };
            return Err(invalid(name, format!("options.{name} must be {expected}")));
        }
    }
    Ok(options.clone())
}

/// Names the field of a body that does not fit `ConfigureBody`.
fn explain(root: &Fields<'_>) -> Result<(), ApiError> {
    root.req_nonempty("queue")?;
    root.opt_str("namespace")?;
    root.opt_str("task")?;
    root.opt_object("options").map(drop)
}

fn invalid(name: &str, message: String) -> ApiError {
    let mut e = ApiError::bad_request(message);
    e.invalid = Some(name.to_string());
    e
}
