//! Finding a scenario file from what the command line gives: a path as given, else a bare name
//! (`smoke`) as `scenarios/<name>.toml`; when neither exists, the error suggests the scenarios
//! whose names come closest.

use std::path::{Path, PathBuf};

/// Where the shipped scenarios live, relative to the working directory.
const SCENARIO_DIR: &str = "scenarios";

/// The scenario file `given` names: the path itself when it exists, else
/// `scenarios/<given>.toml` (`.toml` added when missing); an error naming what was tried and
/// the closest scenario names when none exists.
pub fn find_scenario(given: &Path) -> Result<PathBuf, String> {
    find_in(given, Path::new(SCENARIO_DIR))
}

fn find_in(given: &Path, dir: &Path) -> Result<PathBuf, String> {
    if given.exists() {
        return Ok(given.to_path_buf());
    }
    let stem = given.file_stem().map(|s| s.to_string_lossy().to_string());
    let bare = given.components().count() == 1;
    if let (true, Some(stem)) = (bare, &stem) {
        let candidate = dir.join(format!("{stem}.toml"));
        if candidate.exists() {
            return Ok(candidate);
        }
    }
    let names = scenario_names(dir);
    let close = closest(stem.as_deref().unwrap_or(""), &names);
    let hint = match (close.is_empty(), names.is_empty()) {
        (false, _) => format!(
            "; did you mean {}?",
            close
                .iter()
                .map(|n| format!("{}/{n}.toml", dir.display()))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
        (true, false) => format!(
            "; the scenarios in {}/ are {}",
            dir.display(),
            names.join(", ")
        ),
        (true, true) => String::new(),
    };
    Err(format!(
        "{}: no such scenario file{}{hint}",
        given.display(),
        match bare {
            true => format!(" (nor {}/{}.toml)", dir.display(), stem.unwrap_or_default()),
            false => String::new(),
        }
    ))
}

/// The names (stems) of the `.toml` files in `dir`, sorted.
fn scenario_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().to_string()))
        .collect();
    names.sort();
    names
}

/// The names within an edit distance of a third of `wanted`'s length (at least 2), or that
/// contain it or are contained in it: the likely meant ones.
fn closest(wanted: &str, names: &[String]) -> Vec<String> {
    let limit = (wanted.chars().count() / 3).max(2);
    names
        .iter()
        .filter(|n| {
            !wanted.is_empty()
                && (n.contains(wanted)
                    || wanted.contains(n.as_str())
                    || distance(wanted, n) <= limit)
        })
        .cloned()
        .collect()
}

/// Levenshtein distance between `a` and `b`, by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory holding empty `<name>.toml` files.
    fn dir_with(names: &[&str]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ackbench-find-{}", fastrand::u64(..)));
        std::fs::create_dir_all(&dir).unwrap();
        for n in names {
            std::fs::write(dir.join(format!("{n}.toml")), "").unwrap();
        }
        dir
    }

    #[test]
    fn a_bare_name_finds_the_scenario_file_and_a_typo_is_told_the_closest() {
        let dir = dir_with(&["smoke", "tiny-batches", "mixed-nacks"]);
        let found = find_in(Path::new("smoke"), dir.as_path()).unwrap();
        assert_eq!(found, dir.as_path().join("smoke.toml"));
        let err = find_in(Path::new("smoek"), dir.as_path()).unwrap_err();
        assert!(
            err.contains("did you mean") && err.contains("smoke.toml"),
            "{err}"
        );
        let err = find_in(Path::new("tiny"), dir.as_path()).unwrap_err();
        assert!(err.contains("tiny-batches.toml"), "{err}");
        let err = find_in(Path::new("zzzzzzzzzz"), dir.as_path()).unwrap_err();
        assert!(err.contains("mixed-nacks, smoke, tiny-batches"), "{err}");
    }

    #[test]
    fn an_existing_path_is_taken_as_given() {
        let dir = dir_with(&["smoke"]);
        let path = dir.as_path().join("smoke.toml");
        assert_eq!(find_in(&path, Path::new("/nonexistent")).unwrap(), path);
    }
}
