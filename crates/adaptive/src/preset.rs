//! The adaptive preset: the profile and settings the simulator tuned, as a library default
//! next to the static one ([`shepherd_scorers::DEFAULT_CONFIG_YAML`], prefix 3 : queue 2 :
//! KV 2).
//!
//! The preset is the static default plus two scheduler-own Distribution scorers and the
//! hot-prefix scorer, with weights retuned every tick from the pool's imbalance:
//!
//! | scorer | weight | category | why |
//! |---|---:|---|---|
//! | `prefix-cache-scorer` | 3 | Affinity | prompts go where their prefix is cached |
//! | `hot-prefix-scorer` | 4 | Affinity | a prefix with a large share of the work in flight gets as many homes as that share of the servers, one new home per request; neutral for every other prefix |
//! | `queue-scorer` | 2 | Distribution | waiting requests the server reports |
//! | `kv-cache-utilization-scorer` | 2 | Distribution | free KV-cache memory |
//! | `active-request-scorer` | 1 | Distribution | this scheduler's own in-flight requests, fresh at every pick: it sees a hot node whose requests sit in the running batch, which queue and KV scorers do not |
//! | `prefill-load-scorer` (`uncachedWeight: 0`, `minScaleTokens: 8192`) | 2 | Distribution | prefill work sent and not yet answered by a first token |
//!
//! Adaptive settings: enter `burst` above a smoothed imbalance of 0.30, leave below 0.15, and in
//! burst give Distribution scorers 90–99 % of the budget. The reasoning and the measurements
//! behind each number are in `docs/adaptive.md`; [`ADAPTIVE_CONFIG_YAML`] is the file itself,
//! commented, to copy and edit.
//!
//! One call builds the scheduler and its controller:
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_adaptive::preset::build_adaptive_scheduler;
//! use shepherd_scheduler_core::prelude::*;
//!
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let (scheduler, controller) = build_adaptive_scheduler(Arc::clone(&pool)).unwrap();
//! assert_eq!(scheduler.profiles()[0].scorers().len(), 6);
//! // A driver (the runtime, or your own loop) ticks the controller on its interval:
//! let record = controller.tick(&pool.snapshot(), scheduler.clock().now());
//! assert_eq!(record.weights, vec![3.0, 4.0, 2.0, 2.0, 1.0, 2.0]); // nothing to adapt to yet
//! ```

use std::sync::Arc;

use shepherd_scheduler_core::config::{ConfigError, EndpointPickerConfig, build_scheduler_in};
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::scheduler::Scheduler;
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::builtin_registry;
use thiserror::Error;

use crate::{AdaptiveConfig, AdaptiveController, AdaptiveError};

/// The adaptive preset as YAML: an `EndpointPickerConfig` with an `adaptive:` section.
pub const ADAPTIVE_CONFIG_YAML: &str = include_str!("../presets/adaptive.yaml");

/// Why a preset could not be built.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum PresetError {
    /// The picker configuration was rejected.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The `adaptive` section was rejected.
    #[error(transparent)]
    Adaptive(#[from] AdaptiveError),
}

/// The adaptive preset, parsed.
pub fn adaptive_config() -> Result<EndpointPickerConfig, ConfigError> {
    EndpointPickerConfig::from_yaml(ADAPTIVE_CONFIG_YAML)
}

/// Builds the preset's scheduler over `pool` (with fresh shared state) and the controller that
/// retunes its default profile.
pub fn build_adaptive_scheduler(
    pool: Arc<Pool>,
) -> Result<(Scheduler, AdaptiveController), PresetError> {
    build_adaptive_scheduler_in(&SharedState::new(pool))
}

/// Builds the preset's scheduler over `shared` and the controller that retunes its default
/// profile.
pub fn build_adaptive_scheduler_in(
    shared: &SharedState,
) -> Result<(Scheduler, AdaptiveController), PresetError> {
    let config = adaptive_config()?;
    let scheduler = build_scheduler_in(&config, &builtin_registry(), shared)?;
    let adaptive = AdaptiveConfig::from_picker_config(&config)?;
    let controller = AdaptiveController::for_scheduler(&scheduler, adaptive)?;
    Ok((scheduler, controller))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preset_loads_strictly_with_its_documented_settings() {
        let config = EndpointPickerConfig::from_yaml_strict(ADAPTIVE_CONFIG_YAML).unwrap();
        let adaptive = AdaptiveConfig::from_picker_config(&config).unwrap();
        assert_eq!(
            (adaptive.hysteresis.enter, adaptive.hysteresis.exit),
            (0.30, 0.15)
        );
        let weights: Vec<f64> = config.scheduling_profiles[0]
            .plugins
            .iter()
            .filter_map(|p| p.weight)
            .collect();
        assert_eq!(weights, vec![3.0, 4.0, 2.0, 2.0, 1.0, 2.0]);
    }
}
