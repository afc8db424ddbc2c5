//! Half-sent requests are not held open: a head that stops mid-way closes the connection after
//! `QUEEN_HEADER_READ_TIMEOUT_MS`, a body that stalls is answered 408 after
//! `QUEEN_BODY_READ_TIMEOUT_MS` and the connection closed. Raw TCP, since an HTTP client always
//! finishes its requests.

use std::time::{Duration, Instant};

use crate::common::TestBroker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A broker with 300 ms read timeouts.
async fn impatient_broker() -> TestBroker {
    TestBroker::start_with(|c| {
        c.header_read_timeout_ms = 300;
        c.body_read_timeout_ms = 300;
    })
    .await
}

/// Sends `bytes` on a fresh connection, then reads until the broker closes it (at most 10 s):
/// what it answered, and how long it took.
async fn send_and_wait_for_close(t: &TestBroker, bytes: &[u8]) -> (String, Duration) {
    let addr = t.broker.url().trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(bytes).await.expect("send");
    let started = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the connection was still open after 10 s");
    (
        String::from_utf8_lossy(&answer).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn a_half_sent_head_is_closed_after_the_header_timeout() {
    let t = impatient_broker().await;
    let (answer, took) =
        send_and_wait_for_close(&t, b"POST /api/v1/push HTTP/1.1\r\nHost: broker\r\n").await;
    assert!(!answer.contains("201"), "{answer}");
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
    t.broker.shutdown().await;
}

#[tokio::test]
async fn a_stalled_body_is_answered_408_and_closed() {
    let t = impatient_broker().await;
    let head = "POST /api/v1/push HTTP/1.1\r\nHost: broker\r\nContent-Type: application/json\r\n\
                Content-Length: 100\r\n\r\n{\"items\": [";
    let (answer, took) = send_and_wait_for_close(&t, head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body"), "{answer}");
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
    let queues: i64 = t
        .sql()
        .await
        .query_one("SELECT count(*) FROM queen.queues", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(queues, 0, "nothing was written");
    t.broker.shutdown().await;
}

#[tokio::test]
async fn a_20_mb_body_is_413() {
    let t = TestBroker::start().await;
    let body = vec![b' '; 20 << 20];
    let r = t.http.post_raw("/api/v1/push", &body).await;
    assert_eq!(r.status, hyper::StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text);
    assert!(r.json["error"].is_string());
    t.broker.shutdown().await;
}
