//! The `decode_kv_events` target's body: the input is a KV-event payload (the third frame of
//! a vLLM / SGLang ZeroMQ message), also tried as a topic and a sequence frame.
//!
//! It is decoded with the default limits and with small ones. Decoding never panics; an error
//! has a message, and a limit error found more than the limit allowed; what decodes under the
//! small limits decodes the same under the default ones; whatever decodes encodes, in every
//! encoding, to a payload that decodes back to the same batch and re-encodes to the same
//! bytes. A topic that parses formats back to the input (up to a NUL); a sequence frame reads
//! exactly when it has 8 bytes.

use shepherd_scheduler_core::kv_events::KvEventBatch;
use shepherd_scheduler_core::kv_events::wire::{
    DecodeLimits, Encoding, WireError, decode_batch, decode_sequence, encode_batch,
    encode_sequence, format_topic, parse_topic,
};

/// Small limits, so the fuzzer reaches every limit error.
const SMALL: DecodeLimits = DecodeLimits {
    max_payload_bytes: 4096,
    max_events: 8,
    max_items: 64,
    max_depth: 6,
};

fn same(a: &KvEventBatch, b: &KvEventBatch) -> bool {
    a.ts.to_bits() == b.ts.to_bits()
        && a.events == b.events
        && a.data_parallel_rank == b.data_parallel_rank
}

fn check_error(error: &WireError) {
    assert!(!error.to_string().is_empty());
    if let WireError::LimitExceeded { max, found, .. } = error {
        assert!(found > max, "{error}");
    }
}

/// Decodes one input as a payload, a topic and a sequence frame, and checks what comes out.
/// Panics only on a broken invariant.
pub fn decode_kv_events(data: &[u8]) {
    let full = decode_batch(data, &DecodeLimits::default());
    match &full {
        Ok(batch) => round_trip(batch),
        Err(error) => check_error(error),
    }
    match decode_batch(data, &SMALL) {
        Ok(batch) => {
            let full = full.as_ref().expect("the default limits are wider");
            assert!(same(&batch, full));
        }
        Err(error) => check_error(&error),
    }

    if let Some(topic) = parse_topic(data) {
        let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
        assert_eq!(
            format_topic(topic.source, topic.model).as_bytes(),
            &data[..end]
        );
        assert!(!topic.source.is_empty() && !topic.source.contains('@'));
        assert!(!topic.model.is_empty());
    }
    match decode_sequence(data) {
        Ok(seq) => assert_eq!(encode_sequence(seq), data),
        Err(error) => {
            assert_ne!(data.len(), 8);
            check_error(&error);
        }
    }
}

fn round_trip(batch: &KvEventBatch) {
    for encoding in [Encoding::ArrayLike, Encoding::MapEvents, Encoding::Map] {
        let mut payload = Vec::new();
        encode_batch(batch, encoding, &mut payload);
        let again = decode_batch(&payload, &DecodeLimits::default())
            .unwrap_or_else(|e| panic!("{encoding:?}: {e}"));
        assert!(same(&again, batch), "{encoding:?}");
        let mut twice = Vec::new();
        encode_batch(&again, encoding, &mut twice);
        assert_eq!(twice, payload, "{encoding:?}");
    }
}
