//! The authenticated frame around every datagram of the replica exchange: who sent it, in
//! which run, its sequence number, its payload (a [`wire`](super::wire) load report or an
//! [`index_wire`](super::index_wire) delta), and a MAC over all of it. Read without ever
//! panicking; the MAC is checked (in constant time) before any field is believed.
//!
//! Layout (integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `SHP2` |
//! | 1 | kind: 1 a load report, 2 an index delta |
//! | 1 | the sender's address family: 4 or 6 |
//! | 4 or 16 | the sender's IP: the address its peers list it under (`replicas.advertise`, default `listen`) |
//! | 2 | the sender's port |
//! | 8 | epoch: when the sender started (nanoseconds since the UNIX epoch); a later epoch starts a new replay window |
//! | 8 | sequence number of the datagram within its epoch, from 1 |
//! | 8 | when it was sealed (milliseconds since the UNIX epoch): a receiver refuses one far from its own clock |
//! | n | payload |
//! | 16 | MAC: the first 16 bytes of the keyed BLAKE3 hash of every byte before it |
//!
//! A datagram is at most [`MAX_DATAGRAM`] bytes; 52 of them are the frame (IPv4 sender).
//!
//! ```
//! use shepherd_runtime::replicas::frame::{FrameError, Kind, Sealer, open};
//! use shepherd_runtime::replicas::key::MacKey;
//!
//! let key = MacKey::derive("a shared secret of the replicas");
//! let mut sealer = Sealer::new(key.clone(), "10.0.0.5:9400".parse().unwrap(), 1);
//! let datagram = sealer.seal(Kind::Report, b"payload");
//! let (header, payload) = open(&key, &datagram).unwrap();
//! assert_eq!((header.kind, header.sender.port(), header.seq), (Kind::Report, 9400, 1));
//! assert_eq!(payload, b"payload");
//! // Without the key, or with one byte changed, it is refused.
//! assert_eq!(open(&MacKey::derive("a guess"), &datagram), Err(FrameError::BadMac));
//! let mut tampered = datagram.clone();
//! tampered[30] ^= 1;
//! assert_eq!(open(&key, &tampered), Err(FrameError::BadMac));
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::key::MacKey;

/// The magic of a frame.
pub const MAGIC: &[u8; 4] = b"SHP2";
/// Largest datagram sent or accepted: below the common 1,500-byte MTU's payload, so nothing
/// is fragmented (a large report is split into parts).
pub const MAX_DATAGRAM: usize = 1_400;
/// Bytes of the MAC.
pub const TAG_BYTES: usize = 16;
/// Bytes of the frame around the payload with an IPv4 sender (the shortest frame).
pub const MIN_FRAME: usize = 4 + 1 + 1 + 4 + 2 + 8 + 8 + 8 + TAG_BYTES;

/// What a datagram carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A load report ([`wire`](super::wire)).
    Report,
    /// An index delta ([`index_wire`](super::index_wire)).
    IndexDelta,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Report => 1,
            Kind::IndexDelta => 2,
        }
    }
}

/// The authenticated fields of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// What the payload is.
    pub kind: Kind,
    /// The sender: the address its peers list it under.
    pub sender: SocketAddr,
    /// The sender's run: when it started, in nanoseconds since the UNIX epoch.
    pub epoch: u64,
    /// The datagram's sequence number in that run.
    pub seq: u64,
    /// When it was sealed, in milliseconds since the UNIX epoch (the sender's clock).
    pub sent_ms: u64,
}

/// Now, in milliseconds since the UNIX epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Why a datagram was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than the shortest frame.
    #[error("truncated datagram ({0} bytes)")]
    Truncated(usize),
    /// Longer than [`MAX_DATAGRAM`].
    #[error("oversized datagram ({0} bytes)")]
    Oversized(usize),
    /// Not a Shepherd replica frame (another protocol, or another version).
    #[error("not a Shepherd replica datagram")]
    BadMagic,
    /// The MAC does not match: another key, or changed on the way.
    #[error("bad MAC")]
    BadMac,
    /// Authenticated, yet its header does not parse (a sender of another version).
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
}

/// Bytes of the frame around the payload for `sender`.
pub fn overhead(sender: &SocketAddr) -> usize {
    match sender {
        SocketAddr::V4(_) => MIN_FRAME,
        SocketAddr::V6(_) => MIN_FRAME + 12,
    }
}

/// Seals payloads for one sender and run, numbering them.
#[derive(Debug, Clone)]
pub struct Sealer {
    key: MacKey,
    sender: SocketAddr,
    epoch: u64,
    seq: u64,
}

impl Sealer {
    /// A sealer for `sender` in run `epoch`; its first datagram is number 1.
    pub fn new(key: MacKey, sender: SocketAddr, epoch: u64) -> Sealer {
        Sealer {
            key,
            sender,
            epoch,
            seq: 0,
        }
    }

    /// The room left for a payload in a datagram of `max_bytes`.
    pub fn payload_room(&self, max_bytes: usize) -> usize {
        max_bytes.saturating_sub(overhead(&self.sender))
    }

    /// Seals `payload` as the next datagram, stamped with the time now.
    pub fn seal(&mut self, kind: Kind, payload: &[u8]) -> Vec<u8> {
        self.seq += 1;
        let header = Header {
            kind,
            sender: self.sender,
            epoch: self.epoch,
            seq: self.seq,
            sent_ms: now_ms(),
        };
        seal(&self.key, &header, payload)
    }
}

/// Seals `payload` under `header` with `key` (a [`Sealer`] numbers the datagrams for you).
pub fn seal(key: &MacKey, header: &Header, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(overhead(&header.sender) + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.push(header.kind.byte());
    match header.sender.ip() {
        IpAddr::V4(ip) => {
            bytes.push(4);
            bytes.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            bytes.push(6);
            bytes.extend_from_slice(&ip.octets());
        }
    }
    bytes.extend_from_slice(&header.sender.port().to_le_bytes());
    bytes.extend_from_slice(&header.epoch.to_le_bytes());
    bytes.extend_from_slice(&header.seq.to_le_bytes());
    bytes.extend_from_slice(&header.sent_ms.to_le_bytes());
    bytes.extend_from_slice(payload);
    let tag = key.tag(&bytes);
    bytes.extend_from_slice(&tag);
    bytes
}

/// Checks a datagram's size, magic and MAC, then reads its header; returns the header and
/// the payload.
pub fn open<'a>(key: &MacKey, bytes: &'a [u8]) -> Result<(Header, &'a [u8]), FrameError> {
    if bytes.len() > MAX_DATAGRAM {
        return Err(FrameError::Oversized(bytes.len()));
    }
    if bytes.len() < MIN_FRAME {
        return Err(FrameError::Truncated(bytes.len()));
    }
    if &bytes[..4] != MAGIC {
        return Err(FrameError::BadMagic);
    }
    let (signed, tag) = bytes.split_at(bytes.len() - TAG_BYTES);
    let mut expected = [0u8; TAG_BYTES];
    expected.copy_from_slice(tag);
    if !key.verify(signed, &expected) {
        return Err(FrameError::BadMac);
    }
    // Authenticated from here on: only a key holder's bugs reach the errors below.
    let kind = match signed[4] {
        1 => Kind::Report,
        2 => Kind::IndexDelta,
        _ => return Err(FrameError::Malformed("an unknown kind")),
    };
    let (ip, rest) = match signed[5] {
        4 => {
            let (ip, rest) = split::<4>(&signed[6..])?;
            (IpAddr::V4(Ipv4Addr::from(ip)), rest)
        }
        6 => {
            let (ip, rest) = split::<16>(&signed[6..])?;
            (IpAddr::V6(Ipv6Addr::from(ip)), rest)
        }
        _ => return Err(FrameError::Malformed("an unknown address family")),
    };
    let (port, rest) = split::<2>(rest)?;
    let (epoch, rest) = split::<8>(rest)?;
    let (seq, rest) = split::<8>(rest)?;
    let (sent_ms, payload) = split::<8>(rest)?;
    let header = Header {
        kind,
        sender: SocketAddr::new(ip, u16::from_le_bytes(port)),
        epoch: u64::from_le_bytes(epoch),
        seq: u64::from_le_bytes(seq),
        sent_ms: u64::from_le_bytes(sent_ms),
    };
    Ok((header, payload))
}

/// The first `N` bytes of `bytes` and the rest.
fn split<const N: usize>(bytes: &[u8]) -> Result<([u8; N], &[u8]), FrameError> {
    if bytes.len() < N {
        return Err(FrameError::Malformed("a header cut short"));
    }
    let (head, rest) = bytes.split_at(N);
    let mut out = [0u8; N];
    out.copy_from_slice(head);
    Ok((out, rest))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use proptest::prelude::*;

    use super::*;

    fn key() -> MacKey {
        MacKey::derive("the replicas' shared secret")
    }

    fn sender(v6: bool, port: u16) -> SocketAddr {
        if v6 {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port)
        } else {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5)), port)
        }
    }

    #[test]
    fn sizes_and_magic_are_checked_before_the_mac() {
        let mut sealer = Sealer::new(key(), sender(false, 9400), 7);
        let good = sealer.seal(Kind::Report, b"x");
        assert_eq!(good.len(), MIN_FRAME + 1);
        for cut in 0..MIN_FRAME {
            assert_eq!(open(&key(), &good[..cut]), Err(FrameError::Truncated(cut)));
        }
        let big = sealer.seal(Kind::IndexDelta, &[0u8; MAX_DATAGRAM]);
        assert_eq!(open(&key(), &big), Err(FrameError::Oversized(big.len())));
        let mut foreign = good.clone();
        foreign[3] = b'1';
        assert_eq!(open(&key(), &foreign), Err(FrameError::BadMagic));
        // Cut anywhere past the shortest frame: the MAC no longer matches.
        for cut in MIN_FRAME..good.len() {
            assert_eq!(open(&key(), &good[..cut]), Err(FrameError::BadMac));
        }
        let (header, _) = open(&key(), &good).unwrap();
        assert_eq!((header.epoch, header.seq), (7, 1));
    }

    #[test]
    fn an_authenticated_header_of_another_shape_is_malformed() {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&[9, 4]);
        bytes.extend_from_slice(&[0u8; 30]);
        let tag = key().tag(&bytes);
        bytes.extend_from_slice(&tag);
        assert!(matches!(
            open(&key(), &bytes),
            Err(FrameError::Malformed(_))
        ));
        // An IPv6 family in a frame too short to hold the address.
        let mut short = MAGIC.to_vec();
        short.extend_from_slice(&[1, 6]);
        short.extend_from_slice(&[0u8; 30]);
        let tag = key().tag(&short);
        short.extend_from_slice(&tag);
        assert!(matches!(
            open(&key(), &short),
            Err(FrameError::Malformed(_))
        ));
    }

    proptest! {
        #[test]
        fn frames_round_trip(
            v6: bool,
            port: u16,
            epoch: u64,
            seq: u64,
            sent_ms: u64,
            delta: bool,
            payload in proptest::collection::vec(any::<u8>(), 0..1300),
        ) {
            let header = Header {
                kind: if delta { Kind::IndexDelta } else { Kind::Report },
                sender: sender(v6, port),
                epoch,
                seq,
                sent_ms,
            };
            let bytes = seal(&key(), &header, &payload);
            prop_assert_eq!(bytes.len(), overhead(&header.sender) + payload.len());
            let (back, body) = open(&key(), &bytes).unwrap();
            prop_assert_eq!(back, header);
            prop_assert_eq!(body, payload.as_slice());
        }

        #[test]
        fn tampering_with_any_byte_fails_the_mac(
            v6: bool,
            payload in proptest::collection::vec(any::<u8>(), 0..200),
            at: proptest::sample::Index,
            flip in 1u8..=255,
        ) {
            let mut sealer = Sealer::new(key(), sender(v6, 9400), 3);
            let mut bytes = sealer.seal(Kind::IndexDelta, &payload);
            let at = at.index(bytes.len());
            bytes[at] ^= flip;
            let refused = open(&key(), &bytes);
            // The magic is checked first; every other byte is covered by the MAC.
            if at < 4 {
                prop_assert_eq!(refused, Err(FrameError::BadMagic));
            } else {
                prop_assert_eq!(refused, Err(FrameError::BadMac));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic_nor_pass(bytes in proptest::collection::vec(any::<u8>(), 0..1600)) {
            prop_assert!(open(&key(), &bytes).is_err());
            let mut with_magic = MAGIC.to_vec();
            with_magic.extend(&bytes);
            prop_assert!(open(&key(), &with_magic).is_err());
        }

        #[test]
        fn another_key_never_opens(secret in "[a-z]{16,24}", payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assume!(secret != "the replicas' shared secret");
            let mut sealer = Sealer::new(MacKey::derive(&secret), sender(false, 1), 1);
            let bytes = sealer.seal(Kind::Report, &payload);
            prop_assert_eq!(open(&key(), &bytes), Err(FrameError::BadMac));
        }
    }
}
