//! `kv-cache-utilization-scorer`: prefers endpoints with free KV-cache memory.
//!
//! Score = 1 − KV-cache utilization. Utilization outside `[0, 1]` is clamped and NaN counts as
//! full; stale metrics give [`Score::NEUTRAL`].
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::scorers::KvCacheUtilizationScorer;
//!
//! let clock = Arc::new(ManualClock::default());
//! let ep = Arc::new(Endpoint::new(EndpointId(0), "127.0.0.1:8000", clock));
//! ep.set_metrics(EndpointMetrics { kv_utilization: 0.25, ..Default::default() });
//! let request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_millis(200));
//! let mut out = [Score::NEUTRAL];
//! KvCacheUtilizationScorer.score(&mut cycle, &[&ep], &mut out);
//! assert_eq!(out[0].value, 0.75);
//! ```

use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};

use crate::params::NoParameters;

/// Registry type name.
pub const TYPE_NAME: &str = "kv-cache-utilization-scorer";

/// The older Gateway API Inference Extension name of the same scorer, registered as an alias.
pub const LEGACY_TYPE_NAME: &str = "kv-cache-scorer";

/// Scores 1 − KV-cache utilization (a [`Category::Distribution`] scorer).
#[derive(Debug, Clone, Copy, Default)]
pub struct KvCacheUtilizationScorer;

impl Scorer for KvCacheUtilizationScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        for (slot, ep) in out.iter_mut().zip(candidates) {
            let metrics = ep.load_metrics();
            *slot = if metrics.is_stale(cycle.now, cycle.staleness_bound) {
                Score::NEUTRAL
            } else {
                Score::new(1.0 - metrics.kv_utilization_clamped())
            };
        }
    }
}

/// Builds a `kv-cache-utilization-scorer` (it takes no parameters).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    args.parse::<NoParameters>()?;
    Ok(PluginInstance::scorer(Arc::new(KvCacheUtilizationScorer)))
}
