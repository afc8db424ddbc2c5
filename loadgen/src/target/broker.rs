//! The broker a cell runs against: the workspace's `ackbench-broker` started here with the
//! cell's toggles (the default), or an external broker given by `--broker-url`, whose
//! accelerator setting is whatever its `/metrics` gauges report.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::client::BrokerClient;

/// A broker process owned by this run; killed when dropped.
pub struct BrokerProcess {
    child: Child,
    pub url: String,
    pub log_path: PathBuf,
}

impl BrokerProcess {
    /// Starts `binary` on a free loopback port against `database_url`, with `env` on top, and
    /// waits until `/health` answers.
    pub async fn start(
        binary: &Path,
        database_url: &str,
        env: &[(String, String)],
        log_path: PathBuf,
    ) -> Result<BrokerProcess, String> {
        let port = free_port()?;
        let log =
            std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let mut cmd = Command::new(binary);
        cmd.env("DATABASE_URL", database_url)
            .env("QUEEN_LISTEN", format!("127.0.0.1:{port}"))
            .env(
                "RUST_LOG",
                std::env::var("ACKBENCH_BROKER_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .kill_on_drop(true)
            .process_group(0);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let mut broker = BrokerProcess {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log_path,
        };
        broker.wait_healthy(Duration::from_secs(60)).await?;
        Ok(broker)
    }

    async fn wait_healthy(&mut self, limit: Duration) -> Result<(), String> {
        let client = BrokerClient::new(&self.url);
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "the broker exited at start ({status}); its log:\n{}",
                    self.log_tail()
                ));
            }
            if client.health().await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the broker did not become healthy within {limit:?}; its log:\n{}",
                    self.log_tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// CPU seconds (user + system) the process has used so far.
    pub fn cpu_seconds(&self) -> Option<f64> {
        process_cpu_seconds(self.pid()?)
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Stops the broker with SIGTERM (so it closes its pool cleanly), SIGKILL after 10 s.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY-free: plain kill(2) through the `kill` command keeps this crate free of libc.
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
            if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
                .await
                .is_ok()
            {
                return;
            }
        }
        let _ = self.child.kill().await;
    }
}

/// CPU seconds of a process from `/proc/<pid>/stat` (utime + stime).
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clock_ticks_per_second())
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}
