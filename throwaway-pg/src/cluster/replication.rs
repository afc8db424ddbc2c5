//! Streaming replication and crash-like faults: a standby cloned from a primary with
//! `pg_basebackup` (seeded again in place after a failover), synchronous replication switched on
//! for it, promotion, and signals to every process of a server (SIGKILL for a crash, SIGSTOP and
//! SIGCONT for a frozen server).

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{free_port, Cluster, ClusterBuilder, HOST, SUPERUSER};
use crate::binaries::ServerBinaries;
use crate::command::{capture, describe, run};
use crate::config;
use crate::error::{Error, ErrorKind};
use crate::user::RunAs;
use crate::watchdog;

/// The `application_name` a standby streams under (what `synchronous_standby_names` names).
pub const STANDBY_NAME: &str = "standby";

/// How long a standby may take to stream (or to become synchronous), and a promotion to finish.
const REPLICATION_WAIT: Duration = Duration::from_secs(60);

impl ClusterBuilder {
    /// Starts a streaming standby of `primary` in a temp directory of its own, on a fresh port,
    /// with this builder's settings: a `pg_basebackup` of the primary, `standby.signal`, and
    /// `primary_conninfo` naming it [`STANDBY_NAME`]. Returns once the primary sees it
    /// streaming. Replication stays asynchronous until [`Cluster::require_sync_standby`].
    pub fn start_standby_of(self, primary: &Cluster) -> Result<Cluster, Error> {
        config::validate(&self.overrides)?;
        let binaries = ServerBinaries::inspect(primary.bindir())?;
        let run_as = RunAs::detect()?;
        let temp_dir = super::create_temp_dir(&run_as)?;
        let mut standby = Cluster::new(binaries, run_as, temp_dir);
        standby.watchdog = Some(watchdog::spawn(
            &standby.temp_dir,
            &standby.data_dir,
            &standby.binaries.program("pg_ctl"),
            &standby.run_as,
        )?);
        standby.overrides = self.overrides;
        standby.port = free_port()?;
        standby.seed_as_standby_of(primary)?;
        Ok(standby)
    }
}

impl Cluster {
    /// Makes this cluster (stopped or crashed; its data is discarded) a fresh standby of
    /// `primary`, keeping its port and settings, and waits until it streams: what restores a
    /// pair after a failover promoted the other one.
    pub fn seed_as_standby_of(&self, primary: &Cluster) -> Result<(), Error> {
        self.kill_processes()?;
        self.remove_socket_lock()?;
        remove_dir_if_present(&self.data_dir)?;
        self.base_backup_from(primary)?;
        self.write_standby_config(primary)?;
        self.pg_ctl_start()?;
        self.wait_until_ready()?;
        primary.wait_for_standby("state = 'streaming'")
    }

    /// Removes the unix socket and its lock file a killed postmaster left behind (its pid may
    /// linger as an unreaped zombie, which the next postmaster would take for a live owner).
    fn remove_socket_lock(&self) -> Result<(), Error> {
        let socket = format!(".s.PGSQL.{}", self.port);
        for name in [format!("{socket}.lock"), socket] {
            let path = self.temp_dir.join(name);
            match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(format!("cannot remove {}", path.display()), e))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// `pg_basebackup` of `primary` into this cluster's (absent) data directory.
    fn base_backup_from(&self, primary: &Cluster) -> Result<(), Error> {
        let port = primary.port.to_string();
        let mut cmd = self.server_command(&self.binaries.program("pg_basebackup"));
        cmd.args(["-h", HOST, "-p", &port, "-U", SUPERUSER, "-X", "stream"])
            .args(["-c", "fast", "--no-sync", "-D"])
            .arg(&self.data_dir);
        run(&mut cmd).map(drop)
    }

    /// This cluster's own settings (port, socket directory), the standby's connection to the
    /// primary, no synchronous standby of its own, an empty `postgresql.auto.conf` (the
    /// primary's `ALTER SYSTEM` settings must not follow it into a promotion) and
    /// `standby.signal`.
    fn write_standby_config(&self, primary: &Cluster) -> Result<(), Error> {
        let mut settings = self.overrides.clone();
        let conninfo = format!(
            "host={HOST} port={} user={SUPERUSER} application_name={STANDBY_NAME}",
            primary.port
        );
        config::set(&mut settings, "primary_conninfo", &conninfo);
        config::set(&mut settings, "synchronous_standby_names", "");
        self.write_config(&settings)?;
        for (file, text) in [
            ("postgresql.auto.conf", "# Written by throwaway-pg.\n"),
            ("standby.signal", ""),
        ] {
            let path = self.data_dir.join(file);
            fs::write(&path, text)
                .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
            self.run_as.chown(&path)?;
        }
        Ok(())
    }

    /// Switches synchronous replication to [`STANDBY_NAME`] on (`true`) or off on this primary
    /// (`ALTER SYSTEM`, reloaded); on waits until the standby is the synchronous one, so no
    /// commit acknowledged afterwards is missing from it.
    pub fn require_sync_standby(&self, on: bool) -> Result<(), Error> {
        let names = if on { STANDBY_NAME } else { "" };
        self.psql(
            "postgres",
            &format!("ALTER SYSTEM SET synchronous_standby_names = '{names}'"),
        )?;
        self.psql("postgres", "SELECT pg_reload_conf()")?;
        match on {
            true => self.wait_for_standby("sync_state = 'sync'"),
            false => Ok(()),
        }
    }

    /// Waits until `pg_stat_replication` shows the standby with `condition`.
    fn wait_for_standby(&self, condition: &str) -> Result<(), Error> {
        let sql = format!(
            "SELECT count(*) FROM pg_stat_replication WHERE application_name = '{STANDBY_NAME}' AND {condition}"
        );
        let deadline = Instant::now() + REPLICATION_WAIT;
        while Instant::now() < deadline {
            if self.psql("postgres", &sql)? == "1" {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(Error::new(
            ErrorKind::Command,
            format!(
                "the standby did not reach {condition} within {REPLICATION_WAIT:?}; primary log:\n{}",
                super::log_tail(&self.log_path)
            ),
        ))
    }

    /// Promotes this standby to a primary (`pg_ctl promote -w`): it accepts writes on return.
    pub fn promote(&self) -> Result<(), Error> {
        run(&mut self.pg_ctl(&["-w", "-t", "60", "promote"])).map(drop)
    }

    /// The postmaster's pid, from `postmaster.pid`; `None` when the server is not running.
    pub fn postmaster_pid(&self) -> Option<u32> {
        let text = fs::read_to_string(self.data_dir.join("postmaster.pid")).ok()?;
        let pid: u32 = text.lines().next()?.trim().parse().ok()?;
        alive(pid).then_some(pid)
    }

    /// The postmaster's pid followed by its children's (every backend and helper process).
    pub fn server_pids(&self) -> Vec<u32> {
        let Some(postmaster) = self.postmaster_pid() else {
            return Vec::new();
        };
        let mut pids = vec![postmaster];
        pids.extend(children_of(postmaster));
        pids
    }

    /// SIGKILLs the postmaster and every child at once (a machine crash, as far as this server
    /// can tell) and waits until they are gone; nothing to do when it is not running.
    pub fn kill_processes(&self) -> Result<(), Error> {
        let pids = self.server_pids();
        if pids.is_empty() {
            return Ok(());
        }
        signal(&pids, "KILL")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while pids.iter().any(|&p| alive(p)) {
            if Instant::now() > deadline {
                return Err(Error::new(
                    ErrorKind::Command,
                    format!("server processes {pids:?} survived SIGKILL for 10 s"),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// SIGSTOPs the server: the postmaster first (so it forks nothing more), then every child.
    /// Returns the pids stopped, for [`Cluster::continue_processes`].
    pub fn stop_processes(&self) -> Result<Vec<u32>, Error> {
        let postmaster = self.postmaster_pid().ok_or_else(|| {
            Error::new(ErrorKind::Command, "the server is not running".to_string())
        })?;
        signal(&[postmaster], "STOP")?;
        let mut pids = vec![postmaster];
        pids.extend(children_of(postmaster));
        if let Err(e) = signal(&pids[1..], "STOP") {
            let _ = signal(&pids, "CONT");
            return Err(e);
        }
        Ok(pids)
    }

    /// SIGCONTs `pids` (what [`Cluster::stop_processes`] stopped).
    pub fn continue_processes(&self, pids: &[u32]) -> Result<(), Error> {
        signal(pids, "CONT")
    }
}

/// Sends `SIG<name>` to every pid with one `kill` command (a no-op for none); a process that
/// exited meanwhile (a backend whose client left) is no failure.
fn signal(pids: &[u32], name: &str) -> Result<(), Error> {
    if pids.is_empty() {
        return Ok(());
    }
    let mut cmd = std::process::Command::new("kill");
    cmd.arg(format!("-{name}"))
        .args(pids.iter().map(u32::to_string));
    let output = capture(&mut cmd)?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let only_gone = stderr.lines().all(|l| l.contains("No such process"));
    match output.status.success() || only_gone {
        true => Ok(()),
        false => Err(Error::new(
            ErrorKind::Command,
            format!("`{}` failed ({}): {stderr}", describe(&cmd), output.status),
        )),
    }
}

/// The pids whose parent is `parent`, from `/proc/<pid>/stat`.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat_field(pid, 1).is_some_and(|ppid| ppid == parent.to_string()))
        .collect()
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    stat_field(pid, 0).is_some_and(|state| state != "Z" && state != "X")
}

/// Field `i` after the command name of `/proc/<pid>/stat` (0: state, 1: parent pid).
fn stat_field(pid: u32, i: usize) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.get(stat.rfind(')')? + 2..)?;
    after.split_whitespace().nth(i).map(str::to_string)
}

fn remove_dir_if_present(dir: &Path) -> Result<(), Error> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(format!("cannot remove {}", dir.display()), e))
        }
        _ => Ok(()),
    }
}
