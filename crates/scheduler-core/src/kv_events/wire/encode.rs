//! Writes a [`KvEventBatch`] as vLLM's msgspec encoder does (the rules are in the docs of
//! [`encode_batch`](super::encode_batch)).

use super::Encoding;
use super::msgpack::Writer;
use crate::kv_events::event::{
    BlockRemoved, BlockStored, EngineBlockHash, ExtraKey, KvEvent, KvEventBatch,
};

/// Fields of the last positional `BlockStored` after its tag.
const STORED_FIELDS: usize = 11;

/// Fields of the last positional `BlockRemoved` after its tag.
const REMOVED_FIELDS: usize = 3;

pub(super) fn batch(batch: &KvEventBatch, encoding: Encoding, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    let map_events = encoding != Encoding::ArrayLike;
    if encoding == Encoding::Map {
        w.map(2 + usize::from(batch.data_parallel_rank.is_some()));
        w.str("ts");
        w.f64(batch.ts);
        w.str("events");
        events(&mut w, &batch.events, map_events);
        if let Some(rank) = batch.data_parallel_rank {
            w.str("data_parallel_rank");
            w.uint(u64::from(rank));
        }
    } else {
        w.array(3);
        w.f64(batch.ts);
        events(&mut w, &batch.events, map_events);
        w.opt_uint(batch.data_parallel_rank.map(u64::from));
    }
}

fn events(w: &mut Writer<'_>, events: &[KvEvent], as_maps: bool) {
    w.array(events.len());
    for event in events {
        match (event, as_maps) {
            (KvEvent::BlockStored(stored), false) => stored_array(w, stored),
            (KvEvent::BlockStored(stored), true) => stored_map(w, stored),
            (KvEvent::BlockRemoved(removed), false) => removed_array(w, removed),
            (KvEvent::BlockRemoved(removed), true) => removed_map(w, removed),
            (KvEvent::AllBlocksCleared, _) => tag_only(w, "AllBlocksCleared", as_maps),
            (KvEvent::Unknown(tag), _) => tag_only(w, tag, as_maps),
        }
    }
}

/// An event with no fields (or none Shepherd kept).
fn tag_only(w: &mut Writer<'_>, tag: &str, as_map: bool) {
    if as_map {
        w.map(1);
        w.str("type");
    } else {
        w.array(1);
    }
    w.str(tag);
}

fn stored_array(w: &mut Writer<'_>, stored: &BlockStored) {
    w.array(1 + STORED_FIELDS);
    w.str("BlockStored");
    stored_required(w, stored, false);
    if stored.extra_keys.is_empty() {
        w.nil();
    } else {
        extra_keys(w, &stored.extra_keys);
    }
    w.opt_uint(stored.group_idx.map(u64::from));
    w.opt_str(stored.kv_cache_spec_kind.as_deref());
    // kv_cache_spec_sliding_window
    w.nil();
}

fn stored_map(w: &mut Writer<'_>, stored: &BlockStored) {
    let optional = usize::from(!stored.extra_keys.is_empty())
        + usize::from(stored.group_idx.is_some())
        + usize::from(stored.kv_cache_spec_kind.is_some());
    w.map(1 + 7 + optional);
    w.str("type");
    w.str("BlockStored");
    stored_required(w, stored, true);
    if !stored.extra_keys.is_empty() {
        w.str("extra_keys");
        extra_keys(w, &stored.extra_keys);
    }
    if let Some(group) = stored.group_idx {
        w.str("group_idx");
        w.uint(u64::from(group));
    }
    if let Some(kind) = &stored.kv_cache_spec_kind {
        w.str("kv_cache_spec_kind");
        w.str(kind);
    }
}

/// The seven fields without a default, each after its key when `keyed`.
fn stored_required(w: &mut Writer<'_>, stored: &BlockStored, keyed: bool) {
    let key = |w: &mut Writer<'_>, name: &str| {
        if keyed {
            w.str(name);
        }
    };
    key(w, "block_hashes");
    hashes(w, &stored.block_hashes);
    key(w, "parent_block_hash");
    w.opt_uint(stored.parent_block_hash.map(|h| h.0));
    key(w, "token_ids");
    w.array(stored.token_ids.len());
    for &token in &stored.token_ids {
        w.uint(u64::from(token));
    }
    key(w, "block_size");
    w.uint(u64::from(stored.block_size));
    key(w, "lora_id");
    w.opt_int(stored.lora_id);
    key(w, "medium");
    w.opt_str(stored.medium.as_deref());
    key(w, "lora_name");
    w.opt_str(stored.lora_name.as_deref());
}

fn removed_array(w: &mut Writer<'_>, removed: &BlockRemoved) {
    w.array(1 + REMOVED_FIELDS);
    w.str("BlockRemoved");
    hashes(w, &removed.block_hashes);
    w.opt_str(removed.medium.as_deref());
    w.opt_uint(removed.group_idx.map(u64::from));
}

fn removed_map(w: &mut Writer<'_>, removed: &BlockRemoved) {
    w.map(3 + usize::from(removed.group_idx.is_some()));
    w.str("type");
    w.str("BlockRemoved");
    w.str("block_hashes");
    hashes(w, &removed.block_hashes);
    w.str("medium");
    w.opt_str(removed.medium.as_deref());
    if let Some(group) = removed.group_idx {
        w.str("group_idx");
        w.uint(u64::from(group));
    }
}

fn hashes(w: &mut Writer<'_>, hashes: &[EngineBlockHash]) {
    w.array(hashes.len());
    for hash in hashes {
        w.uint(hash.0);
    }
}

/// One entry per block: nil, or an array whose [`ExtraKey::Other`] elements (whose value
/// Shepherd did not keep) are written as nil.
fn extra_keys(w: &mut Writer<'_>, entries: &[Option<Vec<ExtraKey>>]) {
    w.array(entries.len());
    for entry in entries {
        match entry {
            None => w.nil(),
            Some(keys) => {
                w.array(keys.len());
                for key in keys {
                    match key {
                        ExtraKey::Text(text) => w.str(text),
                        ExtraKey::Other => w.nil(),
                    }
                }
            }
        }
    }
}
