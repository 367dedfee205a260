//! Deterministic prompts and pools for the benchmarks.

use std::sync::Arc;

use shepherd_scheduler_core::clock::{ManualClock, Timestamp};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointMetrics, Pool};
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
use shepherd_scheduler_core::rng::PickRng;
use shepherd_test_util::TestPool;

/// `len` bytes of printable ASCII, deterministic in `seed`.
pub fn text(seed: u64, len: usize) -> String {
    let mut rng = PickRng::seed_from(seed);
    let mut out = String::with_capacity(len);
    while out.len() < len {
        let word = rng.next_u64();
        for b in word.to_le_bytes() {
            if out.len() == len {
                break;
            }
            out.push((b' ' + (b % 94)) as char);
        }
    }
    out
}

/// A prompt of `shared` bytes from group `group` followed by `unique` bytes unique to `id`.
pub fn grouped_prompt(group: u64, id: u64, shared: usize, unique: usize) -> String {
    let mut prompt = text(0xA11CE ^ group.wrapping_mul(0x9E37_79B9), shared);
    prompt.push_str(&text(0xB0B ^ id.wrapping_mul(0xC2B2_AE35), unique));
    prompt
}

/// A request for model `bench-model` with `prompt`.
pub fn request(id: u64, prompt: String) -> InferenceRequest {
    InferenceRequest::new(format!("r{id}"), "bench-model", Prompt::Text(prompt))
}

/// A pool of `n` loopback endpoints with fresh, varied metrics, and the clock they are fresh at.
pub fn pool(n: usize) -> (Arc<Pool>, Arc<ManualClock>) {
    let t =
        TestPool::with_addresses((0..n).map(|i| format!("127.0.{}.{}:8000", i / 250, i % 250 + 1)));
    t.clock.set(Timestamp::from_millis(1_000));
    scrape(&t.endpoints);
    (t.pool, t.clock)
}

/// Stores the same pseudo-random load on `endpoints` as every scrape of the bench pool (a
/// fixed seed), stamped now: fresh metrics.
pub fn scrape(endpoints: &[Arc<Endpoint>]) {
    let mut rng = PickRng::seed_from(7);
    for ep in endpoints {
        ep.set_metrics(EndpointMetrics {
            waiting: rng.below(8) as u32,
            running: rng.below(64) as u32,
            kv_utilization: rng.unit_f64() * 0.9,
            num_gpu_blocks: Some(24_000),
            block_size: Some(16),
            ..Default::default()
        });
    }
}

/// Pseudo tokens of a text prompt: 4 bytes each, little-endian (a trailing partial token is
/// dropped), as Shepherd hashes them.
pub fn pseudo_tokens(text: &str) -> Vec<u32> {
    text.as_bytes()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
