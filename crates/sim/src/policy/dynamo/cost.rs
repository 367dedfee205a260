//! The cost of sending a request to one worker: Dynamo's default worker logit
//! (`DefaultWorkerScorer::worker_logit`, `lib/kv-router/src/scheduling/selector/reference.rs`
//! in `dynamo-kv-router` 1.6.1), for an aggregated worker with device-tier overlap only.
//!
//! ```text
//! decay          = 1 / (1 + d · ((P_w − P_min) / B) / max(1, ⌈isl / B⌉))   (1 when d = 0)
//! prefill_blocks = max(0, (P_w + isl) / B − credit · decay · overlap_w)
//! cost_w         = prefill_load_scale · prefill_blocks
//!                  + potential_decode_blocks_w
//!                  + decode_active_request_weight · active_requests_w
//! ```
//!
//! `P_w` is the worker's pending prefill tokens (requests routed there whose first token has
//! not come back), `overlap_w` the request's leading prompt blocks the worker caches, `B` the
//! KV block size and `d` the overlap-credit decay. The lowest cost wins.

/// The formula's settings (upstream's `KvRouterConfig` fields).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Weights {
    /// Blocks of prefill credited per cached block (`overlap_score_credit`).
    pub(crate) overlap_score_credit: f64,
    /// Decay of that credit with excess pending prefill (`overlap_score_credit_decay`).
    pub(crate) overlap_score_credit_decay: f64,
    /// Scale of the prefill term (`prefill_load_scale`).
    pub(crate) prefill_load_scale: f64,
    /// Blocks charged per active request (`decode_active_request_weight`).
    pub(crate) decode_active_request_weight: f64,
    /// KV block size in tokens.
    pub(crate) block_size: u64,
}

impl Default for Weights {
    /// Upstream's defaults (`KvRouterConfig::default()`, and the frontend's flags).
    fn default() -> Self {
        Weights {
            overlap_score_credit: 1.0,
            overlap_score_credit_decay: 0.0,
            prefill_load_scale: 1.0,
            decode_active_request_weight: 0.0,
            block_size: 16,
        }
    }
}

/// What the router knows of one worker for this request.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct WorkerInputs {
    /// Pending prefill tokens of the requests routed there (`active_prefill_tokens`).
    pub(crate) active_prefill_tokens: u64,
    /// Active KV blocks there once this request's prompt joins them, shared blocks counted
    /// once (`potential_decode_blocks`).
    pub(crate) potential_decode_blocks: u64,
    /// Requests routed there and not finished.
    pub(crate) active_requests: u64,
    /// Leading prompt blocks of this request the worker caches (device tier).
    pub(crate) overlap_blocks: u64,
}

/// The cost of `worker` for a request of `isl_tokens` prompt tokens, when the least pending
/// prefill over the eligible workers is `min_active_prefill_tokens`.
pub(crate) fn worker_logit(
    weights: &Weights,
    isl_tokens: u64,
    min_active_prefill_tokens: u64,
    worker: &WorkerInputs,
) -> f64 {
    let block = weights.block_size.max(1) as f64;
    let decay = if weights.overlap_score_credit_decay > 0.0 {
        let excess = worker
            .active_prefill_tokens
            .saturating_sub(min_active_prefill_tokens) as f64
            / block;
        let request_blocks = isl_tokens.div_ceil(weights.block_size.max(1)).max(1) as f64;
        1.0 / (1.0 + weights.overlap_score_credit_decay * excess / request_blocks)
    } else {
        1.0
    };
    let credit_blocks = weights.overlap_score_credit * decay * worker.overlap_blocks as f64;
    let raw_prefill_blocks = (worker.active_prefill_tokens + isl_tokens) as f64 / block;
    let prefill_blocks = (raw_prefill_blocks - credit_blocks).max(0.0);
    weights.prefill_load_scale * prefill_blocks
        + worker.potential_decode_blocks as f64
        + weights.decode_active_request_weight * worker.active_requests as f64
}

/// Tokens of a request's prompt left to prefill on a worker caching `overlap_blocks` of it:
/// what the router adds to that worker's pending prefill when it routes the request there.
pub(crate) fn effective_prefill_tokens(
    isl_tokens: u64,
    overlap_blocks: u64,
    block_size: u64,
) -> u64 {
    isl_tokens.saturating_sub((overlap_blocks * block_size).min(isl_tokens))
}
