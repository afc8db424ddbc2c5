//! Payload encryption of queues with `encryptionEnabled`: AES-256-GCM (RustCrypto's `aes-gcm`),
//! key from `QUEEN_ENCRYPTION_KEY`.
//!
//! A sealed payload is `nonce (12 bytes) || ciphertext || tag (16 bytes)`, with a fresh random
//! nonce per payload and the message id as associated data: a sealed payload opens only as the
//! payload of the message it was pushed as (moving it to another frame fails the tag check).
//! Nothing here knows where sealed bytes are kept (segment frames, DLQ rows).

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use uuid::Uuid;

const NONCE_BYTES: usize = 12;

/// Seals and opens payloads with the broker's key.
pub struct Sealer {
    cipher: Aes256Gcm,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)") // never the key
    }
}

impl Sealer {
    pub fn new(key: &[u8; 32]) -> Sealer {
        Sealer {
            cipher: Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key)),
        }
    }

    /// Seals `plain` as the payload of `message_id`.
    pub fn seal(&self, plain: &[u8], message_id: Uuid) -> Vec<u8> {
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let aad = message_id.as_bytes();
        let sealed = self
            .cipher
            .encrypt(&nonce, Payload { msg: plain, aad })
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        let mut out = Vec::with_capacity(NONCE_BYTES + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// Opens what `seal` made for `message_id`; an error when the key is not the one that
    /// sealed it or the bytes were altered.
    pub fn open(&self, sealed: &[u8], message_id: Uuid) -> Result<Vec<u8>, String> {
        if sealed.len() < NONCE_BYTES + 16 {
            return Err(format!(
                "encrypted payload of message {message_id} is truncated"
            ));
        }
        let (nonce, body) = sealed.split_at(NONCE_BYTES);
        let aad = message_id.as_bytes();
        self.cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: body, aad })
            .map_err(|_| {
                format!(
                    "encrypted payload of message {message_id} cannot be decrypted \
                     (QUEEN_ENCRYPTION_KEY is not the key it was pushed with, or the data was altered)"
                )
            })
    }
}

/// Opens `sealed` with `sealer`, or says that no key is configured.
pub fn open_with(
    sealer: Option<&Sealer>,
    sealed: &[u8],
    message_id: Uuid,
) -> Result<Vec<u8>, String> {
    match sealer {
        Some(s) => s.open(sealed, message_id),
        None => Err(format!(
            "payload of message {message_id} is encrypted and this broker has no QUEEN_ENCRYPTION_KEY"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_and_opens_only_with_the_key_and_the_message() {
        let s = Sealer::new(&[7; 32]);
        let id = Uuid::now_v7();
        let sealed = s.seal(br#"{"a":1}"#, id);
        assert!(!sealed.windows(7).any(|w| w == br#"{"a":1}"#));
        assert_eq!(s.open(&sealed, id).unwrap(), br#"{"a":1}"#);
        assert!(s.open(&sealed, Uuid::now_v7()).is_err(), "another message");
        assert!(
            Sealer::new(&[8; 32]).open(&sealed, id).is_err(),
            "another key"
        );
        assert!(s.open(&sealed[..10], id).is_err(), "truncated");
        assert!(open_with(None, &sealed, id).is_err(), "no key");
    }
}
