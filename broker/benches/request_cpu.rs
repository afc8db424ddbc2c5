//! The broker's own CPU per message outside PostgreSQL: reading, validating and answering the
//! bodies of a push and an ack of 100 items, the way the load generator sends them at pops of
//! 100 (`scenarios/vs-peers.toml`). No database and no HTTP: only the request-body work each
//! route does before and after its procedure calls, so that changes to it can be compared on
//! a busy machine (the figure is the fastest of many repetitions, in µs per message).
//!
//! Run: `cargo bench -p ackbench-broker --bench request_cpu` (`REQUEST_BENCH_REPS=N`
//! repetitions per figure, default 2 000).

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Instant;

use ackbench_broker::ack::{group_items, AckGroup};
use ackbench_broker::http::{Request, Route};
use ackbench_broker::routes::{ack, push};
use ackbench_wire::AckResult;
use bytes::Bytes;
use hyper::{HeaderMap, Method};
use serde_json::json;
use uuid::Uuid;

const ITEMS: usize = 100;

fn main() {
    let reps: usize = std::env::var("REQUEST_BENCH_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000);
    let push_body = push_body();
    let ack_req = request(Route::AckBatch, ack_body());
    let push_req = request(Route::Push, push_body);
    let push_us = fastest(reps, || {
        let items = push::parse(&push_req.body).expect("a valid push");
        let settled: Vec<_> = items.iter().map(|_| push::Settled::Queued).collect();
        black_box(push::answer_body(&items, &settled));
    });
    let ack_us = fastest(reps, || {
        let items = ack::parse(&ack_req).expect("a valid ack");
        let groups = group_items(items);
        black_box(ack::answer_body(&answers(&groups)));
    });
    println!(
        "push of {ITEMS}: read, validate, answer: {:.3} µs per message",
        push_us / ITEMS as f64
    );
    println!(
        "ack of {ITEMS}: read, group, answer: {:.3} µs per message",
        ack_us / ITEMS as f64
    );
}

/// Every item acked, as the registry's fast path answers a whole batch.
fn answers(groups: &[AckGroup]) -> Vec<AckResult> {
    groups
        .iter()
        .flat_map(|g| &g.items)
        .map(|i| AckResult {
            index: i.index,
            transaction_id: i.transaction_id.clone(),
            success: true,
            error: None,
            lease_released: true,
            dlq: false,
            noop: false,
        })
        .collect()
}

/// The fastest of `reps` runs of `f`, in µs (the least disturbed by other work on the machine).
fn fastest(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .fold(f64::INFINITY, f64::min)
}

fn request(route: Route, body: Vec<u8>) -> Request {
    Request {
        method: Method::POST,
        route,
        query: HashMap::new(),
        headers: HeaderMap::new(),
        body: Bytes::from(body),
        tenant: Uuid::nil(),
    }
}

/// Items as the load generator pushes them: a transactionId each and a 128-byte payload.
fn push_body() -> Vec<u8> {
    let items: Vec<_> = (0..ITEMS)
        .map(|i| {
            json!({
                "queue": "vspeers",
                "partition": format!("p{}", i % 16),
                "transactionId": format!("0000018f-aaaa-7bbb-8ccc-{i:012}"),
                "payload": {"seq": i, "pad": "x".repeat(100)},
            })
        })
        .collect();
    serde_json::to_vec(&json!({ "items": items })).expect("json")
}

/// One pop's batch acked whole: one partition, one lease, one group.
fn ack_body() -> Vec<u8> {
    let partition = Uuid::now_v7().to_string();
    let lease = Uuid::now_v7().to_string();
    let items: Vec<_> = (0..ITEMS)
        .map(|i| {
            json!({
                "transactionId": format!("0000018f-aaaa-7bbb-8ccc-{i:012}"),
                "partitionId": partition,
                "leaseId": lease,
                "status": "completed",
            })
        })
        .collect();
    serde_json::to_vec(&json!({ "consumerGroup": "g", "acknowledgments": items })).expect("json")
}
