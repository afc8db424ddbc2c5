//! The live endpoint's HTTP server: `GET /metrics` answers the board's exposition text
//! (`text/plain; version=0.0.4`); any other path is 404, any other method 405. It listens on
//! the address `--metrics-listen` names, bound before the run starts so a bad or taken address
//! fails the command at once.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::Board;

/// The content type of the Prometheus text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Parses `addr` (`HOST:PORT`) and binds it; the error names the flag and what is wrong.
pub fn bind(addr: &str) -> Result<std::net::TcpListener, String> {
    let parsed: SocketAddr = addr.parse().map_err(|_| {
        format!("--metrics-listen {addr:?}: not an address: give IP:PORT, e.g. 127.0.0.1:9464")
    })?;
    let listener = std::net::TcpListener::bind(parsed)
        .map_err(|e| format!("--metrics-listen {addr}: cannot listen there: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("--metrics-listen {addr}: {e}"))?;
    Ok(listener)
}

/// Serves `board` on `listener` until the process ends (on the current Tokio runtime).
pub fn serve(listener: std::net::TcpListener, board: Arc<Board>) -> Result<SocketAddr, String> {
    let listener = TcpListener::from_std(listener).map_err(|e| format!("--metrics-listen: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("--metrics-listen: {e}"))?;
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    eprintln!("ackbench: metrics endpoint: accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let board = board.clone();
            tokio::spawn(async move {
                let answer = service_fn(move |req| answer(req, board.clone()));
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), answer)
                    .await;
            });
        }
    });
    Ok(local)
}

/// The answer to one request.
async fn answer(
    req: Request<Incoming>,
    board: Arc<Board>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => (StatusCode::OK, CONTENT_TYPE, board.scrape()),
        (_, "/metrics") => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET /metrics\n".to_string(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: the metrics are at /metrics\n".to_string(),
        ),
    };
    let response = Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("a response of a status, a header and a body");
    Ok(response)
}
