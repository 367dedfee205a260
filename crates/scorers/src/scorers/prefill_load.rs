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
//! estimates are published before it scores. It is a [`Category::Distribution`] scorer and is
//! never neutral.
//!
//! ## Parameters
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `uncachedWeight` | 1.0 | multiplies this request's own uncached tokens in the cost: 1 = the expected wait; 0 = only the prefill work already queued there (the scorer then only keeps bursts off servers busy prefilling, and adds no prefix affinity of its own) |
//! | `minScaleTokens` | 0 | the cost that scores 0 is at least this many tokens: `1 − cost / max(max cost, minScaleTokens)`. About one engine step's token budget (vLLM's `max_num_batched_tokens`, e.g. 8192) makes prefill work that fits in the next step nearly free, so a short queued question does not push a request off the server that caches its prefix |
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
//! PrefillLoadScorer::default().score(&mut cycle, &candidates, &mut out);
//! // Costs 300 + 100 = 400 and 0 + 1000 = 1000.
//! assert!((out[0].value - 0.6).abs() < 1e-12);
//! assert_eq!(out[1].value, 0.0);
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{
    CachedPrefix, Category, CycleState, PluginInstance, Score, Scorer,
};

/// Registry type name.
pub const TYPE_NAME: &str = "prefill-load-scorer";

/// The `prefill-load-scorer` parameters (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PrefillLoadParameters {
    /// Multiplies this request's own uncached tokens in the cost (finite, at least 0).
    pub uncached_weight: f64,
    /// The cost that scores 0 is at least this many tokens.
    pub min_scale_tokens: u64,
}

impl Default for PrefillLoadParameters {
    fn default() -> Self {
        PrefillLoadParameters {
            uncached_weight: 1.0,
            min_scale_tokens: 0,
        }
    }
}

/// Scores the shortest expected prefill wait highest (a [`Category::Distribution`] scorer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrefillLoadScorer {
    uncached_weight: f64,
    min_scale_tokens: u64,
}

impl Default for PrefillLoadScorer {
    fn default() -> Self {
        PrefillLoadScorer::new(&PrefillLoadParameters::default())
    }
}

impl PrefillLoadScorer {
    /// A scorer with `parameters` (an invalid weight counts as the default, 1).
    pub fn new(parameters: &PrefillLoadParameters) -> Self {
        let w = parameters.uncached_weight;
        PrefillLoadScorer {
            uncached_weight: if w.is_finite() && w >= 0.0 { w } else { 1.0 },
            min_scale_tokens: parameters.min_scale_tokens,
        }
    }

    /// The expected prefill wait on `endpoint`, in tokens, for a prompt of `prompt_tokens`.
    pub fn cost(&self, cycle: &CycleState<'_>, endpoint: &Endpoint, prompt_tokens: u64) -> u64 {
        self.cost_with(
            cycle.extensions.get::<CachedPrefix>(),
            endpoint,
            prompt_tokens,
        )
    }

    #[inline]
    fn cost_with(
        &self,
        cached: Option<&CachedPrefix>,
        endpoint: &Endpoint,
        prompt_tokens: u64,
    ) -> u64 {
        let uncached = cached.map_or(prompt_tokens, |c| {
            c.uncached_tokens(endpoint.id(), prompt_tokens)
        });
        // Saturating float-to-int conversion: never overflows.
        let own = (uncached as f64 * self.uncached_weight) as u64;
        endpoint.total_pending_prefill_tokens().saturating_add(own)
    }
}

impl Scorer for PrefillLoadScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let prompt_tokens = cycle.request.prompt.estimated_tokens() as u64;
        // Looked up once (the cycle's extensions are a type map), and indexed: each candidate
        // is read twice.
        let cached = cycle
            .extensions
            .get_mut::<CachedPrefix>()
            .map(|cached| cached.indexed());
        let cost = |endpoint: &Endpoint| self.cost_with(cached, endpoint, prompt_tokens);
        let scale = candidates
            .iter()
            .map(|e| cost(e))
            .max()
            .unwrap_or(0)
            .max(self.min_scale_tokens);
        for (slot, endpoint) in out.iter_mut().zip(candidates) {
            *slot = if scale == 0 {
                Score::new(1.0)
            } else {
                Score::new(1.0 - cost(endpoint) as f64 / scale as f64)
            };
        }
    }
}

/// Builds a `prefill-load-scorer` from its config arguments.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: PrefillLoadParameters = args.parse()?;
    let w = parameters.uncached_weight;
    if !(w.is_finite() && w >= 0.0) {
        return Err(PluginError::invalid(
            "uncachedWeight",
            format!("must be a finite number >= 0, got {w}"),
        ));
    }
    Ok(PluginInstance::scorer(Arc::new(PrefillLoadScorer::new(
        &parameters,
    ))))
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
        PrefillLoadScorer::default().score(&mut cycle, &candidates, &mut out);
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
    fn uncached_weight_zero_counts_only_the_queued_prefill() {
        let pool = pool(3);
        let snapshot = pool.snapshot();
        let eps = snapshot.endpoints();
        let candidates: Vec<&Arc<Endpoint>> = eps.iter().collect();
        let _busy = eps[1].start_request_uncached(16_200, 16_200);
        let _light = eps[0].start_request_uncached(1000, 4_050);
        let request = tokens(16_200);
        let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::ZERO);
        CachedPrefix::publish(&mut cycle.extensions, [(eps[0].id(), 16_000)]);
        let scorer = PrefillLoadScorer::new(&PrefillLoadParameters {
            uncached_weight: 0.0,
            ..Default::default()
        });
        let mut out = vec![Score::NEUTRAL; 3];
        scorer.score(&mut cycle, &candidates, &mut out);
        // Pending 1000 (capped at the prompt), 16,200 and 0: the idle cold server is not
        // penalized for lacking the prefix.
        let values: Vec<f64> = out.iter().map(|s| s.value).collect();
        assert_eq!(values, vec![1.0 - 1000.0 / 16_200.0, 0.0, 1.0]);
    }

    #[test]
    fn a_minimum_scale_keeps_small_queues_nearly_free() {
        let pool = pool(2);
        let snapshot = pool.snapshot();
        let eps = snapshot.endpoints();
        let candidates: Vec<&Arc<Endpoint>> = eps.iter().collect();
        let _queued = eps[0].start_request_uncached(1200, 1200);
        let request = tokens(1000);
        let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::ZERO);
        let scorer = PrefillLoadScorer::new(&PrefillLoadParameters {
            uncached_weight: 0.0,
            min_scale_tokens: 8000,
        });
        let mut out = vec![Score::NEUTRAL; 2];
        scorer.score(&mut cycle, &candidates, &mut out);
        assert_eq!(out[0].value, 1.0 - 1200.0 / 8000.0);
        assert_eq!(out[1].value, 1.0);
        // Above the scale the worst candidate scores 0 again.
        let _long = eps[0].start_request_uncached(16_000, 16_000);
        scorer.score(&mut cycle, &candidates, &mut out);
        assert_eq!(out[0].value, 0.0);
    }

    #[test]
    fn parameters_are_rejected() {
        let pool = Arc::new(pool(1));
        let shared = shepherd_scheduler_core::shared::SharedState::new(pool);
        let bad = serde_json::json!({"weight": 2});
        let negative = serde_json::json!({"uncachedWeight": -1.0});
        let zero = serde_json::json!({"uncachedWeight": 0.0});
        let args = PluginArgs::new("p", TYPE_NAME, &bad, &shared, 0);
        assert!(factory(&args).is_err());
        let none = serde_json::json!({});
        let args = PluginArgs {
            parameters: &none,
            ..args
        };
        assert!(factory(&args).unwrap().as_scorer().is_some());
        let args = PluginArgs {
            parameters: &negative,
            ..args
        };
        assert!(factory(&args).is_err());
        let args = PluginArgs {
            parameters: &zero,
            ..args
        };
        assert!(factory(&args).is_ok());
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
            proptest::prop_assert!(scores.contains(&1.0) || scores.contains(&0.0));
        }
    }
}
