//! Binding to the other Shepherd crates: the built-in plugin registry and the adaptive
//! controller.
//!
//! A policy whose config has an `adaptive:` section runs with an [`AdaptiveController`] bound
//! to the scheduler's first (default) profile. The runner ticks it every
//! [`AdaptiveController::tick_interval`] of *simulated* time, exactly as the production driver
//! does on the wall clock, and keeps one [`AdaptiveSample`] per tick for the report and plots.

use std::sync::Arc;
use std::time::Duration;

use shepherd_adaptive::{AdaptiveConfig, AdaptiveController, TickRecord};
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::config::Registry;
use shepherd_scheduler_core::endpoint::PoolSnapshot;
use shepherd_scheduler_core::scheduler::Scheduler;

use crate::error::SimError;
use crate::policy::Policy;
use crate::runner::{AdaptiveSample, TickDriver};

/// The registry of built-in plugins.
pub(crate) fn base_registry() -> Registry {
    shepherd_scorers::builtin_registry()
}

/// The adaptive controller for `policy`, bound to the default profile of `scheduler`; `None`
/// when the scheduler has no profile.
pub(crate) fn driver(
    policy: &Policy,
    scheduler: &Scheduler,
) -> Result<Option<Box<dyn TickDriver>>, SimError> {
    let invalid = |source| SimError::Adaptive {
        policy: policy.name.clone(),
        source,
    };
    let config = AdaptiveConfig::from_picker_config(&policy.config).map_err(invalid)?;
    let Some(profile) = scheduler.profiles().first() else {
        return Ok(None);
    };
    let controller = AdaptiveController::new(Arc::clone(profile), config).map_err(invalid)?;
    Ok(Some(Box::new(ControllerDriver { controller })))
}

/// Ticks an [`AdaptiveController`] on the simulated clock.
struct ControllerDriver {
    controller: AdaptiveController,
}

impl TickDriver for ControllerDriver {
    fn interval(&self) -> Duration {
        self.controller.tick_interval()
    }

    fn tick(&mut self, pool: &PoolSnapshot, now: Timestamp) -> Option<AdaptiveSample> {
        Some(sample_of(&self.controller.tick(pool, now)))
    }
}

/// What the report keeps of one tick record.
fn sample_of(record: &TickRecord) -> AdaptiveSample {
    AdaptiveSample {
        time: record.at_nanos,
        signal: record.signal(),
        ncv_load: record.reading.ncv_load,
        ncv_kv: record.reading.ncv_kv,
        smoothed: record.smoothed,
        mode: record.mode.to_string(),
        distribution_share: record.distribution_share,
        weights: record.weights.clone(),
        reason: record.mode_changed().then(|| record.reason.clone()),
    }
}
