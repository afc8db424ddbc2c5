//! The load generator's HTTP client for the broker's wire.
//!
//! Every worker owns a `Connection`: one keep-alive HTTP/1.1 connection (nodelay) opened on
//! first use and reopened after an error, so a request costs a write and a read on a socket the
//! worker alone uses: no pool to check out of, no URI to format or parse. Request paths are
//! pre-built `Uri`s (cloning one is a reference count), bodies arrive as `Bytes` the caller
//! serialised, and answers come back as the raw body for the caller to parse into borrowed
//! types. `BrokerClient` is the broker's address plus the control-plane calls (configure, DLQ
//! listing, `/metrics`, health) over one shared connection.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

use ackbench_wire::DlqPage;

/// A failed request: transport errors and unexpected statuses alike.
#[derive(Debug, Clone)]
pub struct ClientError {
    pub what: String,
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

type Result<T> = std::result::Result<T, ClientError>;

fn err(what: impl Into<String>) -> ClientError {
    ClientError { what: what.into() }
}

/// The fixed routes the workers use.
pub mod routes {
    pub const PUSH: &str = "/api/v1/push";
    pub const ACK_BATCH: &str = "/api/v1/ack/batch";
}

/// Where the broker listens: what every connection needs, built once.
struct Endpoint {
    /// `http://host:port`, without a trailing slash.
    base: String,
    /// `host:port`, what `TcpStream::connect` resolves.
    authority: String,
    host: HeaderValue,
}

impl Endpoint {
    fn parse(base: &str) -> Endpoint {
        let base = base.trim_end_matches('/').to_string();
        let rest = base
            .strip_prefix("http://")
            .unwrap_or(&base)
            .split('/')
            .next()
            .unwrap_or_default();
        let authority = if rest.contains(':') {
            rest.to_string()
        } else {
            format!("{rest}:80")
        };
        let host = HeaderValue::from_str(rest).unwrap_or(HeaderValue::from_static("localhost"));
        Endpoint {
            base,
            authority,
            host,
        }
    }
}

/// One keep-alive connection, owned by one worker.
pub struct Connection {
    endpoint: Arc<Endpoint>,
    sender: Option<SendRequest<Full<Bytes>>>,
    timeout: Duration,
}

/// A status and the whole body of an answer.
pub type Answer = (StatusCode, Bytes);

impl Connection {
    fn new(endpoint: Arc<Endpoint>) -> Connection {
        Connection {
            endpoint,
            sender: None,
            timeout: Duration::from_secs(120),
        }
    }

    /// The sender of a live connection, connecting first when there is none.
    async fn ready(&mut self) -> Result<&mut SendRequest<Full<Bytes>>> {
        if self.sender.as_ref().is_some_and(|s| s.is_closed()) {
            self.sender = None;
        }
        if self.sender.is_none() {
            self.sender = Some(self.connect().await?);
        }
        let sender = self.sender.as_mut().expect("connected");
        sender
            .ready()
            .await
            .map_err(|e| err(format!("connection: {e}")))?;
        Ok(sender)
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>> {
        let addr = &self.endpoint.authority;
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| err(format!("connect {addr}: {e}")))?;
        stream
            .set_nodelay(true)
            .map_err(|e| err(format!("nodelay: {e}")))?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| err(format!("handshake {addr}: {e}")))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Sends one request (`body` is JSON when not empty) and reads the whole answer. Any
    /// failure drops the connection, so the next request starts on a fresh one.
    pub async fn send(&mut self, method: Method, uri: &Uri, body: Bytes) -> Result<Answer> {
        let timeout = self.timeout;
        let answer = tokio::time::timeout(timeout, self.exchange(method, uri, body)).await;
        let answer = match answer {
            Ok(a) => a,
            Err(_) => Err(err(format!("no answer within {timeout:?}"))),
        };
        if answer.is_err() {
            self.sender = None;
        }
        answer.map_err(|e| err(format!("{}: {e}", uri.path())))
    }

    async fn exchange(&mut self, method: Method, uri: &Uri, body: Bytes) -> Result<Answer> {
        let json = !body.is_empty();
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = uri.clone();
        let headers = req.headers_mut();
        headers.insert(HOST, self.endpoint.host.clone());
        if json {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let sender = self.ready().await?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| err(e.to_string()))?;
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| err(e.to_string()))?
            .to_bytes();
        Ok((status, bytes))
    }

    /// A POST answered `ok`; its body.
    pub async fn post(&mut self, uri: &Uri, body: Bytes, ok: StatusCode) -> Result<Bytes> {
        match self.send(Method::POST, uri, body).await? {
            (s, b) if s == ok => Ok(b),
            (s, b) => Err(unexpected(uri, s, &b)),
        }
    }

    /// A GET answered 200 (`Some(body)`) or 204 (`None`).
    pub async fn get(&mut self, uri: &Uri) -> Result<Option<Bytes>> {
        match self.send(Method::GET, uri, Bytes::new()).await? {
            (StatusCode::OK, b) => Ok(Some(b)),
            (StatusCode::NO_CONTENT, _) => Ok(None),
            (s, b) => Err(unexpected(uri, s, &b)),
        }
    }
}

fn unexpected(uri: &Uri, status: StatusCode, body: &[u8]) -> ClientError {
    err(format!(
        "{}: {status}: {}",
        uri.path(),
        String::from_utf8_lossy(body)
    ))
}

/// Parses an answer body into `T` (borrowing from `body` where `T` allows).
pub fn parse<'a, T: serde::Deserialize<'a>>(what: &str, body: &'a [u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| err(format!("{what}: unreadable answer: {e}")))
}

/// A request body buffer reused from request to request: a body is serialised straight into
/// it and handed out as `Bytes`; once the request that carried it is done, the next body
/// reclaims the same allocation.
#[derive(Default)]
pub struct BodyBuf {
    buf: BytesMut,
    last_len: usize,
}

impl BodyBuf {
    /// `value` as JSON.
    pub fn json<T: serde::Serialize>(&mut self, value: &T) -> Bytes {
        self.buf.clear();
        self.buf.reserve(self.last_len.max(256));
        serde_json::to_writer((&mut self.buf).writer(), value).expect("JSON");
        self.last_len = self.buf.len();
        self.buf.split().freeze()
    }
}

/// A path (with its query) as a `Uri`, built once and cloned per request.
pub fn uri(path_and_query: &str) -> Uri {
    path_and_query
        .parse()
        .unwrap_or_else(|e| panic!("{path_and_query} is not a request path: {e}"))
}

/// The broker's address and its control-plane calls.
#[derive(Clone)]
pub struct BrokerClient {
    endpoint: Arc<Endpoint>,
    control: Arc<tokio::sync::Mutex<Connection>>,
}

impl BrokerClient {
    pub fn new(base: &str) -> BrokerClient {
        let endpoint = Arc::new(Endpoint::parse(base));
        BrokerClient {
            control: Arc::new(tokio::sync::Mutex::new(Connection::new(endpoint.clone()))),
            endpoint,
        }
    }

    pub fn base(&self) -> &str {
        &self.endpoint.base
    }

    /// A connection of its own for one worker (connected on first use).
    pub fn connection(&self) -> Connection {
        Connection::new(self.endpoint.clone())
    }

    async fn control(&self, method: Method, path: &str, body: Bytes) -> Result<Answer> {
        self.control
            .lock()
            .await
            .send(method, &uri(path), body)
            .await
    }

    pub async fn health(&self) -> Result<()> {
        match self.control(Method::GET, "/health", Bytes::new()).await? {
            (StatusCode::OK, _) => Ok(()),
            (s, b) => Err(err(format!(
                "/health: {s}: {}",
                String::from_utf8_lossy(&b)
            ))),
        }
    }

    pub async fn configure(&self, body: &Value) -> Result<Value> {
        let body = Bytes::from(serde_json::to_vec(body).expect("JSON"));
        let path = "/api/v1/configure";
        match self.control(Method::POST, path, body).await? {
            (StatusCode::OK, b) => parse(path, &b),
            (s, b) => Err(unexpected(&uri(path), s, &b)),
        }
    }

    pub async fn dlq_page(&self, queue: &str, limit: u32, offset: u64) -> Result<DlqPage> {
        let path = format!(
            "/api/v1/dlq?queue={}&limit={limit}&offset={offset}",
            encode(queue)
        );
        match self.control(Method::GET, &path, Bytes::new()).await? {
            (StatusCode::OK, b) => parse("dlq", &b),
            (s, b) => Err(unexpected(&uri(&path), s, &b)),
        }
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics_text(&self) -> Result<String> {
        match self.control(Method::GET, "/metrics", Bytes::new()).await? {
            (StatusCode::OK, b) => Ok(String::from_utf8_lossy(&b).into_owned()),
            (s, _) => Err(err(format!("/metrics: {s}"))),
        }
    }
}

/// Percent-encodes a path segment or query value.
pub fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_from_base_url() {
        let e = Endpoint::parse("http://127.0.0.1:6632/");
        assert_eq!(e.base, "http://127.0.0.1:6632");
        assert_eq!(e.authority, "127.0.0.1:6632");
        assert_eq!(e.host, "127.0.0.1:6632");
        assert_eq!(Endpoint::parse("http://broker").authority, "broker:80");
    }

    #[test]
    fn body_buffer_reuses_its_allocation() {
        let mut b = BodyBuf::default();
        let first = b.json(&serde_json::json!({"a": [1, 2, 3]}));
        assert_eq!(&first[..], br#"{"a":[1,2,3]}"#);
        let at = first.as_ptr();
        drop(first);
        let second = b.json(&serde_json::json!({"b": 2}));
        assert_eq!(&second[..], br#"{"b":2}"#);
        assert_eq!(second.as_ptr(), at, "the dropped body's memory is reused");
    }
}
