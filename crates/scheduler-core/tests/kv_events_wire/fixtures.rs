//! The fixtures, read from their hex files, and the batch each must decode to.

use super::*;

pub(crate) const TS: f64 = 1_718_000_000.25;
const LORA: &str = "tenant-adapters/support-bot-v2-2026-06";
pub(crate) const ENCODINGS: [Encoding; 3] =
    [Encoding::ArrayLike, Encoding::MapEvents, Encoding::Map];

pub(crate) fn fixture(name: &str) -> Vec<u8> {
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

pub(crate) struct Fixture {
    pub(crate) name: &'static str,
    pub(crate) expected: fn() -> KvEventBatch,
    /// The encoding in which `encode_batch` gives back a fixture, and which fixture.
    pub(crate) reencoded: Option<(Encoding, &'static str)>,
}

pub(crate) const FIXTURES: &[Fixture] = &[
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
