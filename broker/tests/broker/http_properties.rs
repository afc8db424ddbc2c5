//! A property test of the HTTP surface against the real broker: malformed requests of every
//! route (U+0000 in a string field, an over-long name, a huge number, a wrong type, a missing
//! field, invalid UTF-8 inside a string) answer 4xx with a JSON `error` naming the field (the
//! body, for bytes that are not JSON), never 5xx, and change nothing. Seeded (a fixed ChaCha
//! seed, no persistence file) with a bounded number of cases, so a failure replays exactly.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{json, Value};

use crate::common::{Http, TestBroker};

const PID: &str = "0a0a0a0a-0000-4000-8000-00000000000a";
const CASES: u32 = 400;
/// A number beyond every integer field (it still parses: as an f64).
const HUGE: &str = "123456789012345678901234567890";

/// How a well-formed field is broken.
#[derive(Debug, Clone)]
enum Breakage {
    /// U+0000 inside the string.
    Nul,
    /// A name far over the bound (random characters, incompressible).
    OverLong(String),
    /// A number no field holds.
    HugeNumber,
    /// A value of the wrong JSON type.
    WrongType(Value),
    /// The field left out (only for required fields).
    Missing,
}

/// One field of a request body, as a JSON pointer into its template.
struct Target {
    route: &'static str,
    pointer: &'static str,
    /// The name the refusal must carry.
    name: &'static str,
    required: bool,
    /// A numeric field (no string breakages).
    numeric: bool,
    /// Whether a few thousand characters are too many (names, UUIDs, statuses; not a
    /// transactionId, which may hold 65535 bytes).
    bounded: bool,
}

fn ack_item() -> Value {
    json!({"transactionId": "t", "partitionId": PID, "status": "completed",
           "consumerGroup": "g", "leaseId": "l", "error": "e"})
}

/// A well-formed body of `route`.
fn template(route: &str) -> Value {
    match route {
        "/api/v1/configure" => json!({"queue": "q", "namespace": "n", "task": "t"}),
        "/api/v1/push" => json!({"items": [{"queue": "q", "partition": "p",
                                             "transactionId": "t", "payload": 1}]}),
        "/api/v1/ack" => ack_item(),
        "/api/v1/ack/batch" => json!({"consumerGroup": "g", "acknowledgments": [ack_item()]}),
        "/api/v1/transaction" => {
            let mut op = ack_item();
            op["type"] = json!("ack");
            json!({"operations": [op], "requiredLeases": ["l"]})
        }
        _ => json!({"seconds": 60}),
    }
}

const fn target(
    route: &'static str,
    pointer: &'static str,
    name: &'static str,
    required: bool,
) -> Target {
    let bounded = !names_a_transaction_id(name);
    Target {
        route,
        pointer,
        name,
        required,
        numeric: false,
        bounded,
    }
}

/// Whether `name` ends with `transactionId` (a `const` `ends_with`).
const fn names_a_transaction_id(name: &str) -> bool {
    let (name, suffix) = (name.as_bytes(), b"transactionId");
    if name.len() < suffix.len() {
        return false;
    }
    let mut k = 0;
    while k < suffix.len() {
        if name[name.len() - suffix.len() + k] != suffix[k] {
            return false;
        }
        k += 1;
    }
    true
}

/// Every field of every body route.
const TARGETS: &[Target] = &[
    target("/api/v1/configure", "/queue", "queue", true),
    target("/api/v1/configure", "/namespace", "namespace", false),
    target("/api/v1/configure", "/task", "task", false),
    target("/api/v1/push", "/items/0/queue", "items[0].queue", true),
    target(
        "/api/v1/push",
        "/items/0/partition",
        "items[0].partition",
        false,
    ),
    target("/api/v1/ack", "/consumerGroup", "consumerGroup", false),
    target("/api/v1/ack", "/leaseId", "leaseId", false),
    target("/api/v1/ack", "/transactionId", "transactionId", true),
    target("/api/v1/ack", "/partitionId", "partitionId", true),
    target("/api/v1/ack", "/status", "status", true),
    target(
        "/api/v1/ack/batch",
        "/consumerGroup",
        "consumerGroup",
        false,
    ),
    target(
        "/api/v1/ack/batch",
        "/acknowledgments/0/leaseId",
        "acknowledgments[0].leaseId",
        false,
    ),
    target(
        "/api/v1/ack/batch",
        "/acknowledgments/0/transactionId",
        "acknowledgments[0].transactionId",
        true,
    ),
    target(
        "/api/v1/transaction",
        "/requiredLeases/0",
        "requiredLeases[0]",
        false,
    ),
    target(
        "/api/v1/transaction",
        "/operations/0/leaseId",
        "operations[0].leaseId",
        false,
    ),
    target(
        "/api/v1/transaction",
        "/operations/0/partitionId",
        "operations[0].partitionId",
        true,
    ),
    Target {
        route: "/api/v1/lease/l/extend",
        pointer: "/seconds",
        name: "seconds",
        required: false,
        numeric: true,
        bounded: false,
    },
];

fn breakage() -> impl Strategy<Value = Breakage> {
    prop_oneof![
        Just(Breakage::Nul),
        proptest::collection::vec(proptest::char::range('!', '\u{CFFF}'), 300..3000)
            .prop_map(|cs| Breakage::OverLong(cs.into_iter().collect())),
        Just(Breakage::HugeNumber),
        prop_oneof![
            Just(json!(17)),
            Just(json!(true)),
            Just(json!([1])),
            Just(json!({"a": 1}))
        ]
        .prop_map(Breakage::WrongType),
        Just(Breakage::Missing),
    ]
}

/// Whether `b` can break `t` (strings only take string breakages; only required fields can
/// be missing; a numeric field takes numbers and wrong types).
fn applies(t: &Target, b: &Breakage) -> bool {
    match b {
        Breakage::Nul => !t.numeric,
        Breakage::OverLong(_) => t.bounded,
        Breakage::Missing => t.required,
        Breakage::HugeNumber | Breakage::WrongType(_) => true,
    }
}

/// The body of `t` broken by `b`, as bytes (a huge number is spliced in as text).
fn broken_body(t: &Target, b: &Breakage) -> Vec<u8> {
    let mut body = template(t.route);
    let (parent, key) = t.pointer.rsplit_once('/').unwrap();
    let slot = body.pointer_mut(parent).unwrap();
    let value = match b {
        Breakage::Nul => json!(format!("a\u{0}{}", slot[key].as_str().unwrap_or("x"))),
        Breakage::OverLong(s) => json!(s),
        Breakage::HugeNumber => json!("HUGE"),
        Breakage::WrongType(v) => v.clone(),
        Breakage::Missing => Value::Null,
    };
    match (slot, key.parse::<usize>()) {
        (Value::Array(a), Ok(i)) => a[i] = value,
        (Value::Object(o), _) if matches!(b, Breakage::Missing) => drop(o.remove(key)),
        (Value::Object(o), _) => drop(o.insert(key.to_string(), value)),
        _ => unreachable!("templates hold objects and arrays"),
    }
    let text = body.to_string();
    text.replace("\"HUGE\"", HUGE).into_bytes()
}

/// Sends a case and checks the refusal: 4xx, a JSON error containing `name`.
async fn refused(
    http: &Http,
    path: &str,
    method: hyper::Method,
    body: Option<Vec<u8>>,
    name: &str,
) -> Result<(), TestCaseError> {
    let r = http.send(method, path, body, &[]).await;
    let err = r.json["error"].as_str().unwrap_or_default().to_string();
    prop_assert!(
        r.status.is_client_error(),
        "{path}: {} {}",
        r.status,
        r.text
    );
    prop_assert!(err.contains(name), "{path}: `{err}` should name {name}");
    Ok(())
}

/// A body field broken one way.
fn body_case() -> impl Strategy<Value = (usize, Breakage)> {
    (0..TARGETS.len(), breakage())
        .prop_filter("the breakage applies", |(i, b)| applies(&TARGETS[*i], b))
}

/// Invalid UTF-8 inside a string of each body route's template.
fn invalid_utf8(route: &str) -> Vec<u8> {
    let text = template(route).to_string();
    let at = text
        .find("\"q\"")
        .or_else(|| text.find("\"t\""))
        .unwrap_or(1)
        + 1;
    let mut bytes = text.into_bytes();
    bytes.splice(at..at, [0xff, 0xfe, 0xc3]);
    bytes
}

/// Path and query parameters: (path with `{}` where the bad value goes, the name).
const PARAMS: &[(&str, &str)] = &[
    ("/api/v1/pop/queue/{}/partition/p", "queue"),
    ("/api/v1/pop/queue/q/partition/{}", "partition"),
    ("/api/v1/pop/queue/{}", "queue"),
    ("/api/v1/pop/queue/q?consumerGroup={}", "consumerGroup"),
    ("/api/v1/pop?namespace={}", "namespace"),
    ("/api/v1/pop?task={}", "task"),
    ("/api/v1/pop/queue/q?batch={}", "batch"),
    ("/api/v1/dlq?queue={}", "queue"),
    ("/api/v1/dlq?partition={}", "partition"),
    ("/api/v1/dlq?limit={}", "limit"),
    ("/api/v1/lease/{}/extend", "leaseId"),
];

/// The numeric parameters (a huge number is a valid name, not a valid count).
fn numeric_param(name: &str) -> bool {
    matches!(name, "batch" | "limit")
}

fn method_of(path: &str) -> hyper::Method {
    if path.contains("/extend") {
        hyper::Method::POST
    } else {
        hyper::Method::GET
    }
}

/// A parameter broken one way: U+0000, over-long, a huge number, bytes that are not UTF-8.
fn param_case() -> impl Strategy<Value = (usize, String)> {
    let value = prop_oneof![
        Just("a%00b".to_string()),
        proptest::collection::vec(proptest::char::range('a', 'z'), 256..2000)
            .prop_map(|cs| cs.into_iter().collect::<String>()),
        Just(HUGE.to_string()),
        Just("%ff%fe".to_string()),
    ];
    (0..PARAMS.len(), value).prop_filter("a huge number only breaks a count", |(i, v)| {
        v != HUGE || numeric_param(PARAMS[*i].1)
    })
}

/// Counts of everything a request could create.
async fn footprint(t: &TestBroker) -> Vec<i64> {
    let db = t.sql().await;
    let mut counts = Vec::new();
    for table in [
        "queues",
        "log_partitions",
        "log_segments",
        "log_consumers",
        "log_dlq",
    ] {
        let sql = format!("SELECT count(*) FROM queen.{table}");
        counts.push(db.query_one(&sql, &[]).await.unwrap().get(0));
    }
    counts
}

fn runner(seed: u8) -> TestRunner {
    let config = Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]),
    )
}

#[test]
fn malformed_requests_are_4xx_naming_the_field_and_change_nothing() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let t = rt.block_on(TestBroker::start());
    let before = rt.block_on(footprint(&t));
    runner(15)
        .run(&body_case(), |(i, b)| {
            let target = &TARGETS[i];
            let body = Some(broken_body(target, &b));
            rt.block_on(refused(
                &t.http,
                target.route,
                hyper::Method::POST,
                body,
                target.name,
            ))
        })
        .unwrap();
    runner(16)
        .run(&param_case(), |(i, value)| {
            let (pattern, name) = PARAMS[i];
            let path = pattern.replace("{}", &value);
            let wants = if value.starts_with("%ff") && !pattern.contains('?') {
                "UTF-8"
            } else {
                name
            };
            rt.block_on(refused(&t.http, &path, method_of(&path), None, wants))
        })
        .unwrap();
    for route in [
        "/api/v1/configure",
        "/api/v1/push",
        "/api/v1/ack",
        "/api/v1/ack/batch",
        "/api/v1/transaction",
    ] {
        let body = Some(invalid_utf8(route));
        rt.block_on(refused(&t.http, route, hyper::Method::POST, body, "body"))
            .unwrap();
    }
    assert_eq!(
        rt.block_on(footprint(&t)),
        before,
        "refused requests change nothing"
    );
    rt.block_on(t.broker.shutdown());
}
