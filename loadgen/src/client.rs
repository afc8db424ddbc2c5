//! The load generator's HTTP client for the broker's wire.
//!
//! Every worker owns a `Connection`: one keep-alive HTTP/1.1 connection (nodelay) opened on
//! first use and reopened after an error, driven inline by the worker's own task. A request is
//! one `write` of a head and body assembled in a reused buffer; its answer is read into a
//! reused buffer, its head parsed with `httparse`, and its body handed back as `Bytes` for the
//! caller to parse into borrowed types. No pool, no connection task and no channel between the
//! worker and its socket, no URI to format or parse. `BrokerClient` is the broker's address
//! plus the control-plane calls (configure, DLQ listing, `/metrics`, health) over one shared
//! connection.

use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use hyper::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use ackbench_wire::{DlqPage, PartitionDetail};

/// A failed request: transport errors and unexpected statuses alike.
#[derive(Debug, Clone)]
pub struct ClientError {
    pub what: String,
    /// Worth sending again: no answer came (the connection failed or timed out, so the request
    /// may or may not have taken effect), or the broker answered 503 (it did not).
    pub retryable: bool,
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

type Result<T> = std::result::Result<T, ClientError>;

fn err(what: impl Into<String>) -> ClientError {
    ClientError {
        what: what.into(),
        retryable: false,
    }
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
    /// `host:port`, what `TcpStream::connect` resolves and the `host` header carries.
    authority: String,
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
        Endpoint { base, authority }
    }
}

/// A status and the whole body of an answer.
pub type Answer = (StatusCode, Bytes);

/// How an answer's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

/// An answer's head: status, body framing, whether the server closes afterwards, head length.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Head {
    status: u16,
    framing: Framing,
    close: bool,
    len: usize,
}

/// Parses an answer's head from `buf`; `None` while it is incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<Head>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(err(format!("unreadable answer head: {e}"))),
    };
    let status = resp.code.unwrap_or(0);
    let mut framing = Framing::UntilClose;
    let mut close = resp.version == Some(0);
    for h in resp.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = value
                .parse()
                .map_err(|_| err(format!("bad content-length {value:?}")))?;
            framing = Framing::Length(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding")
            && value.to_ascii_lowercase().ends_with("chunked")
        {
            framing = Framing::Chunked;
        } else if h.name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        }
    }
    if status == 204 || status == 304 || (100..200).contains(&status) {
        framing = Framing::Length(0);
    }
    Ok(Some(Head {
        status,
        framing,
        close: close || framing == Framing::UntilClose,
        len,
    }))
}

/// One keep-alive connection, owned by one worker (and used only on the runtime it was first
/// used on, which its socket is registered with).
pub struct Connection {
    /// The brokers this connection may send to, each with its own socket: one, or (routing
    /// round robin over several brokers) all of a cell's.
    lanes: Vec<Lane>,
    /// The lane of the request in progress.
    current: usize,
    /// Round robin: the cell's shared turn counter, so requests from every worker take the
    /// brokers in turn, as a load balancer hands them out; `None` keeps to the one lane.
    turns: Option<Arc<AtomicUsize>>,
    /// The request being written: head and body, one `write`.
    out: Vec<u8>,
    /// What was read of the answer; a body is split off it as `Bytes`, and the next read
    /// reclaims the space once that body is dropped.
    input: BytesMut,
    timeout: Duration,
}

/// One broker a connection can send to, and its socket (opened on first use).
struct Lane {
    endpoint: Arc<Endpoint>,
    stream: Option<TcpStream>,
}

impl Connection {
    fn new(endpoint: Arc<Endpoint>) -> Connection {
        Connection::over(vec![endpoint], None)
    }

    fn over(endpoints: Vec<Arc<Endpoint>>, turns: Option<Arc<AtomicUsize>>) -> Connection {
        Connection {
            lanes: endpoints
                .into_iter()
                .map(|endpoint| Lane {
                    endpoint,
                    stream: None,
                })
                .collect(),
            current: 0,
            turns,
            out: Vec::with_capacity(1024),
            input: BytesMut::with_capacity(8192),
            timeout: Duration::from_secs(120),
        }
    }

    /// Sends one request (`body` is JSON when not empty) and reads the whole answer. Any
    /// failure drops the connection, so the next request starts on a fresh one.
    pub async fn send(&mut self, method: &str, path: &str, body: &[u8]) -> Result<Answer> {
        if let Some(turns) = &self.turns {
            self.current = turns.fetch_add(1, Ordering::Relaxed) % self.lanes.len();
        }
        let timeout = self.timeout;
        let answer = tokio::time::timeout(timeout, self.exchange(method, path, body)).await;
        let answer = match answer {
            Ok(a) => a,
            Err(_) => Err(err(format!("no answer within {timeout:?}"))),
        };
        if answer.is_err() {
            self.lanes[self.current].stream = None;
            self.input.clear();
        }
        answer.map_err(|e| ClientError {
            what: format!("{}: {e}", path.split('?').next().unwrap_or(path)),
            retryable: true,
        })
    }

    async fn exchange(&mut self, method: &str, path: &str, body: &[u8]) -> Result<Answer> {
        self.write_request(method, path, body);
        let lane = &mut self.lanes[self.current];
        if lane.stream.is_none() {
            lane.stream = Some(connect(&lane.endpoint.authority).await?);
        }
        let stream = lane.stream.as_mut().expect("connected");
        stream
            .write_all(&self.out)
            .await
            .map_err(|e| err(format!("write: {e}")))?;
        let head = self.read_head().await?;
        let body = self.read_body(head.framing).await?;
        if head.close {
            self.lanes[self.current].stream = None;
        }
        let status = StatusCode::from_u16(head.status)
            .map_err(|_| err(format!("bad status {}", head.status)))?;
        Ok((status, body))
    }

    fn write_request(&mut self, method: &str, path: &str, body: &[u8]) {
        let out = &mut self.out;
        out.clear();
        for part in [
            method,
            " ",
            path,
            " HTTP/1.1\r\nhost: ",
            &self.lanes[self.current].endpoint.authority,
        ] {
            out.extend_from_slice(part.as_bytes());
        }
        if body.is_empty() && method == "GET" {
            out.extend_from_slice(b"\r\n\r\n");
            return;
        }
        out.extend_from_slice(b"\r\ncontent-type: application/json\r\ncontent-length: ");
        let _ = write!(out, "{}\r\n\r\n", body.len());
        out.extend_from_slice(body);
    }

    /// Reads until an answer head is complete and consumes it.
    async fn read_head(&mut self) -> Result<Head> {
        loop {
            if let Some(head) = parse_head(&self.input)? {
                self.input.advance(head.len);
                if (100..200).contains(&head.status) {
                    continue;
                }
                return Ok(head);
            }
            self.fill().await?;
        }
    }

    /// Reads more of the answer; an early close is an error.
    async fn fill(&mut self) -> Result<usize> {
        let stream = self.lanes[self.current]
            .stream
            .as_mut()
            .ok_or_else(|| err("not connected"))?;
        self.input.reserve(8192);
        match stream.read_buf(&mut self.input).await {
            Ok(0) => Err(err("connection closed by the broker")),
            Ok(n) => Ok(n),
            Err(e) => Err(err(format!("read: {e}"))),
        }
    }

    async fn read_body(&mut self, framing: Framing) -> Result<Bytes> {
        match framing {
            Framing::Length(n) => {
                while self.input.len() < n {
                    self.input.reserve(n - self.input.len());
                    self.fill().await?;
                }
                Ok(self.input.split_to(n).freeze())
            }
            Framing::Chunked => self.read_chunked().await,
            Framing::UntilClose => {
                while self.fill().await.is_ok() {}
                Ok(self.input.split().freeze())
            }
        }
    }

    /// A chunked body, de-chunked (trailers are skipped).
    async fn read_chunked(&mut self) -> Result<Bytes> {
        let mut body = BytesMut::new();
        loop {
            let (skip, size) = match httparse::parse_chunk_size(&self.input) {
                Ok(httparse::Status::Complete(c)) => c,
                Ok(httparse::Status::Partial) => {
                    self.fill().await?;
                    continue;
                }
                Err(_) => return Err(err("bad chunk size")),
            };
            let size = size as usize;
            if size == 0 {
                // The last chunk: skip trailers up to the empty line.
                while !self.input[skip..].windows(2).any(|w| w == b"\r\n") {
                    self.fill().await?;
                }
                let end = self.input[skip..]
                    .windows(2)
                    .position(|w| w == b"\r\n")
                    .expect("seen");
                self.input.advance(skip + end + 2);
                return Ok(body.freeze());
            }
            while self.input.len() < skip + size + 2 {
                self.fill().await?;
            }
            body.put_slice(&self.input[skip..skip + size]);
            self.input.advance(skip + size + 2);
        }
    }

    /// A POST answered `ok`; its body.
    pub async fn post(&mut self, path: &str, body: &[u8], ok: StatusCode) -> Result<Bytes> {
        self.post_any(path, body, &[ok]).await.map(|(_, b)| b)
    }

    /// A POST answered with one of `ok` (a broker's variants of one meaning); which, and the body.
    pub async fn post_any(
        &mut self,
        path: &str,
        body: &[u8],
        ok: &[StatusCode],
    ) -> Result<(StatusCode, Bytes)> {
        match self.send("POST", path, body).await? {
            (s, b) if ok.contains(&s) => Ok((s, b)),
            (s, b) => Err(unexpected(path, s, &b)),
        }
    }

    /// A GET answered 200 (`Some(body)`) or 204 (`None`).
    pub async fn get(&mut self, path: &str) -> Result<Option<Bytes>> {
        match self.send("GET", path, &[]).await? {
            (StatusCode::OK, b) => Ok(Some(b)),
            (StatusCode::NO_CONTENT, _) => Ok(None),
            (s, b) => Err(unexpected(path, s, &b)),
        }
    }
}

async fn connect(addr: &str) -> Result<TcpStream> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| err(format!("connect {addr}: {e}")))?;
    stream
        .set_nodelay(true)
        .map_err(|e| err(format!("nodelay: {e}")))?;
    Ok(stream)
}

fn unexpected(path: &str, status: StatusCode, body: &[u8]) -> ClientError {
    ClientError {
        what: format!(
            "{}: {status}: {}",
            path.split('?').next().unwrap_or(path),
            String::from_utf8_lossy(body)
        ),
        retryable: status == StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// Parses an answer body into `T` (borrowing from `body` where `T` allows).
pub fn parse<'a, T: serde::Deserialize<'a>>(what: &str, body: &'a [u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| err(format!("{what}: unreadable answer: {e}")))
}

/// A request body buffer reused from request to request: a body is serialised straight into
/// it, and the connection copies it behind the request head.
#[derive(Default)]
pub struct BodyBuf(Vec<u8>);

impl BodyBuf {
    /// `value` as JSON.
    pub fn json<T: serde::Serialize>(&mut self, value: &T) -> &[u8] {
        self.0.clear();
        serde_json::to_writer(&mut self.0, value).expect("JSON");
        &self.0
    }

    /// The body last written.
    pub fn written(&self) -> &[u8] {
        &self.0
    }
}

/// The broker's address and its control-plane calls.
#[derive(Clone)]
pub struct BrokerClient {
    endpoint: Arc<Endpoint>,
    control: Arc<tokio::sync::Mutex<Connection>>,
    /// The route of the Prometheus text (`/metrics`; Queen's is `/metrics/prometheus`).
    prometheus_path: &'static str,
}

impl BrokerClient {
    pub fn new(base: &str) -> BrokerClient {
        let endpoint = Arc::new(Endpoint::parse(base));
        BrokerClient {
            control: Arc::new(tokio::sync::Mutex::new(Connection::new(endpoint.clone()))),
            endpoint,
            prometheus_path: "/metrics",
        }
    }

    /// The same broker, its Prometheus text read from `path`.
    pub fn with_prometheus_path(mut self, path: &'static str) -> BrokerClient {
        self.prometheus_path = path;
        self
    }

    pub fn base(&self) -> &str {
        &self.endpoint.base
    }

    /// A connection of its own for one worker (connected on first use).
    pub fn connection(&self) -> Connection {
        Connection::new(self.endpoint.clone())
    }

    /// One control-plane exchange, sent once more on a fresh connection when the first got no
    /// answer: the shared connection idles between window edges, and a server may close an idle
    /// keep-alive connection (Queen's does after about 10 s). Every control call is idempotent.
    async fn control(&self, method: &str, path: &str, body: &[u8]) -> Result<Answer> {
        let mut conn = self.control.lock().await;
        match conn.send(method, path, body).await {
            Err(e) if e.retryable => conn.send(method, path, body).await,
            answer => answer,
        }
    }

    pub async fn health(&self) -> Result<()> {
        self.health_body().await.map(|_| ())
    }

    /// The body of a 200 `/health` answer.
    pub async fn health_body(&self) -> Result<Bytes> {
        match self.control("GET", "/health", &[]).await? {
            (StatusCode::OK, b) => Ok(b),
            (s, b) => Err(err(format!(
                "/health: {s}: {}",
                String::from_utf8_lossy(&b)
            ))),
        }
    }

    pub async fn configure(&self, body: &Value) -> Result<Value> {
        let body = serde_json::to_vec(body).expect("JSON");
        let path = "/api/v1/configure";
        match self.control("POST", path, &body).await? {
            (StatusCode::OK, b) => parse(path, &b),
            (s, b) => Err(unexpected(path, s, &b)),
        }
    }

    pub async fn dlq_page(&self, queue: &str, limit: u32, offset: u64) -> Result<DlqPage> {
        let path = format!(
            "/api/v1/dlq?queue={}&limit={limit}&offset={offset}",
            encode(queue)
        );
        match self.control("GET", &path, &[]).await? {
            (StatusCode::OK, b) => parse("dlq", &b),
            (s, b) => Err(unexpected(&path, s, &b)),
        }
    }

    /// The partitions of `queue` with their cursors (`GET /api/v1/resources/queues/:queue`);
    /// none when the broker does not know the queue yet.
    pub async fn queue_partitions(&self, queue: &str) -> Result<Vec<PartitionDetail>> {
        #[derive(serde::Deserialize)]
        struct Detail {
            partitions: Vec<PartitionDetail>,
        }
        let path = format!("/api/v1/resources/queues/{}", encode(queue));
        match self.control("GET", &path, &[]).await? {
            (StatusCode::OK, b) => parse::<Detail>(&path, &b).map(|d| d.partitions),
            (StatusCode::NOT_FOUND, _) => Ok(Vec::new()),
            (s, b) => Err(unexpected(&path, s, &b)),
        }
    }

    /// The broker's Prometheus text (`/metrics`, or where its profile says).
    pub async fn metrics_text(&self) -> Result<String> {
        let path = self.prometheus_path;
        match self.control("GET", path, &[]).await? {
            (StatusCode::OK, b) => Ok(String::from_utf8_lossy(&b).into_owned()),
            (s, _) => Err(err(format!("{path}: {s}"))),
        }
    }
}

/// A cell's brokers as its workers reach them: every broker's address and how requests are
/// spread over them (`[broker] routing`).
#[derive(Clone)]
pub struct Fleet {
    endpoints: Vec<Arc<Endpoint>>,
    /// The first broker's client, for the control requests of the load generator itself.
    first: BrokerClient,
    sticky: bool,
    turns: Arc<AtomicUsize>,
}

impl Fleet {
    /// The brokers of `clients` (at least one), in order; `sticky` keeps each worker to one
    /// of them, else every request takes the next broker in turn.
    pub fn new(clients: &[BrokerClient], sticky: bool) -> Fleet {
        Fleet {
            endpoints: clients.iter().map(|c| c.endpoint.clone()).collect(),
            first: clients[0].clone(),
            sticky,
            turns: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The first broker, for requests of the load generator's own (the drain's queue detail).
    pub fn first(&self) -> &BrokerClient {
        &self.first
    }

    /// The connection of worker `worker` (its number among the workers of its kind): sticky,
    /// to broker `worker mod brokers`; round robin, to every broker in the shared turn.
    pub fn connection(&self, worker: u32) -> Connection {
        let n = self.endpoints.len();
        if self.sticky || n == 1 {
            let one = self.endpoints[worker as usize % n].clone();
            return Connection::over(vec![one], None);
        }
        Connection::over(self.endpoints.clone(), Some(self.turns.clone()))
    }
}

/// What `encode` leaves as it is: letters, digits and RFC 3986's other unreserved characters
/// (`-`, `.`, `_`, `~`), so queue and group names reach a broker that does not decode its path
/// parameters (Queen's uWebSockets routes) as they were written.
const ENCODED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes a path segment or query value.
pub fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, ENCODED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_from_base_url() {
        let e = Endpoint::parse("http://127.0.0.1:6632/");
        assert_eq!(e.base, "http://127.0.0.1:6632");
        assert_eq!(e.authority, "127.0.0.1:6632");
        assert_eq!(Endpoint::parse("http://broker").authority, "broker:80");
    }

    #[test]
    fn names_keep_their_unreserved_characters() {
        assert_eq!(encode("smoke-q_1.x~"), "smoke-q_1.x~");
        assert_eq!(encode("a b/c?"), "a%20b%2Fc%3F");
    }

    #[test]
    fn answer_heads_are_parsed() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: 12\r\n\r\n{").unwrap();
        assert_eq!(
            h,
            Some(Head {
                status: 200,
                framing: Framing::Length(12),
                close: false,
                len: 39
            })
        );
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-le").unwrap(), None);
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
        let h = parse_head(chunked).unwrap().unwrap();
        assert_eq!((h.framing, h.close), (Framing::Chunked, true));
        let h = parse_head(b"HTTP/1.1 204 No Content\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Length(0));
        let h = parse_head(b"HTTP/1.0 200 OK\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.framing, h.close), (Framing::UntilClose, true));
        assert!(parse_head(b"garbage\r\n\r\n").is_err());
    }

    /// A one-connection server answering each request with the next canned answer.
    async fn serve(answers: Vec<&'static [u8]>) -> (String, tokio::task::JoinHandle<Vec<u8>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            for answer in answers {
                let mut buf = [0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                seen.extend_from_slice(&buf[..n]);
                s.write_all(answer).await.unwrap();
            }
            seen
        });
        (format!("http://{addr}"), task)
    }

    #[tokio::test]
    async fn keep_alive_exchanges_on_one_connection() {
        let (base, server) = serve(vec![
            b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\n[]",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\n[1,\r\n2\r\n2]\r\n0\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\n\r\n",
        ])
        .await;
        let client = BrokerClient::new(&base);
        let mut c = client.connection();
        let pushed = c.post("/api/v1/push", b"{}", StatusCode::CREATED).await;
        assert_eq!(&pushed.unwrap()[..], b"[]");
        assert_eq!(&c.get("/a?b=1").await.unwrap().unwrap()[..], b"[1,2]");
        assert_eq!(c.get("/a").await.unwrap(), None);
        let seen = String::from_utf8(server.await.unwrap()).unwrap();
        let authority = base.trim_start_matches("http://");
        assert!(seen.starts_with(&format!(
            "POST /api/v1/push HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{{}}GET /a?b=1 HTTP/1.1\r\n"
        )), "{seen}");
    }

    #[tokio::test]
    async fn an_unexpected_status_is_an_error_naming_the_route() {
        let (base, _server) = serve(vec![
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 5\r\n\r\nnope!",
        ])
        .await;
        let mut c = BrokerClient::new(&base).connection();
        let e = c.get("/api/v1/pop/queue/q?batch=1").await.unwrap_err();
        assert_eq!(e.what, "/api/v1/pop/queue/q: 400 Bad Request: nope!");
    }
}
