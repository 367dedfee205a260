//! Random batches round trip in every encoding; random and mutated bytes never panic.

use super::*;

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
