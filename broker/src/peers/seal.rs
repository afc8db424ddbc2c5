//! The deployment's peer key and the seal made with it: an HMAC-SHA256, cut to 128 bits, over
//! what a notification asks another broker to trust beyond a hint (a lease's delivered hashes,
//! which its ack registry answers acks from). The key is the one row of `queen.peer_secret`,
//! stored by the first broker that starts and read by every other (`procs::peers`): anyone may
//! `NOTIFY`, but only whoever can read the broker's tables can seal.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of the seal (hex: twice as many characters).
const SEAL_BYTES: usize = 16;

/// The key every broker of one database shares.
pub struct PeerKey(Vec<u8>);

impl PeerKey {
    /// A candidate key of 32 random bytes (two version-4 UUIDs: 244 random bits), which the
    /// database keeps if no broker stored one before.
    pub fn candidate() -> Vec<u8> {
        let mut bytes = uuid::Uuid::new_v4().as_bytes().to_vec();
        bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        bytes
    }

    /// The stored key; `None` when it is too short to be one (the table refuses such keys).
    pub fn new(key: Vec<u8>) -> Option<PeerKey> {
        (key.len() >= 32).then_some(PeerKey(key))
    }

    fn mac(&self, body: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(body);
        mac
    }

    /// The seal of `body`, in lowercase hex.
    pub fn seal(&self, body: &[u8]) -> String {
        hex::encode(&self.mac(body).finalize().into_bytes()[..SEAL_BYTES])
    }

    /// Whether `seal` is `body`'s under this key (compared in constant time).
    pub fn verifies(&self, body: &[u8], seal: &str) -> bool {
        let Ok(tag) = hex::decode(seal) else {
            return false;
        };
        tag.len() == SEAL_BYTES && self.mac(body).verify_truncated_left(&tag).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_verifies_under_its_key_only_and_for_its_body_only() {
        let key = PeerKey::new(PeerKey::candidate()).unwrap();
        let other = PeerKey::new(PeerKey::candidate()).unwrap();
        let seal = key.seal(b"frames");
        assert_eq!(seal.len(), 2 * SEAL_BYTES);
        assert!(key.verifies(b"frames", &seal));
        assert!(
            !other.verifies(b"frames", &seal),
            "another deployment's key"
        );
        assert!(!key.verifies(b"frameS", &seal), "another body");
        for bad in ["", "zz", &seal[..30], &format!("{seal}00")] {
            assert!(!key.verifies(b"frames", bad), "{bad}");
        }
        assert!(PeerKey::new(vec![7; 31]).is_none());
    }
}
