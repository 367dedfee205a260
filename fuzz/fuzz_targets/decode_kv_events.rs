//! Fuzzes the KV-event payload decoder (and the topic and sequence-frame parsers) with one
//! ZeroMQ frame.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shepherd_fuzz::kv_events::decode_kv_events(data));
