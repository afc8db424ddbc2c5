//! `POST /api/v1/configure`: create or update a queue and its options.

use hyper::StatusCode;
use serde_json::{Map, Value};

use crate::app::App;
use crate::http::json::{read_body, Fields};
use crate::http::limits;
use crate::http::{self, Answer, ApiError, Request};
use crate::queue_meta::QueueMeta;
use crate::storage::procs;
use ackbench_wire::{ConfigureBody, ConfigureResponse};

/// How an option's value is checked.
#[derive(Clone, Copy)]
enum Kind {
    /// A whole number in the range.
    Whole(i64, i64),
    Flag,
}

const YEAR: i64 = 365 * 86_400;

/// Queen's whole option set (`wire.md`, "Queues"), with the accepted values. Queen's clients send
/// all of it on every `create()`, defaults included.
const OPTIONS: &[(&str, Kind)] = &[
    ("leaseTime", Kind::Whole(1, 30 * 86_400)),
    ("retryLimit", Kind::Whole(0, 1_000_000)),
    ("deadLetterQueue", Kind::Flag),
    ("dlqAfterMaxRetries", Kind::Flag),
    ("dedupWindowSeconds", Kind::Whole(0, 10 * YEAR)),
    ("completedRetentionSeconds", Kind::Whole(0, 100 * YEAR)),
    ("retentionSeconds", Kind::Whole(0, 100 * YEAR)),
    ("delayedProcessing", Kind::Whole(0, 10 * YEAR)),
    ("windowBuffer", Kind::Whole(0, 10 * YEAR)),
    ("maxSize", Kind::Whole(0, 1_000_000_000_000)),
    ("priority", Kind::Whole(-1_000_000, 1_000_000)),
    ("encryptionEnabled", Kind::Flag),
    ("retentionEnabled", Kind::Flag),
    ("ttl", Kind::Whole(0, 100 * YEAR)),
    ("retryDelay", Kind::Whole(0, i32::MAX as i64)),
    ("maxWaitTimeSeconds", Kind::Whole(0, 10 * YEAR)),
];

pub async fn handle(app: &App, req: &Request) -> Result<Answer, ApiError> {
    let body: ConfigureBody = read_body(&req.body, explain)?;
    // Any string names a queue here, the empty one included: Queen configures `""` too, and
    // Queen's own JS suite relies on it. Push and pop still need a non-empty name.
    let queue = body.queue.as_str();
    let (namespace, task) = (body.namespace.as_deref(), body.task.as_deref());
    limits::name(queue, "queue")?;
    limits::name(namespace.unwrap_or_default(), "namespace")?;
    limits::name(task.unwrap_or_default(), "task")?;
    let (options, ignored) = match &body.options {
        Some(o) => validated_options(o)?,
        None => (Map::new(), Vec::new()),
    };
    if options.get("encryptionEnabled") == Some(&Value::Bool(true))
        && app.config.encryption_key.is_none()
    {
        return Err(invalid(
            "encryptionEnabled",
            "options.encryptionEnabled needs QUEEN_ENCRYPTION_KEY (64 hex characters) set on the broker"
                .into(),
        ));
    }
    let db = app.db("configure").await?;
    let options = Value::Object(options);
    let configure = procs::queues::Configure {
        tenant: req.tenant,
        queue,
        namespace,
        task,
        options: &options,
    };
    let row = procs::queues::configure_queue(&db, &configure).await?;
    let meta = QueueMeta {
        max_size: row.options.max_size,
        encrypted: row.options.encryption_enabled,
    };
    app.queue_metas.set(req.tenant, queue, meta);
    app.ready
        .publish(crate::peers::message::Event::QueueChanged {
            tenant: req.tenant,
            queue: queue.to_string(),
        });
    let answer = ConfigureResponse {
        configured: true,
        queue_id: row.id.to_string(),
        queue: row.name,
        namespace: row.namespace,
        task: row.task,
        options: row.options,
        ignored,
    };
    Ok(http::json(StatusCode::OK, &answer))
}

/// Checks the type and range of every known option. Options this broker does not know are
/// ignored, as Queen ignores them, and named in the second list; a `null` value counts as absent.
fn validated_options(
    options: &Map<String, Value>,
) -> Result<(Map<String, Value>, Vec<String>), ApiError> {
    let mut known = Map::new();
    let mut ignored = Vec::new();
    for (name, value) in options {
        let Some((_, kind)) = OPTIONS.iter().find(|(option, _)| option == name) else {
            ignored.push(name.clone());
            continue;
        };
        if value.is_null() {
            continue;
        }
        let ok = match kind {
            Kind::Whole(min, max) => value.as_i64().is_some_and(|n| (*min..=*max).contains(&n)),
            Kind::Flag => value.is_boolean(),
        };
        if !ok {
            let expected = match kind {
                Kind::Whole(min, max) => format!("a whole number in {min}..={max}"),
                Kind::Flag => "true or false".to_string(),
            };
            return Err(invalid(name, format!("options.{name} must be {expected}")));
        }
        known.insert(name.clone(), value.clone());
    }
    Ok((known, ignored))
}

/// Names the field of a body that does not fit `ConfigureBody`.
fn explain(root: &Fields<'_>) -> Result<(), ApiError> {
    root.req_str("queue")?;
    root.opt_str("namespace")?;
    root.opt_str("task")?;
    root.opt_object("options").map(drop)
}

fn invalid(name: &str, message: String) -> ApiError {
    let mut e = ApiError::bad_request(message);
    e.invalid = Some(name.to_string());
    e
}
