//! `lora-affinity-filter`: narrows the candidates to the endpoints best placed to serve the
//! request's LoRA adapter.
//!
//! The candidates kept are, in order of preference:
//! 1. the endpoints already running the adapter;
//! 2. otherwise, the endpoints with room to load another adapter;
//! 3. otherwise, all of them (the filter never empties the list).
//!
//! An endpoint with stale metrics belongs to neither of the first two groups: the filter does
//! not trust what it cannot see, so such an endpoint only stays when nothing better is known.
//! A request without an adapter passes through untouched.
//!
//! Like the Gateway API Inference Extension's filter of the same name, `threshold` is the
//! probability of keeping the running group when an endpoint with room also exists (the rest of
//! the time the endpoints with room are kept, which lets an adapter spread to more servers).
//! The draw is a hash of the request id and the scheduler's seed, so it is deterministic. The
//! default, 1, always keeps the running group.
//!
//! ```yaml
//! plugins:
//! - type: lora-affinity-filter
//!   parameters:
//!     threshold: 0.999
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{CycleState, Filter, PluginInstance};

use crate::error::ParameterError;
use crate::lora::LoraReadiness;

/// Registry type name.
pub const TYPE_NAME: &str = "lora-affinity-filter";

/// Parameters of `lora-affinity-filter`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LoraAffinityFilterParameters {
    /// Probability in `[0, 1]` of keeping the endpoints running the adapter rather than those
    /// with room, when both exist (default 1).
    pub threshold: f64,
}

impl Default for LoraAffinityFilterParameters {
    fn default() -> Self {
        LoraAffinityFilterParameters { threshold: 1.0 }
    }
}

/// Keeps the endpoints running the request's adapter, else those with room, else all.
#[derive(Debug, Clone)]
pub struct LoraAffinityFilter {
    threshold: f64,
    hasher: ahash::RandomState,
}

impl LoraAffinityFilter {
    /// A filter with `parameters`, drawing with `seed`.
    pub fn new(
        parameters: LoraAffinityFilterParameters,
        seed: u64,
    ) -> Result<Self, ParameterError> {
        let threshold = ParameterError::require_range("threshold", parameters.threshold, 0.0, 1.0)?;
        Ok(LoraAffinityFilter {
            threshold,
            hasher: ahash::RandomState::with_seeds(seed, 0x10_4a, 0xF1_17E5, 0x5EED),
        })
    }

    /// Whether this request keeps the running group (a deterministic draw).
    fn prefers_running(&self, request_id: &str) -> bool {
        if self.threshold >= 1.0 {
            return true;
        }
        let draw = (self.hasher.hash_one(request_id) >> 11) as f64 / (1u64 << 53) as f64;
        draw < self.threshold
    }
}

impl Default for LoraAffinityFilter {
    fn default() -> Self {
        LoraAffinityFilter {
            threshold: 1.0,
            hasher: ahash::RandomState::with_seeds(0, 0x10_4a, 0xF1_17E5, 0x5EED),
        }
    }
}

impl Filter for LoraAffinityFilter {
    fn filter(&self, cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>) {
        let Some(adapter) = cycle.request.lora.as_deref() else {
            return;
        };
        let readiness: Vec<LoraReadiness> = candidates
            .iter()
            .map(|ep| LoraReadiness::of(ep, adapter, cycle.now, cycle.staleness_bound))
            .collect();
        let any_running = readiness.contains(&LoraReadiness::Running);
        let any_room = readiness.contains(&LoraReadiness::Room);
        let keep = match (any_running, any_room) {
            (true, true) if self.prefers_running(&cycle.request.id) => LoraReadiness::Running,
            (true, true) => LoraReadiness::Room,
            (true, false) => LoraReadiness::Running,
            (false, true) => LoraReadiness::Room,
            (false, false) => return,
        };
        let mut i = 0;
        candidates.retain(|_| {
            let kept = readiness[i] == keep;
            i += 1;
            kept
        });
    }
}

/// Builds a `lora-affinity-filter` from its parameters.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters = args.parse::<LoraAffinityFilterParameters>()?;
    let filter = LoraAffinityFilter::new(parameters, args.seed)?;
    Ok(PluginInstance::filter(Arc::new(filter)))
}
