//! Fuzzes the KV-event subscriber's ZMTP connection (handshake, subscription, bounded frames)
//! with what a publisher sends, on a real loopback TCP socket.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shepherd_fuzz::zmtp::zmtp_subscriber(data));
