//! A small HTTP server that answers as the recorded Queen did (`tests/fixtures/queen/`, rows
//! engine at ab23212): every answer's status, content type and body shape are the recorded
//! exchange's, its body the recorded one (`/health`, `/metrics/prometheus`, configure) or
//! the recorded shape filled from a tiny in-memory queue (push, pop, ack, DLQ listing), so the
//! load generator can drive a whole run against Queen's wire in CI without Queen's code.
//!
//! The queue is the rows engine's simplest behaviour: per partition a list of messages and a
//! cursor, a pop leases the partition for the batch after the cursor, and the lease ends (the
//! cursor moving past the batch) once every message of it is acked `completed` or `dlq`.
//! Consumer groups, retries and lease expiry are left out: the tests' scenarios use none.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One recorded exchange's answer.
struct Recorded {
    status: u16,
    content_type: String,
    body: Value,
}

/// Reads `tests/fixtures/queen/{name}.json`.
pub fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/queen")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn recorded(name: &str) -> Recorded {
    let f = fixture(name);
    let r = &f["response"];
    Recorded {
        status: r["status"].as_u64().unwrap() as u16,
        content_type: r["headers"]["content-type"].as_str().unwrap().to_string(),
        body: r["body"].clone(),
    }
}

struct Message {
    id: String,
    transaction_id: String,
    data: Value,
    resolved: bool,
}

#[derive(Default)]
struct Partition {
    id: String,
    messages: Vec<Message>,
    cursor: usize,
    /// The lease held: its id and the end of the leased batch.
    lease: Option<(String, usize)>,
}

#[derive(Default)]
struct State {
    /// Queue -> partition name -> partition.
    queues: HashMap<String, BTreeMap<String, Partition>>,
    dlq: Vec<Value>,
    next_id: u64,
}

impl State {
    fn uuid(&mut self) -> String {
        self.next_id += 1;
        format!("01a23c54-0000-7000-8000-{:012x}", self.next_id)
    }
}

/// The recorded answers the server fills, read once.
struct Templates {
    health: Recorded,
    configure: Recorded,
    push: Recorded,
    push_duplicate: Recorded,
    pop: Recorded,
    pop_empty: Recorded,
    pop_empty_wait: Recorded,
    ack: Recorded,
    dlq: Recorded,
    prometheus: Recorded,
}

impl Templates {
    fn read() -> Templates {
        Templates {
            health: recorded("01-health"),
            configure: recorded("02-configure-full-options"),
            push: recorded("10-push-single"),
            push_duplicate: recorded("12-push-duplicate-transaction-id"),
            pop: recorded("20-pop-queue-wildcard-batch1-nowait"),
            pop_empty: recorded("50-pop-empty-nowait"),
            pop_empty_wait: recorded("51-pop-empty-wait"),
            ack: recorded("21-ack-single-completed"),
            dlq: recorded("60-dlq-list-queue"),
            prometheus: recorded("73-metrics-prometheus-after-traffic"),
        }
    }
}

/// A running recorded-Queen server.
pub struct RecordedQueen {
    pub url: String,
}

impl RecordedQueen {
    /// Starts serving on a free local port (on the current tokio runtime).
    pub async fn start() -> RecordedQueen {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new((Templates::read(), Mutex::new(State::default())));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, shared.clone()));
            }
        });
        RecordedQueen { url }
    }
}

type Shared = Arc<(Templates, Mutex<State>)>;

/// One keep-alive connection: requests in, recorded-shape answers out.
async fn serve(mut stream: TcpStream, shared: Shared) {
    let _ = stream.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let Some((method, path, body)) = read_request(&mut stream, &mut buf).await else {
            return;
        };
        let (status, content_type, text) = answer(&shared, &method, &path, &body).await;
        let head = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\nuwebsockets: 20\r\ncontent-length: {}\r\n\r\n",
            if status == 200 { "OK" } else { "Not Found" },
            text.len()
        );
        if stream.write_all(head.as_bytes()).await.is_err()
            || stream.write_all(text.as_bytes()).await.is_err()
        {
            return;
        }
    }
}

/// Reads one request (head and content-length body); `None` when the client closed.
pub async fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(String, String, Vec<u8>)> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(len)) = req.parse(buf) {
            let length: usize = req
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok())
                .unwrap_or(0);
            let (method, path) = (req.method?.to_string(), req.path?.to_string());
            while buf.len() < len + length {
                read_more(stream, buf).await?;
            }
            let body = buf[len..len + length].to_vec();
            buf.drain(..len + length);
            return Some((method, path, body));
        }
        read_more(stream, buf).await?;
    }
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 16384];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Some(())
        }
    }
}

/// The answer to one request: status, content type, body text.
async fn answer(shared: &Shared, method: &str, path: &str, body: &[u8]) -> (u16, String, String) {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    let query: HashMap<&str, &str> = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let t = &shared.0;
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let filled = match (method, route) {
        ("GET", "/health") => as_recorded(&t.health, t.health.body.clone()),
        ("GET", "/metrics/prometheus") => {
            let text = t.prometheus.body.as_str().unwrap().to_string();
            return (200, t.prometheus.content_type.clone(), text);
        }
        ("POST", "/api/v1/configure") => configure(t, &request),
        ("POST", "/api/v1/push") => push(shared, &request),
        ("POST", "/api/v1/ack/batch") => ack(shared, &request["acknowledgments"]),
        ("GET", "/api/v1/dlq") => dlq(shared, &decoded(query.get("queue").unwrap_or(&""))),
        ("GET", r) if r.starts_with("/api/v1/pop/queue/") => {
            let queue = decoded(r.trim_start_matches("/api/v1/pop/queue/"));
            let batch: usize = query.get("batch").and_then(|b| b.parse().ok()).unwrap_or(1);
            let wait = query.get("wait") == Some(&"true");
            let popped = pop(shared, &queue, batch);
            match popped {
                Some(v) => v,
                None if wait => {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    let mut body = t.pop_empty_wait.body.clone();
                    body["queue"] = json!(queue);
                    as_recorded(&t.pop_empty_wait, body)
                }
                None => as_recorded(&t.pop_empty, t.pop_empty.body.clone()),
            }
        }
        _ => (
            404,
            "application/json".into(),
            json!({"error": "Not found"}),
        ),
    };
    (filled.0, filled.1, filled.2.to_string())
}

fn decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

fn as_recorded(r: &Recorded, body: Value) -> (u16, String, Value) {
    (r.status, r.content_type.clone(), body)
}

fn configure(t: &Templates, request: &Value) -> (u16, String, Value) {
    let mut body = t.configure.body.clone();
    body["queue"] = request["queue"].clone();
    as_recorded(&t.configure, body)
}

fn push(shared: &Shared, request: &Value) -> (u16, String, Value) {
    let (t, state) = (&shared.0, &shared.1);
    let mut state = state.lock().unwrap();
    let mut answers = Vec::new();
    for (index, item) in request["items"].as_array().unwrap().iter().enumerate() {
        let queue = item["queue"].as_str().unwrap().to_string();
        let partition = item["partition"].as_str().unwrap_or("Default").to_string();
        let txn = item["transactionId"].as_str().unwrap().to_string();
        let (id, pid) = (state.uuid(), state.uuid());
        let p = state
            .queues
            .entry(queue.clone())
            .or_default()
            .entry(partition)
            .or_default();
        if p.id.is_empty() {
            p.id = pid;
        }
        if let Some(m) = p.messages.iter().find(|m| m.transaction_id == txn) {
            let mut a = t.push_duplicate.body[0].clone();
            a["index"] = json!(index);
            a["message_id"] = json!(m.id);
            a["queueName"] = json!(queue);
            a["transaction_id"] = json!(txn);
            answers.push(a);
            continue;
        }
        p.messages.push(Message {
            id: id.clone(),
            transaction_id: txn.clone(),
            data: item["payload"].clone(),
            resolved: false,
        });
        let mut a = t.push.body[0].clone();
        a["index"] = json!(index);
        a["message_id"] = json!(id);
        a["partition_id"] = json!(p.id);
        a["queueName"] = json!(queue);
        a["transaction_id"] = json!(txn);
        answers.push(a);
    }
    as_recorded(&t.push, Value::Array(answers))
}

/// Leases the first partition with messages after its cursor and no lease; `None` when none.
fn pop(shared: &Shared, queue: &str, batch: usize) -> Option<(u16, String, Value)> {
    let (t, state) = (&shared.0, &shared.1);
    let mut state = state.lock().unwrap();
    let lease = state.uuid();
    let partitions = state.queues.get_mut(queue)?;
    let (name, p) = partitions
        .iter_mut()
        .find(|(_, p)| p.lease.is_none() && p.cursor < p.messages.len())?;
    let end = (p.cursor + batch).min(p.messages.len());
    p.lease = Some((lease.clone(), end));
    let template = &t.pop.body["messages"][0];
    let messages: Vec<Value> = p.messages[p.cursor..end]
        .iter()
        .map(|m| {
            let mut v = template.clone();
            v["id"] = json!(m.id);
            v["transactionId"] = json!(m.transaction_id);
            v["data"] = m.data.clone();
            v["leaseId"] = json!(lease);
            v["partition"] = json!(name);
            v["partitionId"] = json!(p.id);
            v
        })
        .collect();
    let mut body = t.pop.body.clone();
    body["leaseId"] = json!(lease);
    body["messages"] = Value::Array(messages);
    body["partition"] = json!(name);
    body["partitionId"] = json!(p.id);
    body["queue"] = json!(queue);
    Some(as_recorded(&t.pop, body))
}

fn ack(shared: &Shared, acks: &Value) -> (u16, String, Value) {
    let (t, state) = (&shared.0, &shared.1);
    let mut state = state.lock().unwrap();
    let mut answers = Vec::new();
    for (index, a) in acks.as_array().unwrap().iter().enumerate() {
        let txn = a["transactionId"].as_str().unwrap();
        let status = a["status"].as_str().unwrap_or("completed");
        let mut answer = t.ack.body[0].clone();
        answer["index"] = json!(index);
        answer["transactionId"] = json!(txn);
        answer["leaseReleased"] = json!(false);
        let outcome = settle(&mut state, a, txn, status);
        match outcome {
            Ok((queue, partition, released, entry)) => {
                answer["queueName"] = json!(queue);
                answer["partitionName"] = json!(partition);
                answer["leaseReleased"] = json!(released);
                answer["dlq"] = json!(entry.is_some());
                state.dlq.extend(entry);
            }
            Err(error) => {
                answer["success"] = json!(false);
                answer["error"] = json!(error);
            }
        }
        answers.push(answer);
    }
    as_recorded(&t.ack, Value::Array(answers))
}

/// Settles one ack: the message's queue and partition names, whether the lease ended, and its
/// DLQ entry when dead-lettered; `Err` with Queen's recorded error words.
fn settle(
    state: &mut State,
    a: &Value,
    txn: &str,
    status: &str,
) -> Result<(String, String, bool, Option<Value>), &'static str> {
    let pid = a["partitionId"].as_str().unwrap_or("");
    let found = state.queues.iter_mut().find_map(|(queue, partitions)| {
        let (name, p) = partitions.iter_mut().find(|(_, p)| p.id == pid)?;
        Some((queue, name, p))
    });
    let Some((queue, name, p)) = found else {
        return Err("Message not found");
    };
    let Some((lease, end)) = p.lease.clone() else {
        return Err("Invalid or expired lease");
    };
    if a["leaseId"].as_str().is_some_and(|l| l != lease) {
        return Err("Invalid or expired lease");
    }
    let at = p.messages[p.cursor..end]
        .iter()
        .position(|m| m.transaction_id == txn)
        .ok_or("Message not found")?
        + p.cursor;
    p.messages[at].resolved = true;
    let entry = (status == "dlq").then(|| {
        let m = &p.messages[at];
        json!({"consumerGroup": "__QUEUE_MODE__", "createdAt": "", "data": m.data,
            "errorMessage": a["error"], "failedAt": "", "id": m.id, "partition": name,
            "partitionId": p.id, "producerSub": null, "queue": queue, "retryCount": 0,
            "transactionId": m.transaction_id})
    });
    let released = p.messages[p.cursor..end].iter().all(|m| m.resolved);
    if released {
        p.cursor = end;
        p.lease = None;
    }
    Ok((queue.clone(), name.clone(), released, entry))
}

fn dlq(shared: &Shared, queue: &str) -> (u16, String, Value) {
    let (t, state) = (&shared.0, &shared.1);
    let state = state.lock().unwrap();
    let messages: Vec<Value> = state
        .dlq
        .iter()
        .filter(|m| queue.is_empty() || m["queue"] == queue)
        .cloned()
        .collect();
    let mut body = t.dlq.body.clone();
    body["messages"] = Value::Array(messages);
    as_recorded(&t.dlq, body)
}
