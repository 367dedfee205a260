//! The 64-byte greeting both peers send first (RFC 23 and 37, "Version negotiation" and
//! "Security mechanisms"): a signature, the protocol version, the security mechanism, whether
//! the sender acts as the mechanism's server, and filler.
//!
//! | bytes | field |
//! |---|---|
//! | 0 | `0xFF` |
//! | 1–8 | padding (any value; ZMTP 1.0 put a length here) |
//! | 9 | `0x7F` |
//! | 10, 11 | major and minor version (3, 0 or 3, 1) |
//! | 12–31 | the mechanism's name, padded with zeros (`NULL`) |
//! | 32 | as-server (0 or 1; 0 with NULL) |
//! | 33–63 | zeros |

/// The greeting's length.
pub const GREETING_LEN: usize = 64;

/// Why a peer's greeting is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GreetingError {
    /// The first and tenth bytes are not `0xFF` and `0x7F`: not ZMTP at all.
    #[error("not a ZMTP greeting (signature bytes {0:#04x} {1:#04x})")]
    Signature(u8, u8),
    /// A ZMTP 1.0 or 2.0 peer: only 3.x is spoken here.
    #[error("ZMTP {0}.{1} is not supported (3.0 or later needed)")]
    Version(u8, u8),
    /// A security mechanism other than NULL (CURVE, PLAIN).
    #[error("security mechanism {0:?} is not supported (only NULL)")]
    Mechanism(String),
}

/// A greeting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Greeting {
    /// Major version.
    pub major: u8,
    /// Minor version.
    pub minor: u8,
    /// The mechanism's name, zero-padded.
    pub mechanism: [u8; 20],
    /// Whether the sender is the mechanism's server.
    pub as_server: bool,
}

impl Greeting {
    /// What Shepherd sends: ZMTP 3.0, the NULL mechanism, not as server. Announcing 3.0 makes
    /// a 3.1 peer speak 3.0 too, so subscriptions are the `0x01`-prefixed messages that every
    /// 3.x publisher reads (libzmq, and the `zeromq` crate, which knows no SUBSCRIBE command).
    pub fn null() -> Greeting {
        let mut mechanism = [0u8; 20];
        mechanism[..4].copy_from_slice(b"NULL");
        Greeting {
            major: 3,
            minor: 0,
            mechanism,
            as_server: false,
        }
    }

    /// Its 64 bytes.
    pub fn encode(&self) -> [u8; GREETING_LEN] {
        let mut bytes = [0u8; GREETING_LEN];
        bytes[0] = 0xff;
        bytes[9] = 0x7f;
        bytes[10] = self.major;
        bytes[11] = self.minor;
        bytes[12..32].copy_from_slice(&self.mechanism);
        bytes[32] = u8::from(self.as_server);
        bytes
    }

    /// Reads a peer's greeting: a 3.x one with the NULL mechanism.
    pub fn parse(bytes: &[u8; GREETING_LEN]) -> Result<Greeting, GreetingError> {
        if bytes[0] != 0xff || bytes[9] != 0x7f {
            return Err(GreetingError::Signature(bytes[0], bytes[9]));
        }
        let (major, minor) = (bytes[10], bytes[11]);
        if major < 3 {
            return Err(GreetingError::Version(major, minor));
        }
        let mut mechanism = [0u8; 20];
        mechanism.copy_from_slice(&bytes[12..32]);
        let greeting = Greeting {
            major,
            minor,
            mechanism,
            as_server: bytes[32] == 1,
        };
        if greeting.mechanism_name() != b"NULL" {
            return Err(GreetingError::Mechanism(
                String::from_utf8_lossy(greeting.mechanism_name()).into_owned(),
            ));
        }
        Ok(greeting)
    }

    /// The mechanism's name without its padding.
    pub fn mechanism_name(&self) -> &[u8] {
        let end = self
            .mechanism
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(self.mechanism.len());
        &self.mechanism[..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ours_round_trips_and_is_laid_out_as_the_rfc_says() {
        let bytes = Greeting::null().encode();
        assert_eq!(&bytes[..12], b"\xff\0\0\0\0\0\0\0\0\x7f\x03\x00");
        assert_eq!(&bytes[12..17], b"NULL\0");
        assert!(bytes[32..].iter().all(|b| *b == 0));
        assert_eq!(Greeting::parse(&bytes), Ok(Greeting::null()));
    }

    #[test]
    fn other_versions_and_mechanisms_are_refused() {
        let mut bytes = Greeting::null().encode();
        bytes[11] = 1;
        assert_eq!(Greeting::parse(&bytes).map(|g| g.minor), Ok(1));
        bytes[10] = 2;
        assert_eq!(Greeting::parse(&bytes), Err(GreetingError::Version(2, 1)));
        let mut curve = Greeting::null().encode();
        curve[12..17].copy_from_slice(b"CURVE");
        assert!(matches!(
            Greeting::parse(&curve),
            Err(GreetingError::Mechanism(m)) if m == "CURVE"
        ));
        let mut http = [0u8; GREETING_LEN];
        http[..4].copy_from_slice(b"GET ");
        assert!(matches!(
            Greeting::parse(&http),
            Err(GreetingError::Signature(..))
        ));
    }
}
