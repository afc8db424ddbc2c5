//! PGMQ's installer: `tools/pgmq-install`, a program of its own that applies the SQL the `pgmq`
//! crate embeds with the crate's own installer. It is not part of this workspace (its sqlx
//! would add about a fifth to every build of the suite), so a run with the PGMQ peer builds it
//! with cargo before its first cell, when it is missing or older than its sources;
//! `ACKBENCH_PGMQ_INSTALLER` names a binary built elsewhere.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::SystemTime;

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

/// The installer's sources, relative to its project: a binary older than any of them is rebuilt.
const SOURCES: [&str; 3] = ["Cargo.toml", "Cargo.lock", "src/main.rs"];

/// One build at a time within this process (cargo's own lock covers other processes).
static BUILDING: Mutex<()> = Mutex::const_new(());

/// Installs PGMQ's SQL into the database at `url` (passed in `DATABASE_URL`, never on the
/// command line), building the installer first if needed.
pub async fn install(url: &str) -> Result<(), String> {
    let installer = ready().await?;
    let mut command = Command::new(&installer);
    command.env("DATABASE_URL", url);
    run(command)
        .await
        .map(drop)
        .map_err(|e| format!("pgmq: its installer ({}) {e}", installer.display()))
}

/// Runs `command` to its end: `Err` says whether it could not start or how it failed (its
/// standard error).
async fn run(mut command: Command) -> Result<Output, String> {
    let output = command
        .output()
        .await
        .map_err(|e| format!("cannot run: {e}"))?;
    if output.status.success() {
        return Ok(output);
    }
    Err(format!(
        "failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

/// The installer binary: `ACKBENCH_PGMQ_INSTALLER`, else the built one, built now if it is
/// missing or older than its sources (a run checks this before any cell, so the build never
/// falls inside one).
pub async fn ready() -> Result<PathBuf, String> {
    if let Ok(path) = std::env::var(INSTALLER_ENV) {
        return named(PathBuf::from(path));
    }
    let _one = BUILDING.lock().await;
    let path = built();
    if older_than_sources(&path) {
        build().await?;
    }
    Ok(path)
}

/// Whether `binary` is missing or older than any source of the installer's project.
fn older_than_sources(binary: &Path) -> bool {
    let modified = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
    let Some(built_at) = modified(binary) else {
        return true;
    };
    let project = project();
    SOURCES
        .iter()
        .any(|f| modified(&project.join(f)).unwrap_or(SystemTime::UNIX_EPOCH) > built_at)
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

/// `cargo build` of the installer's project, without debug info (built once, then run once
/// per cell).
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
    eprintln!("ackbench: building PGMQ's installer (the pgmq crate's SQL): {how}");
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .args(["build", "-q", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", project().join("target"))
        .env("CARGO_PROFILE_DEV_DEBUG", "false");
    run(cargo).await.map_err(|e| {
        format!(
            "the PGMQ peer needs PGMQ's installer, and cargo {e} (`{how}`; or set \
             {INSTALLER_ENV} to a binary built elsewhere)"
        )
    })?;
    // Cargo leaves a binary it found up to date as it was; dated now, it is not rebuilt again
    // for sources merely touched (a checkout) since.
    std::fs::File::options()
        .append(true)
        .open(built())
        .and_then(|f| f.set_modified(SystemTime::now()))
        .map_err(|e| format!("pgmq: its installer was built but cannot be dated: {e}"))
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
    fn an_installer_older_than_its_sources_is_rebuilt() {
        assert!(older_than_sources(Path::new("/nonexistent/pgmq-install")));
        let sources = project().join("src/main.rs");
        let newest = SOURCES
            .iter()
            .filter_map(|f| project().join(f).metadata().ok()?.modified().ok())
            .max()
            .expect("the project's sources are in the tree");
        let binary = std::env::temp_dir().join(format!("pgmq-install-age-{}", std::process::id()));
        let file = std::fs::File::create(&binary).unwrap();
        file.set_modified(newest - std::time::Duration::from_secs(1))
            .unwrap();
        assert!(
            older_than_sources(&binary),
            "older than {}",
            sources.display()
        );
        file.set_modified(newest + std::time::Duration::from_secs(1))
            .unwrap();
        assert!(!older_than_sources(&binary));
        std::fs::remove_file(&binary).unwrap();
    }

    #[tokio::test]
    async fn a_failing_command_is_told_with_its_status_and_standard_error() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo nothing here >&2; exit 3"]);
        let e = run(command).await.unwrap_err();
        assert!(
            e.contains("exit status: 3") && e.contains("nothing here"),
            "{e}"
        );
        let e = run(Command::new("/nonexistent/binary")).await.unwrap_err();
        assert!(e.starts_with("cannot run"), "{e}");
    }

    #[test]
    fn the_installer_project_is_in_the_source_tree() {
        assert!(project().join("Cargo.toml").is_file());
        assert!(built().ends_with("tools/pgmq-install/target/debug/pgmq-install"));
    }
}
