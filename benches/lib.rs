//! Shared helpers for the benchmarks: deterministic prompts, pools and timing.
#![forbid(unsafe_code)]

pub mod docs_prompts;
pub mod latency_setup;
pub mod workload;
