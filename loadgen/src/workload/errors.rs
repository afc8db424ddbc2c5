//! Errors by kind: what a failed request was doing (`push`, `pop`, `ack`, ...), read from the
//! words every error is logged with (`push: connection refused`), counted apart so the live
//! metrics can tell a failing push path from a failing ack path.

use std::sync::atomic::{AtomicU64, Ordering};

/// The kinds errors are counted under; an error whose words name none of them is `other`.
pub const ERROR_KINDS: [&str; 7] = ["push", "pop", "ack", "tick", "audit", "drain", "other"];

/// One counter per kind of `ERROR_KINDS`.
#[derive(Default)]
pub struct ErrorKinds([AtomicU64; ERROR_KINDS.len()]);

impl ErrorKinds {
    /// Counts one error logged as `what` under the kind its first word names.
    pub fn count(&self, what: &str) {
        self.0[kind_of(what)].fetch_add(1, Ordering::Relaxed);
    }

    /// Every kind with its count so far.
    pub fn values(&self) -> Vec<(&'static str, u64)> {
        ERROR_KINDS
            .iter()
            .zip(&self.0)
            .map(|(kind, n)| (*kind, n.load(Ordering::Relaxed)))
            .collect()
    }
}

/// The index in `ERROR_KINDS` of the kind `what` names with its first word (`ack (sent
/// again): ...` is an `ack`).
fn kind_of(what: &str) -> usize {
    let first = what
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("");
    ERROR_KINDS
        .iter()
        .position(|k| *k == first)
        .unwrap_or(ERROR_KINDS.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_counts_under_the_kind_its_first_word_names() {
        let kinds = ErrorKinds::default();
        kinds.count("push: connection refused");
        kinds.count("ack (sent again): timeout");
        kinds.count("ack: 500");
        kinds.count("something odd");
        let values = kinds.values();
        let of = |k: &str| values.iter().find(|(n, _)| *n == k).unwrap().1;
        assert_eq!(
            (of("push"), of("ack"), of("pop"), of("other")),
            (1, 2, 0, 1)
        );
    }
}
