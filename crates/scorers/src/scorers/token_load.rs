//! `token-load-scorer` (upstream's name): prefers endpoints with fewer tokens in flight,
//! counting what this request would add there.
//!
//! As upstream, for each candidate:
//!
//! ```text
//! load  = in-flight tokens there + this request's tokens there
//! score = 1                                  when load ≤ 0
//!       = 1 − min(load, queueThresholdTokens) / queueThresholdTokens  otherwise
//! ```
//!
//! In-flight tokens and the request's tokens are the `inflight-load-producer`'s
//! ([`InFlightLoad`]: by default the endpoint's
//! pending prefill tokens, and this request's uncached prompt tokens there, from the cached
//! estimates the profile's prefix plugins published). A [`Category::Distribution`] scorer.
//! With `prefix-cache-affinity-filter` before it, it is llm-d's "sticky until saturated"
//! default (the optimized-baseline guide).
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `queueThresholdTokens` | 4194304 (128 requests of 32K) | the load that scores 0; ≤ 0 means the default, as upstream |
//! | `inFlightLoadProducerName` | `inflight-load-producer` | the producer read (its defaults when none is declared) |
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shepherd_scheduler_core::clock::Timestamp;
//! use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
//! use shepherd_scheduler_core::plugin::{CachedPrefix, CycleState, Score, Scorer};
//! use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
//! use shepherd_scorers::producers::inflight_load::InFlightLoad;
//! use shepherd_scorers::scorers::TokenLoadScorer;
//!
//! let pool = Pool::new();
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let snapshot = pool.snapshot();
//! let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
//! let _busy = candidates[1].start_request_uncached(3000, 3000); // 3000 tokens to prefill
//!
//! let request = InferenceRequest::new("r", "m", Prompt::Tokens((0..1000).collect()));
//! let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_millis(200));
//! CachedPrefix::publish(&mut cycle.extensions, [(candidates[0].id(), 1000)]);
//! let scorer = TokenLoadScorer::new(10_000, InFlightLoad::default());
//! let mut out = vec![Score::NEUTRAL; 2];
//! scorer.score(&mut cycle, &candidates, &mut out);
//! assert_eq!(out[0].value, 1.0); // nothing in flight, the prompt cached
//! assert!((out[1].value - 0.6).abs() < 1e-12); // 3000 + 1000 of 10000
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{
    CachedPrefix, Category, CycleState, PluginInstance, Score, Scorer,
};

use crate::producers::inflight_load::{InFlightLink, InFlightLoad};

/// Registry type name.
pub const TYPE_NAME: &str = "token-load-scorer";

/// Upstream's default threshold: 128 requests of 32K tokens.
pub const DEFAULT_QUEUE_THRESHOLD_TOKENS: i64 = 4_194_304;

/// The `token-load-scorer` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct TokenLoadParameters {
    /// The load that scores 0 (≤ 0: the default).
    pub queue_threshold_tokens: Option<i64>,
    /// The in-flight load producer read.
    pub in_flight_load_producer_name: Option<String>,
}

#[derive(Debug)]
enum Load {
    Fixed(InFlightLoad),
    Linked(InFlightLink),
}

/// Scores by tokens in flight (a [`Category::Distribution`] scorer; see the module docs).
#[derive(Debug)]
pub struct TokenLoadScorer {
    threshold: f64,
    load: Load,
}

impl TokenLoadScorer {
    /// A scorer with `threshold` tokens (≤ 0: the default) counting load as `load` says.
    pub fn new(threshold: i64, load: InFlightLoad) -> Self {
        TokenLoadScorer {
            threshold: threshold_or_default(threshold),
            load: Load::Fixed(load),
        }
    }

    fn load(&self) -> &InFlightLoad {
        match &self.load {
            Load::Fixed(load) => load,
            Load::Linked(link) => link.get(),
        }
    }

    /// The load of `endpoint` for this cycle's request, in tokens.
    pub fn load_of(&self, cycle: &CycleState<'_>, endpoint: &Endpoint, input: u64) -> u64 {
        let cached = cycle.extensions.get::<CachedPrefix>();
        self.load_with(cached, cycle.request.max_tokens, endpoint, input)
    }

    #[inline]
    fn load_with(
        &self,
        cached: Option<&CachedPrefix>,
        max_tokens: Option<u32>,
        endpoint: &Endpoint,
        input: u64,
    ) -> u64 {
        let load = self.load();
        let uncached = cached.map_or(input, |c| c.uncached_tokens(endpoint.id(), input));
        load.tokens(endpoint)
            .saturating_add(load.request_tokens(uncached, input, max_tokens))
    }
}

fn threshold_or_default(threshold: i64) -> f64 {
    if threshold <= 0 {
        DEFAULT_QUEUE_THRESHOLD_TOKENS as f64
    } else {
        threshold as f64
    }
}

impl Scorer for TokenLoadScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let input = cycle.request.prompt.estimated_tokens() as u64;
        // Everything but the endpoints' own counts and cached prefixes is the same for every
        // candidate: looked up and worked out once (the sum is `load_with`'s, term by term).
        let load = self.load();
        let output = load.request_tokens(0, input, cycle.request.max_tokens);
        // A multiplication per candidate rather than a division; a load at or past the
        // threshold scores exactly 0. Loads below it are below 2⁶³ (the threshold is an
        // `i64`): converted as signed integers, one instruction.
        let threshold = self.threshold as u64;
        let per_token = 1.0 / self.threshold;
        let score = |tokens: u64| Score {
            // `load_with` is never negative: 0 scores 1, as upstream's idle endpoint.
            value: if tokens >= threshold {
                0.0
            } else {
                (1.0 - (tokens as i64) as f64 * per_token).max(0.0)
            },
            neutral: false,
        };
        // Indexed: each candidate's estimate in one read.
        match cycle
            .extensions
            .get_mut::<CachedPrefix>()
            .map(|cached| cached.indexed())
        {
            Some(cached) => {
                for (slot, endpoint) in out.iter_mut().zip(candidates) {
                    let uncached = cached.uncached_tokens(endpoint.id(), input);
                    let tokens = load
                        .tokens(endpoint)
                        .saturating_add(uncached.saturating_add(output));
                    *slot = score(tokens);
                }
            }
            None => {
                let request = input.saturating_add(output);
                for (slot, endpoint) in out.iter_mut().zip(candidates) {
                    *slot = score(load.tokens(endpoint).saturating_add(request));
                }
            }
        }
    }
}

/// Builds a `token-load-scorer` from its config arguments.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: TokenLoadParameters = args.parse()?;
    let scorer = TokenLoadScorer {
        threshold: threshold_or_default(parameters.queue_threshold_tokens.unwrap_or(0)),
        load: Load::Linked(InFlightLink::new(
            args.resources,
            parameters.in_flight_load_producer_name.as_deref(),
        )),
    };
    Ok(PluginInstance::scorer(Arc::new(scorer)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use shepherd_scheduler_core::clock::Timestamp;
    use shepherd_scheduler_core::endpoint::Pool;
    use shepherd_scheduler_core::request::{InferenceRequest, Prompt};

    use super::*;

    #[test]
    fn the_threshold_caps_the_load_and_defaults_as_upstream() {
        let pool = Pool::new();
        pool.set_members(["10.0.0.1:8000"]);
        let snapshot = pool.snapshot();
        let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
        let _held = candidates[0].start_request_uncached(50_000, 50_000);
        let request = InferenceRequest::new("r", "m", Prompt::Tokens(vec![1; 100]));
        let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_millis(200));
        let mut out = vec![Score::NEUTRAL; 1];
        TokenLoadScorer::new(10_000, InFlightLoad::default()).score(
            &mut cycle,
            &candidates,
            &mut out,
        );
        assert_eq!(out[0].value, 0.0);
        TokenLoadScorer::new(0, InFlightLoad::default()).score(&mut cycle, &candidates, &mut out);
        let expected = 1.0 - 50_100.0 / DEFAULT_QUEUE_THRESHOLD_TOKENS as f64;
        assert!((out[0].value - expected).abs() < 1e-12);
    }
}
