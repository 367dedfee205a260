//! Unit tests of the msgpack reader and writer, and of the decoder on hand-built payloads
//! (the byte-level tests against msgspec's own output are in `tests/kv_events_wire.rs`).

use super::msgpack::{Head, Reader, Writer};
use super::*;
use crate::kv_events::event::{BlockRemoved, BlockStored, EngineBlockHash, ExtraKey, KvEvent};

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

#[test]
fn integers_take_msgspecs_smallest_format() {
    // What msgspec 0.23.0 writes for each value.
    let unsigned: [(u64, &str); 11] = [
        (0, "00"),
        (127, "7f"),
        (128, "cc80"),
        (255, "ccff"),
        (256, "cd0100"),
        (65535, "cdffff"),
        (65536, "ce00010000"),
        (u64::from(u32::MAX), "ceffffffff"),
        (1 << 32, "cf0000000100000000"),
        (1 << 63, "cf8000000000000000"),
        (u64::MAX, "cfffffffffffffffff"),
    ];
    for (value, expected) in unsigned {
        let bytes = written(|w| w.uint(value));
        assert_eq!(hex(&bytes), expected, "{value}");
        assert_eq!(Reader::new(&bytes).head(), Ok(Head::Uint(value)));
    }
    let signed: [(i64, &str); 10] = [
        (-1, "ff"),
        (-32, "e0"),
        (-33, "d0df"),
        (-128, "d080"),
        (-129, "d1ff7f"),
        (-32768, "d18000"),
        (-32769, "d2ffff7fff"),
        (i64::from(i32::MIN), "d280000000"),
        (i64::from(i32::MIN) - 1, "d3ffffffff7fffffff"),
        (i64::MIN, "d38000000000000000"),
    ];
    for (value, expected) in signed {
        let bytes = written(|w| w.int(value));
        assert_eq!(hex(&bytes), expected, "{value}");
        assert_eq!(Reader::new(&bytes).head(), Ok(Head::Int(value)));
    }
    assert_eq!(hex(&written(|w| w.int(5))), "05");
}

#[test]
fn strings_and_containers_take_the_smallest_header() {
    assert_eq!(hex(&written(|w| w.str(&"a".repeat(31))))[..2], *"bf");
    assert_eq!(hex(&written(|w| w.str(&"a".repeat(32))))[..4], *"d920");
    assert_eq!(hex(&written(|w| w.str(&"a".repeat(256))))[..6], *"da0100");
    assert_eq!(
        hex(&written(|w| w.str(&"a".repeat(65536))))[..10],
        *"db00010000"
    );
    assert_eq!(hex(&written(|w| w.array(15))), "9f");
    assert_eq!(hex(&written(|w| w.array(16))), "dc0010");
    assert_eq!(hex(&written(|w| w.array(65536))), "dd00010000");
    assert_eq!(hex(&written(|w| w.map(15))), "8f");
    assert_eq!(hex(&written(|w| w.map(16))), "de0010");
    assert_eq!(hex(&written(|w| w.map(65536))), "df00010000");
    assert_eq!(hex(&written(|w| w.f64(1.0))), "cb3ff0000000000000");
}

#[test]
fn the_reader_reads_every_header() {
    let cases: [(&[u8], Head); 20] = [
        (&[0xc0], Head::Nil),
        (&[0xc2], Head::Bool(false)),
        (&[0xc3], Head::Bool(true)),
        (&[0xca, 0x3f, 0xc0, 0, 0], Head::F32(1.5)),
        (&[0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0], Head::F64(1.5)),
        (&[0xa3], Head::Str(3)),
        (&[0xd9, 0x20], Head::Str(32)),
        (&[0xda, 0x01, 0x00], Head::Str(256)),
        (&[0xdb, 0, 1, 0, 0], Head::Str(65536)),
        (&[0xc4, 0x20], Head::Bin(32)),
        (&[0xc5, 0x01, 0x00], Head::Bin(256)),
        (&[0xc6, 0, 1, 0, 0], Head::Bin(65536)),
        (&[0x93], Head::Array(3)),
        (&[0xdc, 0x00, 0x10], Head::Array(16)),
        (&[0xdd, 0, 1, 0, 0], Head::Array(65536)),
        (&[0x82], Head::Map(2)),
        (&[0xde, 0x00, 0x10], Head::Map(16)),
        (&[0xdf, 0, 1, 0, 0], Head::Map(65536)),
        (&[0xd4, 0x01], Head::Ext(1)),
        (&[0xd8, 0x01], Head::Ext(16)),
    ];
    for (bytes, head) in cases {
        let mut r = Reader::new(bytes);
        assert_eq!(r.head(), Ok(head), "{}", hex(bytes));
        assert_eq!(r.remaining(), 0);
    }
    for (bytes, len) in [
        (&[0xc7, 0x05, 0x01][..], 5),
        (&[0xc8, 0x01, 0x00, 0x01], 256),
        (&[0xc9, 0, 1, 0, 0, 0x01], 65536),
    ] {
        assert_eq!(Reader::new(bytes).head(), Ok(Head::Ext(len)));
    }
    assert_eq!(
        Reader::new(&[0xc1]).head(),
        Err(WireError::InvalidMarker { offset: 0 })
    );
    assert_eq!(
        Reader::new(&[0xcd, 0x01]).head(),
        Err(WireError::Truncated {
            offset: 1,
            needed: 1
        })
    );
}

#[test]
fn unknown_fields_of_any_type_are_skipped() {
    // {"type": "BlockRemoved", "x": <value>, "block_hashes": [7]} for every kind of value.
    let values: [&[u8]; 12] = [
        &[0xc0],
        &[0xc3],
        &[0xca, 0, 0, 0, 0],
        &[0xd3, 0, 0, 0, 0, 0, 0, 0, 0],
        &[0xd9, 0x02, b'h', b'i'],
        &[0xc5, 0x00, 0x02, 0xff, 0xfe],
        &[0xd5, 0x07, 0x01, 0x02],
        &[0xc7, 0x03, 0x07, 1, 2, 3],
        &[0xc9, 0, 0, 0, 1, 0x07, 0xaa],
        &[0xdc, 0x00, 0x02, 0x91, 0x90, 0x80],
        &[0x81, 0x01, 0x92, 0xa1, b'k', 0xc0],
        &[0xdf, 0, 0, 0, 1, 0x90, 0x90],
    ];
    for value in values {
        let mut event = written(|w| {
            w.map(3);
            w.str("type");
            w.str("BlockRemoved");
            w.str("x");
        });
        event.extend_from_slice(value);
        event.extend_from_slice(&written(|w| {
            w.str("block_hashes");
            w.array(1);
            w.uint(7);
        }));
        let batch = decode(&positional_batch(&[event])).unwrap();
        assert_eq!(batch.events, [removed_7()], "{}", hex(value));
    }
}

#[test]
fn a_map_event_may_put_its_tag_last_and_use_non_string_keys() {
    let event = written(|w| {
        w.map(4);
        w.uint(1); // a non-string key, skipped with its value
        w.array(0);
        w.str("block_hashes");
        w.array(1);
        w.uint(7);
        w.str("medium");
        w.nil();
        w.str("type");
        w.str("BlockRemoved");
    });
    assert_eq!(
        decode(&positional_batch(&[event])).unwrap().events,
        [removed_7()]
    );
}

#[test]
fn one_batch_may_mix_positional_and_map_events() {
    let positional = written(|w| {
        w.array(2);
        w.str("BlockRemoved");
        w.array(1);
        w.uint(7);
    });
    let map = written(|w| {
        w.map(2);
        w.str("type");
        w.str("BlockRemoved");
        w.str("block_hashes");
        w.array(1);
        w.uint(7);
    });
    let cleared = written(|w| {
        w.map(1);
        w.str("type");
        w.str("AllBlocksCleared");
    });
    let batch = decode(&positional_batch(&[
        positional.clone(),
        map.clone(),
        cleared,
    ]))
    .unwrap();
    assert_eq!(
        batch.events,
        [removed_7(), removed_7(), KvEvent::AllBlocksCleared]
    );

    // And a map batch may hold positional events, its keys in any order, unknown keys skipped.
    let mut payload = written(|w| {
        w.map(4);
        w.str("events");
        w.array(2);
    });
    payload.extend_from_slice(&map);
    payload.extend_from_slice(&positional);
    payload.extend_from_slice(&written(|w| {
        w.str("producer");
        w.str("test");
        w.str("data_parallel_rank");
        w.uint(3);
        w.str("ts");
        w.uint(12);
    }));
    let batch = decode(&payload).unwrap();
    assert_eq!(batch.events, [removed_7(), removed_7()]);
    assert_eq!(batch.ts, 12.0);
    assert_eq!(batch.data_parallel_rank, Some(3));
}

#[test]
fn ts_may_be_float32_or_an_integer() {
    for (ts, expected) in [
        (&[0xca, 0x3f, 0xc0, 0, 0][..], 1.5),
        (&[0x05], 5.0),
        (&[0xff], -1.0),
        (&[0xcf, 0, 0, 0, 0, 0x66, 0x6a, 0x3e, 0x80], 1_718_238_848.0),
    ] {
        let mut payload = vec![0x92];
        payload.extend_from_slice(ts);
        payload.push(0x90);
        assert_eq!(decode(&payload).unwrap().ts, expected);
    }
    assert_eq!(
        decode(&[0x92, 0xa1, b'x', 0x90]),
        Err(WireError::WrongType {
            field: "ts",
            expected: "float",
            found: "str"
        })
    );
}

/// A positional `BlockStored` with `field` (0-based, after the tag) replaced.
fn stored_with(field: usize, value: &[u8]) -> Vec<u8> {
    let fields: [Vec<u8>; 6] = [
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

#[test]
fn out_of_range_integers_name_their_field() {
    let cases: [(usize, Vec<u8>, &str, i128); 5] = [
        (
            2,
            written(|w| {
                w.array(1);
                w.int(-1);
            }),
            "BlockStored.token_ids",
            -1,
        ),
        (
            2,
            written(|w| {
                w.array(1);
                w.uint(1 << 32);
            }),
            "BlockStored.token_ids",
            1 << 32,
        ),
        (3, written(|w| w.int(-4)), "BlockStored.block_size", -4),
        (
            4,
            written(|w| w.uint(u64::MAX)),
            "BlockStored.lora_id",
            i128::from(u64::MAX),
        ),
        (
            3,
            written(|w| w.uint(u64::MAX)),
            "BlockStored.block_size",
            i128::from(u64::MAX),
        ),
    ];
    for (field, value, name, found) in cases {
        assert_eq!(
            decode(&stored_with(field, &value)),
            Err(WireError::OutOfRange {
                field: name,
                value: found
            })
        );
    }
    // A negative lora_id is an i64 like any other.
    let batch = decode(&stored_with(4, &written(|w| w.int(-2)))).unwrap();
    assert!(matches!(&batch.events[0], KvEvent::BlockStored(s) if s.lora_id == Some(-2)));

    let mut rank = positional_batch(&[]);
    rank[0] = 0x93;
    rank.push(0xff);
    assert_eq!(
        decode(&rank),
        Err(WireError::OutOfRange {
            field: "data_parallel_rank",
            value: -1
        })
    );
}

#[test]
fn wrong_types_name_their_field() {
    let cases: [(usize, Vec<u8>, &str, &str, &str); 4] = [
        (
            0,
            written(|w| w.nil()),
            "BlockStored.block_hashes",
            "array",
            "nil",
        ),
        (
            0,
            written(|w| {
                w.array(1);
                w.f64(1.0);
            }),
            "BlockStored.block_hashes",
            "int or bytes",
            "float",
        ),
        (
            1,
            written(|w| w.map(0)),
            "BlockStored.parent_block_hash",
            "int or bytes",
            "map",
        ),
        (
            3,
            written(|w| w.str("16")),
            "BlockStored.block_size",
            "int",
            "str",
        ),
    ];
    for (field, value, name, expected, found) in cases {
        assert_eq!(
            decode(&stored_with(field, &value)),
            Err(WireError::WrongType {
                field: name,
                expected,
                found
            })
        );
    }
    let bad_utf8 = stored_with(5, &[0xa2, 0xff, 0xfe]);
    assert_eq!(
        decode(&bad_utf8),
        Err(WireError::InvalidUtf8 {
            field: "BlockStored.medium"
        })
    );
}

#[test]
fn hashes_keep_their_bits_or_fold_bytes() {
    let mut list = written(|w| {
        w.array(4);
        w.uint(u64::MAX);
        w.int(-2);
    });
    list.extend_from_slice(&[0xc4, 0x03, 1, 2, 3]);
    list.extend_from_slice(&[0xa3, 1, 2, 3]);
    let batch = decode(&stored_with(0, &list)).unwrap();
    let folded = EngineBlockHash(xxhash_rust::xxh3::xxh3_64(&[1, 2, 3]));
    let KvEvent::BlockStored(stored) = &batch.events[0] else {
        panic!("{batch:?}");
    };
    assert_eq!(
        stored.block_hashes,
        [
            EngineBlockHash(u64::MAX),
            EngineBlockHash(u64::MAX - 1),
            folded,
            folded
        ]
    );
}

#[test]
fn extra_keys_keep_strings_and_mark_the_rest() {
    let mut positional = written(|w| {
        w.array(9);
        w.str("BlockStored");
        w.array(0);
        w.nil();
        w.array(0);
        w.uint(1);
        w.nil();
        w.str("GPU");
        w.nil();
        w.array(3); // extra_keys
        w.nil();
        w.array(4);
        w.str("salt");
        w.uint(9);
    });
    positional.extend_from_slice(&[0xc4, 0x01, 0xaa]); // bytes
    positional.extend_from_slice(&written(|w| {
        w.array(2); // a nested tuple (a multimodal hash and its offset)
        w.str("mm-hash");
        w.uint(0);
        w.array(0);
    }));
    let batch = decode(&positional_batch(&[positional])).unwrap();
    let KvEvent::BlockStored(stored) = &batch.events[0] else {
        panic!("{batch:?}");
    };
    assert_eq!(
        stored.extra_keys,
        [
            None,
            Some(vec![
                ExtraKey::Text("salt".into()),
                ExtraKey::Other,
                ExtraKey::Other,
                ExtraKey::Other
            ]),
            Some(vec![]),
        ]
    );
    let wrong = written(|w| {
        w.array(9);
        w.str("BlockStored");
        w.array(0);
        w.nil();
        w.array(0);
        w.uint(1);
        w.nil();
        w.nil();
        w.nil();
        w.array(1);
        w.str("salt");
    });
    assert_eq!(
        decode(&positional_batch(&[wrong])),
        Err(WireError::WrongType {
            field: "BlockStored.extra_keys",
            expected: "arrays or nil",
            found: "str"
        })
    );
}

#[test]
fn missing_fields_are_named() {
    let short = written(|w| {
        w.array(3);
        w.str("BlockStored");
        w.array(0);
        w.nil();
    });
    let no_tokens = written(|w| {
        w.map(3);
        w.str("type");
        w.str("BlockStored");
        w.str("block_hashes");
        w.array(0);
        w.str("block_size");
        w.uint(4);
    });
    let removed = written(|w| {
        w.array(1);
        w.str("BlockRemoved");
    });
    let untagged = written(|w| {
        w.map(1);
        w.str("block_hashes");
        w.array(0);
    });
    for (event, field) in [
        (short, "BlockStored.token_ids"),
        (no_tokens, "BlockStored.token_ids"),
        (removed, "BlockRemoved.block_hashes"),
        (untagged, "type"),
        (vec![0x90], "event tag"),
    ] {
        assert_eq!(
            decode(&positional_batch(&[event])),
            Err(WireError::MissingField { field })
        );
    }
    let no_events = written(|w| {
        w.map(1);
        w.str("ts");
        w.f64(1.0);
    });
    assert_eq!(
        decode(&no_events),
        Err(WireError::MissingField { field: "events" })
    );
}

#[test]
fn the_optional_fields_of_a_map_event_may_be_absent() {
    let event = written(|w| {
        w.map(4);
        w.str("type");
        w.str("BlockStored");
        w.str("block_hashes");
        w.array(1);
        w.uint(3);
        w.str("token_ids");
        w.array(0);
        w.str("block_size");
        w.uint(16);
    });
    let batch = decode(&positional_batch(&[event])).unwrap();
    assert_eq!(
        batch.events,
        [KvEvent::BlockStored(BlockStored {
            block_hashes: vec![EngineBlockHash(3)],
            block_size: 16,
            ..BlockStored::default()
        })]
    );
}

#[test]
fn unknown_kinds_are_kept_by_tag_and_bad_tags_rejected() {
    let unknown = written(|w| {
        w.array(3);
        w.str("BlockPinned");
        w.array(1);
        w.uint(1);
        w.map(0);
    });
    assert_eq!(
        decode(&positional_batch(&[unknown])).unwrap().events,
        [KvEvent::Unknown("BlockPinned".into())]
    );
    let numeric = written(|w| {
        w.array(1);
        w.uint(1);
    });
    assert_eq!(
        decode(&positional_batch(&[numeric])),
        Err(WireError::WrongType {
            field: "event tag",
            expected: "str",
            found: "int"
        })
    );
    assert_eq!(
        decode(&positional_batch(&[vec![0x05]])),
        Err(WireError::WrongType {
            field: "events",
            expected: "arrays or maps",
            found: "int"
        })
    );
}

#[test]
fn only_arrays_of_two_or_more_and_maps_are_batches() {
    for (payload, found) in [
        (&[0xc0][..], "nil"),
        (&[0xa1, b'x'], "str"),
        (&[0x90], "an array of 0 elements"),
        (&[0x91, 0x05], "an array of 1 element"),
    ] {
        assert_eq!(
            decode(payload),
            Err(WireError::UnknownBatchShape {
                found: found.into()
            })
        );
    }
    assert!(matches!(decode(&[]), Err(WireError::Truncated { .. })));
}

#[test]
fn nesting_is_bounded_without_recursing_deeply() {
    // An unknown field holding 100,000 nested arrays.
    let mut event = written(|w| {
        w.map(3);
        w.str("type");
        w.str("BlockRemoved");
        w.str("block_hashes");
        w.array(0);
        w.str("nested");
    });
    event.extend(std::iter::repeat_n(0x91, 100_000));
    event.push(0xc0);
    assert_eq!(
        decode(&positional_batch(&[event])),
        Err(WireError::LimitExceeded {
            limit: Limit::Depth,
            max: 32,
            found: 33
        })
    );
}

#[test]
fn sequences_are_eight_signed_big_endian_bytes() {
    assert_eq!(encode_sequence(REPLAY_END), [0xff; 8]);
    assert_eq!(decode_sequence(&[0xff; 8]), Ok(REPLAY_END));
    assert_eq!(decode_sequence(&encode_sequence(258)), Ok(258));
    assert_eq!(encode_sequence(1), [0, 0, 0, 0, 0, 0, 0, 1]);
    for len in [0, 7, 9] {
        assert_eq!(
            decode_sequence(&vec![0; len]),
            Err(WireError::BadSequenceFrame { len })
        );
    }
}

#[test]
fn topics() {
    fn parsed(topic: &[u8]) -> Option<(&str, &str)> {
        parse_topic(topic).map(|t| (t.source, t.model))
    }
    assert_eq!(
        parsed(b"kv@10.0.0.1:8000@meta-llama/Llama-3.1-8B"),
        Some(("10.0.0.1:8000", "meta-llama/Llama-3.1-8B"))
    );
    assert_eq!(
        parsed(b"kv@10.0.0.1@org/m@v2"),
        Some(("10.0.0.1", "org/m@v2"))
    );
    assert_eq!(
        parsed(b"kv@pod-a@qwen\0sgl-kv-epoch=1f2e"),
        Some(("pod-a", "qwen"))
    );
    let formatted = format_topic("[::1]:5557", "m");
    assert_eq!(parsed(formatted.as_bytes()), Some(("[::1]:5557", "m")));
    for bad in [
        &b""[..],
        b"kv-events",
        b"kv@",
        b"kv@host",
        b"kv@@model",
        b"kv@host@",
        b"KV@host@model",
        b"kv@h\xffst@model",
        b"\0kv@host@model",
    ] {
        assert_eq!(parse_topic(bad), None, "{bad:?}");
    }
}

#[test]
fn errors_read_well() {
    let cases = [
        (
            WireError::Truncated {
                offset: 3,
                needed: 2,
            },
            "payload truncated: 2 more bytes needed at byte 3",
        ),
        (
            WireError::LimitExceeded {
                limit: Limit::Items,
                max: 4,
                found: 5,
            },
            "item count limit exceeded: 5 > 4",
        ),
        (
            WireError::WrongType {
                field: "BlockStored.token_ids",
                expected: "array",
                found: "nil",
            },
            "BlockStored.token_ids: expected array, found nil",
        ),
        (
            WireError::OutOfRange {
                field: "BlockStored.token_ids",
                value: -1,
            },
            "BlockStored.token_ids: -1 is out of range",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
}
