//! `prefix-cache-affinity-filter`: narrows the candidates to the "sticky" endpoints that hold
//! most of the request's prompt prefix, unless they are so loaded that waiting for them would
//! cost more than recomputing the prompt elsewhere.
//!
//! As upstream, for each request:
//! 1. with one candidate or fewer, or `affinityThreshold` ≤ 0, keep all;
//! 2. with probability `explorationProbability`, keep all (to seed caches elsewhere);
//! 3. sticky = candidates whose matched ratio (matched blocks / total blocks, from the prefix
//!    producer) is at least `affinityThreshold`; none sticky → keep all;
//! 4. TTFT load gate (when `maxTTFTPenaltyMs` > 0 and some candidates are not sticky): if the
//!    best sticky candidate's estimated TTFT exceeds the best other one's by more than
//!    `maxTTFTPenaltyMs`, keep all; the estimate is `in-flight prompt tokens /
//!    peakPrefillThroughput × 1000` ms;
//! 5. otherwise keep the sticky candidates.
//!
//! The exploration draw is a hash of the request id and the scheduler's seed (deterministic;
//! upstream draws at random). In-flight tokens are the `inflight-load-producer`'s, as upstream
//! ([`InFlightLoad`](crate::producers::inflight_load::InFlightLoad): by default the endpoint's
//! pending prefill tokens, from this replica and its peers). The producer is found as the `prefix-cache-scorer`
//! finds it (see [`crate::prefix_cache`]): `prefixMatchInfoProducerName`, else the declared
//! `approx-prefix-cache-producer`, else the index of the all-in-one `prefix-cache-scorer`.
//!
//! ## Parameters
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `affinityThreshold` | 0.80 | matched ratio that makes an endpoint sticky (at most 1) |
//! | `explorationProbability` | 0 | probability of skipping the filter, in [0, 1] |
//! | `maxTTFTPenaltyMs` | 18000 | largest TTFT penalty accepted to stay sticky; 0 = always stick |
//! | `ttftSource` | `prefillThroughput` | `prefillThroughput` as above; `latencyPredictor`: the TTFT the `predicted-latency-producer` predicts for each candidate (the gate is skipped while it has no predictions, as upstream does when they are missing) |
//! | `peakPrefillThroughput` | 15928 | prefill tokens per second (must be above 0 when the gate uses it) |
//! | `prefixMatchInfoProducerName` | — | the prefix producer read |
//! | `latencyPredictionInfoProducerName` | `predicted-latency-producer` | the latency producer read with `ttftSource: latencyPredictor` |
//! | `inFlightLoadProducerName` | `inflight-load-producer` | the in-flight load read (its defaults when none is declared) |
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: approx-prefix-cache-producer
//! - type: prefix-cache-affinity-filter
//!   name: prefix-affinity
//!   parameters:
//!     affinityThreshold: 0.80
//!     explorationProbability: 0
//!     maxTTFTPenaltyMs: 5000
//!     ttftSource: prefillThroughput
//! - type: queue-scorer
//! - type: weighted-random-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: prefix-affinity
//!   - pluginRef: queue-scorer
//!   - pluginRef: weighted-random-picker
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! let prompt = Prompt::Text("shared system prompt ".repeat(200));
//! let first = scheduler.schedule(&InferenceRequest::new("r0", "m", prompt.clone())).unwrap();
//! let home = first.primary().address().to_string();
//! first.finish(Completion::success(None));
//! // The same prompt sticks to the endpoint that cached it.
//! for i in 1..20 {
//!     let d = scheduler.schedule(&InferenceRequest::new(format!("r{i}"), "m", prompt.clone())).unwrap();
//!     assert_eq!(d.primary().address(), home);
//!     d.finish(Completion::success(None));
//! }
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::completion::{CompletedRequest, Completion, CompletionHook};
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{CycleState, Filter, PickHook, PluginInstance};

use crate::error::ParameterError;
use crate::latency::LatencyLink;
use crate::prefix_cache;
use crate::producers::approx_prefix;
use crate::producers::inflight_load::InFlightLink;
use crate::producers::link::ProducerLink;

/// Registry type name.
pub const TYPE_NAME: &str = "prefix-cache-affinity-filter";

/// Where the TTFT estimate of the load gate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TtftSource {
    /// In-flight prompt tokens over the peak prefill throughput.
    PrefillThroughput,
    /// The `predicted-latency-producer`'s predicted TTFT.
    LatencyPredictor,
}

/// The `prefix-cache-affinity-filter` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PrefixAffinityParameters {
    /// Matched ratio that makes an endpoint sticky.
    pub affinity_threshold: f64,
    /// Probability of skipping the filter.
    pub exploration_probability: f64,
    /// Largest TTFT penalty, in milliseconds, accepted to stay sticky (0 = always).
    #[serde(rename = "maxTTFTPenaltyMs")]
    pub max_ttft_penalty_ms: f64,
    /// Where the TTFT estimate comes from.
    pub ttft_source: TtftSource,
    /// Prefill tokens per second.
    pub peak_prefill_throughput: f64,
    /// The prefix producer read.
    pub prefix_match_info_producer_name: Option<String>,
    /// The latency producer read with `ttftSource: latencyPredictor`.
    pub latency_prediction_info_producer_name: Option<String>,
    /// Ignored.
    pub in_flight_load_producer_name: Option<String>,
}

impl Default for PrefixAffinityParameters {
    fn default() -> Self {
        PrefixAffinityParameters {
            affinity_threshold: 0.80,
            exploration_probability: 0.0,
            max_ttft_penalty_ms: 18_000.0,
            ttft_source: TtftSource::PrefillThroughput,
            peak_prefill_throughput: 15_928.0,
            prefix_match_info_producer_name: None,
            latency_prediction_info_producer_name: None,
            in_flight_load_producer_name: None,
        }
    }
}

impl PrefixAffinityParameters {
    /// Checks the values as upstream does.
    pub fn validate(&self) -> Result<(), ParameterError> {
        ParameterError::require_range("affinityThreshold", self.affinity_threshold, f64::MIN, 1.0)?;
        ParameterError::require_range(
            "explorationProbability",
            self.exploration_probability,
            0.0,
            1.0,
        )?;
        ParameterError::require_range("maxTTFTPenaltyMs", self.max_ttft_penalty_ms, 0.0, f64::MAX)?;
        ParameterError::require_range(
            "peakPrefillThroughput",
            self.peak_prefill_throughput,
            0.0,
            f64::MAX,
        )?;
        if self.ttft_source == TtftSource::PrefillThroughput
            && self.max_ttft_penalty_ms > 0.0
            && self.peak_prefill_throughput == 0.0
        {
            return Err(ParameterError::OutOfRange {
                field: "peakPrefillThroughput",
                value: 0.0,
                min: f64::MIN_POSITIVE,
                max: f64::MAX,
            });
        }
        Ok(())
    }
}

/// The filter, and a pick hook recording the pick in its producer's index.
#[derive(Debug)]
pub struct PrefixAffinityFilter {
    parameters: PrefixAffinityParameters,
    link: ProducerLink,
    in_flight: InFlightLink,
    latency: Option<LatencyLink>,
    hasher: ahash::RandomState,
}

impl PrefixAffinityFilter {
    fn explores(&self, request_id: &str) -> bool {
        let p = self.parameters.exploration_probability;
        if p <= 0.0 {
            return false;
        }
        let draw = (self.hasher.hash_one(request_id) >> 11) as f64 / (1u64 << 53) as f64;
        draw < p
    }

    /// Estimated TTFT of `endpoint`, in milliseconds.
    pub fn ttft_ms(&self, endpoint: &Endpoint) -> f64 {
        self.in_flight.get().tokens(endpoint) as f64 / self.parameters.peak_prefill_throughput
            * 1000.0
    }

    /// Whether the sticky set costs more than `maxTTFTPenaltyMs` over the best other.
    fn gate_broken(
        &self,
        cycle: &mut CycleState<'_>,
        candidates: &[&Arc<Endpoint>],
        sticky: &[&Arc<Endpoint>],
        others: &[&Arc<Endpoint>],
    ) -> bool {
        let p = &self.parameters;
        if p.max_ttft_penalty_ms <= 0.0 || others.is_empty() {
            return false;
        }
        let Some(link) = &self.latency else {
            let best = |set: &[&Arc<Endpoint>]| {
                set.iter()
                    .map(|e| self.ttft_ms(e))
                    .fold(f64::INFINITY, f64::min)
            };
            return best(sticky) - best(others) > p.max_ttft_penalty_ms;
        };
        let producer = Arc::clone(link.get());
        let Some(predictions) = producer.produce(cycle, candidates) else {
            return false;
        };
        // `sticky` and `others` split `candidates` keeping their order: one walk over the
        // candidates and their predictions takes the best of each (a candidate without a
        // prediction counts as never starting).
        let mut sticky_ids = sticky.iter().map(|e| e.id()).peekable();
        let (mut best_sticky, mut best_other) = (f64::INFINITY, f64::INFINITY);
        for (e, predicted) in candidates.iter().zip(predictions.by_candidate(candidates)) {
            let ttft = predicted.map_or(f64::INFINITY, |p| p.ttft_ms);
            if sticky_ids.next_if_eq(&e.id()).is_some() {
                best_sticky = best_sticky.min(ttft);
            } else {
                best_other = best_other.min(ttft);
            }
        }
        best_sticky - best_other > p.max_ttft_penalty_ms
    }
}

impl Filter for PrefixAffinityFilter {
    fn filter(&self, cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>) {
        let threshold = self.parameters.affinity_threshold;
        if candidates.len() <= 1 || threshold <= 0.0 || self.explores(cycle.request_id()) {
            return;
        }
        let Some(info) = self.link.get().produce(cycle) else {
            return;
        };
        let (sticky, others): (Vec<&Arc<Endpoint>>, Vec<&Arc<Endpoint>>) =
            candidates.iter().partition(|e| info.ratio(e) >= threshold);
        if sticky.is_empty() || self.gate_broken(cycle, candidates, &sticky, &others) {
            return;
        }
        *candidates = sticky;
    }
}

impl PickHook for PrefixAffinityFilter {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        self.link.get().record(cycle, picked);
        if let Some(latency) = &self.latency {
            latency.get().record_pick(cycle, picked);
        }
    }
}

impl CompletionHook for PrefixAffinityFilter {
    fn on_complete(&self, request: &CompletedRequest<'_>, completion: &Completion) {
        if let Some(latency) = &self.latency {
            latency.get().record_completion(request, completion);
        }
    }
}

/// Builds a `prefix-cache-affinity-filter`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: PrefixAffinityParameters = args.parse()?;
    parameters.validate()?;
    let names = match &parameters.prefix_match_info_producer_name {
        Some(name) => vec![name.clone()],
        None => vec![
            approx_prefix::TYPE_NAME.to_string(),
            prefix_cache::TYPE_NAME.to_string(),
        ],
    };
    let filter = Arc::new(PrefixAffinityFilter {
        link: ProducerLink::new(args.resources, args.pool, names, None),
        in_flight: InFlightLink::new(
            args.resources,
            parameters.in_flight_load_producer_name.as_deref(),
        ),
        latency: (parameters.ttft_source == TtftSource::LatencyPredictor).then(|| {
            LatencyLink::new(
                args.resources,
                args.pool,
                parameters.latency_prediction_info_producer_name.as_deref(),
            )
        }),
        hasher: ahash::RandomState::with_seeds(args.seed, 0xAFF1, 0x9F1C, 0x5EED),
        parameters,
    });
    Ok(PluginInstance::filter(filter.clone())
        .with_pick_hook(filter.clone())
        .with_completion_hook(filter))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use shepherd_scheduler_core::prelude::*;

    fn parse(json: serde_json::Value) -> PrefixAffinityParameters {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn defaults_and_validation_follow_upstream() {
        let p = PrefixAffinityParameters::default();
        assert_eq!(p.affinity_threshold, 0.8);
        assert_eq!(p.max_ttft_penalty_ms, 18_000.0);
        assert_eq!(p.peak_prefill_throughput, 15_928.0);
        assert!(p.validate().is_ok());
        assert!(
            parse(serde_json::json!({"affinityThreshold": 1.1}))
                .validate()
                .is_err()
        );
        assert!(
            parse(serde_json::json!({"explorationProbability": 2}))
                .validate()
                .is_err()
        );
        assert!(
            parse(serde_json::json!({"maxTTFTPenaltyMs": -1}))
                .validate()
                .is_err()
        );
        assert!(
            parse(serde_json::json!({"peakPrefillThroughput": 0}))
                .validate()
                .is_err()
        );
        assert!(
            parse(serde_json::json!({"peakPrefillThroughput": 0, "maxTTFTPenaltyMs": 0}))
                .validate()
                .is_ok()
        );
        assert!(
            serde_json::from_value::<PrefixAffinityParameters>(
                serde_json::json!({"ttftSource": "guess"})
            )
            .is_err()
        );
    }

    fn setup(yaml_parameters: &str) -> (Arc<Pool>, shepherd_scheduler_core::scheduler::Scheduler) {
        let yaml = format!(
            "
plugins:
- type: approx-prefix-cache-producer
- type: prefix-cache-affinity-filter
  parameters: {yaml_parameters}
- type: active-request-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-affinity-filter
  - pluginRef: active-request-scorer
"
        );
        let pool = Arc::new(Pool::new());
        pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
        let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
        let scheduler =
            build_scheduler(&config, &crate::builtin_registry(), Arc::clone(&pool)).unwrap();
        (pool, scheduler)
    }

    #[test]
    fn an_overloaded_sticky_endpoint_is_left_when_the_penalty_is_exceeded() {
        // 1,000 in-flight tokens at 1,000 tokens/s = 1 s of estimated TTFT.
        let (_pool, scheduler) = setup("{maxTTFTPenaltyMs: 500, peakPrefillThroughput: 1000}");
        let prompt = Prompt::Text("p".repeat(4000)); // 1,000 pseudo tokens
        let first = scheduler
            .schedule(&InferenceRequest::new("a", "m", prompt.clone()))
            .unwrap();
        let home = first.primary().address().to_string();
        let _held = first.into_handle(); // still in flight: 1,000 tokens on `home`
        let d = scheduler
            .schedule(&InferenceRequest::new("b", "m", prompt.clone()))
            .unwrap();
        assert_ne!(d.primary().address(), home, "the gate opened");
    }

    #[test]
    fn without_a_penalty_it_always_sticks() {
        let (_pool, scheduler) = setup("{maxTTFTPenaltyMs: 0}");
        let prompt = Prompt::Text("p".repeat(4000));
        let first = scheduler
            .schedule(&InferenceRequest::new("a", "m", prompt.clone()))
            .unwrap();
        let home = first.primary().address().to_string();
        let _held = first.into_handle();
        let d = scheduler
            .schedule(&InferenceRequest::new("b", "m", prompt))
            .unwrap();
        assert_eq!(d.primary().address(), home);
    }
}
