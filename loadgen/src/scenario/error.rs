//! `ScenarioError`: what is wrong with a scenario file or a command-line override, always naming
//! the key (its dotted name) and the line, or the flag.

use std::fmt;
use std::path::PathBuf;

/// Why a scenario could not be read, parsed, validated or overridden.
///
/// Every variant that comes from the file carries the file's name, the 1-based line and the
/// key's dotted name (`consumers.pop_batch`, `gates[1].figure`, `run.cells[2]`), so `Display`
/// reads like `scenarios/x.toml:12: consumers.pop_batch must be between 1 and 10000, got 0`.
#[derive(Debug)]
pub enum ScenarioError {
    /// The file could not be read.
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The text is not TOML.
    Syntax {
        file: String,
        line: usize,
        message: String,
    },
    /// A key the schema does not have.
    UnknownKey {
        file: String,
        line: usize,
        /// Dotted name of the unknown key, e.g. `consumers.batchsize`.
        key: String,
        /// Where it was found, e.g. `[consumers]`, `[[gates]]` or `top level`.
        section: String,
        /// The keys that section accepts.
        expected: Vec<String>,
    },
    /// A key with a bad value, a missing required key, or keys that contradict each other.
    Invalid {
        file: String,
        line: usize,
        /// Dotted name of the offending key.
        key: String,
        /// The whole sentence, starting with the key's dotted name.
        message: String,
    },
    /// A command-line override that cannot apply (`--cells`, `--rounds`, ...).
    Override { flag: String, message: String },
}

impl ScenarioError {
    /// The 1-based line in the scenario file, when the error comes from the file.
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::Syntax { line, .. }
            | Self::UnknownKey { line, .. }
            | Self::Invalid { line, .. } => Some(*line),
            Self::Read { .. } | Self::Override { .. } => None,
        }
    }

    /// The dotted name of the offending key, when there is one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::UnknownKey { key, .. } | Self::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }

    /// The flag an override error is about (`--cells`, ...).
    pub fn flag(&self) -> Option<&str> {
        match self {
            Self::Override { flag, .. } => Some(flag),
            _ => None,
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read { path, error } => {
                write!(f, "{}: cannot read the scenario: {error}", path.display())
            }
            Self::Syntax {
                file,
                line,
                message,
            } => write!(f, "{file}:{line}: not valid TOML: {message}"),
            Self::UnknownKey {
                file,
                line,
                key,
                section,
                expected,
            } => {
                let leaf = super::key_path::leaf(key);
                let place = if section == "top level" {
                    "at top level".to_string()
                } else {
                    format!("in {section}")
                };
                write!(f, "{file}:{line}: unknown key `{leaf}` {place}")?;
                if expected.is_empty() {
                    write!(f, " (this section takes no keys)")
                } else {
                    write!(f, " (expected one of: {})", expected.join(", "))
                }
            }
            Self::Invalid {
                file,
                line,
                message,
                ..
            } => write!(f, "{file}:{line}: {message}"),
            Self::Override { flag, message } => write!(f, "{flag}: {message}"),
        }
    }
}

impl std::error::Error for ScenarioError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Read { error, .. } => Some(error),
            _ => None,
        }
    }
}
