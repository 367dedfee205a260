//! One stream entry of the Redis backend: who wrote it (the replica's name and run) and the
//! payload, a load report ([`wire`](crate::replicas::wire)) or an index delta
//! ([`index_wire`](crate::replicas::index_wire)), read without ever panicking.
//!
//! Fields: `r` the writer's name, `e` its epoch (the time its run started, in nanoseconds,
//! decimal), `p` the payload's bytes. Anything else in an entry is ignored; an entry
//! without the three is refused.
//!
//! ```
//! use shepherd_runtime::replicas::redis::entry::{Entry, FIELD_EPOCH, FIELD_NAME, FIELD_PAYLOAD};
//!
//! let fields = [
//!     (FIELD_NAME, b"epp-0/1".to_vec()),
//!     (FIELD_EPOCH, b"1765000000000000000".to_vec()),
//!     (FIELD_PAYLOAD, vec![1, 2, 3]),
//! ];
//! let entry = Entry::from_fields(fields.iter().map(|(k, v)| (*k, v.as_slice()))).unwrap();
//! assert_eq!((entry.name.as_str(), entry.epoch, entry.payload.as_slice()), ("epp-0/1", 1765000000000000000, &[1u8, 2, 3][..]));
//! assert!(Entry::from_fields([(FIELD_NAME, &b"x"[..])]).is_err());
//! ```

/// The field holding the writer's name.
pub const FIELD_NAME: &str = "r";
/// The field holding the writer's epoch.
pub const FIELD_EPOCH: &str = "e";
/// The field holding the payload.
pub const FIELD_PAYLOAD: &str = "p";
/// Longest name taken from an entry, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

/// A decoded stream entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The writer's name.
    pub name: String,
    /// The writer's run.
    pub epoch: u64,
    /// The payload.
    pub payload: Vec<u8>,
}

/// Why a stream entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// A field is missing.
    #[error("stream entry without its `{0}` field")]
    Missing(&'static str),
    /// A field does not hold what it should.
    #[error("stream entry with a bad `{0}` field")]
    Bad(&'static str),
}

impl Entry {
    /// Reads an entry from its fields (name, value).
    ///
    /// # Errors
    ///
    /// When the name, epoch or payload is missing, the name is empty, longer than
    /// [`MAX_NAME_BYTES`] or not UTF-8, or the epoch is not a number.
    pub fn from_fields<'a>(
        fields: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<Entry, EntryError> {
        let (mut name, mut epoch, mut payload) = (None, None, None);
        for (field, value) in fields {
            match field {
                FIELD_NAME => name = Some(value),
                FIELD_EPOCH => epoch = Some(value),
                FIELD_PAYLOAD => payload = Some(value),
                _ => {}
            }
        }
        let name = name.ok_or(EntryError::Missing(FIELD_NAME))?;
        if name.is_empty() || name.len() > MAX_NAME_BYTES {
            return Err(EntryError::Bad(FIELD_NAME));
        }
        let name = std::str::from_utf8(name).map_err(|_| EntryError::Bad(FIELD_NAME))?;
        let epoch = epoch.ok_or(EntryError::Missing(FIELD_EPOCH))?;
        let epoch = std::str::from_utf8(epoch)
            .ok()
            .and_then(|e| e.parse::<u64>().ok())
            .ok_or(EntryError::Bad(FIELD_EPOCH))?;
        let payload = payload.ok_or(EntryError::Missing(FIELD_PAYLOAD))?;
        Ok(Entry {
            name: name.to_owned(),
            epoch,
            payload: payload.to_vec(),
        })
    }
}

/// A stream entry id, `milliseconds-sequence`, ordered as Redis orders them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// The milliseconds part.
    pub ms: u64,
    /// The sequence part.
    pub seq: u64,
}

impl StreamId {
    /// Parses `ms-seq` (or `ms`), `None` for anything else.
    ///
    /// ```
    /// use shepherd_runtime::replicas::redis::entry::StreamId;
    ///
    /// let id = StreamId::parse("1765000000000-3").unwrap();
    /// assert!(id > StreamId::parse("1765000000000-2").unwrap());
    /// assert!(id < StreamId::parse("1765000000001").unwrap());
    /// assert_eq!(id.to_string(), "1765000000000-3");
    /// assert!(StreamId::parse("x-1").is_none());
    /// ```
    pub fn parse(text: &str) -> Option<StreamId> {
        let (ms, seq) = text.split_once('-').unwrap_or((text, "0"));
        Some(StreamId {
            ms: ms.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}
