//! Live metrics (`ackbench run --metrics-listen ADDR`) through the binary: a scrape in the middle
//! of a short smoke run returns the running cell's series; every metric the Grafana dashboard
//! (`deploy/grafana/ackbench.json`) queries is one the endpoint exports; a real Prometheus
//! server (Debian's `prometheus`) scraping the run every second answers a rate query over it
//! and runs every dashboard query; a bad address is refused with exit 2.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{a_run_judged_by_its_audit, ackbench, temp_dir};

pub(super) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A port free on the loopback interface now.
pub(super) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The shipped smoke scenario, one cell, its window `secs` long.
fn start_smoke(dir: &Path, port: u16, secs: &str) -> Child {
    start_run(&workspace().join("scenarios/smoke.toml"), dir, port, secs)
}

/// The scenario file `scenario`, one cell, its window `secs` long.
fn start_run(scenario: &Path, dir: &Path, port: u16, secs: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .arg("run")
        .arg(scenario)
        .args([
            "--cells",
            "registry+fusion",
            "--rounds",
            "1",
            "--warmup",
            "1",
        ])
        .args(["--duration", secs, "--out"])
        .arg(dir.join("out"))
        .arg("--metrics-listen")
        .arg(format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
        .spawn()
        .expect("start ackbench")
}

/// One plain HTTP/1.1 GET to `127.0.0.1:port`: the status line, the head and the body.
fn http_get(port: u16, target: &str) -> Option<(String, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    Some((head.to_string(), body.to_string()))
}

/// The endpoint's exposition text, when it answers 200 in the Prometheus text format.
fn scrape(port: u16) -> Option<String> {
    let (head, body) = http_get(port, "/metrics")?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    Some(body)
}

/// The sample lines of `text` whose series name is `name` and whose labels include every one
/// of `labels` (`key="value"`), as (line, value).
fn series<'a>(text: &'a str, name: &str, labels: &[&str]) -> Vec<(&'a str, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split('{').next() == Some(name))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .map(|l| (l, l.rsplit(' ').next().unwrap().parse().unwrap()))
        .collect()
}

/// The names of every series in an exposition text.
fn names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

/// Scrapes every 200 ms until `child` exits: every scrape taken, with its time (UNIX seconds).
fn scrape_until_exit(child: &mut Child, port: u16) -> (i32, Vec<(f64, String)>) {
    let mut scrapes = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code().unwrap_or(-1), scrapes);
        }
        assert!(Instant::now() < deadline, "the run did not end in 120 s");
        if let Some(text) = scrape(port) {
            scrapes.push((unix_now(), text));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub(super) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The first scrape taken in the measured window once every operation had latency recorded and
/// the window's first second had sampled PostgreSQL.
fn mid_window(scrapes: &[(f64, String)]) -> Option<&(f64, String)> {
    let measuring = r#"phase="measure"} 1"#;
    scrapes.iter().find(|(_, text)| {
        text.contains(measuring)
            && !series(text, "ackbench_pg_commits_total", &[]).is_empty()
            && ["push", "pop", "ack"].iter().all(|op| {
                !series(
                    text,
                    "ackbench_latency_seconds_count",
                    &[&format!("op=\"{op}\"")],
                )
                .is_empty()
            })
    })
}

#[test]
fn a_scrape_mid_run_returns_the_running_cells_series() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("live", "scrape");
    let port = free_port();
    let mut child = start_smoke(&dir, port, "4");
    let (code, scrapes) = scrape_until_exit(&mut child, port);
    let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
    assert_eq!(code, 0, "the run passes; stderr:\n{stderr}");
    let (_, text) = mid_window(&scrapes)
        .unwrap_or_else(|| panic!("no scrape inside the window ({} taken)", scrapes.len()));
    let cell = [
        r#"run_id="out""#,
        r#"scenario="smoke""#,
        r#"cell="registry+fusion""#,
        r#"round="1""#,
    ];
    let one = |name: &str, extra: &[&str]| -> f64 {
        let labels: Vec<&str> = cell.iter().chain(extra).copied().collect();
        let found = series(text, name, &labels);
        assert_eq!(found.len(), 1, "one {name} {extra:?}:\n{text}");
        found[0].1
    };
    assert_eq!(one("ackbench_cell_running", &[]), 1.0);
    for op in ["push", "pop", "ack"] {
        let op = format!("op=\"{op}\"");
        assert!(one("ackbench_messages_total", &[&op]) > 0.0, "{op} counted");
        assert!(
            one("ackbench_requests_total", &[&op]) > 0.0,
            "{op} requests"
        );
        let count = one("ackbench_latency_seconds_count", &[&op]);
        assert_eq!(
            one("ackbench_latency_seconds_bucket", &[&op, r#"le="+Inf""#]),
            count,
            "the +Inf bucket holds every {op}"
        );
        assert!(
            one(
                "ackbench_latency_quantile_seconds",
                &[&op, r#"quantile="0.99""#]
            ) > 0.0
        );
    }
    // Smoke offers 250 msg/s open loop: the offered counter runs from the cell's start.
    assert!(one("ackbench_offered_messages_total", &[r#"op="push""#]) > 0.0);
    assert!(one("ackbench_audit_messages", &[r#"outcome="pushed""#]) > 0.0);
    assert!(one("ackbench_audit_messages", &[r#"outcome="acked""#]) > 0.0);
    let unresolved = one("ackbench_audit_messages", &[r#"outcome="unresolved""#]);
    assert_eq!(one("ackbench_backlog_messages", &[]), unresolved);
    assert!(
        one("ackbench_pg_commits_total", &[]) > 0.0,
        "commits sampled"
    );
    assert_eq!(one("ackbench_errors_total", &[r#"kind="push""#]), 0.0);
    assert_eq!(
        one("ackbench_fault_active", &[r#"kind="kill_broker""#]),
        0.0
    );
    // Once audited, the round's series stay with the audit's final word.
    let (_, last) = scrapes.last().unwrap();
    let lost = series(last, "ackbench_audit_messages", &[r#"outcome="lost""#]);
    assert_eq!(lost.len(), 1, "the audit's lost count is exported:\n{last}");
    assert_eq!(lost[0].1, 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The dashboard's JSON model.
fn dashboard() -> serde_json::Value {
    let path = workspace().join("deploy/grafana/ackbench.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("dashboard JSON")
}

/// Every PromQL expression of the dashboard: its panels' targets and its query variables.
fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<String> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            queries.push(target["expr"].as_str().unwrap().to_string());
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(q) = variable["query"]["query"].as_str() {
            queries.push(q.to_string());
        }
    }
    queries
}

/// The metric names a PromQL expression uses (identifiers starting `ackbench_`).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut rest = expr;
    while let Some(at) = rest.find("ackbench_") {
        let before = rest[..at].chars().next_back();
        let tail = &rest[at..];
        let end = tail.find(|c| !word(c)).unwrap_or(tail.len());
        if !before.is_some_and(word) {
            names.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    names
}

#[test]
fn the_metric_names_of_a_query_are_found_and_nothing_else() {
    let names = metric_names(
        r#"rate(ackbench_pg_commits_total{run_id=~"$run"}[5s]) / ignoring(op) rate(ackbench_messages_total{op="ack"}[5s]) + x_ackbench_no"#,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["ackbench_messages_total", "ackbench_pg_commits_total"]
    );
}

#[test]
fn every_metric_the_dashboard_queries_is_exported_by_a_run() {
    let board = dashboard();
    let queries = dashboard_queries(&board);
    let used: BTreeSet<String> = queries.iter().flat_map(|q| metric_names(q)).collect();
    assert!(
        used.len() >= 12,
        "the dashboard queries the run's series: {used:?}"
    );
    let variables: Vec<&str> = board["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert!(variables.contains(&"run") && variables.contains(&"cell"));
    let mut fault_seen = false;
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("live", "dashboard");
    let port = free_port();
    // Smoke with a short hold_xmin fault, so the vacuum series (sampled only then) show too.
    let smoke = std::fs::read_to_string(workspace().join("scenarios/smoke.toml")).unwrap();
    let scenario = dir.join("scenario.toml");
    let hold = "\n[[faults]]\nkind = \"hold_xmin\"\nat_secs = 1\nduration_ms = 1000\n";
    std::fs::write(&scenario, smoke + hold).unwrap();
    let mut child = start_run(&scenario, &dir, port, "4");
    let (code, scrapes) = scrape_until_exit(&mut child, port);
    let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
    assert_eq!(code, 0, "the run passes; stderr:\n{stderr}");
    let exported: BTreeSet<String> = scrapes.iter().flat_map(|(_, t)| names(t)).collect();
    for (_, text) in &scrapes {
        fault_seen |= !series(text, "ackbench_fault_active", &[r#"kind="hold_xmin""#])
            .iter()
            .all(|(_, v)| *v == 0.0);
    }
    assert!(fault_seen, "the fault marker read 1 while the hold lasted");
    let missing: Vec<&String> = used.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries series the endpoint never exported: {missing:?}; exported: {exported:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Prometheus server on a free port with its own storage, scraping `target` every second;
/// killed when dropped.
pub(super) struct Prometheus {
    child: Child,
    pub(super) port: u16,
}

impl Prometheus {
    fn start(dir: &Path, target: u16) -> Prometheus {
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: ackbench\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        );
        Prometheus::with_config(dir, &config, &[])
    }

    /// A Prometheus server run with `config` (its YAML) and `extra_args`, on a free port, its
    /// storage and log in `dir`, answering before this returns.
    pub(super) fn with_config(dir: &Path, config: &str, extra_args: &[&str]) -> Prometheus {
        let binary = which("prometheus").unwrap_or_else(|| {
            panic!(
                "the prometheus server is not installed: this test needs Debian's `prometheus` \
                 package (apt-get install -y prometheus)"
            )
        });
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        let port = free_port();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(extra_args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("start prometheus");
        let prometheus = Prometheus { child, port };
        prometheus.wait_ready(dir);
        prometheus
    }

    fn wait_ready(&self, dir: &Path) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if http_get(self.port, "/-/ready").is_some_and(|(head, _)| head.contains(" 200")) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
        panic!("prometheus was not ready in 30 s; its log:\n{log}");
    }

    /// The answer of an instant query at `time` (UNIX seconds), as JSON.
    pub(super) fn query(&self, promql: &str, time: f64) -> serde_json::Value {
        let encoded =
            percent_encoding::utf8_percent_encode(promql, percent_encoding::NON_ALPHANUMERIC);
        let target = format!("/api/v1/query?query={encoded}&time={time:.3}");
        let (head, body) = http_get(self.port, &target).expect("prometheus answers");
        assert!(head.contains(" 200"), "{promql}: {head}\n{body}");
        serde_json::from_str(body_of(&head, &body).as_str()).unwrap()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP body, de-chunked when it came in chunks.
fn body_of(head: &str, body: &str) -> String {
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return body.to_string();
    }
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&tail[..n]);
        rest = &tail[n + 2..];
    }
    out
}

/// The path of `program` on the PATH.
pub(super) fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.is_file())
    })
}

#[test]
fn a_real_prometheus_scraping_a_run_answers_a_rate_query_and_every_dashboard_query() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("live", "prometheus");
    let port = free_port();
    let prometheus = Prometheus::start(&dir, port);
    let mut child = start_smoke(&dir, port, "6");
    let (code, scrapes) = scrape_until_exit(&mut child, port);
    let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
    assert_eq!(code, 0, "the run passes; stderr:\n{stderr}");
    let (window_began, _) = mid_window(&scrapes).expect("a scrape inside the window");
    // Four seconds into the six-second window: a 5 s range holds several 1 s scrapes.
    let at = window_began + 4.0;
    let rate = r#"rate(ackbench_messages_total{op="ack",cell="registry+fusion"}[5s])"#;
    let answer = prometheus.query(rate, at);
    assert_eq!(answer["status"], "success", "{answer}");
    let result = answer["data"]["result"].as_array().unwrap();
    assert_eq!(result.len(), 1, "one ack series: {answer}");
    let acks_per_sec: f64 = result[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!(acks_per_sec > 0.0, "acks flowed: {answer}");
    assert_eq!(result[0]["metric"]["run_id"], "out", "{answer}");
    for query in dashboard_queries(&dashboard()) {
        let promql = query
            .replace("$__rate_interval", "5s")
            .replace("$run", "out")
            .replace("$cell", ".*");
        if promql.starts_with("label_values(") {
            continue; // a Grafana function, not PromQL: its metric is checked by name above
        }
        let answer = prometheus.query(&promql, at);
        assert_eq!(answer["status"], "success", "{promql}: {answer}");
    }
    drop(prometheus);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_metrics_address_is_refused_with_exit_2_before_anything_runs() {
    let dir = temp_dir("live", "bad-address");
    let out = dir.join("out");
    let scenario = std::fs::read_to_string(workspace().join("scenarios/smoke.toml")).unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    for (addr, says) in [
        ("localhost-9464", "not an address"),
        ("127.0.0.1:99999", "not an address"),
        (taken_addr.as_str(), "cannot listen there"),
    ] {
        let args = ["--metrics-listen", addr, "--out", out.to_str().unwrap()];
        let o = ackbench(&dir, "run", &scenario, &args);
        assert_eq!(o.code, 2, "{addr}: {}", o.stderr);
        assert!(
            o.stderr.contains("--metrics-listen") && o.stderr.contains(says),
            "{addr}: {}",
            o.stderr
        );
        assert!(!out.exists(), "nothing ran for {addr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
