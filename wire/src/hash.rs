//! The transactionId hash: xxh3_128 of the UTF-8 bytes, 16 bytes big-endian.
//!
//! SQL never hashes; it stores and compares these 16 bytes (`log_txns.hashes`), and answers
//! with them as 32-character lowercase hex tokens.

use xxhash_rust::xxh3::xxh3_128;

/// The 16 big-endian bytes of `xxh3_128(transactionId)`.
pub type TxnHash = [u8; 16];

/// Hashes one transactionId the way the sidecar stores it.
pub fn txn_hash(transaction_id: &str) -> TxnHash {
    xxh3_128(transaction_id.as_bytes()).to_be_bytes()
}

/// The 32-character lowercase hex token SQL uses for a hash.
pub fn hash_hex(hash: &TxnHash) -> String {
    hex::encode(hash)
}

/// The hash a `hash_hex` token stands for; `None` unless it is 32 hex digits.
pub fn parse_hash_hex(token: &str) -> Option<TxnHash> {
    let mut hash = [0u8; 16];
    hex::decode_to_slice(token, &mut hash).ok()?;
    Some(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_big_endian_xxh3_128() {
        let h = txn_hash("order-1");
        let v = xxh3_128(b"order-1");
        assert_eq!(u128::from_be_bytes(h), v);
        assert_eq!(hash_hex(&h).len(), 32);
        assert_eq!(hash_hex(&h), format!("{v:032x}"));
        assert_eq!(parse_hash_hex(&hash_hex(&h)), Some(h));
        for bad in [
            "",
            "0",
            &hash_hex(&h)[1..],
            &format!("{}0", hash_hex(&h)),
            "zz",
        ] {
            assert_eq!(parse_hash_hex(bad), None, "{bad}");
        }
    }

    #[test]
    fn distinct_ids_distinct_hashes() {
        assert_ne!(txn_hash("a"), txn_hash("b"));
        assert_eq!(txn_hash(""), xxh3_128(b"").to_be_bytes());
    }
}
