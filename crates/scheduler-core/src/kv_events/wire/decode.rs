//! Reads a `KVEventBatch` payload into a [`KvEventBatch`], whatever mix of positional arrays
//! and field-name maps it uses.
//!
//! Nesting levels, for [`DecodeLimits::max_depth`]: the batch is at level 1, its events array
//! at 2, an event at 3, an event's lists at 4, an `extra_keys` entry at 5.

use xxhash_rust::xxh3::xxh3_64;

use super::DecodeLimits;
use super::error::{Limit, WireError};
use super::msgpack::reader::check_depth;
use super::msgpack::{Head, Reader};
use crate::kv_events::event::{
    BlockRemoved, BlockStored, EngineBlockHash, ExtraKey, KvEvent, KvEventBatch,
};

/// How many events to reserve room for before reading them (the rest grows as they come).
const EVENTS_RESERVED: usize = 256;

/// The level of an event's fields (see the module docs).
const FIELD_DEPTH: usize = 4;

pub(super) fn batch(payload: &[u8], limits: &DecodeLimits) -> Result<KvEventBatch, WireError> {
    if payload.len() > limits.max_payload_bytes {
        return Err(WireError::LimitExceeded {
            limit: Limit::PayloadBytes,
            max: limits.max_payload_bytes,
            found: payload.len(),
        });
    }
    let mut decoder = Decoder {
        r: Reader::new(payload),
        limits,
        items: 0,
    };
    let batch = decoder.batch()?;
    let count = decoder.r.remaining();
    if count > 0 {
        return Err(WireError::TrailingBytes {
            offset: decoder.r.pos(),
            count,
        });
    }
    Ok(batch)
}

struct Decoder<'a, 'l> {
    r: Reader<'a>,
    limits: &'l DecodeLimits,
    /// Block hashes, token ids and `extra_keys` entries and elements declared so far.
    items: usize,
}

fn wrong(field: &'static str, expected: &'static str, found: Head) -> WireError {
    WireError::WrongType {
        field,
        expected,
        found: found.kind(),
    }
}

fn utf8<'a>(bytes: &'a [u8], field: &'static str) -> Result<&'a str, WireError> {
    std::str::from_utf8(bytes).map_err(|_| WireError::InvalidUtf8 { field })
}

impl<'a> Decoder<'a, '_> {
    /// Checks a container of `len` values at level `depth` (a map's pairs count twice).
    fn open(&self, values: u64, depth: usize) -> Result<(), WireError> {
        check_depth(depth, self.limits.max_depth)?;
        self.r.check_fits(values)
    }

    fn skip(&mut self, depth: usize) -> Result<(), WireError> {
        self.r.skip(depth, self.limits.max_depth)
    }

    fn skip_rest(&mut self, head: Head, depth: usize) -> Result<(), WireError> {
        self.r.skip_rest(head, depth, self.limits.max_depth)
    }

    /// Counts `n` more items against [`DecodeLimits::max_items`].
    fn count_items(&mut self, n: u32) -> Result<(), WireError> {
        self.items = self.items.saturating_add(n as usize);
        if self.items > self.limits.max_items {
            return Err(WireError::LimitExceeded {
                limit: Limit::Items,
                max: self.limits.max_items,
                found: self.items,
            });
        }
        Ok(())
    }

    fn batch(&mut self) -> Result<KvEventBatch, WireError> {
        match self.r.head()? {
            Head::Array(len) if len >= 2 => {
                self.open(u64::from(len), 1)?;
                let ts = self.ts()?;
                let events = self.events()?;
                let mut data_parallel_rank = None;
                for index in 2..len {
                    if index == 2 {
                        data_parallel_rank = self.opt_u32("data_parallel_rank")?;
                    } else {
                        self.skip(2)?;
                    }
                }
                Ok(KvEventBatch {
                    ts,
                    events,
                    data_parallel_rank,
                })
            }
            Head::Array(len) => Err(WireError::UnknownBatchShape {
                found: format!(
                    "an array of {len} element{}",
                    if len == 1 { "" } else { "s" }
                ),
            }),
            Head::Map(len) => {
                self.open(2 * u64::from(len), 1)?;
                let (mut ts, mut events, mut data_parallel_rank) = (None, None, None);
                for _ in 0..len {
                    match self.key(2)? {
                        Some(b"ts") => ts = Some(self.ts()?),
                        Some(b"events") => events = Some(self.events()?),
                        Some(b"data_parallel_rank") => {
                            data_parallel_rank = self.opt_u32("data_parallel_rank")?;
                        }
                        _ => self.skip(2)?,
                    }
                }
                Ok(KvEventBatch {
                    ts: ts.ok_or(WireError::MissingField { field: "ts" })?,
                    events: events.ok_or(WireError::MissingField { field: "events" })?,
                    data_parallel_rank,
                })
            }
            other => Err(WireError::UnknownBatchShape {
                found: other.kind().to_owned(),
            }),
        }
    }

    /// A map key: the bytes of a string key; `None` (the key skipped) for any other type.
    fn key(&mut self, depth: usize) -> Result<Option<&'a [u8]>, WireError> {
        match self.r.head()? {
            Head::Str(len) => Ok(Some(self.r.bytes(len)?)),
            other => {
                self.skip_rest(other, depth)?;
                Ok(None)
            }
        }
    }

    fn ts(&mut self) -> Result<f64, WireError> {
        match self.r.head()? {
            Head::F64(v) => Ok(v),
            Head::F32(v) => Ok(f64::from(v)),
            Head::Uint(v) => Ok(v as f64),
            Head::Int(v) => Ok(v as f64),
            other => Err(wrong("ts", "float", other)),
        }
    }

    fn events(&mut self) -> Result<Vec<KvEvent>, WireError> {
        let len = match self.r.head()? {
            Head::Array(len) => len,
            other => return Err(wrong("events", "array", other)),
        };
        if len as usize > self.limits.max_events {
            return Err(WireError::LimitExceeded {
                limit: Limit::Events,
                max: self.limits.max_events,
                found: len as usize,
            });
        }
        self.open(u64::from(len), 2)?;
        let mut events = Vec::with_capacity((len as usize).min(EVENTS_RESERVED));
        for _ in 0..len {
            events.push(self.event()?);
        }
        Ok(events)
    }

    fn event(&mut self) -> Result<KvEvent, WireError> {
        match self.r.head()? {
            Head::Array(len) => {
                self.open(u64::from(len), 3)?;
                if len == 0 {
                    return Err(WireError::MissingField { field: "event tag" });
                }
                let tag = self.tag()?;
                let fields = len - 1;
                match tag {
                    "BlockStored" => self.stored_array(fields).map(KvEvent::BlockStored),
                    "BlockRemoved" => self.removed_array(fields).map(KvEvent::BlockRemoved),
                    _ => {
                        for _ in 0..fields {
                            self.skip(FIELD_DEPTH)?;
                        }
                        Ok(known_or_unknown(tag))
                    }
                }
            }
            Head::Map(len) => {
                self.open(2 * u64::from(len), 3)?;
                // The tag may sit anywhere among the keys: find it first, then read the
                // fields of a known kind by name from the start again.
                let fields_start = self.r.pos();
                let mut tag = None;
                for _ in 0..len {
                    match self.key(FIELD_DEPTH)? {
                        Some(b"type") => tag = Some(self.tag()?),
                        _ => self.skip(FIELD_DEPTH)?,
                    }
                }
                let tag = tag.ok_or(WireError::MissingField { field: "type" })?;
                match tag {
                    "BlockStored" | "BlockRemoved" => {
                        self.r.seek(fields_start);
                        if tag == "BlockStored" {
                            self.stored_map(len).map(KvEvent::BlockStored)
                        } else {
                            self.removed_map(len).map(KvEvent::BlockRemoved)
                        }
                    }
                    _ => Ok(known_or_unknown(tag)),
                }
            }
            other => Err(wrong("events", "arrays or maps", other)),
        }
    }

    fn tag(&mut self) -> Result<&'a str, WireError> {
        match self.r.head()? {
            Head::Str(len) => utf8(self.r.bytes(len)?, "event tag"),
            other => Err(wrong("event tag", "str", other)),
        }
    }

    /// `BlockStored` as a positional array (after its tag): block_hashes, parent_block_hash,
    /// token_ids, block_size, then as far as the sender's version goes: lora_id, medium,
    /// lora_name, extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window,
    /// anything newer.
    fn stored_array(&mut self, fields: u32) -> Result<BlockStored, WireError> {
        const REQUIRED: [&str; 4] = [
            "BlockStored.block_hashes",
            "BlockStored.parent_block_hash",
            "BlockStored.token_ids",
            "BlockStored.block_size",
        ];
        if let Some(&field) = REQUIRED.get(fields as usize) {
            return Err(WireError::MissingField { field });
        }
        let mut stored = BlockStored {
            block_hashes: self.hashes("BlockStored.block_hashes")?,
            parent_block_hash: self.opt_hash("BlockStored.parent_block_hash")?,
            token_ids: self.token_ids()?,
            block_size: self.u32("BlockStored.block_size")?,
            ..BlockStored::default()
        };
        let mut salted = false;
        for index in 4..fields {
            match index {
                4 => stored.lora_id = self.opt_i64("BlockStored.lora_id")?,
                5 => stored.medium = self.opt_string("BlockStored.medium")?,
                6 => match self.lora_name_or_metadata()? {
                    Ok(name) => stored.lora_name = name,
                    Err(()) => salted = true,
                },
                7 => stored.extra_keys = self.extra_keys()?,
                8 => stored.group_idx = self.opt_u32("BlockStored.group_idx")?,
                9 => {
                    stored.kv_cache_spec_kind = self.opt_string("BlockStored.kv_cache_spec_kind")?
                }
                _ => self.skip(FIELD_DEPTH)?,
            }
        }
        if salted && stored.extra_keys.is_empty() {
            // SGLang's salted blocks depend on more than their tokens.
            stored.extra_keys = vec![Some(vec![ExtraKey::Other]); stored.block_hashes.len()];
        }
        Ok(stored)
    }

    /// `BlockStored` as a map: fields by name, unknown keys skipped.
    fn stored_map(&mut self, pairs: u32) -> Result<BlockStored, WireError> {
        let mut stored = BlockStored::default();
        let mut salted = false;
        let (mut hashes, mut tokens, mut block_size) = (false, false, false);
        for _ in 0..pairs {
            match self.key(FIELD_DEPTH)? {
                Some(b"block_hashes") => {
                    stored.block_hashes = self.hashes("BlockStored.block_hashes")?;
                    hashes = true;
                }
                Some(b"parent_block_hash") => {
                    stored.parent_block_hash = self.opt_hash("BlockStored.parent_block_hash")?;
                }
                Some(b"token_ids") => {
                    stored.token_ids = self.token_ids()?;
                    tokens = true;
                }
                Some(b"block_size") => {
                    stored.block_size = self.u32("BlockStored.block_size")?;
                    block_size = true;
                }
                Some(b"lora_id") => stored.lora_id = self.opt_i64("BlockStored.lora_id")?,
                Some(b"medium") => stored.medium = self.opt_string("BlockStored.medium")?,
                Some(b"lora_name") => {
                    stored.lora_name = self.opt_string("BlockStored.lora_name")?;
                }
                Some(b"extra_keys") => stored.extra_keys = self.extra_keys()?,
                Some(b"group_idx") => stored.group_idx = self.opt_u32("BlockStored.group_idx")?,
                Some(b"kv_cache_spec_kind") => {
                    stored.kv_cache_spec_kind =
                        self.opt_string("BlockStored.kv_cache_spec_kind")?;
                }
                // SGLang's map events name the salt their blocks were hashed with.
                Some(b"cache_salt" | b"metadata") => match self.r.head()? {
                    Head::Nil => {}
                    head => {
                        self.skip_rest(head, FIELD_DEPTH)?;
                        salted = true;
                    }
                },
                _ => self.skip(FIELD_DEPTH)?,
            }
        }
        if salted && stored.extra_keys.is_empty() {
            stored.extra_keys = vec![Some(vec![ExtraKey::Other]); stored.block_hashes.len()];
        }
        let missing = [
            (hashes, "BlockStored.block_hashes"),
            (tokens, "BlockStored.token_ids"),
            (block_size, "BlockStored.block_size"),
        ];
        if let Some(&(_, field)) = missing.iter().find(|(seen, _)| !seen) {
            return Err(WireError::MissingField { field });
        }
        Ok(stored)
    }

    /// `BlockRemoved` as a positional array (after its tag): block_hashes, then medium,
    /// group_idx, anything newer.
    fn removed_array(&mut self, fields: u32) -> Result<BlockRemoved, WireError> {
        if fields == 0 {
            return Err(WireError::MissingField {
                field: "BlockRemoved.block_hashes",
            });
        }
        let mut removed = BlockRemoved {
            block_hashes: self.hashes("BlockRemoved.block_hashes")?,
            ..BlockRemoved::default()
        };
        for index in 1..fields {
            match index {
                1 => removed.medium = self.opt_string("BlockRemoved.medium")?,
                2 => removed.group_idx = self.opt_u32("BlockRemoved.group_idx")?,
                _ => self.skip(FIELD_DEPTH)?,
            }
        }
        Ok(removed)
    }

    /// `BlockRemoved` as a map.
    fn removed_map(&mut self, pairs: u32) -> Result<BlockRemoved, WireError> {
        let mut removed = BlockRemoved::default();
        let mut hashes = false;
        for _ in 0..pairs {
            match self.key(FIELD_DEPTH)? {
                Some(b"block_hashes") => {
                    removed.block_hashes = self.hashes("BlockRemoved.block_hashes")?;
                    hashes = true;
                }
                Some(b"medium") => removed.medium = self.opt_string("BlockRemoved.medium")?,
                Some(b"group_idx") => {
                    removed.group_idx = self.opt_u32("BlockRemoved.group_idx")?;
                }
                _ => self.skip(FIELD_DEPTH)?,
            }
        }
        if !hashes {
            return Err(WireError::MissingField {
                field: "BlockRemoved.block_hashes",
            });
        }
        Ok(removed)
    }

    /// A hash whose header was read: an integer's 64 bits, or a byte string folded with
    /// XXH3-64.
    fn hash_from(&mut self, head: Head, field: &'static str) -> Result<EngineBlockHash, WireError> {
        match head {
            Head::Uint(v) => Ok(EngineBlockHash(v)),
            Head::Int(v) => Ok(EngineBlockHash(v as u64)),
            Head::Bin(len) | Head::Str(len) => Ok(EngineBlockHash(xxh3_64(self.r.bytes(len)?))),
            other => Err(wrong(field, "int or bytes", other)),
        }
    }

    fn opt_hash(&mut self, field: &'static str) -> Result<Option<EngineBlockHash>, WireError> {
        match self.r.head()? {
            Head::Nil => Ok(None),
            head => self.hash_from(head, field).map(Some),
        }
    }

    /// The header of a list of block hashes or token ids, its length counted as items.
    fn list(&mut self, field: &'static str) -> Result<u32, WireError> {
        let len = match self.r.head()? {
            Head::Array(len) => len,
            other => return Err(wrong(field, "array", other)),
        };
        self.open(u64::from(len), FIELD_DEPTH)?;
        self.count_items(len)?;
        Ok(len)
    }

    fn hashes(&mut self, field: &'static str) -> Result<Vec<EngineBlockHash>, WireError> {
        let len = self.list(field)?;
        let mut hashes = Vec::with_capacity(len as usize);
        for _ in 0..len {
            let head = self.r.head()?;
            hashes.push(self.hash_from(head, field)?);
        }
        Ok(hashes)
    }

    fn token_ids(&mut self) -> Result<Vec<u32>, WireError> {
        const FIELD: &str = "BlockStored.token_ids";
        let len = self.list(FIELD)?;
        let mut tokens = Vec::with_capacity(len as usize);
        for _ in 0..len {
            tokens.push(self.u32(FIELD)?);
        }
        Ok(tokens)
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, WireError> {
        match self.r.head()? {
            Head::Uint(v) => u32::try_from(v).map_err(|_| WireError::OutOfRange {
                field,
                value: i128::from(v),
            }),
            Head::Int(v) => u32::try_from(v).map_err(|_| WireError::OutOfRange {
                field,
                value: i128::from(v),
            }),
            other => Err(wrong(field, "int", other)),
        }
    }

    fn opt_u32(&mut self, field: &'static str) -> Result<Option<u32>, WireError> {
        match self.r.head()? {
            Head::Nil => Ok(None),
            Head::Uint(v) => u32::try_from(v)
                .map(Some)
                .map_err(|_| WireError::OutOfRange {
                    field,
                    value: i128::from(v),
                }),
            Head::Int(v) => u32::try_from(v)
                .map(Some)
                .map_err(|_| WireError::OutOfRange {
                    field,
                    value: i128::from(v),
                }),
            other => Err(wrong(field, "int or nil", other)),
        }
    }

    fn opt_i64(&mut self, field: &'static str) -> Result<Option<i64>, WireError> {
        match self.r.head()? {
            Head::Nil => Ok(None),
            Head::Int(v) => Ok(Some(v)),
            Head::Uint(v) => i64::try_from(v)
                .map(Some)
                .map_err(|_| WireError::OutOfRange {
                    field,
                    value: i128::from(v),
                }),
            other => Err(wrong(field, "int or nil", other)),
        }
    }

    fn opt_string(&mut self, field: &'static str) -> Result<Option<String>, WireError> {
        match self.r.head()? {
            Head::Nil => Ok(None),
            Head::Str(len) => Ok(Some(utf8(self.r.bytes(len)?, field)?.to_owned())),
            other => Err(wrong(field, "str or nil", other)),
        }
    }

    /// The eighth field of a positional `BlockStored`: vLLM's `lora_name` (`Ok(Ok(name))`),
    /// or where SGLang (0.5.18 on, `BlockStoredWithMetadata`) puts a metadata map
    /// (`{"cache_salt": ...}`: `Ok(Err(()))`), skipped here; its blocks are hashed with the
    /// salt, which the caller records as an extra key of every block.
    fn lora_name_or_metadata(&mut self) -> Result<Result<Option<String>, ()>, WireError> {
        const FIELD: &str = "BlockStored.lora_name";
        match self.r.head()? {
            Head::Nil => Ok(Ok(None)),
            Head::Str(len) => Ok(Ok(Some(utf8(self.r.bytes(len)?, FIELD)?.to_owned()))),
            head @ Head::Map(_) => {
                self.skip_rest(head, FIELD_DEPTH)?;
                Ok(Err(()))
            }
            other => Err(wrong(FIELD, "str, nil or a metadata map", other)),
        }
    }

    /// `extra_keys`: nil (no keys at all) or one entry per block, each nil or a tuple whose
    /// string elements are kept.
    fn extra_keys(&mut self) -> Result<Vec<Option<Vec<ExtraKey>>>, WireError> {
        const FIELD: &str = "BlockStored.extra_keys";
        let len = match self.r.head()? {
            Head::Nil => return Ok(Vec::new()),
            Head::Array(len) => len,
            other => return Err(wrong(FIELD, "array or nil", other)),
        };
        self.open(u64::from(len), FIELD_DEPTH)?;
        self.count_items(len)?;
        let mut entries = Vec::with_capacity(len as usize);
        for _ in 0..len {
            let keys = match self.r.head()? {
                Head::Nil => None,
                Head::Array(keys) => {
                    self.open(u64::from(keys), FIELD_DEPTH + 1)?;
                    self.count_items(keys)?;
                    let mut entry = Vec::with_capacity(keys as usize);
                    for _ in 0..keys {
                        entry.push(match self.r.head()? {
                            Head::Str(len) => {
                                ExtraKey::Text(utf8(self.r.bytes(len)?, FIELD)?.to_owned())
                            }
                            other => {
                                self.skip_rest(other, FIELD_DEPTH + 2)?;
                                ExtraKey::Other
                            }
                        });
                    }
                    Some(entry)
                }
                other => return Err(wrong(FIELD, "arrays or nil", other)),
            };
            entries.push(keys);
        }
        Ok(entries)
    }
}

/// `AllBlocksCleared`, or an event kind Shepherd does not know.
fn known_or_unknown(tag: &str) -> KvEvent {
    if tag == "AllBlocksCleared" {
        KvEvent::AllBlocksCleared
    } else {
        KvEvent::Unknown(tag.to_owned())
    }
}
