//! `prefill-load-scorer`: prefers endpoints where this request's prompt would be prefilled
//! soonest.
//!
//! A request's time to first token is mostly the prefill work queued ahead of it plus its own
//! uncached prompt. For each candidate the scorer estimates that wait, in tokens:
//!
//! ```text
//! cost = pending prefill tokens on the endpoint + this request's uncached tokens there
//! ```
//!
//! - *pending prefill* ([`Endpoint::pending_prefill_tokens`]) is the scheduler's own count of
//!   uncached prompt tokens it has sent to the endpoint whose first token has not come back:
//!   fresh at every pick, like the in-flight count, so it sees a burst before any scrape does;
//! - *uncached tokens* are the prompt tokens minus what an affinity scorer believes the
//!   candidate caches ([`CachedPrefix`], published by `prefix-cache-scorer`); with no estimate
//!   the whole prompt counts.
//!
//! Scores are relative to the worst candidate, `1 − cost / max cost` (all zero → all 1). So a
//! server that lacks a long prefix, or is still prefilling it for an earlier request, scores
//! low until the servers that have it queue as much prefill work themselves — the same idea as
//! an overlap-credited prefill cost, fed by the scheduler's own counts.
//!
//! **Order matters:** list it *after* `prefix-cache-scorer` in the profile, so the cached
//! estimates are published before it scores. It is a [`Category::Distribution`] scorer; it
//! takes no parameters and is never neutral.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shepherd_scheduler_core::clock::Timestamp;
//! use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
//! use shepherd_scheduler_core::plugin::{CachedPrefix, CycleState, Score, Scorer};
//! use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
//! use shepherd_scorers::scorers::PrefillLoadScorer;
//!
//! let pool = Pool::new();
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let snapshot = pool.snapshot();
//! let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
//! // The first endpoint caches 900 of the 1000-token prompt but has 300 tokens to prefill.
//! let _earlier = candidates[0].start_request_uncached(2000, 300);
//!
//! let request = InferenceRequest::new("r", "m", Prompt::Tokens((0..1000).collect()));
//! let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_millis(200));
//! CachedPrefix::publish(&mut cycle.extensions, [(candidates[0].id(), 900)]);
//! let mut out = vec![Score::NEUTRAL; 2];
//! PrefillLoadScorer.score(&mut cycle, &candidates, &mut out);
//! // Costs 300 + 100 = 400 and 0 + 1000 = 1000.
//! assert!((out[0].value - 0.6).abs() < 1e-12);
//! assert_eq!(out[1].value, 0.0);
//! ```

use std::sync::Arc;

use shepherd_scheduler_core::config::PluginArgs;
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{
    CachedPrefix, Category, CycleState, PluginInstance, Score, Scorer,
};

use super::normalize::fewer_relative_to_busiest;
use crate::params::NoParameters;

/// Registry type name.
pub const TYPE_NAME: &str = "prefill-load-scorer";

/// Scores the shortest expected prefill wait highest (a [`Category::Distribution`] scorer).
#[derive(Debug, Clone, Copy, Default)]
pub struct PrefillLoadScorer;

impl PrefillLoadScorer {
    /// The expected prefill wait on `endpoint`, in tokens, for a prompt of `prompt_tokens`.
    pub fn cost(cycle: &CycleState<'_>, endpoint: &Endpoint, prompt_tokens: u64) -> u64 {
        let uncached =
            CachedPrefix::uncached_tokens_in(&cycle.extensions, endpoint.id(), prompt_tokens);
        endpoint.pending_prefill_tokens().saturating_add(uncached)
    }
}

impl Scorer for PrefillLoadScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let prompt_tokens = cycle.request.prompt.estimated_tokens() as u64;
        let cycle = &*cycle;
        fewer_relative_to_busiest(out, |i| Self::cost(cycle, candidates[i], prompt_tokens));
    }
}

/// Builds a `prefill-load-scorer` (it takes no parameters).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, String> {
    args.parse::<NoParameters>()?;
    Ok(PluginInstance::scorer(Arc::new(PrefillLoadScorer)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use shepherd_scheduler_core::clock::Timestamp;
    use shepherd_scheduler_core::endpoint::{EndpointId, InFlightGuard, Pool};
    use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
    use std::time::Duration;

    fn pool(n: usize) -> Pool {
        let pool = Pool::new();
        pool.set_members((0..n).map(|i| format!("10.0.0.{i}:8000")));
        pool
    }

    fn tokens(n: u32) -> InferenceRequest {
        InferenceRequest::new("r", "m", Prompt::Tokens((0..n).collect()))
    }

    /// Scores `request` over `pool` with `cached` published (when given).
    fn run(pool: &Pool, request: &InferenceRequest, cached: Option<&[(usize, u64)]>) -> Vec<f64> {
        let snapshot = pool.snapshot();
        let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
        let mut cycle = CycleState::new(request, Timestamp::ZERO, Duration::from_millis(200));
        if let Some(cached) = cached {
            let ids: Vec<EndpointId> = candidates.iter().map(|e| e.id()).collect();
            CachedPrefix::publish(
                &mut cycle.extensions,
                cached.iter().map(|&(i, t)| (ids[i], t)),
            );
        }
        let mut out = vec![Score::NEUTRAL; candidates.len()];
        PrefillLoadScorer.score(&mut cycle, &candidates, &mut out);
        assert!(out.iter().all(|s| !s.neutral));
        out.iter().map(|s| s.value).collect()
    }

    #[test]
    fn a_cold_server_scores_below_one_that_caches_the_prefix() {
        let pool = pool(2);
        let scores = run(&pool, &tokens(16_200), Some(&[(0, 16_000)]));
        assert_eq!(scores[1], 0.0);
        assert!((scores[0] - (1.0 - 200.0 / 16_200.0)).abs() < 1e-12);
    }

    #[test]
    fn pending_prefill_of_a_cold_start_keeps_later_requests_away() {
        // Endpoint 1 already holds the prefix in the index (picked once) but is still
        // prefilling it; endpoint 0 has it and a dozen short prefills queued.
        let pool = pool(2);
        let snapshot = pool.snapshot();
        let eps = snapshot.endpoints();
        let _cold: InFlightGuard = eps[1].start_request_uncached(16_200, 16_200);
        let _hot: Vec<InFlightGuard> = (0..12)
            .map(|_| eps[0].start_request_uncached(16_200, 200))
            .collect();
        let scores = run(&pool, &tokens(16_200), Some(&[(0, 16_000), (1, 16_000)]));
        assert!(scores[0] > scores[1], "{scores:?}");
        assert_eq!(scores[1], 0.0);
    }

    #[test]
    fn prefill_done_makes_the_endpoint_attractive_again() {
        let pool = pool(2);
        let snapshot = pool.snapshot();
        let eps = snapshot.endpoints();
        let mut guard = eps[0].start_request_uncached(5000, 5000);
        assert_eq!(
            run(&pool, &tokens(100), None),
            vec![0.0, 1.0 - 100.0 / 5100.0]
        );
        guard.prefill_done();
        let scores = run(&pool, &tokens(100), None);
        assert_eq!(scores[0], scores[1], "equal costs, equal scores");
    }

    #[test]
    fn equal_costs_score_alike_and_nothing_to_do_scores_one() {
        let pool = pool(3);
        let scores = run(&pool, &tokens(500), None);
        assert!(scores.iter().all(|&s| s == scores[0]));
        assert_eq!(run(&pool, &tokens(0), None), vec![1.0, 1.0, 1.0]);
    }

    #[test]
    fn parameters_are_rejected() {
        let pool = Arc::new(pool(1));
        let clock: Arc<dyn shepherd_scheduler_core::clock::Clock> =
            Arc::new(shepherd_scheduler_core::clock::ManualClock::default());
        let bad = serde_json::json!({"weight": 2});
        let args = PluginArgs {
            name: "p",
            plugin_type: TYPE_NAME,
            parameters: &bad,
            pool: &pool,
            clock: &clock,
            seed: 0,
        };
        assert!(factory(&args).is_err());
        let none = serde_json::json!({});
        let args = PluginArgs {
            parameters: &none,
            ..args
        };
        assert!(factory(&args).unwrap().as_scorer().is_some());
    }

    proptest::proptest! {
        #[test]
        fn scores_stay_in_range(
            pending in proptest::collection::vec((0u64..u64::MAX / 4, 0u64..u64::MAX / 4), 1..6),
            cached in proptest::collection::vec((0usize..6, proptest::num::u64::ANY), 0..8),
            prompt in 0u32..3000,
        ) {
            let pool = pool(pending.len());
            let snapshot = pool.snapshot();
            let mut guards: Vec<InFlightGuard> = Vec::new();
            for (ep, &(prompt_tokens, uncached)) in snapshot.endpoints().iter().zip(&pending) {
                guards.push(ep.start_request_uncached(prompt_tokens, uncached));
            }
            let cached: Vec<(usize, u64)> =
                cached.into_iter().filter(|c| c.0 < pending.len()).collect();
            let scores = run(&pool, &tokens(prompt), Some(&cached));
            proptest::prop_assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)));
            proptest::prop_assert!(scores.iter().any(|&s| s == 1.0) || scores.iter().any(|&s| s == 0.0));
        }
    }
}
