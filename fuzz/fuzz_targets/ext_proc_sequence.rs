//! Fuzzes the ext_proc endpoint picker's stream state machine with message sequences.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shepherd_fuzz::ext_proc_sequence(data));
