//! `prefill-duty-scorer` (Shepherd's extension): prefers endpoints that have had little prefill
//! work of late, so requests that will decode for long land where long prefills do not run.
//!
//! A long prefill stalls every request decoding on the same server for its duration: the
//! decode steps wait for the prefill chunks. `prefill-load-scorer` keeps new prefills off a
//! server while one is pending, but a request decodes long after it is placed, and what hurts
//! its time per token is the prefills that arrive *later*. Which servers those will be is best
//! told by which servers have been prefilling: with prefill/decode disaggregation, the servers
//! that prefill for the others. This scorer keeps, for each endpoint, a time average of its
//! pending prefill tokens ([`Endpoint::pending_prefill_tokens`]: the scheduler's own count,
//! prefill stages sent there included) with time constant `windowMs`, and scores
//!
//! ```text
//! 1 − average / max(the candidates' largest average, scaleTokens)
//! ```
//!
//! so that where every server prefills a little alike (aggregated serving), or nobody prefills
//! much (below `scaleTokens`), all score alike, and where some servers carry the prefill work,
//! the others score higher. The averages are updated at each pick (one exponential a pick);
//! an endpoint is remembered while it is seen, and forgotten after `64 × windowMs` unseen. It
//! is a [`Category::Distribution`] scorer.
//!
//! ## Parameters
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `windowMs` | 5000 | time constant of the average of pending prefill tokens, ms (above 0) |
//! | `scaleTokens` | 4096 | the average that scores 0 is at least this many tokens (at least 1) |
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shepherd_scheduler_core::clock::Timestamp;
//! use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
//! use shepherd_scheduler_core::plugin::{CycleState, Score, Scorer};
//! use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
//! use shepherd_scorers::scorers::PrefillDutyScorer;
//!
//! let pool = Pool::new();
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let snapshot = pool.snapshot();
//! let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
//! let scorer = PrefillDutyScorer::default();
//! let request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! let mut out = vec![Score::NEUTRAL; 2];
//! // The first server keeps 16k tokens pending for ten seconds of picks.
//! let _long = candidates[0].start_request_uncached(16_000, 16_000);
//! for ms in (0..10_000).step_by(100) {
//!     let mut cycle = CycleState::new(&request, Timestamp::from_millis(ms), Duration::from_secs(1));
//!     scorer.score(&mut cycle, &candidates, &mut out);
//! }
//! assert!(out[0].value < 0.05 && out[1].value == 1.0, "{out:?}");
//! ```

use std::sync::Arc;

use parking_lot::Mutex;
use serde::Deserialize;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId};
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};

use crate::error::ParameterError;

/// Registry type name.
pub const TYPE_NAME: &str = "prefill-duty-scorer";

/// An endpoint unseen for this many windows is forgotten.
const FORGET_WINDOWS: u64 = 64;

/// The `prefill-duty-scorer` parameters (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PrefillDutyParameters {
    /// Time constant of the average, ms (above 0).
    pub window_ms: u64,
    /// The average that scores 0 is at least this many tokens (at least 1).
    pub scale_tokens: u64,
}

impl Default for PrefillDutyParameters {
    fn default() -> Self {
        PrefillDutyParameters {
            window_ms: 5000,
            scale_tokens: 4096,
        }
    }
}

/// The averages, and when they were last brought forward.
#[derive(Debug, Default)]
struct Averages {
    at: Option<Timestamp>,
    /// `(endpoint, average pending prefill tokens, last seen)`, sorted by endpoint.
    of: Vec<(EndpointId, f64, Timestamp)>,
}

/// Prefers endpoints with little recent prefill work (see the module docs).
#[derive(Debug)]
pub struct PrefillDutyScorer {
    window_ns: f64,
    scale_tokens: f64,
    averages: Mutex<Averages>,
}

impl Default for PrefillDutyScorer {
    fn default() -> Self {
        PrefillDutyScorer::with_valid(PrefillDutyParameters::default())
    }
}

impl PrefillDutyScorer {
    /// A scorer with these parameters, or why they are invalid.
    pub fn new(params: PrefillDutyParameters) -> Result<Self, ParameterError> {
        ParameterError::require_positive("windowMs", params.window_ms)?;
        ParameterError::require_positive("scaleTokens", params.scale_tokens)?;
        Ok(PrefillDutyScorer::with_valid(params))
    }

    /// A scorer with `params`, already checked.
    fn with_valid(params: PrefillDutyParameters) -> Self {
        PrefillDutyScorer {
            window_ns: params.window_ms as f64 * 1e6,
            scale_tokens: params.scale_tokens as f64,
            averages: Mutex::new(Averages::default()),
        }
    }

    /// The average pending prefill tokens of `endpoint`, as of the last pick (0 if unknown).
    pub fn average(&self, endpoint: EndpointId) -> f64 {
        let averages = self.averages.lock();
        averages
            .of
            .binary_search_by_key(&endpoint, |e| e.0)
            .map_or(0.0, |i| averages.of[i].1)
    }
}

impl Scorer for PrefillDutyScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let now = cycle.now;
        let mut averages = self.averages.lock();
        let elapsed = averages
            .at
            .map_or(0, |at| now.as_nanos().saturating_sub(at.as_nanos()));
        averages.at = Some(averages.at.map_or(now, |at| at.max(now)));
        // The weight the past keeps over `elapsed`; the pending tokens now take the rest.
        let keep = (-(elapsed as f64) / self.window_ns).exp();
        let forget_after = (self.window_ns as u64).saturating_mul(FORGET_WINDOWS);
        averages
            .of
            .retain(|e| now.as_nanos().saturating_sub(e.2.as_nanos()) <= forget_after);
        for e in &mut averages.of {
            e.1 *= keep;
        }
        let mut max = 0.0f64;
        for (slot, ep) in out.iter_mut().zip(candidates) {
            let pending = ep.pending_prefill_tokens() as f64 * (1.0 - keep);
            let v = match averages.of.binary_search_by_key(&ep.id(), |e| e.0) {
                Ok(i) => {
                    let e = &mut averages.of[i];
                    e.1 += pending;
                    e.2 = now;
                    e.1
                }
                Err(i) => {
                    averages.of.insert(i, (ep.id(), pending, now));
                    pending
                }
            };
            max = max.max(v);
            slot.value = v;
        }
        let scale = 1.0 / max.max(self.scale_tokens);
        for slot in out.iter_mut() {
            *slot = Score::new(1.0 - slot.value * scale);
        }
    }
}

/// Builds a `prefill-duty-scorer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params = args.parse::<PrefillDutyParameters>()?;
    Ok(PluginInstance::scorer(Arc::new(PrefillDutyScorer::new(
        params,
    )?)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;
    use shepherd_scheduler_core::endpoint::Pool;
    use shepherd_scheduler_core::request::{InferenceRequest, Prompt};

    use super::*;

    fn score_at(scorer: &PrefillDutyScorer, ms: u64, candidates: &[&Arc<Endpoint>]) -> Vec<f64> {
        let request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
        let mut cycle =
            CycleState::new(&request, Timestamp::from_millis(ms), Duration::from_secs(1));
        let mut out = vec![Score::NEUTRAL; candidates.len()];
        scorer.score(&mut cycle, candidates, &mut out);
        out.iter().map(|s| s.value).collect()
    }

    #[test]
    fn a_server_that_stopped_prefilling_recovers_and_an_unseen_one_is_forgotten() {
        let pool = Pool::new();
        pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
        let snapshot = pool.snapshot();
        let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
        let scorer = PrefillDutyScorer::default();
        let busy = candidates[0].start_request_uncached(20_000, 20_000);
        for ms in (0..10_000).step_by(50) {
            score_at(&scorer, ms, &candidates);
        }
        assert!(score_at(&scorer, 10_000, &candidates)[0] < 0.1);
        drop(busy);
        // Five windows later the average is under 1 % of what it was.
        let scores = score_at(&scorer, 35_000, &candidates);
        assert!(scores[0] > 0.9, "{scores:?}");
        // Seen no more (only the second endpoint is a candidate) for 64 windows: forgotten.
        score_at(&scorer, 400_000, &candidates[1..]);
        assert!(
            scorer
                .averages
                .lock()
                .of
                .iter()
                .all(|e| e.0 == candidates[1].id())
        );
    }

    proptest! {
        /// Whatever the pending prefill and the clock do (even going back), scores stay in
        /// [0, 1], the averages stay finite and sorted, and nobody scores below a server with
        /// a higher average.
        #[test]
        fn scores_stay_in_range_and_follow_the_averages(
            steps in proptest::collection::vec((0u64..3_000, 0usize..3, 0u64..50_000, any::<bool>()), 1..80),
        ) {
            let pool = Pool::new();
            pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
            let snapshot = pool.snapshot();
            let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
            let scorer = PrefillDutyScorer::new(PrefillDutyParameters { window_ms: 500, scale_tokens: 100 }).unwrap();
            let mut guards = Vec::new();
            let mut now = 10_000u64;
            for (dt, endpoint, tokens, back) in steps {
                now = if back { now.saturating_sub(dt) } else { now + dt };
                guards.push(candidates[endpoint].start_request_uncached(tokens, tokens));
                if guards.len() > 4 {
                    drop(guards.remove(0));
                }
                let scores = score_at(&scorer, now, &candidates);
                let averages: Vec<f64> = candidates.iter().map(|c| scorer.average(c.id())).collect();
                for (s, a) in scores.iter().zip(&averages) {
                    prop_assert!((0.0..=1.0).contains(s));
                    prop_assert!(a.is_finite() && *a >= 0.0);
                }
                for i in 0..3 {
                    for j in 0..3 {
                        if averages[i] > averages[j] {
                            prop_assert!(scores[i] <= scores[j]);
                        }
                    }
                }
                let of = &scorer.averages.lock().of;
                prop_assert!(of.windows(2).all(|w| w[0].0 < w[1].0));
            }
        }
    }
}
