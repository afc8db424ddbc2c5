//! The cluster itself: builder, start sequence, SQL helpers and teardown.

use std::fs;
use std::io::Write;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::binaries::{find_server_binaries, BinarySearch, ServerBinaries};
use crate::command::{capture, clean_command, combined_output, describe, run};
use crate::config::{self, Settings};
use crate::error::{Error, ErrorKind};
use crate::user::RunAs;
use crate::watchdog;

mod replication;

pub use replication::STANDBY_NAME;

const HOST: &str = "127.0.0.1";
const SUPERUSER: &str = "postgres";
/// Included from postgresql.conf; rewritten for each start attempt.
const CONF_FILE: &str = "throwaway-pg.conf";
/// How many fresh ports to try when the chosen one is taken meanwhile.
const START_ATTEMPTS: usize = 5;
const LOG_TAIL_LINES: usize = 40;

/// Configures a [`Cluster`] before starting it.
#[derive(Debug, Clone, Default)]
pub struct ClusterBuilder {
    overrides: Settings,
    bindir: Option<PathBuf>,
}

impl ClusterBuilder {
    /// A builder with the default settings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets any server setting, e.g. `.setting("fsync", "off")` or
    /// `.setting("work_mem", "8MB")`. Overrides win over the crate's defaults.
    /// Values are quoted for postgresql.conf; a value already in single quotes
    /// is written as is. Setting `port` pins the port (no retry on conflict).
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        config::set(&mut self.overrides, &name.into(), &value.into());
        self
    }

    /// Uses the binaries in `bindir` instead of searching for them.
    pub fn bindir(mut self, bindir: impl Into<PathBuf>) -> Self {
        self.bindir = Some(bindir.into());
        self
    }

    /// Creates, configures and starts the cluster; returns once it accepts
    /// connections and `pg_stat_statements` is installed.
    pub fn start(self) -> Result<Cluster, Error> {
        config::validate(&self.overrides)?;
        let binaries = match &self.bindir {
            Some(dir) => ServerBinaries::inspect(dir)?,
            None => find_server_binaries(&BinarySearch::from_environment())?,
        };
        let run_as = RunAs::detect()?;
        let temp_dir = create_temp_dir(&run_as)?;
        // From here on, dropping `cluster` (also on `?`) cleans everything up.
        let mut cluster = Cluster::new(binaries, run_as, temp_dir);
        cluster.watchdog = Some(watchdog::spawn(
            &cluster.temp_dir,
            &cluster.data_dir,
            &cluster.binaries.program("pg_ctl"),
            &cluster.run_as,
        )?);
        cluster.initdb()?;
        cluster.overrides = self.overrides.clone();
        cluster.start_server(&self.overrides)?;
        cluster.wait_until_ready()?;
        cluster.install_pg_stat_statements()?;
        Ok(cluster)
    }
}

/// A private PostgreSQL cluster in a temp directory, stopped and removed on
/// drop. See the crate documentation for the cleanup strategy.
#[derive(Debug)]
pub struct Cluster {
    binaries: ServerBinaries,
    run_as: RunAs,
    temp_dir: PathBuf,
    data_dir: PathBuf,
    log_path: PathBuf,
    port: u16,
    watchdog: Option<Child>,
    cleaned_up: bool,
    /// The caller's settings, kept to configure the cluster again (a standby re-seeded).
    overrides: Settings,
}

impl Cluster {
    /// Starts a cluster with the default settings.
    pub fn start() -> Result<Cluster, Error> {
        ClusterBuilder::new().start()
    }

    /// A builder to override settings before starting.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::new()
    }

    /// TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Address the server listens on: `"127.0.0.1"`.
    pub fn host(&self) -> &str {
        HOST
    }

    /// Directory of the PostgreSQL binaries in use.
    pub fn bindir(&self) -> &Path {
        self.binaries.bindir()
    }

    /// The data directory (inside the cluster's temp directory).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The temp directory holding data dir, log and unix socket; removed on drop.
    pub fn temp_dir(&self) -> &Path {
        &self.temp_dir
    }

    /// The server log file.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Server version, e.g. `"15.18"`.
    pub fn version(&self) -> &str {
        self.binaries.version()
    }

    /// `postgres://postgres@127.0.0.1:PORT/DATABASE` (trust auth, no password).
    pub fn url(&self, database: &str) -> String {
        format!("postgres://{SUPERUSER}@{HOST}:{}/{database}", self.port)
    }

    /// Creates database `name` (only `[a-z0-9_]`, at most 63 characters) and
    /// returns its URL. It has `pg_stat_statements` (inherited from `template1`).
    pub fn create_database(&self, name: &str) -> Result<String, Error> {
        validate_database_name(name)?;
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\""))?;
        Ok(self.url(name))
    }

    /// Runs `sql` in `database` with `psql -X -At -v ON_ERROR_STOP=1` and
    /// returns its output without the final newline (unaligned, tuples only:
    /// one row per line, columns separated by `|`).
    pub fn psql(&self, database: &str, sql: &str) -> Result<String, Error> {
        let port = self.port.to_string();
        let mut cmd = clean_command(&self.binaries.program("psql"));
        cmd.args([
            "-X",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            HOST,
            "-p",
            &port,
        ])
        .args(["-U", SUPERUSER, "-d", database, "-c", sql]);
        let output = run(&mut cmd)?;
        Ok(output.strip_suffix('\n').unwrap_or(&output).to_string())
    }

    /// Stops the server but keeps the cluster (data directory, port), so that a test can see
    /// how its clients behave while the database is down; [`Cluster::resume`] starts it again.
    pub fn pause(&self) -> Result<(), Error> {
        self.stop_server()
    }

    /// Starts a [`Cluster::pause`]d server again, on the same port.
    pub fn resume(&self) -> Result<(), Error> {
        self.pg_ctl_start()
    }

    /// Stops the server and removes the temp directory, reporting failures
    /// (dropping does the same but silently).
    pub fn stop(mut self) -> Result<(), Error> {
        self.clean_up()
    }

    fn new(binaries: ServerBinaries, run_as: RunAs, temp_dir: PathBuf) -> Self {
        Cluster {
            binaries,
            run_as,
            data_dir: temp_dir.join("data"),
            log_path: temp_dir.join("server.log"),
            temp_dir,
            port: 0,
            watchdog: None,
            cleaned_up: false,
            overrides: Settings::new(),
        }
    }

    /// `initdb` (as the server user), then includes our config file.
    fn initdb(&self) -> Result<(), Error> {
        let initdb = self.binaries.program("initdb");
        let mut cmd = self.server_command(&initdb);
        cmd.arg("-D")
            .arg(&self.data_dir)
            .args(["--auth=trust", "--username", SUPERUSER])
            .args(["--encoding=UTF8", "--locale=C", "--no-sync"]);
        if supports_no_instructions(&initdb) {
            cmd.arg("--no-instructions");
        }
        run(&mut cmd)?;
        let main_conf = self.data_dir.join("postgresql.conf");
        append(&main_conf, &format!("\ninclude '{CONF_FILE}'\n"))
    }

    /// Starts the server, retrying with a fresh port when the one picked was
    /// taken in the meantime (unless the caller pinned `port`).
    fn start_server(&mut self, overrides: &Settings) -> Result<(), Error> {
        let pinned_port = config::get(overrides, "port").map(parse_port).transpose()?;
        let attempts = if pinned_port.is_some() {
            1
        } else {
            START_ATTEMPTS
        };
        for attempt in 1..=attempts {
            self.port = match pinned_port {
                Some(port) => port,
                None => free_port()?,
            };
            self.write_config(overrides)?;
            let log_start = file_len(&self.log_path);
            match self.pg_ctl_start() {
                Ok(()) => return Ok(()),
                Err(_) if attempt < attempts && self.port_conflict_since(log_start) => continue,
                Err(e) => return Err(e),
            }
        }
        unreachable!("the last attempt returns")
    }

    fn write_config(&self, overrides: &Settings) -> Result<(), Error> {
        let settings = config::merge(config::defaults(self.port, &self.temp_dir), overrides);
        let path = self.data_dir.join(CONF_FILE);
        fs::write(&path, config::render(&settings))
            .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
        self.run_as.chown(&path)
    }

    /// `pg_ctl restart -m immediate -w` as the server user, in its own process group: a
    /// crash-like restart (no shutdown checkpoint; the server recovers from WAL as it starts).
    /// The caller runs it, blocking or not; the server keeps its port and settings.
    pub fn immediate_restart_command(&self) -> std::process::Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = self.pg_ctl(&["-m", "immediate", "-w", "-t", "60", "-l"]);
        cmd.arg(&self.log_path).arg("restart").process_group(0);
        cmd
    }

    /// `pg_ctl start -w` in its own process group, so a Ctrl-C sent to the
    /// terminal's foreground group does not reach the server.
    fn pg_ctl_start(&self) -> Result<(), Error> {
        use std::os::unix::process::CommandExt;
        let mut cmd = self.pg_ctl(&["-w", "-t", "60", "-l"]);
        cmd.arg(&self.log_path).arg("start").process_group(0);
        let output = capture(&mut cmd)?;
        if output.status.success() {
            return Ok(());
        }
        Err(self.start_error(&describe(&cmd), &combined_output(&output)))
    }

    fn start_error(&self, command: &str, output: &str) -> Error {
        let log = log_tail(&self.log_path);
        let mut message = format!(
            "PostgreSQL failed to start: `{command}`:\n{output}\n--- last lines of {} ---\n{log}",
            self.log_path.display()
        );
        if log.contains("pg_stat_statements") {
            message.push_str(
                "\nHint: pg_stat_statements comes with `postgresql-contrib` \
                 (apt-get install -y postgresql-contrib).",
            );
        }
        Error::new(ErrorKind::Command, message)
    }

    fn port_conflict_since(&self, log_start: u64) -> bool {
        let log = fs::read(&self.log_path).unwrap_or_default();
        let new = log.get(log_start as usize..).unwrap_or_default();
        let new = String::from_utf8_lossy(new);
        new.contains("could not bind") || new.contains("Address already in use")
    }

    /// `pg_ctl -w` already waited; double-check from the outside.
    fn wait_until_ready(&self) -> Result<(), Error> {
        let pg_isready = self.binaries.program("pg_isready");
        if !pg_isready.is_file() {
            return TcpStream::connect((HOST, self.port))
                .map(drop)
                .map_err(|e| {
                    Error::io(
                        format!(
                            "server is not accepting connections on {HOST}:{}",
                            self.port
                        ),
                        e,
                    )
                });
        }
        let port = self.port.to_string();
        let mut cmd = clean_command(&pg_isready);
        cmd.args(["-q", "-t", "30", "-h", HOST, "-p", &port, "-U", SUPERUSER]);
        run(&mut cmd).map(drop).map_err(|e| {
            let log = log_tail(&self.log_path);
            Error::new(
                ErrorKind::Command,
                format!("server started but is not ready: {e}\n--- server log ---\n{log}"),
            )
        })
    }

    /// In `template1` (so every later database has it) and in `postgres`.
    fn install_pg_stat_statements(&self) -> Result<(), Error> {
        for database in ["template1", "postgres"] {
            self.psql(
                database,
                "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
            )
            .map_err(|e| {
                Error::new(
                    e.kind(),
                    format!("{e}\nHint: pg_stat_statements comes with `postgresql-contrib`."),
                )
            })?;
        }
        Ok(())
    }

    /// Stops the server (fast, then immediate), removes the temp dir, and
    /// dismisses the watchdog. Runs at most once.
    fn clean_up(&mut self) -> Result<(), Error> {
        if std::mem::replace(&mut self.cleaned_up, true) {
            return Ok(());
        }
        let stopped = self.stop_server();
        let removed = match fs::remove_dir_all(&self.temp_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(
                format!("cannot remove {}", self.temp_dir.display()),
                e,
            )),
            _ => Ok(()),
        };
        if let Some(child) = self.watchdog.take() {
            watchdog::stop(child);
        }
        stopped.and(removed)
    }

    fn stop_server(&self) -> Result<(), Error> {
        if self.postmaster_pid().is_none() {
            return Ok(());
        }
        // A server frozen by `stop_processes` must run to shut down.
        let _ = self.continue_processes(&self.server_pids());
        let fast = run(&mut self.pg_ctl(&["-m", "fast", "-w", "-t", "30", "stop"]));
        let Err(fast_error) = fast else { return Ok(()) };
        run(&mut self.pg_ctl(&["-m", "immediate", "-w", "-t", "30", "stop"]))
            .map(drop)
            .map_err(|e| {
                Error::new(
                    ErrorKind::Command,
                    format!("cannot stop PostgreSQL: {fast_error}\n{e}"),
                )
            })
    }

    /// `pg_ctl -D <data> <args>` as the server user.
    fn pg_ctl(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = self.server_command(&self.binaries.program("pg_ctl"));
        cmd.arg("-D").arg(&self.data_dir).args(args);
        cmd
    }

    fn server_command(&self, program: &Path) -> std::process::Command {
        self.run_as.command(program, &self.temp_dir)
    }
}

impl Drop for Cluster {
    /// Stops the server (`pg_ctl stop -m fast`, falling back to `immediate`)
    /// and removes the temp directory. Errors are ignored; use
    /// [`Cluster::stop`] to see them.
    fn drop(&mut self) {
        let _ = self.clean_up();
    }
}

/// A fresh, uniquely named directory under the system temp dir, owned by the
/// server user and world-traversable (mode 0755).
fn create_temp_dir(run_as: &RunAs) -> Result<PathBuf, Error> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let base = temp_base(run_as);
    loop {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("throwaway-pg-{}-{n}-{nanos:x}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => {
                let perms = fs::Permissions::from_mode(0o755);
                fs::set_permissions(&dir, perms)
                    .map_err(|e| Error::io(format!("cannot chmod {}", dir.display()), e))?;
                if let Err(e) = run_as.chown(&dir) {
                    let _ = fs::remove_dir(&dir);
                    return Err(e);
                }
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(Error::io(
                    format!("cannot create a directory in {}", base.display()),
                    e,
                ))
            }
        }
    }
}

/// `std::env::temp_dir()`, or `/tmp` when the server runs as another user
/// who could not traverse the former (e.g. `TMPDIR` under `/root`).
fn temp_base(run_as: &RunAs) -> PathBuf {
    let base = std::env::temp_dir();
    if run_as.account().is_none() || world_traversable(&base) {
        base
    } else {
        PathBuf::from("/tmp")
    }
}

fn world_traversable(dir: &Path) -> bool {
    dir.ancestors()
        .all(|d| fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// A port that was free a moment ago (bound to port 0, then released).
fn free_port() -> Result<u16, Error> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| Error::io("cannot find a free TCP port on 127.0.0.1", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io("cannot read the free port", e))?
        .port();
    Ok(port)
}

fn parse_port(value: &str) -> Result<u16, Error> {
    value.trim_matches('\'').parse().map_err(|_| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("invalid port setting {value:?}"),
        )
    })
}

fn supports_no_instructions(initdb: &Path) -> bool {
    capture(clean_command(initdb).arg("--help"))
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("--no-instructions"))
}

fn validate_database_name(name: &str) -> Result<(), Error> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::InvalidInput,
            format!("invalid database name {name:?}: use 1-63 characters from [a-z0-9_]"),
        ))
    }
}

fn append(path: &Path, text: &str) -> Result<(), Error> {
    fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| Error::io(format!("cannot append to {}", path.display()), e))
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The last lines of the server log, for error messages.
fn log_tail(path: &Path) -> String {
    let text = match fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => return format!("(cannot read {}: {e})", path.display()),
    };
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_are_restricted() {
        assert!(validate_database_name("bench_01").is_ok());
        assert!(validate_database_name("").is_err());
        assert!(validate_database_name("Bench").is_err());
        assert!(validate_database_name("a\"; DROP").is_err());
        assert!(validate_database_name(&"a".repeat(64)).is_err());
    }
}
