//! The watchdog removes a cluster whose owner died without dropping it.
//!
//! Each parent test re-runs this test binary with `CHILD_MODE` set, which
//! makes `watchdog_child` start a cluster, print its temp dir and port, and
//! then leave without dropping it in the requested way.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use throwaway_pg::Cluster;

const CHILD_MODE: &str = "THROWAWAY_PG_WATCHDOG_CHILD";
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(15);

/// Child side; does nothing in a normal test run.
#[test]
fn watchdog_child() {
    let Ok(mode) = std::env::var(CHILD_MODE) else {
        return;
    };
    match mode.as_str() {
        "exit" => {
            // A `static` cluster is never dropped.
            let cluster = throwaway_pg::shared();
            announce(cluster);
            std::process::exit(0);
        }
        _ => {
            // Held until the parent kills us.
            let cluster = Cluster::start().unwrap();
            announce(&cluster);
            std::thread::sleep(Duration::from_secs(120));
        }
    }
}

fn announce(cluster: &Cluster) {
    println!(
        "CLUSTER {} {}",
        cluster.port(),
        cluster.temp_dir().display()
    );
}

/// A child test process and the lines of its stdout.
struct ChildRun {
    child: Child,
    lines: Receiver<String>,
}

impl ChildRun {
    fn spawn(mode: &str) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "watchdog::watchdog_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_MODE, mode)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        ChildRun { child, lines }
    }

    /// Port and temp dir announced by the child.
    fn cluster(&self) -> (u16, PathBuf) {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("child announced no cluster");
            // libtest may print "test watchdog_child ... " on the same line.
            if let Some((_, rest)) = line.split_once("CLUSTER ") {
                let (port, dir) = rest.split_once(' ').unwrap();
                return (port.parse().unwrap(), PathBuf::from(dir));
            }
        }
    }

    /// Waits until the child's stdout is closed by everyone holding it.
    fn wait_for_eof(&self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return true,
                _ => continue,
            }
        }
        false
    }

    fn signal_group(&self, signal: &str) {
        let group = format!("-{}", self.child.id());
        let status = Command::new("kill")
            .args([signal, "--", &group])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for ChildRun {
    /// A failed test must not leave its child sleeping.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn accepts_connections(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
}

fn assert_cleaned_up(port: u16, temp_dir: &Path) {
    let deadline = Instant::now() + CLEANUP_TIMEOUT;
    while temp_dir.exists() || accepts_connections(port) {
        assert!(
            Instant::now() < deadline,
            "cluster in {} (port {port}) not cleaned up within {CLEANUP_TIMEOUT:?}",
            temp_dir.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn cleans_up_after_exit_without_drop() {
    let mut run = ChildRun::spawn("exit");
    let (port, temp_dir) = run.cluster();
    // Nothing the cluster spawned may keep the child's stdout open.
    assert!(run.wait_for_eof(), "child's stdout is still held open");
    assert!(run.child.wait().unwrap().success());
    assert_cleaned_up(port, &temp_dir);
}

#[test]
fn cleans_up_after_sigkill() {
    let mut run = ChildRun::spawn("hold");
    let (port, temp_dir) = run.cluster();
    assert!(accepts_connections(port));
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    assert_cleaned_up(port, &temp_dir);
}

#[test]
fn cleans_up_after_ctrl_c() {
    let mut run = ChildRun::spawn("hold");
    let (port, temp_dir) = run.cluster();
    // What a terminal's Ctrl-C does: SIGINT to the whole foreground group.
    run.signal_group("-INT");
    assert!(!run.child.wait().unwrap().success());
    assert_cleaned_up(port, &temp_dir);
}
