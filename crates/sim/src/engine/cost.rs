//! How long one engine step takes: the cost model.
//!
//! A step of a vLLM-like engine runs one forward pass over a batch that mixes decodes (one new
//! token each) and prefill chunks. Its time is
//!
//! ```text
//! step = fixed + per_request × requests
//!      + (weight_read^p + (compute_per_token × (prefill tokens + decode tokens))^p)^(1/p)
//!      + decode_attention_per_context_token × Σ context of the decodes
//!      + prefill_attention_per_pair × Σ chunk × (cached context + chunk / 2)
//! ```
//!
//! - `fixed`: scheduler, sampling and kernel-launch overhead of a step;
//! - `weight_read`: streaming the model weights from HBM once (the memory-bound floor of a
//!   decode step: 15 GB of Llama-3-8B's bf16 weights at 88 % of 3.35 TB/s is 5.4 ms on an
//!   H100);
//! - `compute_per_token`: the matmul time of one token when compute-bound (2 × 7 GFLOP per
//!   token: 22.9 µs on an H100, 61 % of its bf16 peak; 66.5 µs on an A100, 67 %). The matmuls
//!   turn from the floor to the compute line smoothly (`p` = [`CostModel::matmul_knee`], 2 in
//!   the presets), as a profile of the linear layers shows, not at a hard corner;
//! - attention: decodes read the KV cache of their context (128 KiB per token for Llama-3-8B
//!   with GQA: 43.7 ns per token on an H100, as vLLM's published fit says), prefill chunks
//!   attend to their cached context and, causally, to themselves (0.52 MFLOP per pair: 0.91 ns
//!   on an H100, 58 % of peak).
//!
//! Outside the steps, a request spends [`CostModel::frontend_nanos`] in the server's frontend
//! (HTTP, request processing, tokenization, streaming the first token back): the runner
//! delays its arrival at the engine by that much. `docs/calibration.md` sets every
//! coefficient against published measurements ([`crate::calibration`]).
//!
//! ```
//! use shepherd_sim::engine::{BatchShape, CostModel};
//!
//! let h100 = CostModel::h100_llama8b();
//! let idle_decode = h100.step_nanos(&BatchShape { requests: 1, decode_tokens: 1, decode_context: 100, ..Default::default() });
//! assert!((6_300_000..6_600_000).contains(&idle_decode));
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
    /// How sharply the matmuls turn from the weight-read floor to compute-bound: the exponent
    /// `p` of `(weight_read^p + compute^p)^(1/p)` (infinity would be a hard `max`).
    #[serde(default = "default_matmul_knee")]
    pub matmul_knee: f64,
    /// Attention time per context token of a decode.
    pub decode_attention_per_token_ns: f64,
    /// Attention time per (query token, context token) pair of a prefill.
    pub prefill_attention_per_pair_ns: f64,
    /// Time a request spends in the server's frontend outside any step (HTTP, request
    /// processing, detokenizing and streaming the first token back).
    #[serde(default)]
    pub frontend_ns: f64,
    /// Frontend time per prompt token (tokenization).
    #[serde(default)]
    pub frontend_per_prompt_token_ns: f64,
}

fn default_matmul_knee() -> f64 {
    MATMUL_KNEE
}

/// The matmul knee of the presets.
const MATMUL_KNEE: f64 = 2.0;

impl CostModel {
    /// Llama-3-8B (bf16) on one H100 SXM, calibrated in `docs/calibration.md`: a 6.4 ms
    /// decode floor (the weights read at 88 % of 3.35 TB/s plus 1 ms of step overhead),
    /// 22.9 µs per prefill token (61 % of 989 TFLOP/s), prefill attention at 58 % of peak,
    /// decode attention 43.7 ns per context token, 7.5 ms in the frontend.
    pub fn h100_llama8b() -> Self {
        CostModel {
            fixed_ns: 1_000_000.0,
            per_request_ns: 8_000.0,
            weight_read_ns: 5_430_000.0,
            compute_per_token_ns: 22_900.0,
            matmul_knee: MATMUL_KNEE,
            decode_attention_per_token_ns: 43.7,
            prefill_attention_per_pair_ns: 0.91,
            frontend_ns: 7_500_000.0,
            frontend_per_prompt_token_ns: 0.0,
        }
    }

    /// Llama-3-8B (bf16) on one A100 80GB, calibrated in `docs/calibration.md`: a 10.7 ms
    /// decode floor (the weights read at 85 % of 2.04 TB/s plus 1.4 ms of step overhead),
    /// 66.5 µs per prefill token (67 % of 312 TFLOP/s), prefill attention at 58 % of peak,
    /// decode attention 72 ns per context token (the H100's at the A100's bandwidth), the
    /// H100's frontend.
    pub fn a100_llama8b() -> Self {
        CostModel {
            fixed_ns: 1_400_000.0,
            per_request_ns: 12_000.0,
            weight_read_ns: 9_300_000.0,
            compute_per_token_ns: 66_500.0,
            matmul_knee: MATMUL_KNEE,
            decode_attention_per_token_ns: 72.0,
            prefill_attention_per_pair_ns: 2.9,
            frontend_ns: 7_500_000.0,
            frontend_per_prompt_token_ns: 0.0,
        }
    }

    /// The time a request with `prompt_tokens` spends in the frontend, in whole nanoseconds.
    pub fn frontend_nanos(&self, prompt_tokens: u32) -> u64 {
        let ns = self.frontend_ns + self.frontend_per_prompt_token_ns * f64::from(prompt_tokens);
        if ns.is_finite() && ns > 0.0 {
            ns.round() as u64
        } else {
            0
        }
    }

    /// The matmul time of a step over `tokens` tokens: the weight-read floor blended into
    /// the compute-bound line.
    pub fn matmul_ns(&self, tokens: f64) -> f64 {
        let floor = self.weight_read_ns.max(0.0);
        let compute = (self.compute_per_token_ns * tokens).max(0.0);
        let p = self.matmul_knee;
        if !(p.is_finite() && p >= 1.0) {
            return floor.max(compute);
        }
        let big = floor.max(compute);
        if big == 0.0 {
            return 0.0;
        }
        // Scaled by the larger term so the powers cannot overflow.
        big * ((floor / big).powf(p) + (compute / big).powf(p)).powf(1.0 / p)
    }

    /// The duration of a step over `batch`, in whole nanoseconds.
    pub fn step_nanos(&self, batch: &BatchShape) -> u64 {
        let tokens = (batch.prefill_tokens + batch.decode_tokens) as f64;
        let ns = self.fixed_ns
            + self.per_request_ns * f64::from(batch.requests)
            + self.matmul_ns(tokens)
            + self.decode_attention_per_token_ns * batch.decode_context as f64
            + self.prefill_attention_per_pair_ns * batch.prefill_pairs;
        ns.max(1.0).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matmul_blends_from_the_weight_read_floor_into_the_compute_line() {
        let h100 = CostModel::h100_llama8b();
        let floor = h100.weight_read_ns;
        assert!((h100.matmul_ns(0.0) - floor).abs() < 1e-6);
        // At the knee (compute = floor) the blend costs sqrt(2) of either.
        let knee = floor / h100.compute_per_token_ns;
        assert!((h100.matmul_ns(knee) / floor - 2f64.sqrt()).abs() < 1e-9);
        // Far past it, compute-bound.
        let big = h100.matmul_ns(100_000.0) / (h100.compute_per_token_ns * 100_000.0);
        assert!((1.0..1.001).contains(&big), "{big}");
        // A hard max when the knee is infinite, and garbage never panics or goes negative.
        let hard = CostModel {
            matmul_knee: f64::INFINITY,
            ..h100
        };
        assert_eq!(hard.matmul_ns(knee / 2.0), floor);
        let garbage = CostModel {
            matmul_knee: f64::NAN,
            compute_per_token_ns: -1.0,
            ..h100
        };
        assert_eq!(garbage.matmul_ns(10.0), floor);
    }

    #[test]
    fn the_frontend_time_is_never_negative() {
        let mut model = CostModel::h100_llama8b();
        assert_eq!(model.frontend_nanos(100), 7_500_000);
        model.frontend_ns = -1e9;
        assert_eq!(model.frontend_nanos(100), 0);
        model.frontend_ns = f64::NAN;
        assert_eq!(model.frontend_nanos(100), 0);
    }
}
