//! Which OS user the server processes run as.
//!
//! `initdb` and `postgres` refuse to run as root. When this process is root,
//! every server command runs as the `postgres` OS user (created by Debian's
//! `postgresql` package) and the files the server needs are chowned to it.
//! Otherwise commands run as the current user, unchanged.

use std::fs;
use std::os::unix::fs::chown;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::command::clean_command;
use crate::error::{Error, ErrorKind};

/// Name of the OS user that owns the server when we are root.
const SERVER_USER: &str = "postgres";

/// An OS account: name, uid and primary gid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Account {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// How to run server commands: as ourselves (`None`) or as another account.
#[derive(Debug, Clone)]
pub(crate) struct RunAs(Option<Account>);

impl RunAs {
    /// As ourselves unless we are root, then as `postgres` (an error if that
    /// user does not exist).
    pub fn detect() -> Result<Self, Error> {
        if effective_uid() != Some(0) {
            return Ok(RunAs(None));
        }
        let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
        match find_account(&passwd, SERVER_USER) {
            Some(account) => Ok(RunAs(Some(account))),
            None => Err(Error::new(
                ErrorKind::ServerUser,
                "running as root, but PostgreSQL refuses to run as root and there is no \
                 `postgres` OS user to run it as. Install `postgresql` (which creates the user), \
                 run as a non-root user, or pass a database URL instead.",
            )),
        }
    }

    /// The account commands switch to, if any.
    pub fn account(&self) -> Option<&Account> {
        self.0.as_ref()
    }

    /// A clean command for `program` that will run as this user, with `cwd`
    /// as working directory (the caller's may be unreadable to that user).
    pub fn command(&self, program: &Path, cwd: &Path) -> Command {
        let mut cmd = clean_command(program);
        cmd.current_dir(cwd);
        if let Some(account) = &self.0 {
            cmd.uid(account.uid).gid(account.gid);
        }
        cmd
    }

    /// Gives `path` to this user (no-op when running as ourselves).
    pub fn chown(&self, path: &Path) -> Result<(), Error> {
        match &self.0 {
            Some(a) => chown(path, Some(a.uid), Some(a.gid)).map_err(|e| {
                Error::io(format!("cannot chown {} to {}", path.display(), a.name), e)
            }),
            None => Ok(()),
        }
    }
}

/// Effective uid from `/proc/self/status` (`Uid: real effective saved fs`).
fn effective_uid() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Looks `name` up in the contents of an `/etc/passwd` file.
fn find_account(passwd: &str, name: &str) -> Option<Account> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() < 4 || fields[0] != name {
            return None;
        }
        Some(Account {
            name: name.to_string(),
            uid: fields[2].parse().ok()?,
            gid: fields[3].parse().ok()?,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_account_in_passwd() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      postgres:x:101:104:PostgreSQL administrator:/var/lib/postgresql:/bin/bash\n";
        let account = find_account(passwd, "postgres").unwrap();
        assert_eq!((account.uid, account.gid), (101, 104));
        assert_eq!(find_account(passwd, "nobody"), None);
    }

    #[test]
    fn reads_own_uid() {
        assert!(effective_uid().is_some());
    }
}
