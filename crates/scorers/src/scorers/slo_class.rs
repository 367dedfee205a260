//! `slo-class-scorer` (Shepherd's extension): keeps latency-tolerant requests together, and
//! latency-critical requests away from them.
//!
//! A request whose first token may take long (a batch summary of a long document, its TTFT
//! objective a second or more) is usually a long prefill, and a long prefill holds up every
//! request that reaches its server while it runs: a chat request with a 200 ms objective
//! that arrives behind a 16k-token prefill misses it even on a prefix-cache hit. Spread
//! evenly, the tolerant requests leave no server free of them. This scorer lets them collect
//! on the servers already serving tolerant requests, and steers the critical requests, and so
//! the prefixes they build up, to the others; the load and latency scorers still decide when
//! a class spills over.
//!
//! A request's **class** comes from its TTFT objective (the `x-slo-ttft-ms` header, read as
//! the predicted-latency plugins read it): *tolerant* when the objective is at least
//! `tolerantTtftMs`, *critical* when it is below; a request without a TTFT objective has no
//! class and every candidate scores [`Score::NEUTRAL`]. With `n` the tolerant requests this
//! scheduler has in flight on a candidate and `max` the most on any candidate:
//!
//! - a tolerant request scores `n / max` (where tolerant work already is: 1);
//! - a critical request scores `1 − n / max` (a server with no tolerant work: 1);
//! - while no candidate has tolerant work in flight, every candidate scores neutral.
//!
//! It is a [`Category::Balance`] scorer: the adaptive weights leave it alone. Counting is a
//! pick hook and a completion hook; memory is one entry per tolerant request in flight (at
//! most `maxTracked`; beyond that new ones are not counted) and one per endpoint with tolerant
//! requests in flight. Several picker replicas each count their own requests.
//!
//! ## Parameters
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `tolerantTtftMs` | 1000 | TTFT objective (ms) at and above which a request is tolerant |
//! | `maxTracked` | 65536 | most tolerant requests in flight counted |
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shepherd_scheduler_core::clock::Timestamp;
//! use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
//! use shepherd_scheduler_core::plugin::{CycleState, PickHook, Score, Scorer};
//! use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
//! use shepherd_scorers::scorers::SloClassScorer;
//!
//! let pool = Pool::new();
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let snapshot = pool.snapshot();
//! let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
//! let scorer = SloClassScorer::default();
//! let request = |id: &str, ttft_ms: &str| {
//!     let mut r = InferenceRequest::new(id, "m", Prompt::Text("hi".into()));
//!     r.headers.push(("x-slo-ttft-ms".into(), ttft_ms.into()));
//!     r
//! };
//!
//! // A batch request (1 s objective) went to the first server.
//! let batch = request("b1", "1000");
//! let mut cycle = CycleState::new(&batch, Timestamp::ZERO, Duration::from_millis(200));
//! scorer.on_pick(&mut cycle, candidates[0]);
//!
//! // The next batch request is drawn to it; a chat request (200 ms) is steered off it.
//! let mut out = vec![Score::NEUTRAL; 2];
//! let next = request("b2", "5000");
//! scorer.score(&mut CycleState::new(&next, Timestamp::ZERO, Duration::from_millis(200)), &candidates, &mut out);
//! assert_eq!((out[0].value, out[1].value), (1.0, 0.0));
//! let chat = request("c1", "200");
//! scorer.score(&mut CycleState::new(&chat, Timestamp::ZERO, Duration::from_millis(200)), &candidates, &mut out);
//! assert_eq!((out[0].value, out[1].value), (0.0, 1.0));
//! ```

use std::sync::Arc;

use ahash::AHashMap;
use parking_lot::Mutex;
use serde::Deserialize;
use shepherd_scheduler_core::completion::{CompletedRequest, Completion, CompletionHook};
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId};
use shepherd_scheduler_core::plugin::{
    Category, CycleState, PickHook, PluginInstance, Score, Scorer,
};
use shepherd_scheduler_core::request::InferenceRequest;

use crate::error::ParameterError;
use crate::latency::Objectives;

/// Registry type name.
pub const TYPE_NAME: &str = "slo-class-scorer";

/// Default `tolerantTtftMs`.
pub const DEFAULT_TOLERANT_TTFT_MS: f64 = 1000.0;

/// Default `maxTracked`.
pub const DEFAULT_MAX_TRACKED: usize = 1 << 16;

/// The `slo-class-scorer` parameters (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SloClassParameters {
    /// TTFT objective (ms) at and above which a request is tolerant (above 0).
    pub tolerant_ttft_ms: f64,
    /// Most tolerant requests in flight counted (at least 1).
    pub max_tracked: usize,
}

impl Default for SloClassParameters {
    fn default() -> Self {
        SloClassParameters {
            tolerant_ttft_ms: DEFAULT_TOLERANT_TTFT_MS,
            max_tracked: DEFAULT_MAX_TRACKED,
        }
    }
}

/// A request's latency class (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SloClass {
    /// Its TTFT objective is at least `tolerantTtftMs`.
    Tolerant,
    /// Its TTFT objective is below `tolerantTtftMs`.
    Critical,
}

/// The tolerant requests in flight.
#[derive(Debug, Default)]
struct Tolerant {
    /// Request id → the endpoint it was picked for.
    requests: AHashMap<String, EndpointId>,
    /// The endpoints with tolerant requests in flight and how many, sorted by endpoint: few
    /// (tolerant work collects), so a pick finds each candidate's count by a short binary
    /// search.
    per_endpoint: Vec<(EndpointId, u32)>,
}

impl Tolerant {
    fn count(&self, endpoint: EndpointId) -> u32 {
        self.per_endpoint
            .binary_search_by_key(&endpoint, |e| e.0)
            .map_or(0, |i| self.per_endpoint[i].1)
    }

    fn add(&mut self, endpoint: EndpointId) {
        match self.per_endpoint.binary_search_by_key(&endpoint, |e| e.0) {
            Ok(i) => self.per_endpoint[i].1 += 1,
            Err(i) => self.per_endpoint.insert(i, (endpoint, 1)),
        }
    }

    fn release(&mut self, endpoint: EndpointId) {
        if let Ok(i) = self.per_endpoint.binary_search_by_key(&endpoint, |e| e.0) {
            let n = &mut self.per_endpoint[i].1;
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_endpoint.remove(i);
            }
        }
    }
}

/// Collects tolerant requests together and steers critical ones away from them.
#[derive(Debug)]
pub struct SloClassScorer {
    tolerant_ttft_ms: f64,
    max_tracked: usize,
    tolerant: Mutex<Tolerant>,
}

impl Default for SloClassScorer {
    fn default() -> Self {
        SloClassScorer::with_valid(SloClassParameters::default())
    }
}

impl SloClassScorer {
    /// A scorer with these parameters, or why they are invalid.
    pub fn new(params: SloClassParameters) -> Result<Self, ParameterError> {
        ParameterError::require_range("tolerantTtftMs", params.tolerant_ttft_ms, 1e-9, 1e12)?;
        ParameterError::require_positive("maxTracked", params.max_tracked)?;
        Ok(SloClassScorer::with_valid(params))
    }

    /// A scorer with `params`, already checked.
    fn with_valid(params: SloClassParameters) -> Self {
        SloClassScorer {
            tolerant_ttft_ms: params.tolerant_ttft_ms,
            max_tracked: params.max_tracked,
            tolerant: Mutex::new(Tolerant::default()),
        }
    }

    /// `request`'s class, `None` without a TTFT objective.
    pub fn class_of(&self, request: &InferenceRequest) -> Option<SloClass> {
        let ttft = Objectives::ttft_of(request)?;
        Some(if ttft >= self.tolerant_ttft_ms {
            SloClass::Tolerant
        } else {
            SloClass::Critical
        })
    }

    /// Tolerant requests this scorer counts in flight on `endpoint`.
    pub fn tolerant_in_flight(&self, endpoint: EndpointId) -> u32 {
        self.tolerant.lock().count(endpoint)
    }
}

impl Scorer for SloClassScorer {
    fn category(&self) -> Category {
        Category::Balance
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let neutral = |out: &mut [Score]| out.iter_mut().for_each(|s| *s = Score::NEUTRAL);
        let Some(class) = self.class_of(cycle.request) else {
            return neutral(out);
        };
        let mut max = 0;
        {
            let tolerant = self.tolerant.lock();
            if tolerant.per_endpoint.is_empty() {
                return neutral(out);
            }
            // Each candidate's count, in its slot for now.
            for (slot, ep) in out.iter_mut().zip(candidates) {
                let n = tolerant.count(ep.id());
                max = max.max(n);
                slot.value = f64::from(n);
            }
        }
        if max == 0 {
            return neutral(out);
        }
        let per_count = 1.0 / f64::from(max);
        for slot in out.iter_mut() {
            let share = slot.value * per_count;
            *slot = Score::new(match class {
                SloClass::Tolerant => share,
                SloClass::Critical => 1.0 - share,
            });
        }
    }
}

impl PickHook for SloClassScorer {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        if self.class_of(cycle.request) != Some(SloClass::Tolerant) {
            return;
        }
        let mut tolerant = self.tolerant.lock();
        let id = cycle.request_id();
        // Picked again under the same id (a retry): it is counted where it went last.
        if let Some(previous) = tolerant.requests.remove(id) {
            tolerant.release(previous);
        } else if tolerant.requests.len() >= self.max_tracked {
            return;
        }
        tolerant.requests.insert(id.to_owned(), picked.id());
        tolerant.add(picked.id());
    }
}

impl CompletionHook for SloClassScorer {
    fn on_complete(&self, request: &CompletedRequest<'_>, _: &Completion) {
        let mut tolerant = self.tolerant.lock();
        if let Some(endpoint) = tolerant.requests.remove(request.id) {
            tolerant.release(endpoint);
        }
    }
}

/// Builds a `slo-class-scorer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params = args.parse::<SloClassParameters>()?;
    let scorer = Arc::new(SloClassScorer::new(params)?);
    Ok(PluginInstance::scorer(scorer.clone())
        .with_pick_hook(scorer.clone())
        .with_completion_hook(scorer))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use proptest::prelude::*;
    use shepherd_scheduler_core::clock::Timestamp;
    use shepherd_scheduler_core::endpoint::Pool;
    use shepherd_scheduler_core::request::Prompt;

    use super::*;

    fn request(id: &str, ttft_ms: &str) -> InferenceRequest {
        let mut r = InferenceRequest::new(id, "m", Prompt::Text("p".into()));
        r.headers.push(("x-slo-ttft-ms".into(), ttft_ms.into()));
        r
    }

    proptest! {
        /// Whatever picks (some retried under the same id, some critical) and completions
        /// (some of unknown ids) happen, each endpoint's count is exactly its tolerant
        /// requests still in flight, no endpoint is kept with a count of 0, and no more than
        /// `maxTracked` are counted.
        #[test]
        fn the_counts_are_those_of_the_tolerant_requests_in_flight(
            ops in proptest::collection::vec((any::<bool>(), 0u8..10, 0usize..3, any::<bool>()), 0..150),
            max_tracked in 1usize..8,
        ) {
            let pool = Pool::new();
            pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
            let snapshot = pool.snapshot();
            let endpoints = snapshot.endpoints();
            let scorer = SloClassScorer::new(SloClassParameters { max_tracked, ..Default::default() }).unwrap();
            let mut model: HashMap<String, EndpointId> = HashMap::new();
            for (pick, id, endpoint, tolerant) in ops {
                let id = format!("r{id}");
                if pick {
                    let r = request(&id, if tolerant { "1500" } else { "300" });
                    let mut cycle = CycleState::new(&r, Timestamp::ZERO, Duration::from_millis(200));
                    scorer.on_pick(&mut cycle, &endpoints[endpoint]);
                    if tolerant && (model.contains_key(&id) || model.len() < max_tracked) {
                        model.insert(id, endpoints[endpoint].id());
                    }
                } else {
                    let completed = CompletedRequest {
                        id: &id,
                        model: "m",
                        endpoint: &endpoints[endpoint],
                        prompt_tokens: 1,
                        scheduled_at: Timestamp::ZERO,
                        first_token_at: None,
                        finished_at: Timestamp::ZERO,
                        used_fallback: false,
                    };
                    scorer.on_complete(&completed, &Completion::cancelled());
                    model.remove(&id);
                }
            }
            for ep in endpoints {
                let expected = model.values().filter(|e| **e == ep.id()).count() as u32;
                prop_assert_eq!(scorer.tolerant_in_flight(ep.id()), expected);
            }
            let tolerant = scorer.tolerant.lock();
            prop_assert!(tolerant.per_endpoint.iter().all(|e| e.1 > 0));
            prop_assert!(tolerant.per_endpoint.windows(2).all(|w| w[0].0 < w[1].0));
            prop_assert!(tolerant.requests.len() <= max_tracked);
        }

        /// Scores are in [0, 1], the tolerant and critical scores of a candidate add up to 1,
        /// and the busiest candidate is a tolerant request's best.
        #[test]
        fn tolerant_and_critical_scores_mirror_each_other(
            picks in proptest::collection::vec(0usize..4, 1..30),
        ) {
            let pool = Pool::new();
            pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000", "10.0.0.4:8000"]);
            let snapshot = pool.snapshot();
            let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
            let scorer = SloClassScorer::default();
            for (i, e) in picks.iter().enumerate() {
                let r = request(&format!("d{i}"), "1000");
                let mut cycle = CycleState::new(&r, Timestamp::ZERO, Duration::from_millis(200));
                scorer.on_pick(&mut cycle, candidates[*e]);
            }
            let score = |ttft: &str| {
                let r = request("x", ttft);
                let mut out = vec![Score::NEUTRAL; candidates.len()];
                scorer.score(&mut CycleState::new(&r, Timestamp::ZERO, Duration::from_millis(200)), &candidates, &mut out);
                out
            };
            let (tolerant, critical) = (score("60000"), score("50"));
            for (t, c) in tolerant.iter().zip(&critical) {
                prop_assert!((0.0..=1.0).contains(&t.value));
                prop_assert!((t.value + c.value - 1.0).abs() < 1e-12);
            }
            let busiest = (0..candidates.len()).max_by_key(|i| scorer.tolerant_in_flight(candidates[*i].id())).unwrap();
            prop_assert_eq!(tolerant[busiest].value, 1.0);
        }
    }
}
