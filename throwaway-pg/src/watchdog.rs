//! A tiny shell process that cleans up if the owning process dies without
//! dropping its [`Cluster`](crate::Cluster) (Ctrl-C, SIGKILL, a `static` that
//! is never dropped).
//!
//! It runs in its own process group, ignores SIGHUP/SIGINT, and has all of
//! its stdio on `/dev/null`: it never writes to the terminal and never keeps
//! a caller's pipe open (which would make `cargo test` wait for it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::error::{Error, ErrorKind};
use crate::user::RunAs;
use std::os::unix::process::CommandExt;

/// Polls once a second while the owner is alive and the temp dir exists.
/// When the owner is gone it continues a server a fault left frozen (SIGCONT to the postmaster
/// and its children), then stops it (`pg_ctl stop -m immediate`,
/// through `runuser` when the server runs as another user; SIGQUIT to the
/// postmaster, which is the same immediate shutdown, if that fails) and
/// removes the temp dir. When the dir disappears first (normal drop), it
/// just exits.
const SCRIPT: &str = r#"
trap '' HUP INT
owner=$1 dir=$2 data=$3 pg_ctl=$4 runuser=$5 user=$6
while kill -0 "$owner" 2>/dev/null && [ -d "$dir" ]; do sleep 1; done
[ -d "$dir" ] || exit 0
if [ -f "$data/postmaster.pid" ]; then
  pm=$(head -n 1 "$data/postmaster.pid")
  kill -CONT "$pm" $(ps -o pid= --ppid "$pm" 2>/dev/null) 2>/dev/null
  if [ -n "$user" ]; then
    set -- "$runuser" -u "$user" -- "$pg_ctl"
  else
    set -- "$pg_ctl"
  fi
  if ! "$@" -D "$data" -m immediate -w -t 30 stop; then
    pid=$(head -n 1 "$data/postmaster.pid")
    kill -QUIT "$pid"
    n=0
    while kill -0 "$pid" && [ $n -lt 30 ]; do sleep 1; n=$((n + 1)); done
  fi
fi
rm -rf "$dir"
"#;

/// Starts the watchdog for the cluster living in `temp_dir`.
pub(crate) fn spawn(
    temp_dir: &Path,
    data_dir: &Path,
    pg_ctl: &Path,
    run_as: &RunAs,
) -> Result<Child, Error> {
    let user = run_as.account().map(|a| a.name.clone()).unwrap_or_default();
    let runuser = find_runuser().unwrap_or_default();
    Command::new("/bin/sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg("throwaway-pg-watchdog")
        .arg(std::process::id().to_string())
        .args([temp_dir, data_dir, pg_ctl, &runuser])
        .arg(user)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| {
            Error::new(
                ErrorKind::Command,
                format!("cannot start the cleanup watchdog: {e}"),
            )
        })
}

/// Stops a watchdog whose job is done.
pub(crate) fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `runuser` (util-linux) switches user without PAM prompts when root.
fn find_runuser() -> Option<PathBuf> {
    [
        "/usr/sbin/runuser",
        "/sbin/runuser",
        "/usr/bin/runuser",
        "/bin/runuser",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}
