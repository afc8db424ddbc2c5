//! The remote-write encoding read back (snappy, then protobuf, against hand-encoded bytes of the
//! protocol's field numbers), the URL check, and pushes to a real local HTTP server: the headers
//! and body it receives, and a refused push counted and survived.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::*;
use crate::live::exposition::{Family, Type};

const SEEN: Family = Family {
    name: "demo_seen_total",
    kind: Type::Counter,
    help: "Things seen.",
};
const WAIT: Family = Family {
    name: "demo_wait_seconds",
    kind: Type::Histogram,
    help: "Waits.",
};

fn sample(
    family: Family,
    suffix: &'static str,
    extra: &[(&'static str, &str)],
    value: f64,
) -> Sample {
    let mut labels = vec![("run_id", "r1".to_string()), ("cell", "c".to_string())];
    labels.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    Sample {
        family,
        suffix,
        labels,
        value,
    }
}

fn demo() -> Vec<Sample> {
    vec![
        sample(SEEN, "", &[("op", "ack")], 7.0),
        sample(WAIT, "_bucket", &[("le", "0.5")], 2.0),
        sample(WAIT, "_bucket", &[("le", "+Inf")], 3.0),
        sample(WAIT, "_sum", &[], 1.25),
        sample(WAIT, "_count", &[], 3.0),
    ]
}

/// A series' labels as `name=value` words, in the order sent.
fn words(ts: &TimeSeries) -> Vec<String> {
    ts.labels
        .iter()
        .map(|l| format!("{}={}", l.name, l.value))
        .collect()
}

#[test]
fn a_request_reads_back_through_snappy_and_protobuf_with_sorted_labels_and_histogram_series() {
    let request = write_request(&demo(), 1_700_000_000_123);
    let wire = body(&request);
    let raw = snap::raw::Decoder::new().decompress_vec(&wire).unwrap();
    let decoded = WriteRequest::decode(raw.as_slice()).unwrap();
    assert_eq!(decoded, request);
    assert_eq!(decoded.timeseries.len(), 5);
    let mut names = Vec::new();
    for ts in &decoded.timeseries {
        let mut sorted = ts.labels.clone();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(sorted, ts.labels, "labels sorted by name: {:?}", words(ts));
        assert_eq!(ts.samples.len(), 1);
        assert_eq!(ts.samples[0].timestamp, 1_700_000_000_123);
        names.push(ts.labels[0].value.clone());
        assert_eq!(ts.labels[0].name, "__name__");
    }
    names.sort();
    assert_eq!(
        names,
        [
            "demo_seen_total",
            "demo_wait_seconds_bucket",
            "demo_wait_seconds_bucket",
            "demo_wait_seconds_count",
            "demo_wait_seconds_sum"
        ]
    );
    let inf = decoded
        .timeseries
        .iter()
        .find(|ts| words(ts).contains(&"le=+Inf".to_string()))
        .unwrap();
    assert_eq!(
        words(inf),
        [
            "__name__=demo_wait_seconds_bucket",
            "cell=c",
            "le=+Inf",
            "run_id=r1"
        ]
    );
    assert_eq!(inf.samples[0].value, 3.0);
}

#[test]
fn the_protobuf_bytes_follow_the_protocols_field_numbers() {
    // WriteRequest.timeseries = 1; TimeSeries.labels = 1, .samples = 2; Label.name = 1,
    // .value = 2; Sample.value = 1 (double), .timestamp = 2 (int64), encoded by hand.
    let request = WriteRequest {
        timeseries: vec![TimeSeries {
            labels: vec![Label {
                name: "a".into(),
                value: "b".into(),
            }],
            samples: vec![PushedSample {
                value: 1.0,
                timestamp: 2,
            }],
        }],
    };
    let label = [0x0a, 0x01, b'a', 0x12, 0x01, b'b'];
    let one = 1.0f64.to_le_bytes();
    let mut point = vec![0x09];
    point.extend(one);
    point.extend([0x10, 0x02]);
    let mut series = vec![0x0a, label.len() as u8];
    series.extend(label);
    series.extend([0x12, point.len() as u8]);
    series.extend(&point);
    let mut expected = vec![0x0a, series.len() as u8];
    expected.extend(&series);
    assert_eq!(request.encode_to_vec(), expected);
}

#[test]
fn a_sample_repeated_under_the_same_labels_is_sent_once_with_the_later_value() {
    let twice = [sample(SEEN, "", &[], 1.0), sample(SEEN, "", &[], 4.0)];
    let request = write_request(&twice, 5);
    assert_eq!(request.timeseries.len(), 1);
    assert_eq!(request.timeseries[0].samples[0].value, 4.0);
}

#[test]
fn urls_are_checked_and_a_bad_one_is_named() {
    let ok = Endpoint::parse("http://127.0.0.1:9090/api/v1/write").unwrap();
    assert_eq!(ok.address, "127.0.0.1:9090");
    assert_eq!(ok.path, "/api/v1/write");
    let default_port = Endpoint::parse("http://prometheus.monitoring/api/v1/write?x=1").unwrap();
    assert_eq!(default_port.address, "prometheus.monitoring:80");
    assert_eq!(default_port.path, "/api/v1/write?x=1");
    let v6 = Endpoint::parse("http://[::1]/api/v1/write").unwrap();
    assert_eq!(v6.address, "[::1]:80");
    for (url, says) in [
        ("prometheus:9090", "not an absolute URL"),
        ("ftp://prom/api/v1/write", "the scheme ftp is not http"),
        ("/api/v1/write", "not an absolute URL"),
        ("https://prom/api/v1/write", "https is not supported"),
        ("http://u:p@prom/api/v1/write", "credentials"),
        (
            "http://127.0.0.1:99999/api/v1/write",
            "the port \"99999\" is not 1 to 65535",
        ),
        ("http:// bad", "not a URL"),
    ] {
        let e = Endpoint::parse(url).unwrap_err();
        assert!(e.starts_with(&format!("--metrics-push {url:?}")), "{e}");
        assert!(e.contains(says), "{url}: {e}");
    }
}

type Received = Arc<Mutex<Vec<(String, HeaderMap, Bytes)>>>;

/// A real HTTP server on a free loopback port answering every request with `status` and
/// keeping what it received.
async fn receiver(status: StatusCode) -> (String, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/api/v1/write", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let kept = received.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let kept = kept.clone();
            let answer = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let kept = kept.clone();
                async move {
                    let target = req.uri().to_string();
                    let headers = req.headers().clone();
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    kept.lock().unwrap().push((target, headers, body));
                    let reply = Full::new(Bytes::from("out of bounds\nsample too old"));
                    Ok::<_, std::convert::Infallible>(
                        Response::builder().status(status).body(reply).unwrap(),
                    )
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), answer));
        }
    });
    (url, received)
}

#[tokio::test]
async fn pushes_reach_a_server_with_the_protocols_headers_and_a_decodable_body() {
    let (url, received) = receiver(StatusCode::NO_CONTENT).await;
    let endpoint = Endpoint::parse(&url).unwrap();
    let pushing = start(endpoint, Duration::from_millis(50), Box::new(demo));
    tokio::time::sleep(Duration::from_millis(180)).await;
    let tally = pushing.finish().await;
    assert_eq!(tally.failed, 0, "{tally}");
    let got = received.lock().unwrap().clone();
    assert_eq!(tally.pushes, got.len() as u64);
    assert!(
        got.len() >= 2,
        "a push at once, more every 50 ms and a last: {}",
        got.len()
    );
    let mut times = Vec::new();
    for (target, headers, body) in &got {
        assert_eq!(target, "/api/v1/write");
        assert_eq!(headers["content-encoding"], "snappy");
        assert_eq!(headers["content-type"], "application/x-protobuf");
        assert_eq!(headers["x-prometheus-remote-write-version"], "0.1.0");
        let raw = snap::raw::Decoder::new().decompress_vec(body).unwrap();
        let request = WriteRequest::decode(raw.as_slice()).unwrap();
        assert_eq!(request.timeseries.len(), 5);
        times.push(request.timeseries[0].samples[0].timestamp);
    }
    assert!(
        times.windows(2).all(|w| w[0] < w[1]),
        "times move on: {times:?}"
    );
}

#[tokio::test]
async fn a_refused_push_is_counted_and_pushing_goes_on() {
    let (url, received) = receiver(StatusCode::BAD_REQUEST).await;
    let endpoint = Endpoint::parse(&url).unwrap();
    let pushing = start(endpoint, Duration::from_millis(50), Box::new(demo));
    tokio::time::sleep(Duration::from_millis(120)).await;
    let tally = pushing.finish().await;
    assert!(tally.pushes >= 2, "{tally}");
    assert_eq!(tally.failed, tally.pushes, "{tally}");
    assert_eq!(received.lock().unwrap().len() as u64, tally.pushes);
    assert!(tally
        .to_string()
        .contains(&format!("{} failed", tally.failed)));
}

#[tokio::test]
async fn an_unreachable_endpoint_fails_each_push_and_nothing_is_pushed_without_samples() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api/v1/write", closed.local_addr().unwrap());
    drop(closed);
    let endpoint = Endpoint::parse(&url).unwrap();
    let pushing = start(endpoint.clone(), Duration::from_millis(30), Box::new(demo));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let tally = pushing.finish().await;
    assert!(tally.pushes >= 2 && tally.failed == tally.pushes, "{tally}");
    let quiet = start(endpoint, Duration::from_millis(30), Box::new(Vec::new));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(quiet.finish().await.pushes, 0);
}

#[test]
fn an_excerpt_is_one_line_and_bounded() {
    assert_eq!(
        excerpt(b" out of bounds\nsample too old \n"),
        "out of bounds sample too old"
    );
    let long = "x".repeat(500);
    assert_eq!(excerpt(long.as_bytes()).chars().count(), EXCERPT_CHARS + 1);
}
