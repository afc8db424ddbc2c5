//! PGMQ's installer: `tools/pgmq-install`, a program of its own that applies the SQL the `pgmq`
//! crate embeds with the crate's own installer. It is not part of this workspace (its sqlx
//! would add about a fifth to every build of the suite), so the first run with the PGMQ peer
//! builds it with cargo, once; `ACKBENCH_PGMQ_INSTALLER` names a binary built elsewhere.

use std::path::{Path, PathBuf};

use tokio::process::Command;
use tokio::sync::Mutex;

/// The variable naming an installer binary to use instead of the built one.
pub const INSTALLER_ENV: &str = "ACKBENCH_PGMQ_INSTALLER";

/// The installer's project, in the source tree this binary was built from.
fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/pgmq-install")
}

/// Where cargo puts the built installer (its own target directory, whatever the caller's).
fn built() -> PathBuf {
    project().join("target/debug/pgmq-install")
}

/// One build at a time within this process (cargo's own lock covers other processes).
static BUILDING: Mutex<()> = Mutex::const_new(());

/// Installs PGMQ's SQL into the database at `url` (passed in `DATABASE_URL`, never on the
/// command line), building the installer first if needed.
pub async fn install(url: &str) -> Result<(), String> {
    let installer = ready().await?;
    let output = Command::new(&installer)
        .env("DATABASE_URL", url)
        .output()
        .await
        .map_err(|e| {
            format!(
                "pgmq: cannot run its installer {}: {e}",
                installer.display()
            )
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "pgmq: its installer ({}) failed: {}",
        installer.display(),
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

/// The installer binary: `ACKBENCH_PGMQ_INSTALLER`, else the built one, built now if missing
/// (a run checks this before any cell, so the build never falls inside one).
pub async fn ready() -> Result<PathBuf, String> {
    if let Ok(path) = std::env::var(INSTALLER_ENV) {
        return named(PathBuf::from(path));
    }
    let _one = BUILDING.lock().await;
    let path = built();
    if !path.is_file() {
        build().await?;
    }
    Ok(path)
}

/// The binary `ACKBENCH_PGMQ_INSTALLER` names, if it is a file.
fn named(path: PathBuf) -> Result<PathBuf, String> {
    if path.is_file() {
        return Ok(path);
    }
    Err(format!(
        "pgmq: {INSTALLER_ENV} names {}, which is not a file (unset it to build the installer \
         from {})",
        path.display(),
        project().display()
    ))
}

/// `cargo build` of the installer's project, without debug info (it runs once per cell).
async fn build() -> Result<(), String> {
    let manifest = project().join("Cargo.toml");
    let how = format!("cargo build --manifest-path {}", manifest.display());
    if !manifest.is_file() {
        return Err(format!(
            "the PGMQ peer needs PGMQ's installer, whose project ({}) is not where this binary \
             was built from: build it with `{how}` from a checkout and set {INSTALLER_ENV} to \
             the binary",
            manifest.display()
        ));
    }
    eprintln!("ackbench: building PGMQ's installer once (the pgmq crate's SQL): {how}");
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "-q", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", project().join("target"))
        .env("CARGO_PROFILE_DEV_DEBUG", "false")
        .output()
        .await
        .map_err(|e| {
            format!("the PGMQ peer needs PGMQ's installer, and cargo cannot run to build it ({e}): build it with `{how}` or set {INSTALLER_ENV}")
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "the PGMQ peer needs PGMQ's installer, and building it failed (`{how}`): {}",
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_installer_must_be_a_file_and_the_refusal_says_which() {
        let missing = PathBuf::from("/nonexistent/pgmq-install");
        let e = named(missing.clone()).unwrap_err();
        assert!(
            e.contains(INSTALLER_ENV) && e.contains("/nonexistent/pgmq-install"),
            "{e}"
        );
        let this_file = PathBuf::from(file!());
        let here = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(this_file);
        assert_eq!(named(here.clone()), Ok(here));
    }

    #[test]
    fn the_installer_project_is_in_the_source_tree() {
        assert!(project().join("Cargo.toml").is_file());
        assert!(built().ends_with("tools/pgmq-install/target/debug/pgmq-install"));
    }
}
