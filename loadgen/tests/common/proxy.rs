//! A perturbing HTTP proxy between the load generator's workers and a real broker: it passes
//! every request through, or breaks one guarantee on purpose (`Mode`), so a test can show each
//! audit check counting what it claims when, and only when, its guarantee is broken. Each
//! downstream connection (one per worker) gets its own upstream connection.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use ackbench::client::BrokerClient;

use super::recorded_queen::read_request;

/// What the proxy breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// Nothing: every request and answer passes unchanged.
    PassThrough,
    /// Swaps the first two messages of some pop answers (first deliveries of one producer in
    /// one partition): order within a lease broken.
    Swap,
    /// Gives some pops the answer another worker got just before, lease and all, without
    /// asking the broker: two consumers hold one lease.
    Share,
    /// Answers some acks success without passing them on: acked messages come back.
    Swallow,
    /// Adds to some pop answers a message with a transactionId nobody pushed.
    Invent,
    /// Answers success for acks the broker refused for an invalid or expired lease: a fencing
    /// failure.
    Fence,
}

/// A pop answer kept for `Mode::Share`: which connection got it, when, and its body.
struct Kept {
    connection: u64,
    at: Instant,
    body: Vec<u8>,
}

struct Shared {
    upstream: BrokerClient,
    mode: AtomicU8,
    /// Requests a perturbation could apply to so far (every third is perturbed).
    eligible: AtomicU64,
    /// Answers perturbed so far.
    perturbed: AtomicU64,
    last_pop: Mutex<Option<Kept>>,
    invented: AtomicU64,
}

/// A running proxy.
pub struct Proxy {
    pub url: String,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Listens on a free local port (on the current tokio runtime), forwarding to `upstream`.
    pub async fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared {
            upstream: BrokerClient::new(upstream),
            mode: AtomicU8::new(Mode::PassThrough as u8),
            eligible: AtomicU64::new(0),
            perturbed: AtomicU64::new(0),
            last_pop: Mutex::new(None),
            invented: AtomicU64::new(0),
        });
        let serving = shared.clone();
        tokio::spawn(async move {
            let mut connection = 0;
            while let Ok((stream, _)) = listener.accept().await {
                connection += 1;
                tokio::spawn(serve(stream, serving.clone(), connection));
            }
        });
        Proxy { url, shared }
    }

    /// Switches what the proxy breaks and zeroes its tally.
    pub fn set_mode(&self, mode: Mode) {
        self.shared.mode.store(mode as u8, Ordering::SeqCst);
        self.shared.perturbed.store(0, Ordering::SeqCst);
        *self.shared.last_pop.lock().unwrap() = None;
    }

    /// Answers perturbed since the mode was set.
    pub fn perturbed(&self) -> u64 {
        self.shared.perturbed.load(Ordering::SeqCst)
    }
}

impl Shared {
    fn mode(&self) -> Mode {
        match self.mode.load(Ordering::SeqCst) {
            1 => Mode::Swap,
            2 => Mode::Share,
            3 => Mode::Swallow,
            4 => Mode::Invent,
            5 => Mode::Fence,
            _ => Mode::PassThrough,
        }
    }

    /// Whether this eligible request is one to perturb (every third).
    fn take_turn(&self) -> bool {
        self.eligible
            .fetch_add(1, Ordering::SeqCst)
            .is_multiple_of(3)
    }

    fn count(&self) {
        self.perturbed.fetch_add(1, Ordering::SeqCst);
    }
}

/// One downstream keep-alive connection.
async fn serve(mut stream: TcpStream, shared: Arc<Shared>, connection: u64) {
    let _ = stream.set_nodelay(true);
    let mut upstream = shared.upstream.connection();
    let mut buf = Vec::new();
    while let Some((method, path, body)) = read_request(&mut stream, &mut buf).await {
        let (status, answer) =
            exchange(&shared, &mut upstream, connection, &method, &path, &body).await;
        let content_type = match path.starts_with("/metrics") {
            true => "text/plain",
            false => "application/json",
        };
        let head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
            answer.len()
        );
        if stream.write_all(head.as_bytes()).await.is_err()
            || stream.write_all(&answer).await.is_err()
        {
            return;
        }
    }
}

/// The answer to one request: the broker's, perturbed by the mode.
async fn exchange(
    shared: &Shared,
    upstream: &mut ackbench::client::Connection,
    connection: u64,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mode = shared.mode();
    let is_pop = method == "GET" && path.starts_with("/api/v1/pop/");
    let is_ack = method == "POST" && path.starts_with("/api/v1/ack/batch");
    if is_pop && mode == Mode::Share {
        if let Some(kept) = shareable(shared, connection) {
            return (200, kept);
        }
    }
    if is_ack && mode == Mode::Swallow && shared.take_turn() {
        shared.count();
        return (200, swallowed(body));
    }
    let (status, answer) = match upstream.send(method, path, body).await {
        Ok((s, b)) => (s.as_u16(), b.to_vec()),
        Err(e) => {
            return (
                502,
                json!({"error": e.to_string()}).to_string().into_bytes(),
            )
        }
    };
    if status != 200 {
        return (status, answer);
    }
    let answer = match (is_pop, is_ack, mode) {
        (true, _, Mode::Swap) => swapped(shared, answer),
        (true, _, Mode::Invent) => invented(shared, answer),
        (true, _, Mode::Share) => {
            keep(shared, connection, &answer);
            answer
        }
        (_, true, Mode::Fence) => fenced_open(shared, answer),
        _ => answer,
    };
    (status, answer)
}

/// For `Mode::Share`: the pop answer another connection got 50 to 250 ms ago (its consumer is
/// still working on it, its lease certainly live), once, on every third chance.
fn shareable(shared: &Shared, connection: u64) -> Option<Vec<u8>> {
    let mut last = shared.last_pop.lock().unwrap();
    let kept = last.as_ref()?;
    let age = kept.at.elapsed();
    let fresh = age >= Duration::from_millis(50) && age <= Duration::from_millis(250);
    if kept.connection == connection || !fresh || !shared.take_turn() {
        return None;
    }
    shared.count();
    last.take().map(|k| k.body)
}

fn keep(shared: &Shared, connection: u64, answer: &[u8]) {
    let has_messages = serde_json::from_slice::<Value>(answer)
        .is_ok_and(|v| v["messages"].as_array().is_some_and(|m| !m.is_empty()));
    if has_messages {
        *shared.last_pop.lock().unwrap() = Some(Kept {
            connection,
            at: Instant::now(),
            body: answer.to_vec(),
        });
    }
}

/// The producer prefix of a transactionId (`{tag}-{producer}-`).
fn producer_of(txn: &str) -> Option<&str> {
    let mut parts = txn.rsplitn(3, '-');
    parts.next()?;
    parts.next()?;
    parts.next()
}

/// For `Mode::Swap`: the first two messages swapped when they are first deliveries of one
/// producer in one partition, on every third such answer.
fn swapped(shared: &Shared, answer: Vec<u8>) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<Value>(&answer) else {
        return answer;
    };
    let Some(m) = v["messages"].as_array_mut().filter(|m| m.len() >= 2) else {
        return answer;
    };
    let first_time = |x: &Value| x["deliveryAttempt"].as_i64().unwrap_or(1) <= 1;
    let same_producer = producer_of(m[0]["transactionId"].as_str().unwrap_or(""))
        == producer_of(m[1]["transactionId"].as_str().unwrap_or(""));
    let same_partition = m[0]["partitionId"] == m[1]["partitionId"];
    let eligible = same_producer && same_partition && first_time(&m[0]) && first_time(&m[1]);
    if !eligible || !shared.take_turn() {
        return answer;
    }
    m.swap(0, 1);
    shared.count();
    v.to_string().into_bytes()
}

/// For `Mode::Invent`: a message nobody pushed added to every third pop answer with messages.
fn invented(shared: &Shared, answer: Vec<u8>) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<Value>(&answer) else {
        return answer;
    };
    let Some(m) = v["messages"].as_array_mut().filter(|m| !m.is_empty()) else {
        return answer;
    };
    if !shared.take_turn() {
        return answer;
    }
    let n = shared.invented.fetch_add(1, Ordering::SeqCst);
    let mut extra = m[0].clone();
    extra["transactionId"] = json!(format!("invented-by-the-proxy-{n}"));
    extra["id"] = json!(format!("00000000-0000-7000-8000-{n:012x}"));
    m.push(extra);
    shared.count();
    v.to_string().into_bytes()
}

/// For `Mode::Swallow`: success for every item of an ack that never reaches the broker.
fn swallowed(request: &[u8]) -> Vec<u8> {
    let v: Value = serde_json::from_slice(request).unwrap_or(Value::Null);
    let items = v["acknowledgments"].as_array().cloned().unwrap_or_default();
    let answers: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(i, a)| {
            json!({"index": i, "transactionId": a["transactionId"], "success": true,
                   "error": null, "leaseReleased": true, "dlq": false, "noop": false})
        })
        .collect();
    Value::Array(answers).to_string().into_bytes()
}

/// For `Mode::Fence`: every item refused for its lease answered success instead.
fn fenced_open(shared: &Shared, answer: Vec<u8>) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<Value>(&answer) else {
        return answer;
    };
    let mut changed = false;
    for item in v.as_array_mut().into_iter().flatten() {
        let refused = item["error"]
            .as_str()
            .is_some_and(|e| e.eq_ignore_ascii_case("invalid or expired lease"));
        if item["success"] == json!(false) && refused {
            item["success"] = json!(true);
            item["error"] = Value::Null;
            item["noop"] = json!(false);
            changed = true;
        }
    }
    if !changed {
        return answer;
    }
    shared.count();
    v.to_string().into_bytes()
}
