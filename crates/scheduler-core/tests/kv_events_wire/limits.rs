//! Each decoding limit holds, and a declared length beyond the payload allocates nothing.

use super::*;

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
