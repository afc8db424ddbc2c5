//! Serving HTTP: accepting connections, reading each request into an `http::Request` (route,
//! query, tenant, bounded body), holding slow clients to the read timeouts, running its handler
//! from `routes` as a task of its own, and counting the answer.
//!
//! Read timeouts: a request head not complete within `QUEEN_HEADER_READ_TIMEOUT_MS` of the
//! connection's previous answer (or its opening) closes the connection (hyper's timer; it also
//! bounds keep-alive idling); a body that goes `QUEEN_BODY_READ_TIMEOUT_MS` without a byte is
//! answered 408 and the connection closed.
//!
//! Errors become answers here; nothing below knows about connections.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use percent_encoding::percent_decode_str;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use uuid::Uuid;

use crate::app::App;
use crate::http::{error_answer, limits, router, Answer, ApiError, Request};

/// Accepts connections until `stopped` flips; each connection is served on its own task.
pub async fn accept_loop(app: Arc<App>, listener: TcpListener, mut stopped: watch::Receiver<bool>) {
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped.changed() => return,
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(app.clone(), stream, peer, stopped.clone()));
    }
}

/// Serves one keep-alive connection; a stop closes it gracefully.
async fn connection(
    app: Arc<App>,
    stream: TcpStream,
    peer: std::net::SocketAddr,
    mut stopped: watch::Receiver<bool>,
) {
    let header_timeout = Duration::from_millis(app.config.header_read_timeout_ms);
    let service = service_fn(move |req| serve(app.clone(), req));
    let conn = http1::Builder::new()
        .keep_alive(true)
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        }
        _ = stopped.changed() => conn.as_mut().graceful_shutdown(),
    }
}

/// Serves one HTTP request end to end; never fails (errors become answers).
pub async fn serve(app: Arc<App>, req: hyper::Request<Incoming>) -> Result<Answer, Infallible> {
    let (route_name, answer) = match read(&app, req).await {
        Ok(request) => {
            let name = request.route.name();
            (name, handle(app.clone(), request).await)
        }
        Err((name, e)) => (name, refusal_of_read(&e)),
    };
    app.metrics
        .count_request(route_name, answer.status().as_u16());
    Ok(answer)
}

/// The answer to a request that could not be read; after a stalled body (408) or an
/// oversized one (413) the rest of the body is not read, so the connection is closed.
fn refusal_of_read(e: &ApiError) -> Answer {
    let mut answer = error_answer(e);
    if matches!(
        e.status,
        StatusCode::REQUEST_TIMEOUT | StatusCode::PAYLOAD_TOO_LARGE
    ) {
        answer
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    answer
}

/// Runs the handler as its own task, so that a bug that panics answers 500 (and is logged)
/// instead of tearing down the client's connection.
async fn handle(app: Arc<App>, request: Request) -> Answer {
    let name = request.route.name();
    // Boxed: the task then holds a pointer, not the handler's whole state machine (about ten
    // kilobytes, copied into the task and again on the way out).
    let handled = tokio::spawn(Box::pin(async move {
        crate::routes::dispatch(&app, request).await
    }))
    .await;
    match handled {
        Ok(answer) => answer.unwrap_or_else(|e| error_answer(&e)),
        Err(e) => {
            tracing::error!(route = name, error = %e, "request handler panicked");
            error_answer(&ApiError::internal(format!("{name}: internal error")))
        }
    }
}

/// Routes the request line, reads the tenant and the body (bounded by `QUEEN_MAX_BODY_BYTES`).
async fn read(
    app: &App,
    req: hyper::Request<Incoming>,
) -> Result<Request, (&'static str, ApiError)> {
    let (parts, body) = req.into_parts();
    let route = router::route(&parts.method, parts.uri.path()).map_err(|e| ("unrouted", e))?;
    let name = route.name();
    let query = query_of(parts.uri.query()).map_err(|e| (name, e))?;
    let tenant = tenant_of(app, &parts.headers).map_err(|e| (name, e))?;
    let idle = Duration::from_millis(app.config.body_read_timeout_ms);
    let body = read_body(body, app.config.max_body_bytes, idle)
        .await
        .map_err(|e| (name, e))?;
    Ok(Request {
        method: parts.method,
        route,
        query,
        headers: parts.headers,
        body,
        tenant,
    })
}

/// The query parameters, percent-decoded (`+` is a space); a key or value that is not UTF-8 is
/// a 400 naming it (never silently replaced), and every value is held to the bounds of a name
/// (the string parameters are names: queue, partition, namespace, task, consumerGroup; the
/// others are short numbers and flags).
fn query_of(raw: Option<&str>) -> Result<HashMap<String, String>, ApiError> {
    let mut query = HashMap::new();
    for pair in raw.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode_query(key, || format!("a query parameter name (`{key}`)"))?;
        let value = decode_query(value, || format!("query parameter {key}"))?;
        limits::name(&value, &key)?;
        query.insert(key, value);
    }
    Ok(query)
}

/// One percent-encoded query component as UTF-8.
fn decode_query(raw: &str, what: impl FnOnce() -> String) -> Result<String, ApiError> {
    let plus_as_space = match raw.contains('+') {
        true => std::borrow::Cow::Owned(raw.replace('+', " ")),
        false => std::borrow::Cow::Borrowed(raw),
    };
    percent_decode_str(&plus_as_space)
        .decode_utf8()
        .map(|v| v.into_owned())
        .map_err(|_| ApiError::bad_request(format!("{} is not valid UTF-8", what())))
}

/// Reads a body of at most `limit` bytes; 408 when `idle` passes without a byte of it.
async fn read_body(body: Incoming, limit: usize, idle: Duration) -> Result<Bytes, ApiError> {
    let mut body = Limited::new(body, limit);
    // A body that comes in one frame is kept as that frame, uncopied.
    let mut first: Option<Bytes> = None;
    let mut read = BytesMut::new();
    loop {
        let frame = tokio::time::timeout(idle, body.frame())
            .await
            .map_err(|_| {
                ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    format!("no byte of the body for {} ms", idle.as_millis()),
                )
            })?;
        match frame {
            None if read.is_empty() => return Ok(first.unwrap_or_default()),
            None => return Ok(read.freeze()),
            Some(Err(e)) => return Err(body_error(limit, e)),
            Some(Ok(frame)) => match (frame.into_data(), first.take()) {
                (Ok(data), None) if read.is_empty() => first = Some(data),
                (Ok(data), earlier) => {
                    if let Some(earlier) = earlier {
                        read.extend_from_slice(&earlier);
                    }
                    read.extend_from_slice(&data);
                }
                (Err(_), earlier) => first = earlier,
            },
        }
    }
}

/// 413 for a body over the limit, else 400 naming what went wrong.
fn body_error(limit: usize, e: Box<dyn std::error::Error + Send + Sync>) -> ApiError {
    if e.downcast_ref::<http_body_util::LengthLimitError>()
        .is_some()
    {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("body is larger than {limit} bytes"),
        )
    } else {
        ApiError::bad_request(format!("could not read the body: {e}"))
    }
}

/// The caller's tenant: the `x-queen-tenant` header when tenancy is on, else the default.
fn tenant_of(app: &App, headers: &HeaderMap) -> Result<Uuid, ApiError> {
    let default = app.default_tenant;
    if !app.config.tenancy_header {
        return Ok(default);
    }
    match headers.get("x-queen-tenant") {
        None => Ok(default),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| Uuid::parse_str(s.trim()).ok())
            .ok_or_else(|| ApiError::bad_request("header x-queen-tenant must be a UUID")),
    }
}
