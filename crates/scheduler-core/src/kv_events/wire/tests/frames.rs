//! The frames around a payload: sequence numbers, topics, and how errors read.

use super::*;

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
