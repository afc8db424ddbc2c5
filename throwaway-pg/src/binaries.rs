//! Locating the PostgreSQL server binaries (`initdb`, `pg_ctl`, `postgres`,
//! `psql`) and checking their version.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::command::{clean_command, run};
use crate::error::{Error, ErrorKind};

/// Oldest supported major version.
pub const MIN_MAJOR_VERSION: u32 = 14;

/// Programs a directory must contain to count as a server bindir.
const SERVER_PROGRAMS: [&str; 3] = ["initdb", "pg_ctl", "postgres"];

/// Where to look for the server binaries, in order:
/// 1. every directory of `path` that contains `initdb`, `pg_ctl` and `postgres`;
/// 2. `pg_config --bindir`, with `pg_config` taken from `path` (if `use_pg_config`);
/// 3. `<root>/<major>/bin` for each of `install_roots`, newest major first
///    (Debian/Ubuntu layout: `/usr/lib/postgresql/15/bin`).
#[derive(Debug, Clone, Default)]
pub struct BinarySearch {
    /// Directories searched like `PATH`.
    pub path: Vec<PathBuf>,
    /// Whether to ask `pg_config` (found in `path`) for its bindir.
    pub use_pg_config: bool,
    /// Directories holding one subdirectory per major version.
    pub install_roots: Vec<PathBuf>,
}

impl BinarySearch {
    /// The search used by [`Cluster::start`](crate::Cluster::start): `$PATH`,
    /// `pg_config`, then `/usr/lib/postgresql/*/bin`.
    pub fn from_environment() -> Self {
        let path = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        BinarySearch {
            path,
            use_pg_config: true,
            install_roots: vec![PathBuf::from("/usr/lib/postgresql")],
        }
    }
}

/// A directory with usable server binaries and their version.
#[derive(Debug, Clone)]
pub struct ServerBinaries {
    bindir: PathBuf,
    version: String,
    major: u32,
}

impl ServerBinaries {
    /// Checks that `bindir` holds the server programs and `psql`, and reads the
    /// version from `postgres --version`. Any version is accepted here.
    pub fn inspect(bindir: &Path) -> Result<Self, Error> {
        let bindir = resolve_bindir(bindir);
        if let Some(missing) = SERVER_PROGRAMS
            .iter()
            .chain(&["psql"])
            .find(|p| !is_executable(&bindir.join(p)))
        {
            return Err(Error::new(
                ErrorKind::BinariesNotFound,
                format!("{} has no executable `{missing}`", bindir.display()),
            ));
        }
        let output = run(clean_command(&bindir.join("postgres")).arg("--version"))?;
        let version = parse_version(&output).ok_or_else(|| {
            Error::new(
                ErrorKind::BinariesNotFound,
                format!("cannot read the version from `postgres --version`: {output:?}"),
            )
        })?;
        let major = major_of(&version).unwrap_or(0);
        Ok(ServerBinaries {
            bindir,
            version,
            major,
        })
    }

    /// The directory holding the binaries.
    pub fn bindir(&self) -> &Path {
        &self.bindir
    }

    /// Full version, e.g. `"15.18"`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Major version, e.g. `15`.
    pub fn major(&self) -> u32 {
        self.major
    }

    /// Path of a program in the bindir.
    pub fn program(&self, name: &str) -> PathBuf {
        self.bindir.join(name)
    }
}

/// Finds the first usable bindir (version >= [`MIN_MAJOR_VERSION`]) following
/// the order of [`BinarySearch`]. The error explains how to install
/// PostgreSQL, and lists candidates that were rejected.
pub fn find_server_binaries(search: &BinarySearch) -> Result<ServerBinaries, Error> {
    let mut rejected = Vec::new();
    for dir in candidate_dirs(search) {
        match ServerBinaries::inspect(&dir) {
            Ok(found) if found.major >= MIN_MAJOR_VERSION => return Ok(found),
            Ok(found) => rejected.push(format!(
                "{}: version {} is older than {MIN_MAJOR_VERSION}",
                found.bindir.display(),
                found.version
            )),
            Err(e) => rejected.push(e.to_string()),
        }
    }
    Err(not_found_error(&rejected))
}

fn not_found_error(rejected: &[String]) -> Error {
    let mut message = format!(
        "no PostgreSQL {MIN_MAJOR_VERSION}+ server binaries (initdb, pg_ctl, postgres) found \
         on PATH, via `pg_config --bindir`, or in /usr/lib/postgresql/*/bin. \
         Install `postgresql` and `postgresql-contrib` ({MIN_MAJOR_VERSION} or newer), \
         e.g. `apt-get install -y postgresql postgresql-contrib`, \
         or pass a database URL instead."
    );
    if !rejected.is_empty() {
        message.push_str("\nRejected candidates:");
        for reason in rejected {
            message.push_str("\n  ");
            message.push_str(reason);
        }
    }
    Error::new(ErrorKind::BinariesNotFound, message)
}

/// All candidate directories in search order, without duplicates.
fn candidate_dirs(search: &BinarySearch) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = search
        .path
        .iter()
        .filter(|dir| has_server_programs(dir))
        .cloned()
        .collect();
    if search.use_pg_config {
        dirs.extend(pg_config_bindir(&search.path));
    }
    for root in &search.install_roots {
        dirs.extend(versioned_bindirs(root));
    }
    let mut seen = Vec::new();
    dirs.retain(|d| {
        let key = resolve_bindir(d);
        let new = !seen.contains(&key);
        seen.push(key);
        new
    });
    dirs
}

fn has_server_programs(dir: &Path) -> bool {
    SERVER_PROGRAMS.iter().all(|p| is_executable(&dir.join(p)))
}

/// `pg_config --bindir`, with `pg_config` looked up in `path`.
fn pg_config_bindir(path: &[PathBuf]) -> Option<PathBuf> {
    let pg_config = path
        .iter()
        .map(|dir| dir.join("pg_config"))
        .find(|p| is_executable(p))?;
    let output = run(clean_command(&pg_config).arg("--bindir")).ok()?;
    let dir = output.trim();
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

/// `<root>/<version>/bin` directories, newest version first.
fn versioned_bindirs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    let mut versions: Vec<(Vec<u32>, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let key = name
                .split('.')
                .map(|part| part.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            Some((key, entry.path().join("bin")))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions.into_iter().map(|(_, dir)| dir).collect()
}

/// If `dir/postgres` is a symlink into a real bindir that holds every server
/// program, use that directory; otherwise keep `dir`.
fn resolve_bindir(dir: &Path) -> PathBuf {
    let target = fs::canonicalize(dir.join("postgres"))
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    match target {
        Some(real) if has_server_programs(&real) && is_executable(&real.join("psql")) => real,
        _ => dir.to_path_buf(),
    }
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `"postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"` -> `"15.18"`.
fn parse_version(output: &str) -> Option<String> {
    let mut words = output.split_whitespace();
    words.find(|w| *w == "(PostgreSQL)")?;
    words.next().map(str::to_string)
}

/// `"15.18"` -> 15, `"17beta1"` -> 17.
fn major_of(version: &str) -> Option<u32> {
    let digits: String = version.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_debian_version_line() {
        let line = "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n";
        assert_eq!(parse_version(line).as_deref(), Some("15.18"));
        assert_eq!(major_of("15.18"), Some(15));
        assert_eq!(major_of("17beta1"), Some(17));
        assert_eq!(parse_version("garbage"), None);
    }
}
