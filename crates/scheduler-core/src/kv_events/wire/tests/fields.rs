//! Field by field: integers out of range, wrong types and missing fields are named; hashes
//! and extra keys keep what they can.

use super::*;

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
    let mut extra_keys = written(|w| {
        w.array(3);
        w.nil();
        w.array(4);
        w.str("salt");
        w.uint(9);
    });
    extra_keys.extend_from_slice(&[0xc4, 0x01, 0xaa]); // bytes
    extra_keys.extend_from_slice(&written(|w| {
        w.array(2); // a nested tuple (a multimodal hash and its offset)
        w.str("mm-hash");
        w.uint(0);
        w.array(0);
    }));
    let batch = decode(&stored_with(7, &extra_keys)).unwrap();
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
        w.array(1);
        w.str("salt");
    });
    assert_eq!(
        decode(&stored_with(7, &wrong)),
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
