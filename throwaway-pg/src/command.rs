//! Running external programs with captured output and a clean environment.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::error::{Error, ErrorKind};

/// A command for `program` whose environment carries no `PG*` variables, so a
/// caller's `PGPORT`, `PGOPTIONS`, `PGSSLMODE`, ... cannot leak into the
/// private cluster.
pub(crate) fn clean_command(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PG") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// Runs `cmd` to completion with no stdin and captured output.
/// Returns stdout on success; on failure the error includes stdout and stderr.
pub(crate) fn run(cmd: &mut Command) -> Result<String, Error> {
    let output = capture(cmd)?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    Err(Error::new(
        ErrorKind::Command,
        format!(
            "`{}` failed ({}):\n{}",
            describe(cmd),
            output.status,
            combined_output(&output)
        ),
    ))
}

/// Runs `cmd` with no stdin and captured output, whatever its exit status.
pub(crate) fn capture(cmd: &mut Command) -> Result<Output, Error> {
    cmd.stdin(Stdio::null()).output().map_err(|e| {
        Error::new(
            ErrorKind::Command,
            format!("could not run `{}`: {e}", describe(cmd)),
        )
    })
}

/// Stdout followed by stderr, lossily decoded and trimmed.
pub(crate) fn combined_output(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    format!("{}\n{}", stdout.trim_end(), stderr.trim_end())
        .trim()
        .to_string()
}

/// `program arg1 arg2 ...` for error messages.
pub(crate) fn describe(cmd: &Command) -> String {
    let args = cmd.get_args().map(OsStr::to_string_lossy);
    std::iter::once(cmd.get_program().to_string_lossy())
        .chain(args)
        .collect::<Vec<_>>()
        .join(" ")
}
