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

const TS: f64 = 1_718_000_000.25;
const LORA: &str = "tenant-adapters/support-bot-v2-2026-06";
const ENCODINGS: [Encoding; 3] = [Encoding::ArrayLike, Encoding::MapEvents, Encoding::Map];

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kv_events")
        .join(format!("{name}.hex"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = text.trim();
    assert!(text.len().is_multiple_of(2), "{name}: odd hex");
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn h(v: u64) -> EngineBlockHash {
    EngineBlockHash(v)
}

fn gpu() -> Option<String> {
    Some("GPU".to_owned())
}

fn sha256_fold(hex: &str) -> EngineBlockHash {
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(bytes.len(), 32);
    EngineBlockHash(xxh3_64(&bytes))
}

/// The two-block store, one removal and a clear, no optional field set.
fn int_hashes() -> KvEventBatch {
    KvEventBatch {
        ts: TS,
        events: vec![
            KvEvent::BlockStored(BlockStored {
                block_hashes: vec![h(1001), h(1002)],
                parent_block_hash: None,
                token_ids: (1..=8).collect(),
                block_size: 4,
                ..BlockStored::default()
            }),
            KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: vec![h(1001)],
                ..BlockRemoved::default()
            }),
            KvEvent::AllBlocksCleared,
        ],
        data_parallel_rank: None,
    }
}

/// Every field set.
fn full() -> KvEventBatch {
    KvEventBatch {
        ts: TS,
        events: vec![
            KvEvent::BlockStored(BlockStored {
                block_hashes: vec![h(1003), h(1004)],
                parent_block_hash: Some(h(1002)),
                token_ids: vec![300, 70000, 0, 127, 128, 65535, 65536, 151645],
                block_size: 4,
                lora_id: Some(3),
                medium: gpu(),
                lora_name: Some(LORA.to_owned()),
                extra_keys: vec![None, Some(vec![ExtraKey::Text("tenant-salt".to_owned())])],
                group_idx: Some(0),
                kv_cache_spec_kind: Some("full_attention".to_owned()),
            }),
            KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: vec![h(1003)],
                medium: gpu(),
                group_idx: Some(0),
            }),
            KvEvent::AllBlocksCleared,
        ],
        data_parallel_rank: Some(1),
    }
}

fn uint64_hashes() -> KvEventBatch {
    KvEventBatch {
        ts: TS,
        events: vec![
            KvEvent::BlockStored(BlockStored {
                block_hashes: vec![h(1 << 63), h(u64::MAX)],
                parent_block_hash: Some(h((1 << 63) + 12345)),
                token_ids: vec![9, 10],
                block_size: 1,
                medium: gpu(),
                ..BlockStored::default()
            }),
            KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: vec![h(u64::MAX)],
                medium: gpu(),
                group_idx: None,
            }),
        ],
        data_parallel_rank: None,
    }
}

fn negative_hashes() -> KvEventBatch {
    KvEventBatch {
        ts: TS,
        events: vec![
            KvEvent::BlockStored(BlockStored {
                block_hashes: vec![h(u64::MAX), h(1 << 63), h((-33i64) as u64)],
                parent_block_hash: Some(h((-5i64) as u64)),
                token_ids: vec![1, 2, 3],
                block_size: 1,
                ..BlockStored::default()
            }),
            KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: vec![h(1 << 63)],
                ..BlockRemoved::default()
            }),
        ],
        data_parallel_rank: None,
    }
}

fn bytes_hashes() -> KvEventBatch {
    let d0 = sha256_fold("b8c6f33f1780d30977c5e964f62e7959102a3694f1c28ae0834ab12f98a3dcb0");
    let d1 = sha256_fold("89a1a98e709fa672374b463bbd8d5946ff4f530c5e65be07bf17ef8473ec96e9");
    let d2 = sha256_fold("2453695514ac2ba4f06e40a20e20cbc76b7a6c6d9a438c4a30e2acea3be39f57");
    KvEventBatch {
        ts: TS,
        events: vec![
            KvEvent::BlockStored(BlockStored {
                block_hashes: vec![d1, d2],
                parent_block_hash: Some(d0),
                token_ids: vec![5, 6, 7, 8],
                block_size: 2,
                medium: gpu(),
                extra_keys: vec![None, None],
                group_idx: Some(0),
                kv_cache_spec_kind: Some("full_attention".to_owned()),
                ..BlockStored::default()
            }),
            KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: vec![d1],
                medium: gpu(),
                group_idx: Some(0),
            }),
        ],
        data_parallel_rank: None,
    }
}

fn map_unknown_tag() -> KvEventBatch {
    KvEventBatch {
        ts: TS,
        events: vec![
            KvEvent::BlockStored(BlockStored {
                block_hashes: vec![h(7)],
                parent_block_hash: None,
                token_ids: vec![1, 2],
                block_size: 2,
                medium: gpu(),
                group_idx: Some(1),
                kv_cache_spec_kind: Some("sliding_window".to_owned()),
                ..BlockStored::default()
            }),
            KvEvent::Unknown("BlockPinned".to_owned()),
            KvEvent::AllBlocksCleared,
        ],
        data_parallel_rank: Some(0),
    }
}

fn array_unknown_tag() -> KvEventBatch {
    KvEventBatch {
        ts: TS,
        events: vec![
            KvEvent::Unknown("BlockPinned".to_owned()),
            KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: vec![h(7)],
                medium: gpu(),
                group_idx: None,
            }),
        ],
        data_parallel_rank: None,
    }
}

fn sglang_dp_rank() -> KvEventBatch {
    KvEventBatch {
        ts: TS,
        events: vec![
            KvEvent::BlockStored(BlockStored {
                block_hashes: vec![h(11), h(12)],
                parent_block_hash: Some(h(10)),
                token_ids: vec![1, 2, 3, 4],
                block_size: 2,
                ..BlockStored::default()
            }),
            KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: vec![h(11)],
                ..BlockRemoved::default()
            }),
            KvEvent::AllBlocksCleared,
        ],
        data_parallel_rank: Some(2),
    }
}

fn sglang_metadata() -> KvEventBatch {
    KvEventBatch {
        ts: TS,
        events: vec![
            KvEvent::BlockStored(BlockStored {
                block_hashes: vec![h(21)],
                token_ids: vec![1, 2],
                block_size: 2,
                medium: gpu(),
                ..BlockStored::default()
            }),
            // The salted store: its metadata map sits where vLLM has lora_name; its blocks
            // are hashed with the salt, so each carries an extra key.
            KvEvent::BlockStored(BlockStored {
                block_hashes: vec![h(22)],
                parent_block_hash: Some(h(21)),
                token_ids: vec![3, 4],
                block_size: 2,
                medium: gpu(),
                lora_name: None,
                extra_keys: vec![Some(vec![ExtraKey::Other])],
                ..BlockStored::default()
            }),
            KvEvent::BlockRemoved(BlockRemoved {
                block_hashes: vec![h(21)],
                medium: gpu(),
                group_idx: None,
            }),
        ],
        data_parallel_rank: None,
    }
}

struct Fixture {
    name: &'static str,
    expected: fn() -> KvEventBatch,
    /// The encoding in which `encode_batch` gives back a fixture, and which fixture.
    reencoded: Option<(Encoding, &'static str)>,
}

const FIXTURES: &[Fixture] = &[
    Fixture {
        name: "array_v0_int_hashes",
        expected: int_hashes,
        // The oldest structs lack medium, lora_name and later fields; the encoder writes the
        // newest positional structs, as vLLM before #42892 published the same batch.
        reencoded: Some((Encoding::ArrayLike, "array_int_hashes")),
    },
    Fixture {
        name: "array_int_hashes",
        expected: int_hashes,
        reencoded: Some((Encoding::ArrayLike, "array_int_hashes")),
    },
    Fixture {
        name: "array_full",
        expected: full,
        reencoded: Some((Encoding::ArrayLike, "array_full")),
    },
    Fixture {
        name: "map_full",
        expected: full,
        reencoded: Some((Encoding::Map, "map_full")),
    },
    Fixture {
        name: "map_events_array_batch",
        expected: full,
        reencoded: Some((Encoding::MapEvents, "map_events_array_batch")),
    },
    Fixture {
        name: "array_uint64_hashes",
        expected: uint64_hashes,
        reencoded: Some((Encoding::ArrayLike, "array_uint64_hashes")),
    },
    // Negative hashes come back unsigned, byte hashes folded, unknown events without their
    // fields, SGLang's shorter structs and metadata as vLLM's: these are decoded only.
    Fixture {
        name: "array_v0_negative_hashes",
        expected: negative_hashes,
        reencoded: None,
    },
    Fixture {
        name: "map_bytes_hashes",
        expected: bytes_hashes,
        reencoded: None,
    },
    Fixture {
        name: "map_unknown_tag",
        expected: map_unknown_tag,
        reencoded: None,
    },
    Fixture {
        name: "array_unknown_tag",
        expected: array_unknown_tag,
        reencoded: None,
    },
    Fixture {
        name: "sglang_array_dp_rank",
        expected: sglang_dp_rank,
        reencoded: None,
    },
    Fixture {
        name: "sglang_array_metadata",
        expected: sglang_metadata,
        reencoded: None,
    },
];

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

fn limits() -> DecodeLimits {
    DecodeLimits::default()
}

#[test]
fn the_payload_size_limit() {
    let bytes = fixture("array_full");
    let at = DecodeLimits {
        max_payload_bytes: bytes.len(),
        ..limits()
    };
    assert!(decode_batch(&bytes, &at).is_ok());
    let below = DecodeLimits {
        max_payload_bytes: bytes.len() - 1,
        ..limits()
    };
    assert_eq!(
        decode_batch(&bytes, &below),
        Err(WireError::LimitExceeded {
            limit: Limit::PayloadBytes,
            max: bytes.len() - 1,
            found: bytes.len()
        })
    );
}

#[test]
fn the_event_limit() {
    for name in ["array_full", "map_full", "map_events_array_batch"] {
        let bytes = fixture(name);
        let three = DecodeLimits {
            max_events: 3,
            ..limits()
        };
        assert!(decode_batch(&bytes, &three).is_ok());
        let two = DecodeLimits {
            max_events: 2,
            ..limits()
        };
        assert_eq!(
            decode_batch(&bytes, &two),
            Err(WireError::LimitExceeded {
                limit: Limit::Events,
                max: 2,
                found: 3
            }),
            "{name}"
        );
    }
}

#[test]
fn the_item_limit() {
    // 2 block hashes + 8 token ids + 2 extra_keys entries + 1 extra key + 1 removed hash.
    for name in ["array_full", "map_full", "map_events_array_batch"] {
        let bytes = fixture(name);
        let enough = DecodeLimits {
            max_items: 14,
            ..limits()
        };
        assert!(decode_batch(&bytes, &enough).is_ok(), "{name}");
        let short = DecodeLimits {
            max_items: 13,
            ..limits()
        };
        assert_eq!(
            decode_batch(&bytes, &short),
            Err(WireError::LimitExceeded {
                limit: Limit::Items,
                max: 13,
                found: 14
            }),
            "{name}"
        );
    }
}

#[test]
fn the_depth_limit() {
    // batch 1, events 2, event 3, extra_keys 4, an entry 5.
    for name in ["array_full", "map_full"] {
        let bytes = fixture(name);
        let five = DecodeLimits {
            max_depth: 5,
            ..limits()
        };
        assert!(decode_batch(&bytes, &five).is_ok());
        let four = DecodeLimits {
            max_depth: 4,
            ..limits()
        };
        assert_eq!(
            decode_batch(&bytes, &four),
            Err(WireError::LimitExceeded {
                limit: Limit::Depth,
                max: 4,
                found: 5
            }),
            "{name}"
        );
    }
}

#[test]
fn declared_lengths_beyond_the_payload_allocate_nothing() {
    // [ts, array32 of 2^32 - 1 events]
    let mut huge_events = vec![0x92, 0xcb];
    huge_events.extend_from_slice(&TS.to_be_bytes());
    huge_events.extend_from_slice(&[0xdd, 0xff, 0xff, 0xff, 0xff]);
    let limits = DecodeLimits {
        max_events: usize::MAX,
        ..DecodeLimits::default()
    };
    assert!(matches!(
        decode_batch(&huge_events, &limits),
        Err(WireError::Truncated { .. })
    ));
    assert_eq!(
        decode_batch(&huge_events, &DecodeLimits::default()),
        Err(WireError::LimitExceeded {
            limit: Limit::Events,
            max: 1 << 20,
            found: u32::MAX as usize
        })
    );

    // [ts, [["BlockRemoved", array32 of 2^32 - 1 hashes]]]
    let mut huge_hashes = vec![0x92, 0xcb];
    huge_hashes.extend_from_slice(&TS.to_be_bytes());
    huge_hashes.extend_from_slice(&[0x91, 0x92, 0xac]);
    huge_hashes.extend_from_slice(b"BlockRemoved");
    huge_hashes.extend_from_slice(&[0xdd, 0xff, 0xff, 0xff, 0xff]);
    assert!(matches!(
        decode_batch(&huge_hashes, &DecodeLimits::default()),
        Err(WireError::Truncated { .. })
    ));
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![".{0,12}", "[a-z_/-]{30,300}"]
}

fn arb_stored() -> impl Strategy<Value = BlockStored> {
    let extra_key = prop_oneof![arb_text().prop_map(ExtraKey::Text), Just(ExtraKey::Other)];
    (
        (
            prop::collection::vec(any::<u64>().prop_map(EngineBlockHash), 0..6),
            prop::option::of(any::<u64>().prop_map(EngineBlockHash)),
            prop::collection::vec(any::<u32>(), 0..40),
            any::<u32>(),
            prop::option::of(any::<i64>()),
        ),
        (
            prop::option::of(arb_text()),
            prop::option::of(arb_text()),
            prop::collection::vec(
                prop::option::of(prop::collection::vec(extra_key, 0..3)),
                0..4,
            ),
            prop::option::of(any::<u32>()),
            prop::option::of(arb_text()),
        ),
    )
        .prop_map(
            |(
                (block_hashes, parent_block_hash, token_ids, block_size, lora_id),
                (medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind),
            )| BlockStored {
                block_hashes,
                parent_block_hash,
                token_ids,
                block_size,
                lora_id,
                medium,
                lora_name,
                extra_keys,
                group_idx,
                kv_cache_spec_kind,
            },
        )
}

fn arb_event() -> impl Strategy<Value = KvEvent> {
    prop_oneof![
        4 => arb_stored().prop_map(KvEvent::BlockStored),
        2 => (
            prop::collection::vec(any::<u64>().prop_map(EngineBlockHash), 0..6),
            prop::option::of(arb_text()),
            prop::option::of(any::<u32>()),
        )
            .prop_map(|(block_hashes, medium, group_idx)| KvEvent::BlockRemoved(BlockRemoved {
                block_hashes,
                medium,
                group_idx
            })),
        1 => Just(KvEvent::AllBlocksCleared),
        1 => "[A-Z][A-Za-z]{0,20}"
            .prop_filter("a kind Shepherd knows", |tag| {
                !matches!(tag.as_str(), "BlockStored" | "BlockRemoved" | "AllBlocksCleared")
            })
            .prop_map(KvEvent::Unknown),
    ]
}

fn arb_batch() -> impl Strategy<Value = KvEventBatch> {
    (
        any::<f64>().prop_filter("NaN is not equal to itself", |ts| !ts.is_nan()),
        prop::collection::vec(arb_event(), 0..20),
        prop::option::of(any::<u32>()),
    )
        .prop_map(|(ts, events, data_parallel_rank)| KvEventBatch {
            ts,
            events,
            data_parallel_rank,
        })
}

fn arb_encoding() -> impl Strategy<Value = Encoding> {
    prop::sample::select(ENCODINGS.to_vec())
}

proptest! {
    #[test]
    fn random_batches_round_trip(batch in arb_batch(), encoding in arb_encoding()) {
        let payload = encode(&batch, encoding);
        let decoded = decode_batch(&payload, &DecodeLimits::default());
        prop_assert_eq!(decoded.as_ref(), Ok(&batch));
        // Re-encoding what was decoded gives the same bytes.
        if let Ok(decoded) = decoded {
            prop_assert_eq!(encode(&decoded, encoding), payload);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        check_any_input(&bytes);
    }

    #[test]
    fn mutated_fixtures_never_panic(
        which in 0..FIXTURES.len(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = fixture(FIXTURES[which].name);
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        check_any_input(&bytes);
    }
}

/// Decodes any input; whatever decodes must round trip through every encoding.
fn check_any_input(bytes: &[u8]) {
    let small = DecodeLimits {
        max_payload_bytes: 512,
        max_events: 8,
        max_items: 64,
        max_depth: 6,
    };
    for limits in [DecodeLimits::default(), small] {
        match decode_batch(bytes, &limits) {
            Ok(batch) => {
                for encoding in ENCODINGS {
                    let again =
                        decode_batch(&encode(&batch, encoding), &DecodeLimits::default()).unwrap();
                    // ts may be NaN: compare it by its bits.
                    assert_eq!(again.ts.to_bits(), batch.ts.to_bits());
                    assert_eq!(again.events, batch.events);
                    assert_eq!(again.data_parallel_rank, batch.data_parallel_rank);
                }
            }
            Err(error) => assert!(!error.to_string().is_empty()),
        }
    }
}
