//! Dotted key names (`consumers.outcomes.failed`, `gates[1].figure`): their parent and their
//! last segment, shared by the locator and the errors that name a key.

/// Splits `a.b[2].c` into (`a.b[2]`, `c`) and `a.b[2]` into (`a.b`, `[2]`).
pub(crate) fn split_parent(path: &str) -> Option<(&str, &str)> {
    let cut = path.rfind(['.', '['])?;
    let leaf = path[cut..].trim_start_matches('.');
    Some((&path[..cut], leaf))
}

/// The last segment of a dotted name (`consumers.batchsize` -> `batchsize`).
pub(crate) fn leaf(path: &str) -> &str {
    split_parent(path).map_or(path, |(_, leaf)| leaf)
}
