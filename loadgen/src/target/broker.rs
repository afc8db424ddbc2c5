//! The broker a cell runs against: the workspace's `ackbench-broker` started here with the
//! cell's toggles (the default), or an external broker given by `--broker-url`, whose
//! accelerator setting is whatever its `/metrics` gauges report.
//!
//! A started broker can be faulted: killed and restarted on the same port and database, or
//! paused and resumed (`kill_broker`, `pause_broker` fault steps).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::client::BrokerClient;

/// A broker process owned by this run; killed when dropped.
pub struct BrokerProcess {
    child: Mutex<Child>,
    launch: Launch,
    pub url: String,
    pub log_path: PathBuf,
}

/// How the broker was started, to start it again after a kill.
struct Launch {
    binary: PathBuf,
    database_url: String,
    env: Vec<(String, String)>,
    port: u16,
}

impl Launch {
    /// Spawns the broker, its output appended to `log_path`.
    fn spawn(&self, log_path: &Path) -> Result<Child, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let mut cmd = Command::new(&self.binary);
        cmd.env("DATABASE_URL", &self.database_url)
            .env("QUEEN_LISTEN", format!("127.0.0.1:{}", self.port))
            // A fixed, public benchmark key, so `[queue.options] encryption_enabled` works.
            .env("QUEEN_ENCRYPTION_KEY", "ab".repeat(32))
            .env(
                "RUST_LOG",
                std::env::var("ACKBENCH_BROKER_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .kill_on_drop(true)
            .process_group(0);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.binary.display()))
    }
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
        let launch = Launch {
            binary: binary.to_path_buf(),
            database_url: database_url.to_string(),
            env: env.to_vec(),
            port: free_port()?,
        };
        std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let broker = BrokerProcess {
            child: Mutex::new(launch.spawn(&log_path)?),
            url: format!("http://127.0.0.1:{}", launch.port),
            launch,
            log_path,
        };
        broker.wait_healthy(Duration::from_secs(60)).await?;
        Ok(broker)
    }

    /// SIGKILLs the broker and waits until it is gone.
    pub async fn kill(&self) -> Result<(), String> {
        self.signal("KILL").await?;
        loop {
            if self.exited() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Starts the broker again on the same port and database (after `kill`) and waits until it
    /// is healthy.
    pub async fn restart(&self) -> Result<(), String> {
        let child = self.launch.spawn(&self.log_path)?;
        *self.child.lock().expect("broker child lock") = child;
        self.wait_healthy(Duration::from_secs(60)).await
    }

    /// Sends `SIG<name>` to the broker (`KILL`, `STOP`, `CONT`).
    pub async fn signal(&self, name: &str) -> Result<(), String> {
        let pid = self.pid().ok_or("the broker has already exited")?;
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status()
            .await
            .map_err(|e| format!("kill -{name} {pid}: {e}"))?;
        match status.success() {
            true => Ok(()),
            false => Err(format!("kill -{name} {pid}: {status}")),
        }
    }

    /// Whether the process has exited (reaping it if so).
    fn exited(&self) -> bool {
        let mut child = self.child.lock().expect("broker child lock");
        !matches!(child.try_wait(), Ok(None))
    }

    async fn wait_healthy(&self, limit: Duration) -> Result<(), String> {
        let client = BrokerClient::new(&self.url);
        let deadline = Instant::now() + limit;
        loop {
            let exit = self.child.lock().expect("broker child lock").try_wait();
            if let Ok(Some(status)) = exit {
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
        self.child.lock().expect("broker child lock").id()
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
    pub async fn stop(self) {
        let mut child = self.child.into_inner().expect("broker child lock");
        if let Some(pid) = child.id() {
            // SAFETY-free: plain kill(2) through the `kill` command keeps this crate free of libc.
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
            if tokio::time::timeout(Duration::from_secs(10), child.wait())
                .await
                .is_ok()
            {
                return;
            }
        }
        let _ = child.kill().await;
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
