//! Fuzzes the YAML picker configuration: load it, and build a scheduler when it loads.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shepherd_fuzz::parse_config(data));
