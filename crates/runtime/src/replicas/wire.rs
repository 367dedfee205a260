//! The load report one replica sends its peers: a small datagram, read without ever panicking.
//!
//! The payload of a [`frame`](super::frame) of kind [`Report`](super::frame::Kind::Report)
//! (the frame carries the sender, its run and the datagram's sequence, and authenticates it
//! all). Layout (integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 8 | sequence of the report (one per interval; all its parts share it) |
//! | 2 | part of the report, 2: parts in all (a report too large for one datagram is split) |
//! | 2 | entries in this part |
//! | per entry | the endpoint's address (1 byte of length, UTF-8 `ip:port`), requests (4), prompt tokens (8), pending prefill tokens (8) |
//!
//! Only endpoints with something in flight are listed: an endpoint missing from a report has
//! nothing of that sender's in flight.
//!
//! ```
//! use shepherd_runtime::replicas::wire::{Entry, Report, decode, encode};
//! use shepherd_scheduler_core::endpoint::PeerLoad;
//!
//! let report = Report {
//!     seq: 42,
//!     part: 0,
//!     parts: 1,
//!     entries: vec![Entry {
//!         address: "10.0.0.1:8000".into(),
//!         load: PeerLoad { requests: 3, prompt_tokens: 9_000, prefill_tokens: 2_000 },
//!     }],
//! };
//! let mut payloads = Vec::new();
//! encode(report.seq, &report.entries, 1356, &mut payloads);
//! assert_eq!(payloads.len(), 1);
//! assert_eq!(decode(&payloads[0]).unwrap(), report);
//! assert!(decode(&payloads[0][..10]).is_err());
//! ```

use shepherd_scheduler_core::endpoint::PeerLoad;

const HEADER: usize = 8 + 2 + 2 + 2;
/// Bytes of an entry besides its address.
const ENTRY_FIXED: usize = 1 + 4 + 8 + 8;

/// One endpoint's load in a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The endpoint's address, as the pool names it.
    pub address: String,
    /// What the sender has in flight there.
    pub load: PeerLoad,
}

/// One decoded payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The report's sequence number.
    pub seq: u64,
    /// This datagram's part of the report.
    pub part: u16,
    /// Parts in the report.
    pub parts: u16,
    /// The entries in this part.
    pub entries: Vec<Entry>,
}

/// Why a payload is not a report (or an index delta).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Too short, or an entry runs past the end.
    #[error("truncated report ({0} bytes)")]
    Truncated(usize),
    /// Bytes after the last entry, a part beyond the count, or an address that is not UTF-8.
    #[error("malformed report: {0}")]
    Malformed(&'static str),
}

/// Encodes one report of `entries` into payloads of at most `max_bytes` each (split into
/// parts when needed), appended to `out`. Addresses longer than 255 bytes are left out.
pub fn encode(seq: u64, entries: &[Entry], max_bytes: usize, out: &mut Vec<Vec<u8>>) {
    let max_bytes = max_bytes.max(HEADER + ENTRY_FIXED + 255);
    let fits: Vec<&Entry> = entries.iter().filter(|e| e.address.len() <= 255).collect();
    let mut chunks: Vec<Vec<&Entry>> = Vec::new();
    let mut current: Vec<&Entry> = Vec::new();
    let mut size = HEADER;
    for entry in fits {
        let need = ENTRY_FIXED + entry.address.len();
        if size + need > max_bytes || current.len() == usize::from(u16::MAX) {
            chunks.push(std::mem::take(&mut current));
            size = HEADER;
        }
        size += need;
        current.push(entry);
    }
    chunks.push(current);
    let parts = u16::try_from(chunks.len()).unwrap_or(u16::MAX);
    for (part, chunk) in chunks.iter().enumerate().take(usize::from(parts)) {
        let mut bytes = Vec::with_capacity(HEADER + chunk.len() * (ENTRY_FIXED + 21));
        bytes.extend_from_slice(&seq.to_le_bytes());
        bytes.extend_from_slice(&(part as u16).to_le_bytes());
        bytes.extend_from_slice(&parts.to_le_bytes());
        bytes.extend_from_slice(&(chunk.len() as u16).to_le_bytes());
        for entry in chunk {
            bytes.push(entry.address.len() as u8);
            bytes.extend_from_slice(entry.address.as_bytes());
            let requests = u32::try_from(entry.load.requests).unwrap_or(u32::MAX);
            bytes.extend_from_slice(&requests.to_le_bytes());
            bytes.extend_from_slice(&entry.load.prompt_tokens.to_le_bytes());
            bytes.extend_from_slice(&entry.load.prefill_tokens.to_le_bytes());
        }
        out.push(bytes);
    }
}

/// A cursor over a datagram that fails, never panics, past its end.
pub(super) struct Reader<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) at: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or(WireError::Truncated(self.bytes.len()))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
}

/// Decodes one payload.
pub fn decode(bytes: &[u8]) -> Result<Report, WireError> {
    if bytes.len() < HEADER {
        return Err(WireError::Truncated(bytes.len()));
    }
    let mut r = Reader { bytes, at: 0 };
    let seq = u64::from_le_bytes(r.array()?);
    let part = u16::from_le_bytes(r.array()?);
    let parts = u16::from_le_bytes(r.array()?);
    if part >= parts {
        return Err(WireError::Malformed("part beyond the part count"));
    }
    let count = u16::from_le_bytes(r.array()?);
    // Every entry takes at least ENTRY_FIXED bytes: a count the datagram cannot hold is refused
    // before anything is allocated for it.
    if usize::from(count) * ENTRY_FIXED > bytes.len() - HEADER {
        return Err(WireError::Truncated(bytes.len()));
    }
    let mut entries = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let len = usize::from(r.take(1)?[0]);
        let address = std::str::from_utf8(r.take(len)?)
            .map_err(|_| WireError::Malformed("an address that is not UTF-8"))?
            .to_string();
        let requests = u64::from(u32::from_le_bytes(r.array()?));
        let prompt_tokens = u64::from_le_bytes(r.array()?);
        let prefill_tokens = u64::from_le_bytes(r.array()?);
        entries.push(Entry {
            address,
            load: PeerLoad {
                requests,
                prompt_tokens,
                prefill_tokens,
            },
        });
    }
    if r.at != bytes.len() {
        return Err(WireError::Malformed("bytes after the last entry"));
    }
    Ok(Report {
        seq,
        part,
        parts,
        entries,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use proptest::prelude::*;

    use super::*;

    fn entry(i: u64) -> Entry {
        Entry {
            address: format!("10.0.{}.{}:8000", i / 250, i % 250),
            load: PeerLoad {
                requests: i,
                prompt_tokens: i * 1000,
                prefill_tokens: i * 7,
            },
        }
    }

    #[test]
    fn large_reports_split_into_parts_that_fit() {
        let entries: Vec<Entry> = (0..2000).map(entry).collect();
        let mut datagrams = Vec::new();
        encode(2, &entries, 1400, &mut datagrams);
        assert!(datagrams.len() > 1);
        assert!(datagrams.iter().all(|d| d.len() <= 1400));
        let mut back = Vec::new();
        for (i, d) in datagrams.iter().enumerate() {
            let r = decode(d).unwrap();
            assert_eq!((r.part as usize, r.parts as usize), (i, datagrams.len()));
            back.extend(r.entries);
        }
        assert_eq!(back, entries);
        // An empty report is one datagram with no entries.
        let mut empty = Vec::new();
        encode(3, &[], 1400, &mut empty);
        assert_eq!(decode(&empty[0]).unwrap().entries, vec![]);
    }

    #[test]
    fn foreign_and_broken_datagrams_are_refused() {
        let mut datagrams = Vec::new();
        encode(2, &[entry(3)], 1400, &mut datagrams);
        let good = &datagrams[0];
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(decode(&trailing).is_err());
        let mut beyond = good.clone();
        beyond[8] = 5;
        assert!(decode(&beyond).is_err(), "part 5 of 1");
    }

    proptest! {
        #[test]
        fn reports_round_trip(n in 0usize..40, seq: u64) {
            let entries: Vec<Entry> = (0..n as u64).map(entry).collect();
            let mut datagrams = Vec::new();
            encode(seq, &entries, 512, &mut datagrams);
            let mut back = Vec::new();
            for d in &datagrams {
                let r = decode(d).unwrap();
                prop_assert_eq!(r.seq, seq);
                back.extend(r.entries);
            }
            prop_assert_eq!(back, entries);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = decode(&bytes);
        }
    }
}
