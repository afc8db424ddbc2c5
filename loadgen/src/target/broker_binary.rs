//! Finding the broker binary a run starts per cell: `--broker-bin`, else the one beside this
//! executable, else building it with cargo when running from the workspace (so the README's one
//! command works on a fresh clone). A build says what it builds and why before it starts, and
//! shows cargo's own progress, because a first build takes a minute or more.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Why the broker beside this executable cannot be used as it is.
enum BuildReason {
    Missing,
    /// Older than this executable, so it may predate the workspace's current sources.
    OlderThanLoadGenerator,
}

impl BuildReason {
    fn words(&self, broker: &Path) -> String {
        match self {
            BuildReason::Missing => format!("{} does not exist yet", broker.display()),
            BuildReason::OlderThanLoadGenerator => format!(
                "{} is older than ackbench, so it may predate the sources",
                broker.display()
            ),
        }
    }
}

/// The broker binary to start: `explicit` when given, else the workspace's, built if needed.
pub fn locate(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("--broker-bin: {} does not exist", p.display()))
        };
    }
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = binaries_dir(&me)?;
    let beside = dir.join("ackbench-broker");
    let reason = match (beside.is_file(), is_older(&beside, &me)) {
        (false, _) => BuildReason::Missing,
        (true, true) => BuildReason::OlderThanLoadGenerator,
        (true, false) => return Ok(beside),
    };
    build(&beside, &reason, dir.ends_with("release"))?;
    Ok(beside)
}

/// The directory the workspace's binaries are built into (a test binary sits one level down,
/// in `deps/`).
fn binaries_dir(me: &Path) -> Result<&Path, String> {
    let dir = me.parent().ok_or("the executable has no directory")?;
    if dir.ends_with("deps") {
        return dir.parent().ok_or_else(|| "no target directory".into());
    }
    Ok(dir)
}

/// Runs `cargo build -p ackbench -p ackbench-broker` in the workspace with cargo's progress on
/// stderr.
fn build(broker: &Path, reason: &BuildReason, release: bool) -> Result<(), String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no workspace")?;
    if !workspace.join("broker").is_dir() {
        return Err(
            "ackbench-broker not found beside ackbench; build it or pass --broker-bin".into(),
        );
    }
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(workspace)
        // Both packages, as the README and CI build them: cargo unifies features over the
        // packages it builds, so building the broker alone would compile the shared crates
        // a second time, with another feature set.
        .args(["build", "-p", "ackbench", "-p", "ackbench-broker"]);
    if release {
        cargo.arg("--release");
    }
    eprintln!(
        "ackbench: building the broker first (`cargo build -p ackbench -p ackbench-broker{}` in {}), because {}; \
         a first build takes a minute or two, cargo's progress follows (--broker-bin skips this)",
        if release { " --release" } else { "" },
        workspace.display(),
        reason.words(broker),
    );
    let started = Instant::now();
    let status = cargo
        .status()
        .map_err(|e| format!("cannot run cargo to build the broker: {e}"))?;
    if !status.success() || !broker.is_file() {
        return Err("building ackbench-broker failed; pass --broker-bin".into());
    }
    eprintln!(
        "ackbench: broker ready ({:.0} s): {}",
        started.elapsed().as_secs_f64(),
        broker.display()
    );
    Ok(())
}

/// True when `broker` was modified before `me` (false when either time is unknown).
fn is_older(broker: &Path, me: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    matches!((modified(broker), modified(me)), (Some(b), Some(m)) if b < m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_binary_finds_the_workspace_binaries_one_level_up() {
        let dir = binaries_dir(Path::new("/ws/target/debug/deps/end_to_end-1234")).unwrap();
        assert_eq!(dir, Path::new("/ws/target/debug"));
        let dir = binaries_dir(Path::new("/ws/target/release/ackbench")).unwrap();
        assert_eq!(dir, Path::new("/ws/target/release"));
    }

    #[test]
    fn the_reason_names_the_binary() {
        let broker = Path::new("/ws/target/release/ackbench-broker");
        assert_eq!(
            BuildReason::Missing.words(broker),
            "/ws/target/release/ackbench-broker does not exist yet"
        );
        assert!(BuildReason::OlderThanLoadGenerator
            .words(broker)
            .contains("older than ackbench"));
    }
}
