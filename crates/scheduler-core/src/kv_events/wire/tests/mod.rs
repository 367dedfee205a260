//! Unit tests of the msgpack reader and writer, and of the decoder on hand-built payloads
//! (the byte-level tests against msgspec's own output are in `tests/kv_events_wire/`),
//! with the helpers that build payloads by hand.

use super::msgpack::{Head, Reader, Writer};
use super::*;
use crate::kv_events::event::{BlockRemoved, BlockStored, EngineBlockHash, ExtraKey, KvEvent};

mod fields;
mod frames;
mod msgpack;
mod shapes;

fn written(f: impl FnOnce(&mut Writer<'_>)) -> Vec<u8> {
    let mut out = Vec::new();
    f(&mut Writer::new(&mut out));
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode(bytes: &[u8]) -> Result<KvEventBatch, WireError> {
    decode_batch(bytes, &DecodeLimits::default())
}

/// `[1.5, [<events>]]`, each event already encoded.
fn positional_batch(events: &[Vec<u8>]) -> Vec<u8> {
    let mut out = written(|w| {
        w.array(2);
        w.f64(1.5);
        w.array(events.len());
    });
    for event in events {
        out.extend_from_slice(event);
    }
    out
}

fn removed_7() -> KvEvent {
    KvEvent::BlockRemoved(BlockRemoved {
        block_hashes: vec![EngineBlockHash(7)],
        ..BlockRemoved::default()
    })
}

/// A positional `BlockStored` (through `extra_keys`) with `field` (0-based, after the tag)
/// replaced.
fn stored_with(field: usize, value: &[u8]) -> Vec<u8> {
    let fields: [Vec<u8>; 8] = [
        written(|w| {
            w.array(1);
            w.uint(1);
        }),
        written(|w| w.nil()),
        written(|w| {
            w.array(2);
            w.uint(1);
            w.uint(2);
        }),
        written(|w| w.uint(2)),
        written(|w| w.nil()),
        written(|w| w.nil()),
        written(|w| w.nil()),
        written(|w| w.nil()),
    ];
    let mut event = written(|w| {
        w.array(1 + fields.len());
        w.str("BlockStored");
    });
    for (i, bytes) in fields.iter().enumerate() {
        event.extend_from_slice(if i == field { value } else { bytes });
    }
    positional_batch(&[event])
}
