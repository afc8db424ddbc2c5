//! The load generator's HTTP client for the broker's wire: push, pop, ack, DLQ listing,
//! configure and `/metrics`. One keep-alive connection pool shared by every worker.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use serde_json::Value;

use ackbench_wire::{AckResult, DlqPage, PopResponse, PushResult};

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

#[derive(Clone)]
pub struct BrokerClient {
    base: String,
    http: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
}

impl BrokerClient {
    pub fn new(base: &str) -> BrokerClient {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let http = Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(1024)
            .build(connector);
        BrokerClient {
            base: base.trim_end_matches('/').to_string(),
            http,
            timeout: Duration::from_secs(120),
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, Bytes)> {
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path));
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| err(e.to_string()))?;
        let call = async {
            let resp = self
                .http
                .request(req)
                .await
                .map_err(|e| err(format!("{path}: {e}")))?;
            let status = resp.status();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| err(format!("{path}: {e}")))?
                .to_bytes();
            Ok((status, bytes))
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| err(format!("{path}: no answer within {:?}", self.timeout)))?
    }

    async fn json<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &Value,
        ok: StatusCode,
    ) -> Result<T> {
        let (status, bytes) = self
            .send(method, path, Some(serde_json::to_vec(body).expect("JSON")))
            .await?;
        if status != ok {
            return Err(err(format!(
                "{path}: {status}: {}",
                String::from_utf8_lossy(&bytes)
            )));
        }
        serde_json::from_slice(&bytes).map_err(|e| err(format!("{path}: unreadable answer: {e}")))
    }

    pub async fn health(&self) -> Result<()> {
        match self.send(Method::GET, "/health", None).await? {
            (StatusCode::OK, _) => Ok(()),
            (s, b) => Err(err(format!(
                "/health: {s}: {}",
                String::from_utf8_lossy(&b)
            ))),
        }
    }

    pub async fn configure(&self, body: &Value) -> Result<Value> {
        self.json(Method::POST, "/api/v1/configure", body, StatusCode::OK)
            .await
    }

    pub async fn push(&self, items: Vec<Value>) -> Result<Vec<PushResult>> {
        self.json(
            Method::POST,
            "/api/v1/push",
            &serde_json::json!({ "items": items }),
            StatusCode::CREATED,
        )
        .await
    }

    /// A pop; `None` on 204. `path_and_query` is the route with its parameters.
    pub async fn pop(&self, path_and_query: &str) -> Result<Option<PopResponse>> {
        let (status, bytes) = self.send(Method::GET, path_and_query, None).await?;
        match status {
            StatusCode::NO_CONTENT => Ok(None),
            StatusCode::OK => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| err(format!("pop: unreadable answer: {e}"))),
            s => Err(err(format!(
                "pop: {s}: {}",
                String::from_utf8_lossy(&bytes)
            ))),
        }
    }

    pub async fn ack_batch(&self, body: &Value) -> Result<Vec<AckResult>> {
        self.json(Method::POST, "/api/v1/ack/batch", body, StatusCode::OK)
            .await
    }

    pub async fn dlq_page(&self, queue: &str, limit: u32, offset: u64) -> Result<DlqPage> {
        let path = format!(
            "/api/v1/dlq?queue={}&limit={limit}&offset={offset}",
            encode(queue)
        );
        let (status, bytes) = self.send(Method::GET, &path, None).await?;
        if status != StatusCode::OK {
            return Err(err(format!(
                "dlq: {status}: {}",
                String::from_utf8_lossy(&bytes)
            )));
        }
        serde_json::from_slice(&bytes).map_err(|e| err(format!("dlq: unreadable answer: {e}")))
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics_text(&self) -> Result<String> {
        match self.send(Method::GET, "/metrics", None).await? {
            (StatusCode::OK, b) => Ok(String::from_utf8_lossy(&b).into_owned()),
            (s, _) => Err(err(format!("/metrics: {s}"))),
        }
    }
}

/// Percent-encodes a path segment or query value.
pub fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}
