//! The wire format of KV-cache events: msgpack payloads and the ZeroMQ frames they travel in.
//!
//! # Frames
//!
//! A model server publishes on a ZeroMQ PUB socket one multipart message per engine step:
//! `[topic, sequence, payload]`. The topic is the publisher's configured string (llm-d's
//! convention is `kv@<source>@<model>`, read by [`parse_topic`]); the sequence is 8 bytes,
//! big-endian, counting from 0 ([`decode_sequence`]); the payload is one `KVEventBatch`
//! ([`decode_batch`]). A subscriber that missed sequences asks the publisher's ROUTER socket
//! for a replay by sending the first sequence it wants ([`encode_sequence`]); the server
//! answers every batch it still holds from there as `[sequence, payload]`, then
//! `[REPLAY_END, empty]` ([`REPLAY_END`] is `-1`). vLLM after PR #45177 puts the topic in
//! front of each reply too (`[topic, sequence, payload]`), so a replay client should take two
//! or three frames.
//!
//! # Payloads
//!
//! The payload is msgspec's msgpack encoding of
//! `KVEventBatch(ts: float, events: list[BlockStored | BlockRemoved | AllBlocksCleared],
//! data_parallel_rank: int | None = None)`. Over time it has taken three shapes
//! ([`Encoding`]):
//!
//! | shape | batch | events | who |
//! |---|---|---|---|
//! | [`Encoding::ArrayLike`] | `[ts, [events], rank]` (the oldest: `[ts, [events]]`) | `["BlockStored", hashes, parent, ...]` | vLLM before PR #42892; SGLang before PR #37482 |
//! | [`Encoding::MapEvents`] | `[ts, [events], rank]` | `{"type": "BlockStored", "block_hashes": ..., ...}` | vLLM releases after #42892 (0.26 publishes this); SGLang after #37482 |
//! | [`Encoding::Map`] | `{"ts": .., "events": [..], "data_parallel_rank": ..}` | maps | vLLM's `kv_events.py` at 0181ea3 |
//!
//! [`decode_batch`] reads them all, and any mix (positional and map events in one batch):
//!
//! - a positional event's fields are those of the newest struct, in order, as far as the
//!   sender's version goes: `BlockStored` is `block_hashes, parent_block_hash, token_ids,
//!   block_size, lora_id, medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind,
//!   kv_cache_spec_sliding_window`, `BlockRemoved` is `block_hashes, medium, group_idx`;
//!   fields past those are ignored;
//! - a map event's fields are read by name, in any order, the tag under `"type"`; unknown
//!   keys are ignored;
//! - `block_hashes`, `token_ids` and `block_size` (`block_hashes` for `BlockRemoved`) are
//!   required; every other field may be absent, and is then `None` (or empty);
//! - an event of a kind Shepherd does not know decodes to [`KvEvent::Unknown`] with its tag;
//!   a known event that is malformed fails the whole batch;
//! - a block hash (`ExternalBlockHash = bytes | int`) that is an integer keeps its 64 bits
//!   (a negative `int64`, from Python's `hash()`, is reinterpreted as `u64`); a byte string
//!   (bin or str, e.g. a 32-byte SHA-256 digest) is folded to 64 bits with
//!   [`xxh3_64`](xxhash_rust::xxh3::xxh3_64). Folding keeps what matters: equal hashes stay
//!   equal;
//! - token ids, `block_size`, `group_idx` and the rank must fit in `u32`, `lora_id` in `i64`;
//!   the error names the field otherwise;
//! - `extra_keys` is nil or one entry per block, each nil or a tuple whose strings become
//!   [`ExtraKey::Text`] and whose other elements [`ExtraKey::Other`];
//! - `ts` is a float64 as msgspec writes it; a float32 or an integer is accepted too;
//! - `kv_cache_spec_sliding_window` is read past and not kept.
//!
//! [`encode_batch`] writes what msgspec writes for the newest structs in each shape:
//! positional structs whole, `nil` for absent fields; maps without the defaulted fields that
//! hold their default; integers in their smallest format, floats as float64; block hashes as
//! unsigned integers. Encoding a batch and decoding it gives it back.
//!
//! # SGLang
//!
//! SGLang publishes the same frames and payload (`python/sglang/srt/disaggregation/
//! kv_events.py`, checked at 006d053f and 612d5790, and a later revision with
//! `BlockStoredWithMetadata`). Its differences, all read by [`decode_batch`]:
//!
//! - `BlockStored` has only `block_hashes, parent_block_hash, token_ids, block_size,
//!   lora_id`, later `medium` too; `BlockRemoved` has `block_hashes`, later `medium`; no
//!   `lora_name`, `extra_keys`, `group_idx`;
//! - the batch's third slot is `attn_dp_rank`, read as the data-parallel rank; its later
//!   structs drop `omit_defaults`, which changes nothing for positional structs;
//! - from 0.5.18 (PR #30827), a salted store is a `BlockStored` with a metadata map
//!   (`{"cache_salt": ...}`) in the slot where vLLM has `lora_name`: the map is skipped and
//!   `lora_name` stays `None` (SGLang folds the salt into its block hashes already); after
//!   PR #37482 events are maps with `cache_salt` / `session_id` keys, ignored likewise.
//!
//! # Limits
//!
//! The decoder trusts no length: every declared length is checked against the bytes left
//! before anything is reserved for it, nesting is bounded, and [`DecodeLimits`] caps the
//! payload size, the events and the items (block hashes, token ids, extra keys) one batch may
//! make it allocate. No input makes it panic.
//!
//! # Example
//!
//! ```
//! use shepherd_scheduler_core::kv_events::wire::{
//!     DecodeLimits, Encoding, decode_batch, encode_batch,
//! };
//! use shepherd_scheduler_core::kv_events::{BlockStored, EngineBlockHash, KvEvent, KvEventBatch};
//!
//! let batch = KvEventBatch {
//!     ts: 1_718_000_000.25,
//!     events: vec![
//!         KvEvent::BlockStored(BlockStored {
//!             block_hashes: vec![EngineBlockHash(1), EngineBlockHash(2)],
//!             parent_block_hash: None,
//!             token_ids: vec![10, 11, 12, 13],
//!             block_size: 2,
//!             medium: Some("GPU".into()),
//!             ..BlockStored::default()
//!         }),
//!         KvEvent::AllBlocksCleared,
//!     ],
//!     data_parallel_rank: Some(0),
//! };
//! for encoding in [Encoding::ArrayLike, Encoding::MapEvents, Encoding::Map] {
//!     let mut payload = Vec::new();
//!     encode_batch(&batch, encoding, &mut payload);
//!     assert_eq!(decode_batch(&payload, &DecodeLimits::default()), Ok(batch.clone()));
//! }
//!
//! // The oldest vLLM payload: [ts, [["BlockRemoved", [7]]]] with ts = 1.5.
//! let old = [0x92, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x91, 0x92, 0xac, b'B', b'l', b'o',
//!     b'c', b'k', b'R', b'e', b'm', b'o', b'v', b'e', b'd', 0x91, 0x07];
//! let decoded = decode_batch(&old, &DecodeLimits::default()).unwrap();
//! assert_eq!(decoded.ts, 1.5);
//! assert!(matches!(&decoded.events[0], KvEvent::BlockRemoved(r) if r.block_hashes == [EngineBlockHash(7)]));
//! ```
//!
//! [`KvEvent::Unknown`]: super::KvEvent::Unknown
//! [`ExtraKey::Text`]: super::ExtraKey::Text
//! [`ExtraKey::Other`]: super::ExtraKey::Other

mod decode;
mod encode;
mod error;
mod frames;
mod msgpack;
#[cfg(test)]
mod tests;

pub use error::{Limit, WireError};
pub use frames::{REPLAY_END, Topic, decode_sequence, encode_sequence, format_topic, parse_topic};

use super::event::KvEventBatch;

/// How a batch and its events are encoded (see the [module docs](self) for who sends which).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// msgspec `array_like=True`: the batch and its events are positional arrays, each event's
    /// tag first (vLLM before PR #42892, SGLang before PR #37482).
    #[default]
    ArrayLike,
    /// Field-name maps for the batch and its events, the events' tag under `"type"` (vLLM's
    /// `kv_events.py` at 0181ea3).
    Map,
    /// Field-name map events in a positional batch (vLLM releases after PR #42892, which
    /// took `array_like` off the events only; SGLang after PR #37482).
    MapEvents,
}

/// Bounds on what one payload may make the decoder allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest payload, in bytes.
    pub max_payload_bytes: usize,
    /// Most events in one batch.
    pub max_events: usize,
    /// Most block hashes plus token ids over the whole batch (the `extra_keys` entries and
    /// their elements count too).
    pub max_items: usize,
    /// Deepest nesting of arrays and maps (the batch itself is level 1, an event level 3,
    /// an `extra_keys` entry level 5). Skipping an unknown field recurses once per level, so
    /// keep it small.
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

/// Decodes one `KVEventBatch` payload, in any of the shapes of [`Encoding`] or a mix of
/// them. Bytes after the batch are an error.
pub fn decode_batch(payload: &[u8], limits: &DecodeLimits) -> Result<KvEventBatch, WireError> {
    decode::batch(payload, limits)
}

/// Encodes `batch` as vLLM's msgspec encoder would, appending to `out`.
///
/// The structs are vLLM's newest (`vllm/distributed/kv_events.py` at 0181ea3), positional or
/// not as `encoding` says:
///
/// - positional structs (`array_like=True`) are written whole, because msgspec ignores
///   `omit_defaults` for them (checked with msgspec 0.23.0): a `BlockStored` is 12 elements
///   (the tag, then `block_hashes` to `kv_cache_spec_sliding_window`, `nil` where absent;
///   the sliding window, which Shepherd does not keep, always `nil`), a `BlockRemoved` 4, a
///   batch 3 (`data_parallel_rank` `nil` when absent);
/// - maps start with the tag under `"type"`, then the fields in declaration order, leaving
///   out the defaulted ones that are absent (`extra_keys` when empty, `group_idx`,
///   `kv_cache_spec_kind`, the batch's `data_parallel_rank`); the fields without a default
///   (`parent_block_hash`, `lora_id`, `medium`, `lora_name` of `BlockStored`, `medium` of
///   `BlockRemoved`) are always written, `nil` or not;
/// - integers take their smallest format, `ts` is a float64, strings and containers take
///   their smallest header; block hashes are written unsigned (a hash that arrived as a
///   negative integer or as bytes is not written back the way it came);
/// - [`KvEvent::Unknown`](super::KvEvent::Unknown) is written as its tag alone, and an
///   [`ExtraKey::Other`](super::ExtraKey::Other) as `nil` (its value was not kept).
pub fn encode_batch(batch: &KvEventBatch, encoding: Encoding, out: &mut Vec<u8>) {
    encode::batch(batch, encoding, out);
}
