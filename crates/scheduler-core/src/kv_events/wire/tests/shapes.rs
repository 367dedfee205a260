//! The shapes a batch and its events may take: positional or map events, tags anywhere,
//! unknown fields and kinds, optional fields, `ts` formats.

use super::*;

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
