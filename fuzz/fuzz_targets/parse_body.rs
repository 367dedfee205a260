//! Fuzzes the request-body parsers (OpenAI, every HTTP parser of a parser set, and the gRPC
//! parsers): first byte picks the paths, the rest is the body.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shepherd_fuzz::parse_body(data));
