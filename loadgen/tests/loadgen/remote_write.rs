//! Live metrics pushed to a Prometheus remote-write endpoint (`ackbench run --metrics-push URL`)
//! through the binary: a real Prometheus server (Debian's `prometheus`, its remote-write
//! receiver on) holds the series of a short smoke run afterwards, counters, histogram buckets
//! and the audit's final word among them; a run whose pushes all fail passes and counts them;
//! a bad URL or interval is refused with exit 2.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::live::{free_port, unix_now, workspace, Prometheus};
use crate::common::{a_run_judged_by_its_audit, ackbench, temp_dir};

/// A Prometheus server with its remote-write receiver on, scraping nothing, its storage in
/// `dir`; killed when dropped.
fn start_receiver(dir: &Path) -> Prometheus {
    Prometheus::with_config(
        dir,
        "global:\n  evaluation_interval: 1s\n",
        &["--web.enable-remote-write-receiver"],
    )
}

/// Smoke, one cell, a 4 s window, pushing to `url` every second; its output in `dir/pushed`.
fn start_pushing_smoke(dir: &Path, url: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .arg("run")
        .arg(workspace().join("scenarios/smoke.toml"))
        .args(["--cells", "registry+fusion", "--rounds", "1"])
        .args(["--warmup", "1", "--duration", "4", "--out"])
        .arg(dir.join("pushed"))
        .args(["--metrics-push", url, "--metrics-push-interval", "1"])
        .stdout(std::fs::File::create(dir.join("stdout")).unwrap())
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
        .spawn()
        .expect("start ackbench")
}

fn wait_exit(child: &mut Child) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run did not end in 120 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The values of an instant query's vector answer, as numbers.
fn values(prometheus: &Prometheus, promql: &str, at: f64) -> Vec<f64> {
    let answer = prometheus.query(promql, at);
    assert_eq!(answer["status"], "success", "{promql}: {answer}");
    answer["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"][1].as_str().unwrap().parse().unwrap())
        .collect()
}

/// The one value of `promql` at `at`.
fn one(prometheus: &Prometheus, promql: &str, at: f64) -> f64 {
    let found = values(prometheus, promql, at);
    assert_eq!(found.len(), 1, "one series for {promql}: {found:?}");
    found[0]
}

#[test]
fn a_real_prometheus_receives_a_runs_pushed_series() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("remote-write", "prometheus");
    let prometheus = start_receiver(&dir);
    let url = format!("http://127.0.0.1:{}/api/v1/write", prometheus.port);
    let mut child = start_pushing_smoke(&dir, &url);
    let code = wait_exit(&mut child);
    let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
    let stdout = std::fs::read_to_string(dir.join("stdout")).unwrap();
    assert_eq!(code, 0, "the run passes; stderr:\n{stderr}");
    let tally = stdout
        .lines()
        .find(|l| l.starts_with("metrics push:"))
        .unwrap_or_else(|| panic!("the summary tells the pushes:\n{stdout}"));
    assert!(tally.ends_with(", 0 failed"), "{tally}\nstderr:\n{stderr}");
    assert!(
        !stderr.contains("metrics push to"),
        "no push failed:\n{stderr}"
    );
    let at = unix_now();
    let cell = r#"run_id="pushed",scenario="smoke",cell="registry+fusion",round="1""#;
    let acked = format!(r#"ackbench_messages_total{{{cell},op="ack"}}"#);
    let pushes = one(&prometheus, &format!("count_over_time({acked}[5m])"), at);
    assert!(pushes >= 4.0, "a push a second over a 5 s run: {pushes}");
    assert!(one(&prometheus, &format!("max_over_time({acked}[5m])"), at) > 0.0);
    let rate = one(&prometheus, &format!("rate({acked}[5m])"), at);
    assert!(rate > 0.0, "acks flowed between pushes: {rate}");
    let p99 = one(
        &prometheus,
        &format!(
            r#"histogram_quantile(0.99, max_over_time(ackbench_latency_seconds_bucket{{{cell},op="ack"}}[5m]))"#
        ),
        at,
    );
    assert!(
        p99.is_finite() && p99 > 0.0,
        "the buckets make a histogram: {p99}"
    );
    let count = format!(r#"ackbench_latency_seconds_count{{{cell},op="ack"}}"#);
    assert!(one(&prometheus, &format!("last_over_time({count}[5m])"), at) > 0.0);
    // The last push came after the audit: its final word (lost) arrived.
    let lost = format!(r#"last_over_time(ackbench_audit_messages{{{cell},outcome="lost"}}[5m])"#);
    assert_eq!(one(&prometheus, &lost, at), 0.0);
    let running = format!("last_over_time(ackbench_cell_running{{{cell}}}[5m])");
    assert_eq!(
        one(&prometheus, &running, at),
        0.0,
        "the last push saw the round finished"
    );
    drop(prometheus);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_whose_pushes_all_fail_still_passes_and_says_how_many_failed() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("remote-write", "unreachable");
    let closed = free_port();
    let url = format!("http://127.0.0.1:{closed}/api/v1/write");
    let mut child = start_pushing_smoke(&dir, &url);
    let code = wait_exit(&mut child);
    let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
    let stdout = std::fs::read_to_string(dir.join("stdout")).unwrap();
    assert_eq!(
        code, 0,
        "failed pushes do not fail the run; stderr:\n{stderr}"
    );
    let logged = stderr
        .lines()
        .filter(|l| l.starts_with(&format!("ackbench: metrics push to {url} failed")))
        .filter(|l| l.contains("cannot connect"))
        .count();
    let tally = stdout
        .lines()
        .find(|l| l.starts_with("metrics push:"))
        .unwrap_or_else(|| panic!("the summary tells the pushes:\n{stdout}"));
    assert!(
        logged >= 4,
        "each failed push is logged with its cause:\n{stderr}"
    );
    assert_eq!(
        tally,
        format!("metrics push: {logged} push(es) to {url}, {logged} failed"),
        "stderr:\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_push_url_or_interval_is_refused_with_exit_2_before_anything_runs() {
    let dir = temp_dir("remote-write", "bad-url");
    let out = dir.join("out");
    let scenario = std::fs::read_to_string(workspace().join("scenarios/smoke.toml")).unwrap();
    let good = "http://127.0.0.1:9/api/v1/write";
    for (url, interval, says) in [
        (
            "prometheus:9090/api/v1/write",
            "5",
            "prometheus:9090/api/v1/write",
        ),
        ("https://prom/api/v1/write", "5", "https is not supported"),
        (
            "http://127.0.0.1:99999/api/v1/write",
            "5",
            "is not 1 to 65535",
        ),
        (good, "0", "--metrics-push-interval 0"),
        (good, "nan", "--metrics-push-interval NaN"),
    ] {
        let args = [
            "--metrics-push",
            url,
            "--metrics-push-interval",
            interval,
            "--out",
            out.to_str().unwrap(),
        ];
        let o = ackbench(&dir, "run", &scenario, &args);
        assert_eq!(o.code, 2, "{url} {interval}: {}", o.stderr);
        assert!(
            o.stderr.contains("--metrics-push") && o.stderr.contains(says),
            "{url} {interval}: {}",
            o.stderr
        );
        assert!(!out.exists(), "nothing ran for {url} {interval}");
    }
    let alone = [
        "--metrics-push-interval",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = ackbench(&dir, "run", &scenario, &alone);
    assert_eq!(o.code, 2, "an interval without a URL: {}", o.stderr);
    assert!(o.stderr.contains("--metrics-push <URL>"), "{}", o.stderr);
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
