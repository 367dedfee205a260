//! The wire format of KV-cache events: msgpack payloads and ZeroMQ frames.
//!
//! (Being written: the signatures below are the contract.)

use super::event::KvEventBatch;

/// How a batch's events are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// msgspec `array_like=True`: positional arrays, the tag first (vLLM before #42892).
    #[default]
    ArrayLike,
    /// Field-name maps with the tag under `"type"` (vLLM after #42892).
    Map,
}

/// Bounds on what one payload may make the decoder allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest payload, in bytes.
    pub max_payload_bytes: usize,
    /// Most events in one batch.
    pub max_events: usize,
    /// Most block hashes plus token ids over the whole batch.
    pub max_items: usize,
    /// Deepest nesting of arrays and maps.
    pub max_depth: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_payload_bytes: 64 * 1024 * 1024,
            max_events: 1 << 20,
            max_items: 32 * 1024 * 1024,
            max_depth: 32,
        }
    }
}

/// Why a payload or frame could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Placeholder while the codec is written.
    #[error("{0}")]
    Malformed(String),
}

/// The sequence number that ends a replay (`-1` as 8 big-endian bytes).
pub const REPLAY_END: i64 = -1;

/// Decodes one `KVEventBatch` payload.
pub fn decode_batch(_payload: &[u8], _limits: &DecodeLimits) -> Result<KvEventBatch, WireError> {
    Err(WireError::Malformed("not written yet".into()))
}

/// Encodes `batch` as vLLM's msgspec encoder would, appending to `out`.
pub fn encode_batch(_batch: &KvEventBatch, _encoding: Encoding, _out: &mut Vec<u8>) {}

/// Reads a sequence frame: 8 bytes, big-endian, signed.
pub fn decode_sequence(frame: &[u8]) -> Result<i64, WireError> {
    let bytes: [u8; 8] = frame
        .try_into()
        .map_err(|_| WireError::Malformed(format!("sequence frame of {} bytes", frame.len())))?;
    Ok(i64::from_be_bytes(bytes))
}

/// Writes a sequence frame.
pub fn encode_sequence(seq: i64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// A topic of the form `kv@<source>@<model>` (the llm-d convention: the source is the
/// publishing pod's address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topic<'a> {
    /// Who published (an IP, or `ip:port`).
    pub source: &'a str,
    /// The model served.
    pub model: &'a str,
}

/// Parses a `kv@<source>@<model>` topic.
pub fn parse_topic(_topic: &[u8]) -> Option<Topic<'_>> {
    None
}

/// Formats a `kv@<source>@<model>` topic.
pub fn format_topic(source: &str, model: &str) -> String {
    format!("kv@{source}@{model}")
}
