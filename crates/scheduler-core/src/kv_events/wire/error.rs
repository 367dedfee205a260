//! Why a payload or a frame could not be read.

use std::fmt;

/// Which of the [`DecodeLimits`](super::DecodeLimits) a payload exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// [`max_payload_bytes`](super::DecodeLimits::max_payload_bytes).
    PayloadBytes,
    /// [`max_events`](super::DecodeLimits::max_events).
    Events,
    /// [`max_items`](super::DecodeLimits::max_items).
    Items,
    /// [`max_depth`](super::DecodeLimits::max_depth).
    Depth,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::PayloadBytes => "payload size",
            Limit::Events => "event count",
            Limit::Items => "item count",
            Limit::Depth => "nesting depth",
        })
    }
}

/// Why a payload or frame could not be read.
///
/// A `field` names where the decoder was, as `Event.field` (`"BlockStored.token_ids"`) or a
/// batch field (`"ts"`, `"events"`). A malformed known event fails its whole batch; an event
/// of an unknown kind is not an error (it decodes to [`KvEvent::Unknown`]).
///
/// [`KvEvent::Unknown`]: crate::kv_events::KvEvent::Unknown
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The payload ends inside a value.
    #[error("payload truncated: {needed} more bytes needed at byte {offset}")]
    Truncated {
        /// Where the missing bytes should have started.
        offset: usize,
        /// How many bytes the value still needed (for a container, at least one per element).
        needed: usize,
    },
    /// The byte `0xc1`, which msgpack never uses, starts a value.
    #[error("byte {offset} is 0xc1, which msgpack never uses")]
    InvalidMarker {
        /// Where it is.
        offset: usize,
    },
    /// A field holds a value of the wrong msgpack type.
    #[error("{field}: expected {expected}, found {found}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// What it may hold.
        expected: &'static str,
        /// The msgpack type it held (`"nil"`, `"int"`, `"str"`, `"map"`, ...).
        found: &'static str,
    },
    /// An integer field holds a value outside its range (a negative or too large token id,
    /// block size, group index or rank; a LoRA id above `i64::MAX`).
    #[error("{field}: {value} is out of range")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// The value found.
        value: i128,
    },
    /// A string field is not valid UTF-8.
    #[error("{field}: not valid UTF-8")]
    InvalidUtf8 {
        /// The field.
        field: &'static str,
    },
    /// A required field is absent (a map without the key, an array too short to hold it).
    #[error("{field} is missing")]
    MissingField {
        /// The field.
        field: &'static str,
    },
    /// The payload goes beyond one of the [`DecodeLimits`](super::DecodeLimits).
    #[error("{limit} limit exceeded: {found} > {max}")]
    LimitExceeded {
        /// Which limit.
        limit: Limit,
        /// The limit's value.
        max: usize,
        /// What the payload declared or reached.
        found: usize,
    },
    /// The payload is neither a `[ts, events, ...]` array nor a map.
    #[error("not a KVEventBatch: found {found}")]
    UnknownBatchShape {
        /// What the payload is (`"nil"`, `"an array of 1 element"`, ...).
        found: String,
    },
    /// Bytes follow the batch.
    #[error("{count} bytes follow the batch, from byte {offset}")]
    TrailingBytes {
        /// Where the batch ended.
        offset: usize,
        /// How many bytes follow it.
        count: usize,
    },
    /// A sequence frame is not 8 bytes long.
    #[error("a sequence frame has 8 bytes, this one has {len}")]
    BadSequenceFrame {
        /// The frame's length.
        len: usize,
    },
}
