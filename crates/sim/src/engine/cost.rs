//! How long one engine step takes: the cost model.
//!
//! A step of a vLLM-like engine runs one forward pass over a batch that mixes decodes (one new
//! token each) and prefill chunks. Its time is
//!
//! ```text
//! step = fixed + per_request × requests
//!      + max(weight_read, compute_per_token × (prefill tokens + decode tokens))
//!      + decode_attention_per_context_token × Σ context of the decodes
//!      + prefill_attention_per_pair × Σ chunk × (cached context + chunk / 2)
//! ```
//!
//! - `fixed`: scheduler, sampling and kernel-launch overhead of a step;
//! - `weight_read`: streaming the model weights from HBM once (the memory-bound floor of a
//!   decode step: 16 GB of 8B bf16 weights at 3.35 TB/s is about 4.8 ms on an H100);
//! - `compute_per_token`: the matmul time of one token when compute-bound (≈ 2 × 8 GFLOP per
//!   token at a realistic fraction of peak: ~22 µs on an H100, ~67 µs on an A100);
//! - attention: decodes read the KV cache of their context (128 KiB per token for Llama-3-8B
//!   with GQA: ~40 ns per token on an H100), prefill chunks attend to their cached context and,
//!   causally, to themselves.
//!
//! ```
//! use shepherd_sim::engine::{BatchShape, CostModel};
//!
//! let h100 = CostModel::h100_llama8b();
//! let idle_decode = h100.step_nanos(&BatchShape { requests: 1, decode_tokens: 1, decode_context: 100, ..Default::default() });
//! assert!((5_500_000..6_200_000).contains(&idle_decode));
//! ```

use serde::{Deserialize, Serialize};

/// What a step's batch looks like, as far as its cost goes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BatchShape {
    /// Requests in the batch.
    pub requests: u32,
    /// Prefill tokens computed in this step.
    pub prefill_tokens: u64,
    /// Decode tokens (one per decoding request).
    pub decode_tokens: u64,
    /// Σ context length of the decoding requests.
    pub decode_context: u64,
    /// Σ over prefill chunks of chunk × (context already computed + chunk / 2).
    pub prefill_pairs: f64,
}

/// Coefficients of the step-time model (see the module docs). All times in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostModel {
    /// Fixed overhead per step.
    pub fixed_ns: f64,
    /// Overhead per request in the batch.
    pub per_request_ns: f64,
    /// Time to read the weights once.
    pub weight_read_ns: f64,
    /// Compute time per token (prefill or decode) when compute-bound.
    pub compute_per_token_ns: f64,
    /// Attention time per context token of a decode.
    pub decode_attention_per_token_ns: f64,
    /// Attention time per (query token, context token) pair of a prefill.
    pub prefill_attention_per_pair_ns: f64,
}

impl CostModel {
    /// Llama-3-8B (bf16) on one H100 SXM: ~5.5–6 ms floor, ~22 µs per prefill token.
    pub fn h100_llama8b() -> Self {
        CostModel {
            fixed_ns: 800_000.0,
            per_request_ns: 8_000.0,
            weight_read_ns: 4_900_000.0,
            compute_per_token_ns: 22_000.0,
            decode_attention_per_token_ns: 40.0,
            prefill_attention_per_pair_ns: 0.6,
        }
    }

    /// Llama-3-8B (bf16) on one A100 80GB: ~9.5–10 ms floor, ~67 µs per prefill token.
    pub fn a100_llama8b() -> Self {
        CostModel {
            fixed_ns: 1_400_000.0,
            per_request_ns: 12_000.0,
            weight_read_ns: 8_200_000.0,
            compute_per_token_ns: 65_500.0,
            decode_attention_per_token_ns: 65.0,
            prefill_attention_per_pair_ns: 1.2,
        }
    }

    /// The duration of a step over `batch`, in whole nanoseconds.
    pub fn step_nanos(&self, batch: &BatchShape) -> u64 {
        let tokens = (batch.prefill_tokens + batch.decode_tokens) as f64;
        let ns = self.fixed_ns
            + self.per_request_ns * f64::from(batch.requests)
            + self.weight_read_ns.max(self.compute_per_token_ns * tokens)
            + self.decode_attention_per_token_ns * batch.decode_context as f64
            + self.prefill_attention_per_pair_ns * batch.prefill_pairs;
        ns.max(1.0).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_match_published_figures() {
        let a100 = CostModel::a100_llama8b();
        let floor = a100.step_nanos(&BatchShape {
            requests: 1,
            decode_tokens: 1,
            ..Default::default()
        });
        assert!((9_500_000..10_000_000).contains(&floor), "{floor}");
        // A long prefill is compute-bound: marginal cost per token within the quoted ranges.
        for (model, lo, hi) in [
            (CostModel::h100_llama8b(), 20_000.0, 25_000.0),
            (a100, 65_000.0, 70_000.0),
        ] {
            let t = |n: u64| {
                model.step_nanos(&BatchShape {
                    requests: 1,
                    prefill_tokens: n,
                    prefill_pairs: n as f64 * n as f64 / 2.0,
                    ..Default::default()
                }) as f64
            };
            let per_token = (t(4096) - t(2048)) / 2048.0;
            assert!((lo..hi).contains(&per_token), "{per_token}");
        }
    }
}
