//! `slo-headroom-tier-filter`: keeps the candidates predicted to meet the request's latency
//! objectives, else the best-effort tier, with upstream's rules.
//!
//! The candidates are split by the `predicted-latency-producer`'s predictions: the *positive*
//! tier has both headrooms ≥ 0 (see [`LatencyPredictionInfo`](crate::latency::LatencyPredictionInfo)),
//! the *negative* tier is the rest, with the candidates that have no prediction. With both
//! tiers present the positive one is kept, except with probability `epsilonExploreNeg` the
//! negative one (so loaded endpoints keep getting a little traffic and their predictions stay
//! fresh); with one tier, that tier. Without any prediction (a cold model), or with one
//! candidate, every candidate is kept: the filter never empties the set.
//!
//! The exploration draw is a hash of the request id and the scheduler's seed (deterministic;
//! upstream draws at random).
//!
//! ## Parameters
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `epsilonExploreNeg` | 0.01 | probability of keeping the negative tier when both exist, in [0, 1] |
//! | `latencyPredictionInfoProducerName` | `predicted-latency-producer` | Shepherd's: the producer read |
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: predicted-latency-producer
//! - type: slo-headroom-tier-filter
//!   parameters:
//!     epsilonExploreNeg: 0.01
//! - type: latency-scorer
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: slo-headroom-tier-filter
//!   - pluginRef: latency-scorer
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! let mut request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! request.headers.push(("x-slo-ttft-ms".into(), "200".into()));
//! // No predictions yet: both candidates are kept, the request is served.
//! let d = scheduler.schedule(&request).unwrap();
//! assert_eq!(d.breakdown.len(), 2);
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{CycleState, Filter, PluginInstance};

use crate::error::ParameterError;
use crate::latency::LatencyLink;

/// Registry type name.
pub const TYPE_NAME: &str = "slo-headroom-tier-filter";

/// The `slo-headroom-tier-filter` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SloHeadroomTierParameters {
    /// Probability of keeping the negative tier when both exist.
    pub epsilon_explore_neg: f64,
    /// The producer read.
    pub latency_prediction_info_producer_name: Option<String>,
}

impl Default for SloHeadroomTierParameters {
    fn default() -> Self {
        SloHeadroomTierParameters {
            epsilon_explore_neg: 0.01,
            latency_prediction_info_producer_name: None,
        }
    }
}

/// The filter (see the module docs).
#[derive(Debug)]
pub struct SloHeadroomTierFilter {
    epsilon: f64,
    link: Arc<LatencyLink>,
    hasher: ahash::RandomState,
}

impl SloHeadroomTierFilter {
    fn explores(&self, request_id: &str) -> bool {
        if self.epsilon <= 0.0 {
            return false;
        }
        let draw = (self.hasher.hash_one(request_id) >> 11) as f64 / (1u64 << 53) as f64;
        draw < self.epsilon
    }
}

impl Filter for SloHeadroomTierFilter {
    fn filter(&self, cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>) {
        if candidates.len() <= 1 {
            return;
        }
        let producer = Arc::clone(self.link.get());
        let Some(predictions) = producer.produce(cycle, candidates) else {
            return;
        };
        let headroom: Vec<bool> = predictions
            .by_candidate(candidates)
            .map(|info| info.is_some_and(|p| p.has_headroom()))
            .collect();
        let positive = headroom.iter().filter(|&&h| h).count();
        // No candidate in the positive tier: every one is kept (best effort); all of them in
        // it: likewise.
        if positive == 0 || positive == headroom.len() {
            return;
        }
        // Both tiers: the positive one, or (exploring) the negative one, in order.
        let keep = !self.explores(cycle.request_id());
        let mut tiers = headroom.into_iter();
        candidates.retain(|_| tiers.next() == Some(keep));
    }
}

/// Builds a `slo-headroom-tier-filter`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: SloHeadroomTierParameters = args.parse()?;
    let epsilon = ParameterError::require_range(
        "epsilonExploreNeg",
        parameters.epsilon_explore_neg,
        0.0,
        1.0,
    )?;
    let link = Arc::new(LatencyLink::new(
        args.resources,
        args.pool,
        parameters.latency_prediction_info_producer_name.as_deref(),
    ));
    let filter = Arc::new(SloHeadroomTierFilter {
        epsilon,
        link: Arc::clone(&link),
        hasher: ahash::RandomState::with_seeds(args.seed, 0x510, 0x7135, 0xEA51),
    });
    Ok(PluginInstance::filter(filter)
        .with_pick_hook(link.clone())
        .with_completion_hook(link))
}
