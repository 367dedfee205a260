//! Fuzzes the OpenAI request-body parser: first byte picks the path, the rest is the body.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shepherd_fuzz::parse_body(data));
