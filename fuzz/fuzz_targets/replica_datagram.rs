//! Fuzzes the replica exchange's datagram decoder: the gate (size, magic, MAC, sender, replay
//! window) on raw bytes, and, behind a valid MAC, the load-report and index-delta decoders.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shepherd_fuzz::replicas::replica_datagram(data));
