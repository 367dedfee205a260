//! The cache-aware policy's choice for one request, given each worker's load (requests the
//! router has in flight there), as `CacheAwarePolicy::select_worker`
//! (`sgl-model-gateway/src/policies/cache_aware.rs`, sglang-router 0.3.2) makes it:
//!
//! 1. **imbalanced** when `max − min > balance_abs_threshold` *and*
//!    `max > min × balance_rel_threshold` (loads over every worker; the relative test in
//!    `f32`, as upstream): the least-loaded worker;
//! 2. else the prefix tree's best match: if `matched / prompt length` (in characters)
//!    exceeds `cache_threshold`, the worker holding that match;
//! 3. else the least-loaded worker.
//!
//! The least-loaded worker is the first of least load, in pool order.

/// The policy's thresholds (upstream's `CacheAwareConfig` fields).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Thresholds {
    /// Match rate above which the best-matching worker is chosen.
    pub(crate) cache_threshold: f32,
    /// Absolute load gap of the imbalance test.
    pub(crate) balance_abs_threshold: usize,
    /// Relative load ratio of the imbalance test.
    pub(crate) balance_rel_threshold: f32,
}

/// Why a worker was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// The pool was imbalanced: the least-loaded worker.
    Balance(usize),
    /// The match rate exceeded the threshold: the best-matching worker.
    CacheHit(usize),
    /// The match rate did not: the least-loaded worker.
    CacheMiss(usize),
}

impl Route {
    /// The chosen worker's index.
    pub(crate) fn index(self) -> usize {
        match self {
            Route::Balance(i) | Route::CacheHit(i) | Route::CacheMiss(i) => i,
        }
    }
}

/// Whether `loads` are imbalanced under `t`.
pub(crate) fn is_imbalanced(loads: &[usize], t: &Thresholds) -> bool {
    let min = loads.iter().copied().min().unwrap_or(0);
    let max = loads.iter().copied().max().unwrap_or(0);
    max.saturating_sub(min) > t.balance_abs_threshold
        && (max as f32) > (min as f32 * t.balance_rel_threshold)
}

/// The first worker of least load (0 for no workers).
pub(crate) fn least_loaded(loads: &[usize]) -> usize {
    loads
        .iter()
        .enumerate()
        .min_by_key(|(i, l)| (**l, *i))
        .map_or(0, |(i, _)| i)
}

/// The choice for a prompt of `text_len` symbols when the tree's best match is `matched`
/// symbols held by worker `holder` (`matched` asked lazily: not when imbalanced).
pub(crate) fn decide(
    loads: &[usize],
    t: &Thresholds,
    text_len: usize,
    matched: impl FnOnce() -> (usize, Option<usize>),
) -> Route {
    if is_imbalanced(loads, t) {
        return Route::Balance(least_loaded(loads));
    }
    let (matched, holder) = matched();
    let rate = if text_len == 0 {
        0.0
    } else {
        matched as f32 / text_len as f32
    };
    match holder {
        Some(h) if rate > t.cache_threshold => Route::CacheHit(h),
        _ => Route::CacheMiss(least_loaded(loads)),
    }
}
