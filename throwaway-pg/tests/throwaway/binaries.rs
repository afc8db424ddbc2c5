//! Finding the server binaries, and the error when there are none.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use throwaway_pg::{find_server_binaries, BinarySearch, ErrorKind, MIN_MAJOR_VERSION};

/// A fresh empty directory under the temp dir, removed on drop.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(tag: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("throwaway-pg-test-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        ScratchDir(dir)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn write_script(path: &Path, body: &str) {
    fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn empty_dirs_give_install_instructions() {
    let scratch = ScratchDir::new("empty");
    let search = BinarySearch {
        path: vec![scratch.0.join("bin"), scratch.0.clone()],
        use_pg_config: true,
        install_roots: vec![scratch.0.join("postgresql")],
    };
    let err = find_server_binaries(&search).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BinariesNotFound);
    let message = err.to_string();
    for needle in [
        "postgresql-contrib",
        "apt-get install -y postgresql postgresql-contrib",
        "14 or newer",
        "database URL",
    ] {
        assert!(message.contains(needle), "missing {needle:?} in: {message}");
    }
}

#[test]
fn too_old_versions_are_rejected_and_listed() {
    let scratch = ScratchDir::new("old");
    let bindir = scratch.0.join("postgresql/13/bin");
    fs::create_dir_all(&bindir).unwrap();
    for program in ["initdb", "pg_ctl", "psql"] {
        write_script(&bindir.join(program), "exit 0");
    }
    write_script(
        &bindir.join("postgres"),
        "echo 'postgres (PostgreSQL) 13.4'",
    );
    let search = BinarySearch {
        path: vec![],
        use_pg_config: false,
        install_roots: vec![scratch.0.join("postgresql")],
    };
    let message = find_server_binaries(&search).unwrap_err().to_string();
    assert!(message.contains("13.4 is older than 14"), "{message}");
}

#[test]
fn newest_install_root_version_wins() {
    let scratch = ScratchDir::new("newest");
    for major in ["9.6", "14", "16"] {
        let bindir = scratch.0.join("postgresql").join(major).join("bin");
        fs::create_dir_all(&bindir).unwrap();
        for program in ["initdb", "pg_ctl", "psql"] {
            write_script(&bindir.join(program), "exit 0");
        }
        let version = format!("echo 'postgres (PostgreSQL) {major}.1'");
        write_script(&bindir.join("postgres"), &version);
    }
    let search = BinarySearch {
        path: vec![],
        use_pg_config: false,
        install_roots: vec![scratch.0.join("postgresql")],
    };
    let found = find_server_binaries(&search).unwrap();
    assert_eq!(found.major(), 16);
    assert_eq!(found.version(), "16.1");
}

#[test]
fn this_machine_has_a_supported_server() {
    let found = find_server_binaries(&BinarySearch::from_environment()).unwrap();
    assert!(found.major() >= MIN_MAJOR_VERSION);
    assert!(found.program("initdb").is_file());
}
