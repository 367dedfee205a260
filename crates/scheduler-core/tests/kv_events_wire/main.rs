//! Byte-level tests of the KV-event wire codec against payloads that msgspec encoded with
//! vLLM's and SGLang's own structs (`tests/fixtures/kv_events/README.md` says how each was
//! made): every fixture decodes to the exact expected batch, the encoder reproduces the
//! fixtures of its three shapes byte for byte, every truncation is an error, the limits hold,
//! and no input panics.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::path::Path;

use proptest::prelude::*;
use shepherd_scheduler_core::kv_events::wire::{
    DecodeLimits, Encoding, Limit, WireError, decode_batch, encode_batch,
};
use shepherd_scheduler_core::kv_events::{
    BlockRemoved, BlockStored, EngineBlockHash, ExtraKey, KvEvent, KvEventBatch,
};
use xxhash_rust::xxh3::xxh3_64;

mod fixtures;
mod limits;
mod props;

use fixtures::{ENCODINGS, FIXTURES, TS, fixture};

fn encode(batch: &KvEventBatch, encoding: Encoding) -> Vec<u8> {
    let mut out = Vec::new();
    encode_batch(batch, encoding, &mut out);
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_fixture_decodes_to_the_expected_batch() {
    for f in FIXTURES {
        let decoded = decode_batch(&fixture(f.name), &DecodeLimits::default())
            .unwrap_or_else(|e| panic!("{}: {e}", f.name));
        assert_eq!(decoded, (f.expected)(), "{}", f.name);
    }
}

#[test]
fn the_encoder_reproduces_the_fixtures_byte_for_byte() {
    let mut checked = 0;
    for f in FIXTURES {
        let Some((encoding, target)) = f.reencoded else {
            continue;
        };
        let decoded = decode_batch(&fixture(f.name), &DecodeLimits::default()).unwrap();
        assert_eq!(
            hex(&encode(&decoded, encoding)),
            hex(&fixture(target)),
            "{} re-encoded as {encoding:?}",
            f.name
        );
        assert_eq!(
            hex(&encode(&(f.expected)(), encoding)),
            hex(&fixture(target))
        );
        checked += 1;
    }
    assert_eq!(checked, 6);
}

#[test]
fn every_fixture_round_trips_in_every_encoding() {
    for f in FIXTURES {
        let decoded = decode_batch(&fixture(f.name), &DecodeLimits::default()).unwrap();
        for encoding in ENCODINGS {
            let payload = encode(&decoded, encoding);
            assert_eq!(
                decode_batch(&payload, &DecodeLimits::default()).as_ref(),
                Ok(&decoded),
                "{} as {encoding:?}",
                f.name
            );
        }
    }
}

#[test]
fn every_truncation_of_every_fixture_is_a_truncation_error() {
    for f in FIXTURES {
        let bytes = fixture(f.name);
        for cut in 0..bytes.len() {
            match decode_batch(&bytes[..cut], &DecodeLimits::default()) {
                Err(WireError::Truncated { offset, needed }) => {
                    assert!(offset <= cut && needed > 0, "{} cut at {cut}", f.name);
                }
                other => panic!("{} cut at {cut}: {other:?}", f.name),
            }
        }
    }
}

#[test]
fn a_byte_after_the_batch_is_an_error() {
    let mut bytes = fixture("map_full");
    let end = bytes.len();
    bytes.push(0xc0);
    assert_eq!(
        decode_batch(&bytes, &DecodeLimits::default()),
        Err(WireError::TrailingBytes {
            offset: end,
            count: 1
        })
    );
}
