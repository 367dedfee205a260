//! The ZeroMQ frames around a payload: sequence numbers and topics.

use super::error::WireError;

/// The sequence number that ends a replay (`-1` as 8 big-endian bytes).
pub const REPLAY_END: i64 = -1;

/// Reads a sequence frame: 8 bytes, big-endian, signed.
///
/// vLLM numbers its batches from 0 (written unsigned, so a real number never reaches the
/// sign bit); [`REPLAY_END`] closes a replay.
pub fn decode_sequence(frame: &[u8]) -> Result<i64, WireError> {
    let bytes: [u8; 8] = frame
        .try_into()
        .map_err(|_| WireError::BadSequenceFrame { len: frame.len() })?;
    Ok(i64::from_be_bytes(bytes))
}

/// Writes a sequence frame (also the start sequence a replay request carries).
pub fn encode_sequence(seq: i64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// A topic of the form `kv@<source>@<model>` (the llm-d convention: the source is the
/// publishing pod's address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topic<'a> {
    /// Who published (an IP, or `ip:port`): never empty, never contains `@`.
    pub source: &'a str,
    /// The model served: never empty; may contain `/` and `@`.
    pub model: &'a str,
}

/// Parses a `kv@<source>@<model>` topic.
///
/// The source ends at the second `@`; the model is everything after it, up to a NUL byte if
/// there is one (SGLang's snapshot-enabled publishers append `\0sgl-kv-epoch=<epoch>` to
/// their topic; a model name never holds a NUL). `None` for a topic that is not UTF-8, does
/// not start with `kv@`, or has an empty source or model.
///
/// ```
/// use shepherd_scheduler_core::kv_events::wire::{Topic, parse_topic};
///
/// let topic = parse_topic(b"kv@10.0.0.7:8000@meta-llama/Llama-3.1-8B").unwrap();
/// assert_eq!(topic, Topic { source: "10.0.0.7:8000", model: "meta-llama/Llama-3.1-8B" });
/// assert_eq!(parse_topic(b"kv-events"), None);
/// ```
pub fn parse_topic(topic: &[u8]) -> Option<Topic<'_>> {
    let topic = match topic.iter().position(|&b| b == 0) {
        Some(nul) => topic.get(..nul)?,
        None => topic,
    };
    let text = std::str::from_utf8(topic).ok()?;
    let (source, model) = text.strip_prefix("kv@")?.split_once('@')?;
    if source.is_empty() || model.is_empty() {
        return None;
    }
    Some(Topic { source, model })
}

/// Formats a `kv@<source>@<model>` topic.
pub fn format_topic(source: &str, model: &str) -> String {
    format!("kv@{source}@{model}")
}
