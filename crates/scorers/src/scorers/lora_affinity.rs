//! `lora-affinity-scorer`: prefers endpoints that already serve the request's LoRA adapter.
//!
//! | endpoint state for the adapter | score |
//! |---|---|
//! | running it | 1.0 |
//! | not running it, room to load another adapter | 0.8 |
//! | waiting for it, no room | 0.6 |
//! | otherwise | 0.0 |
//! | metrics stale | neutral |
//!
//! A request without an adapter scores 1 everywhere (the scorer has no preference).

use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};

use crate::lora::LoraReadiness;
use crate::params::NoParameters;

/// Registry type name.
pub const TYPE_NAME: &str = "lora-affinity-scorer";

/// Scores endpoints by their readiness for the request's LoRA adapter (a
/// [`Category::Affinity`] scorer).
#[derive(Debug, Clone, Copy, Default)]
pub struct LoraAffinityScorer;

impl Scorer for LoraAffinityScorer {
    fn category(&self) -> Category {
        Category::Affinity
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let Some(adapter) = cycle.request.lora.as_deref() else {
            out.fill(Score::new(1.0));
            return;
        };
        for (slot, ep) in out.iter_mut().zip(candidates) {
            let readiness = LoraReadiness::of(ep, adapter, cycle.now, cycle.staleness_bound);
            *slot = match readiness {
                LoraReadiness::Running => Score::new(1.0),
                LoraReadiness::Room => Score::new(0.8),
                LoraReadiness::Waiting => Score::new(0.6),
                LoraReadiness::Unavailable => Score::new(0.0),
                LoraReadiness::Unknown => Score::NEUTRAL,
            };
        }
    }
}

/// Builds a `lora-affinity-scorer` (it takes no parameters).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    args.parse::<NoParameters>()?;
    Ok(PluginInstance::scorer(Arc::new(LoraAffinityScorer)))
}
