//! Pushing the live series to a Prometheus remote-write endpoint (`ackbench run --metrics-push
//! URL`), for runs where nothing can scrape the load generator (a Job in Kubernetes): every
//! interval, and once more when the run ends, the board's samples (the very series the text
//! endpoint serves, histograms as their `_bucket`, `_sum` and `_count` series) go out as one
//! remote-write 1.0 request: a protobuf `WriteRequest` of `TimeSeries { labels, samples }`,
//! snappy block-compressed, POSTed over plain HTTP/1.1.
//!
//! The protobuf messages are derived by hand from the protocol's field numbers (no `protoc`). A
//! failed push is logged with the URL, the status and an excerpt of the answer, and counted; the
//! next interval sends the values of that moment. Pushing never stops the run.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_ENCODING, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use prost::Message;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::exposition::Sample;

/// The remote-write protocol version this speaks, as its header names it.
pub const PROTOCOL_VERSION: &str = "0.1.0";

/// How long one push may take (connect, send, answer) before it counts as failed.
const PUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest excerpt of a failed push's answer that is logged.
const EXCERPT_CHARS: usize = 200;

/// `prometheus.WriteRequest`: the series of one push (field 3, metadata, is not sent).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// `prometheus.TimeSeries`: one series' labels (sorted by name, `__name__` among them) and its
/// samples in time order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<PushedSample>,
}

/// `prometheus.Label`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `prometheus.Sample`: a value at a time in milliseconds since the UNIX epoch.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PushedSample {
    #[prost(double, tag = "1")]
    pub value: f64,
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// The request for `samples` at `timestamp_ms`: one series per distinct label set (a later
/// sample of the same series wins), in a stable order.
pub fn write_request(samples: &[Sample], timestamp_ms: i64) -> WriteRequest {
    let mut series: BTreeMap<Vec<(String, String)>, f64> = BTreeMap::new();
    for s in samples {
        let mut labels: Vec<(String, String)> = s
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        labels.push(("__name__".into(), format!("{}{}", s.family.name, s.suffix)));
        labels.sort();
        series.insert(labels, s.value);
    }
    let timeseries = series
        .into_iter()
        .map(|(labels, value)| TimeSeries {
            labels: labels
                .into_iter()
                .map(|(name, value)| Label { name, value })
                .collect(),
            samples: vec![PushedSample {
                value,
                timestamp: timestamp_ms,
            }],
        })
        .collect();
    WriteRequest { timeseries }
}

/// A request's body on the wire: its protobuf encoding in one raw snappy block.
pub fn body(request: &WriteRequest) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(&request.encode_to_vec())
        .expect("snappy compresses any protobuf a push builds")
}

/// Where pushes go: an `http://HOST[:PORT]/PATH` URL, checked once.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub url: String,
    /// `host:port`, what the connection dials.
    address: String,
    /// What the `host` header carries.
    authority: String,
    path: String,
}

impl Endpoint {
    /// Parses `--metrics-push URL`; the error names the flag, the URL and what is wrong.
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let bad = |why: &str| {
            format!(
                "--metrics-push {url:?}: {why}: give http://HOST:PORT/PATH, \
                 e.g. http://127.0.0.1:9090/api/v1/write"
            )
        };
        let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => return Err(bad("https is not supported (no TLS client here)")),
            Some(other) => return Err(bad(&format!("the scheme {other} is not http"))),
            None => return Err(bad("not an absolute URL")),
        }
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad("credentials in the URL are not supported"));
        }
        if authority.host().is_empty() {
            return Err(bad("no host"));
        }
        let port = match authority.as_str().rsplit_once(':') {
            Some((_, text)) if !text.contains(']') => match text.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => return Err(bad(&format!("the port {text:?} is not 1 to 65535"))),
            },
            _ => 80,
        };
        Ok(Endpoint {
            url: url.to_string(),
            address: format!("{}:{port}", authority.host()),
            authority: authority.as_str().to_string(),
            path: uri.path_and_query().map_or("/", |p| p.as_str()).to_string(),
        })
    }

    /// POSTs one compressed request; an error says what failed (connection, status and answer).
    async fn post(&self, body: Vec<u8>) -> Result<(), String> {
        match tokio::time::timeout(PUSH_TIMEOUT, self.exchange(body)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("no answer in {} s", PUSH_TIMEOUT.as_secs())),
        }
    }

    async fn exchange(&self, body: Vec<u8>) -> Result<(), String> {
        let stream = TcpStream::connect(&self.address)
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.address))?;
        let _ = stream.set_nodelay(true);
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let request = Request::post(&self.path)
            .header(HOST, &self.authority)
            .header(USER_AGENT, "ackbench")
            .header(CONTENT_TYPE, "application/x-protobuf")
            .header(CONTENT_ENCODING, "snappy")
            .header("X-Prometheus-Remote-Write-Version", PROTOCOL_VERSION)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("request: {e}"))?;
        let answer = sender
            .send_request(request)
            .await
            .map_err(|e| format!("sending: {e}"))?;
        let status = answer.status();
        if status.is_success() {
            return Ok(());
        }
        let text = match answer.into_body().collect().await {
            Ok(collected) => excerpt(&collected.to_bytes()),
            Err(e) => format!("(answer unreadable: {e})"),
        };
        Err(format!("HTTP {status}: {text}"))
    }
}

/// The first characters of an answer's body, on one line.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut cut: String = text.trim().chars().take(EXCERPT_CHARS).collect();
    if text.trim().chars().count() > EXCERPT_CHARS {
        cut.push('…');
    }
    cut.replace('\n', " ")
}

/// How the pushes of a run went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushTally {
    pub url: String,
    /// Pushes attempted (those with at least one series).
    pub pushes: u64,
    pub failed: u64,
}

impl std::fmt::Display for PushTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "metrics push: {} push(es) to {}, {} failed",
            self.pushes, self.url, self.failed
        )
    }
}

/// What a push sends: the samples of the moment.
pub type Source = Box<dyn Fn() -> Vec<Sample> + Send>;

/// The pushing task of a run; `finish` makes the last push and tells how they went.
pub struct Pushing {
    stop: oneshot::Sender<()>,
    task: JoinHandle<PushTally>,
}

/// Starts pushing `source`'s samples to `endpoint` every `interval` (on the current runtime).
pub fn start(endpoint: Endpoint, interval: Duration, source: Source) -> Pushing {
    let (stop, stopped) = oneshot::channel();
    let pusher = Pusher {
        tally: PushTally {
            url: endpoint.url.clone(),
            ..PushTally::default()
        },
        endpoint,
        interval,
        source,
        last_timestamp_ms: 0,
    };
    Pushing {
        stop,
        task: tokio::spawn(pusher.run(stopped)),
    }
}

impl Pushing {
    /// Makes the final push (after any under way) and returns the tally.
    pub async fn finish(self) -> PushTally {
        let _ = self.stop.send(());
        self.task
            .await
            .expect("the metrics push task does not panic")
    }
}

struct Pusher {
    endpoint: Endpoint,
    interval: Duration,
    source: Source,
    tally: PushTally,
    last_timestamp_ms: i64,
}

impl Pusher {
    async fn run(mut self, mut stopped: oneshot::Receiver<()>) -> PushTally {
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => self.push(false).await,
                _ = &mut stopped => {
                    self.push(true).await;
                    return self.tally;
                }
            }
        }
    }

    /// Pushes the samples of now, when there are any; a failure is logged and counted.
    async fn push(&mut self, last: bool) {
        let samples = (self.source)();
        if samples.is_empty() {
            return;
        }
        let request = write_request(&samples, self.next_timestamp_ms());
        self.tally.pushes += 1;
        if let Err(e) = self.endpoint.post(body(&request)).await {
            self.tally.failed += 1;
            let next = match last {
                true => "it was the run's last push".to_string(),
                false => format!("next try in {} s", self.interval.as_secs_f64()),
            };
            eprintln!(
                "ackbench: metrics push to {} failed ({} of {} so far): {e}; {next}",
                self.tally.url, self.tally.failed, self.tally.pushes
            );
        }
    }

    /// Now in milliseconds since the UNIX epoch, later than every earlier push's time (a
    /// series' samples must move forward).
    fn next_timestamp_ms(&mut self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        self.last_timestamp_ms = now.max(self.last_timestamp_ms + 1);
        self.last_timestamp_ms
    }
}

#[cfg(test)]
mod tests;
