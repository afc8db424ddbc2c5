//! The bounds every client string is held to before it reaches the database, so that whatever a
//! request gets past the edge can be stored, indexed and filed (DLQ included) without the
//! database refusing it.
//!
//! - No string may contain U+0000: PostgreSQL `text` cannot hold it (SQLSTATE 22021).
//! - Names (queue, partition, namespace, task, consumerGroup, leaseId) are at most
//!   `MAX_NAME_BYTES` bytes: they are btree-indexed, and a btree entry holds at most about 2.7 kB
//!   whatever the compression.
//! - A transactionId is at most `MAX_TXN_BYTES` bytes (the wire's bound; the broker indexes
//!   transactionIds by hash only).
//! - An ack's `error` reason is free diagnostic text: it is cleaned, never refused (a refusal would
//!   leave a client whose error text carries a NUL unable to dead-letter its poison message, which
//!   would then be redelivered forever). U+0000 becomes U+FFFD and the text is cut to
//!   `MAX_ERROR_BYTES` bytes (at a character boundary).
//!
//! Every refusal is a 400 naming the field.

use super::ApiError;

/// Longest name, in bytes.
pub const MAX_NAME_BYTES: usize = 255;
/// Longest transactionId, in bytes.
pub const MAX_TXN_BYTES: usize = 65535;
/// Longest failure reason kept, in bytes.
pub const MAX_ERROR_BYTES: usize = 4096;

/// A name: no U+0000, at most `MAX_NAME_BYTES` bytes.
pub fn name(value: &str, field: &str) -> Result<(), ApiError> {
    bounded(value, field, MAX_NAME_BYTES)
}

/// A transactionId: no U+0000, at most `MAX_TXN_BYTES` bytes.
pub fn transaction_id(value: &str, field: &str) -> Result<(), ApiError> {
    bounded(value, field, MAX_TXN_BYTES)
}

/// A failure reason, cleaned: U+0000 replaced by U+FFFD, then cut to `MAX_ERROR_BYTES` bytes.
pub fn reason(value: &str) -> String {
    let cleaned = match value.contains('\0') {
        true => std::borrow::Cow::Owned(value.replace('\0', "\u{FFFD}")),
        false => std::borrow::Cow::Borrowed(value),
    };
    let mut end = cleaned.len().min(MAX_ERROR_BYTES);
    while !cleaned.is_char_boundary(end) {
        end -= 1;
    }
    cleaned[..end].to_string()
}

/// `bounded`, naming the field only when it refuses: for checks made per item of a request,
/// whose field names (`acknowledgments[17].leaseId`) would otherwise be formatted for every item.
pub fn bounded_lazy(
    value: &str,
    max: usize,
    field: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    if value.len() <= max && !value.contains('\0') {
        return Ok(());
    }
    bounded(value, &field(), max)
}

/// No U+0000 and at most `max` bytes.
pub fn bounded(value: &str, field: &str, max: usize) -> Result<(), ApiError> {
    no_nul(value, field)?;
    if value.len() > max {
        return Err(ApiError::bad_request(format!(
            "{field} must be at most {max} bytes (got {})",
            value.len()
        )));
    }
    Ok(())
}

/// No U+0000 anywhere in the string.
pub fn no_nul(value: &str, field: &str) -> Result<(), ApiError> {
    match value.contains('\0') {
        true => Err(ApiError::bad_request(format!(
            "{field} must not contain U+0000"
        ))),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_refuse_nul_and_length() {
        assert!(name("orders", "queue").is_ok());
        let e = name("a\0b", "items[0].queue").unwrap_err();
        assert!(e.message.contains("items[0].queue"), "{}", e.message);
        assert!(name(&"x".repeat(255), "queue").is_ok());
        assert!(name(&"x".repeat(256), "queue").is_err());
    }

    #[test]
    fn the_lazy_check_names_the_field_only_when_it_refuses() {
        assert!(bounded_lazy("orders", MAX_NAME_BYTES, || unreachable!()).is_ok());
        let e = bounded_lazy("a\0", MAX_NAME_BYTES, || "items[3].leaseId".into()).unwrap_err();
        assert!(e.message.contains("items[3].leaseId"), "{}", e.message);
        assert!(bounded_lazy(&"x".repeat(256), MAX_NAME_BYTES, || "q".into()).is_err());
    }

    #[test]
    fn reasons_are_cut_at_a_char_boundary() {
        let long = "é".repeat(3000);
        let cut = reason(&long);
        assert!(cut.len() <= MAX_ERROR_BYTES && cut.chars().all(|c| c == 'é'));
        assert_eq!(reason("a\0b"), "a\u{FFFD}b");
        assert_eq!(
            reason(&"\0".repeat(5000)).chars().count(),
            MAX_ERROR_BYTES / 3
        );
    }
}
