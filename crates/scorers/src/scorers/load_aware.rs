//! `load-aware-scorer`: prefers endpoints with shorter waiting queues, on a fixed scale.
//!
//! As upstream, from the scraped waiting-queue length `w` and `threshold`:
//!
//! ```text
//! w = 0          → 0.5
//! w ≥ threshold  → 0.0
//! otherwise      → 0.5 × (1 − w / threshold)
//! ```
//!
//! The ceiling is 0.5, not 1: an empty queue is the best *observable* sign of room, not proof
//! of spare capacity; its pull is about half its weight. Unlike `queue-scorer` the scale is
//! absolute, not min-max over the candidates. A candidate with stale metrics gets
//! [`Score::NEUTRAL`] (upstream reads whatever was last scraped).
//!
//! ## Parameters
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `threshold` | 128 | waiting requests at which the score reaches 0; 0 or less means the default, as upstream |
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: load-aware-scorer
//!   name: load-balancer
//!   parameters:
//!     threshold: 100
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: load-balancer
//!     weight: 5
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000"]);
//! assert!(build_scheduler(&config, &builtin_registry(), pool).is_ok());
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};

/// Registry type name.
pub const TYPE_NAME: &str = "load-aware-scorer";

/// Default `threshold`.
pub const DEFAULT_THRESHOLD: i64 = 128;

/// The `load-aware-scorer` parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LoadAwareParameters {
    /// Waiting requests at which the score reaches 0.
    pub threshold: i64,
}

impl Default for LoadAwareParameters {
    fn default() -> Self {
        LoadAwareParameters {
            threshold: DEFAULT_THRESHOLD,
        }
    }
}

/// Scores short waiting queues highest, in [0, 0.5] (a [`Category::Distribution`] scorer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadAwareScorer {
    threshold: f64,
}

impl LoadAwareScorer {
    /// A scorer with `parameters` (a threshold of 0 or less is the default).
    pub fn new(parameters: LoadAwareParameters) -> Self {
        let threshold = if parameters.threshold > 0 {
            parameters.threshold
        } else {
            DEFAULT_THRESHOLD
        };
        LoadAwareScorer {
            threshold: threshold as f64,
        }
    }

    /// The score of a candidate with `waiting` requests queued.
    pub fn score_of(&self, waiting: u32) -> f64 {
        if waiting == 0 {
            return 0.5;
        }
        let w = f64::from(waiting).min(self.threshold);
        0.5 * (1.0 - w / self.threshold)
    }
}

impl Default for LoadAwareScorer {
    fn default() -> Self {
        LoadAwareScorer::new(LoadAwareParameters::default())
    }
}

impl Scorer for LoadAwareScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        for (slot, endpoint) in out.iter_mut().zip(candidates) {
            let load = endpoint.load_metrics();
            *slot = if load.is_stale(cycle.now, cycle.staleness_bound) {
                Score::NEUTRAL
            } else {
                Score::new(self.score_of(load.waiting))
            };
        }
    }
}

/// Builds a `load-aware-scorer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: LoadAwareParameters = args.parse()?;
    Ok(PluginInstance::scorer(Arc::new(LoadAwareScorer::new(
        parameters,
    ))))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn piecewise_linear_with_a_ceiling_of_one_half() {
        let s = LoadAwareScorer::new(LoadAwareParameters { threshold: 100 });
        assert_eq!(s.score_of(0), 0.5);
        assert_eq!(s.score_of(50), 0.25);
        assert_eq!(s.score_of(100), 0.0);
        assert_eq!(s.score_of(1000), 0.0);
    }

    #[test]
    fn non_positive_thresholds_mean_the_default() {
        let s = LoadAwareScorer::new(LoadAwareParameters { threshold: 0 });
        assert_eq!(s, LoadAwareScorer::default());
        assert_eq!(s.score_of(64), 0.25);
        let s = LoadAwareScorer::new(LoadAwareParameters { threshold: -5 });
        assert_eq!(s, LoadAwareScorer::default());
    }
}
