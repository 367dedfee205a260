//! The index delta one replica sends its peers: the block keys its picks recorded in one
//! approximate prefix index since the last interval, per endpoint. Read without ever panicking.
//!
//! The payload of a [`frame`](super::frame) of kind
//! [`IndexDelta`](super::frame::Kind::IndexDelta). Layout (integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 1 + n | the index's name (the plugin that owns it), 1 byte of length, UTF-8 |
//! | 4 | tokens per block of that index |
//! | 2 | entries |
//! | per entry | the endpoint's address (1 byte of length, UTF-8 `ip:port`), keys (2), each key (8) |
//!
//! A delta is a set of inserts: applying it twice, or out of order with another, records the
//! same blocks; a lost one leaves the peer with what it would have had without the exchange.
//!
//! ```
//! use shepherd_runtime::replicas::index_wire::{Delta, decode, encode};
//! use shepherd_scheduler_core::prefix::BlockKey;
//!
//! let keys: Vec<BlockKey> = (1..=300).map(BlockKey::from_raw).collect();
//! let inserts = vec![("10.0.0.1:8000".to_string(), keys.clone())];
//! let mut datagrams = Vec::new();
//! encode("prefix-cache-scorer", 64, &inserts, 1400, &mut datagrams);
//! assert!(datagrams.len() > 1 && datagrams.iter().all(|d| d.len() <= 1400));
//! let mut back = Vec::new();
//! for datagram in &datagrams {
//!     let delta: Delta = decode(datagram).unwrap();
//!     assert_eq!((delta.index.as_str(), delta.block_tokens), ("prefix-cache-scorer", 64));
//!     for (address, part) in delta.inserts {
//!         assert_eq!(address, "10.0.0.1:8000");
//!         back.extend(part);
//!     }
//! }
//! assert_eq!(back, keys);
//! ```

use shepherd_scheduler_core::prefix::BlockKey;

use super::wire::{Reader, WireError};

const FIXED: usize = 1 + 4 + 2;
const ENTRY_FIXED: usize = 1 + 2;

/// One decoded payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    /// The index's name.
    pub index: String,
    /// Tokens per block of the sender's index (a peer whose index differs ignores the delta).
    pub block_tokens: u32,
    /// Keys per endpoint address.
    pub inserts: Vec<(String, Vec<BlockKey>)>,
}

/// Encodes `inserts` of the index `index` into payloads of at most `max_bytes` each,
/// appended to `out` (an endpoint's keys spread over several when they do not fit). Names and
/// addresses longer than 255 bytes are left out; nothing is sent for no keys.
pub fn encode(
    index: &str,
    block_tokens: u32,
    inserts: &[(String, Vec<BlockKey>)],
    max_bytes: usize,
    out: &mut Vec<Vec<u8>>,
) {
    if index.len() > 255 {
        return;
    }
    let header = FIXED + index.len();
    let max_bytes = max_bytes.max(header + ENTRY_FIXED + 255 + 8);
    let start = |out: &mut Vec<Vec<u8>>| {
        let mut bytes = Vec::with_capacity(max_bytes);
        bytes.push(index.len() as u8);
        bytes.extend_from_slice(index.as_bytes());
        bytes.extend_from_slice(&block_tokens.to_le_bytes());
        bytes.extend_from_slice(&0u16.to_le_bytes());
        out.push(bytes);
    };
    let first = out.len();
    for (address, keys) in inserts.iter().filter(|(a, _)| a.len() <= 255) {
        let mut rest = keys.as_slice();
        while !rest.is_empty() {
            let room = out
                .last()
                .filter(|_| out.len() > first)
                .map_or(0, |d| max_bytes.saturating_sub(d.len()));
            let entry_room = room.saturating_sub(ENTRY_FIXED + address.len()) / 8;
            if entry_room == 0 {
                start(out);
                continue;
            }
            let n = entry_room.min(rest.len()).min(usize::from(u16::MAX));
            let Some(datagram) = out.last_mut() else {
                return;
            };
            let count_at = header - 2;
            let entries = u16::from_le_bytes([datagram[count_at], datagram[count_at + 1]]);
            if entries == u16::MAX {
                start(out);
                continue;
            }
            datagram[count_at..count_at + 2].copy_from_slice(&(entries + 1).to_le_bytes());
            datagram.push(address.len() as u8);
            datagram.extend_from_slice(address.as_bytes());
            datagram.extend_from_slice(&(n as u16).to_le_bytes());
            for key in &rest[..n] {
                datagram.extend_from_slice(&key.get().to_le_bytes());
            }
            rest = &rest[n..];
        }
    }
}

/// Decodes one payload.
pub fn decode(bytes: &[u8]) -> Result<Delta, WireError> {
    let mut r = Reader { bytes, at: 0 };
    let len = usize::from(r.take(1)?[0]);
    let index = std::str::from_utf8(r.take(len)?)
        .map_err(|_| WireError::Malformed("an index name that is not UTF-8"))?
        .to_string();
    let block_tokens = u32::from_le_bytes(r.array()?);
    let count = u16::from_le_bytes(r.array()?);
    if usize::from(count) * ENTRY_FIXED > bytes.len() - r.at {
        return Err(WireError::Truncated(bytes.len()));
    }
    let mut inserts = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let len = usize::from(r.take(1)?[0]);
        let address = std::str::from_utf8(r.take(len)?)
            .map_err(|_| WireError::Malformed("an address that is not UTF-8"))?
            .to_string();
        let keys = usize::from(u16::from_le_bytes(r.array()?));
        let raw = r.take(keys * 8)?;
        let keys = raw
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                BlockKey::from_raw(u64::from_le_bytes(b))
            })
            .collect();
        inserts.push((address, keys));
    }
    if r.at != bytes.len() {
        return Err(WireError::Malformed("bytes after the last entry"));
    }
    Ok(Delta {
        index,
        block_tokens,
        inserts,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use proptest::prelude::*;

    use super::*;

    fn inserts(endpoints: usize, keys: usize) -> Vec<(String, Vec<BlockKey>)> {
        (0..endpoints)
            .map(|e| {
                (
                    format!("10.0.0.{e}:8000"),
                    (0..keys)
                        .map(|k| BlockKey::from_raw((e * 1_000_003 + k + 1) as u64))
                        .collect(),
                )
            })
            .collect()
    }

    fn merged(datagrams: &[Vec<u8>]) -> Vec<(String, Vec<BlockKey>)> {
        let mut out: Vec<(String, Vec<BlockKey>)> = Vec::new();
        for d in datagrams {
            for (address, keys) in decode(d).unwrap().inserts {
                match out.iter_mut().find(|(a, _)| *a == address) {
                    Some((_, known)) => known.extend(keys),
                    None => out.push((address, keys)),
                }
            }
        }
        out
    }

    #[test]
    fn nothing_to_send_sends_nothing() {
        let mut datagrams = Vec::new();
        encode("p", 64, &[], 1400, &mut datagrams);
        encode(
            "p",
            64,
            &[("10.0.0.1:8000".into(), vec![])],
            1400,
            &mut datagrams,
        );
        assert!(datagrams.is_empty());
    }

    #[test]
    fn foreign_and_broken_datagrams_are_refused() {
        let mut datagrams = Vec::new();
        encode(
            "prefix-cache-scorer",
            64,
            &inserts(2, 3),
            1400,
            &mut datagrams,
        );
        let good = &datagrams[0];
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(decode(&trailing).is_err());
        let mut long_name = good.clone();
        long_name[0] = 200;
        assert!(decode(&long_name).is_err());
    }

    proptest! {
        #[test]
        fn deltas_round_trip_in_datagrams_that_fit(
            endpoints in 0usize..6,
            keys in 0usize..400,
            max in 64usize..2000,
        ) {
            let sent = inserts(endpoints, keys);
            let mut datagrams = Vec::new();
            encode("approx-prefix-cache-producer", 64, &sent, max, &mut datagrams);
            let floor = FIXED + "approx-prefix-cache-producer".len() + ENTRY_FIXED + 255 + 8;
            prop_assert!(datagrams.iter().all(|d| d.len() <= max.max(floor)));
            let expected: Vec<_> = sent.into_iter().filter(|(_, k)| !k.is_empty()).collect();
            prop_assert_eq!(merged(&datagrams), expected);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = decode(&bytes);
        }
    }
}
