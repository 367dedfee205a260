//! The key the replicas authenticate their datagrams with.
//!
//! The operator's secret (`replicas.key`: any length, any text) is turned into a 32-byte
//! BLAKE3 key with BLAKE3's key derivation under a context string of its own, so the same
//! secret used elsewhere yields an unrelated key here. The key is never shown: its `Debug`
//! prints `<redacted>`.
//!
//! ```
//! use shepherd_runtime::replicas::key::MacKey;
//!
//! let key = MacKey::derive("a shared secret of the replicas");
//! assert_eq!(format!("{key:?}"), "MacKey(<redacted>)");
//! assert_ne!(key, MacKey::derive("another secret"));
//! assert_ne!(key, MacKey::insecure());
//! ```

use std::fmt;

/// BLAKE3's key-derivation context: fixed, unique to this use.
const CONTEXT: &str = "shepherd 2026 replica exchange datagram MAC v2";

/// The shortest secret accepted in `replicas.key`, in bytes.
pub const MIN_SECRET_BYTES: usize = 16;

/// A 32-byte keyed-BLAKE3 key.
#[derive(Clone, PartialEq, Eq)]
pub struct MacKey([u8; 32]);

impl MacKey {
    /// The key derived from the shared secret `secret`.
    pub fn derive(secret: &str) -> MacKey {
        MacKey(blake3::derive_key(CONTEXT, secret.as_bytes()))
    }

    /// The key of `insecure: true`: derived from an empty secret, so known to anyone. The
    /// datagrams still carry a sender, an epoch and a sequence (bounded tables, replays
    /// refused), but anyone can forge them.
    pub fn insecure() -> MacKey {
        MacKey::derive("")
    }

    /// The MAC of `bytes`: the first 16 bytes of their keyed BLAKE3 hash.
    pub(crate) fn tag(&self, bytes: &[u8]) -> [u8; 16] {
        let hash = blake3::keyed_hash(&self.0, bytes);
        let mut tag = [0u8; 16];
        tag.copy_from_slice(&hash.as_bytes()[..16]);
        tag
    }

    /// Whether `tag` is the MAC of `bytes`, compared in constant time.
    pub(crate) fn verify(&self, bytes: &[u8], tag: &[u8; 16]) -> bool {
        constant_time_eq::constant_time_eq_16(&self.tag(bytes), tag)
    }
}

impl fmt::Debug for MacKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MacKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_depend_on_key_and_bytes_and_verify_only_themselves() {
        let key = MacKey::derive("0123456789abcdef");
        let tag = key.tag(b"hello");
        assert!(key.verify(b"hello", &tag));
        assert!(!key.verify(b"hellp", &tag));
        assert!(!MacKey::derive("0123456789abcdeg").verify(b"hello", &tag));
        let mut flipped = tag;
        flipped[15] ^= 1;
        assert!(!key.verify(b"hello", &flipped));
    }
}
