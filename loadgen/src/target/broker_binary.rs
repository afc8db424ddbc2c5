//! Finding the broker binary a run starts per cell: `--broker-bin`, else the one beside this
//! executable, else building it with cargo when running from the workspace (so the README's one
//! command works on a fresh clone). The one beside this executable is rebuilt only when one of
//! the broker's sources in the workspace is newer than it, so the README's command (one cargo
//! build of both packages, then the run) builds once. A build says what it builds and why before
//! it starts, and shows cargo's own progress, because a first build takes a minute or more.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Instant, SystemTime};

/// What the broker binary is built from, relative to the workspace: a change to any file below
/// these makes the binary beside this executable stale.
const BROKER_SOURCES: &[&str] = &[
    "Cargo.toml",
    "Cargo.lock",
    "broker/Cargo.toml",
    "broker/src",
    "wire/Cargo.toml",
    "wire/src",
    "sql",
];

/// Why the broker beside this executable cannot be used as it is.
enum BuildReason {
    Missing,
    /// A source of the broker changed after the binary was built.
    SourceNewer(PathBuf),
}

impl BuildReason {
    fn words(&self, broker: &Path) -> String {
        match self {
            BuildReason::Missing => format!("{} does not exist yet", broker.display()),
            BuildReason::SourceNewer(source) => format!(
                "{} changed after {} was built",
                source.display(),
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
    let reason = match beside.is_file() {
        false => BuildReason::Missing,
        true => match newer_source(&workspace(), modified(&beside)) {
            Some(source) => BuildReason::SourceNewer(source),
            None => return Ok(beside),
        },
    };
    build(&beside, &reason, dir.ends_with("release"))?;
    Ok(beside)
}

/// The workspace this executable was built from.
fn workspace() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// A file among the broker's sources in `workspace` modified after `built`; `None` when there
/// is none, when `built` is unknown, or when the workspace is not on this machine (an installed
/// binary is used as it is).
fn newer_source(workspace: &Path, built: Option<SystemTime>) -> Option<PathBuf> {
    let built = built?;
    BROKER_SOURCES
        .iter()
        .find_map(|part| newer_below(&workspace.join(part), built))
}

/// `path`, or a file below it, when modified after `built`.
fn newer_below(path: &Path, built: SystemTime) -> Option<PathBuf> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_dir() {
        return meta
            .modified()
            .is_ok_and(|m| m > built)
            .then(|| path.to_path_buf());
    }
    std::fs::read_dir(path)
        .ok()?
        .flatten()
        .find_map(|entry| newer_below(&entry.path(), built))
}

/// When `path` was last modified, if known.
fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
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
    let workspace = workspace();
    if !workspace.join("broker").is_dir() {
        return Err(
            "ackbench-broker not found beside ackbench; build it or pass --broker-bin".into(),
        );
    }
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(&workspace)
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
        let why = BuildReason::SourceNewer("/ws/broker/src/lib.rs".into()).words(broker);
        assert_eq!(
            why,
            "/ws/broker/src/lib.rs changed after /ws/target/release/ackbench-broker was built"
        );
    }

    #[test]
    fn only_a_source_newer_than_the_binary_makes_it_stale() {
        let ws = std::env::temp_dir().join(format!("ackbench-sources-{}", std::process::id()));
        std::fs::create_dir_all(ws.join("broker/src")).unwrap();
        std::fs::write(ws.join("broker/src/lib.rs"), "").unwrap();
        let written = modified(&ws.join("broker/src/lib.rs")).unwrap();
        let later = written + std::time::Duration::from_secs(60);
        let earlier = written - std::time::Duration::from_secs(60);
        assert_eq!(
            newer_source(&ws, Some(later)),
            None,
            "built after the change"
        );
        assert_eq!(
            newer_source(&ws, Some(earlier)),
            Some(ws.join("broker/src/lib.rs")),
            "built before the change"
        );
        assert_eq!(
            newer_source(&ws, None),
            None,
            "unknown build time: used as it is"
        );
        assert_eq!(
            newer_source(&ws.join("gone"), Some(earlier)),
            None,
            "no workspace"
        );
        std::fs::remove_dir_all(&ws).unwrap();
    }
}
