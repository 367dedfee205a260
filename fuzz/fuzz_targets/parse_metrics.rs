//! Fuzzes the Prometheus text parser and the vLLM/SGLang metrics mappings with a `/metrics` page.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shepherd_fuzz::metrics::parse_metrics(data));
