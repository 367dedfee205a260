//! [`AdaptiveController`]: the adaptive loop bound to one scheduling profile.
//!
//! Each [`tick`](AdaptiveController::tick) samples the pool, runs the pure
//! [`Tuner::step`](crate::Tuner::step), publishes the weights to the profile's live weight
//! cell when they differ from those in force (the request path sees them on its next load,
//! without locking), logs mode changes with `tracing`, and keeps the tick's record in a
//! bounded ring. It owns no thread and no timer: a driver calls `tick` every
//! [`tick_interval`](AdaptiveController::tick_interval).
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_adaptive::{AdaptiveConfig, AdaptiveController};
//! use shepherd_scheduler_core::prelude::*;
//! # struct Sticky;
//! # impl Scorer for Sticky {
//! #     fn category(&self) -> Category { Category::Affinity }
//! #     fn score(&self, _: &mut CycleState<'_>, _: &[&Arc<Endpoint>], _: &mut [Score]) {}
//! # }
//! # struct Spread;
//! # impl Scorer for Spread {
//! #     fn category(&self) -> Category { Category::Distribution }
//! #     fn score(&self, _: &mut CycleState<'_>, _: &[&Arc<Endpoint>], _: &mut [Score]) {}
//! # }
//!
//! let profile = Arc::new(
//!     Profile::builder("default")
//!         .scorer("prefix", Arc::new(Sticky), 3.0)
//!         .scorer("queue", Arc::new(Spread), 2.0)
//!         .scorer("kv", Arc::new(Spread), 2.0)
//!         .build(),
//! );
//! let controller = AdaptiveController::new(Arc::clone(&profile), AdaptiveConfig::default()).unwrap();
//!
//! let now = Timestamp::from_millis(10);
//! let pool = Pool::with_clock(Arc::new(ManualClock::at(now)));
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! for ep in pool.snapshot().endpoints() {
//!     ep.set_metrics(EndpointMetrics { running: 5, ..Default::default() });
//! }
//! let record = controller.tick(&pool.snapshot(), now);
//! assert_eq!(record.weights, vec![3.0, 2.0, 2.0]); // balanced: configured weights
//! assert_eq!(controller.latest().unwrap().tick, 0);
//! let json = serde_json::to_string(&controller.history()).unwrap();
//! assert!(json.contains("\"mode\":\"steady\""));
//! ```

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::config::SchedulerSettings;
use shepherd_scheduler_core::endpoint::PoolSnapshot;
use shepherd_scheduler_core::profile::Profile;
use shepherd_scheduler_core::scheduler::Scheduler;
use shepherd_scheduler_core::weights::WeightTable;

use crate::config::AdaptiveConfig;
use crate::error::AdaptiveError;
use crate::layout::ScorerLayout;
use crate::mode::AdaptiveState;
use crate::record::{TickHistory, TickRecord};
use crate::sample::{EndpointSample, sample_pool};
use crate::tuner::Tuner;

struct Inner {
    state: AdaptiveState,
    history: TickHistory,
}

/// The adaptive loop bound to one profile: state, explanation ring, and weight publishing.
pub struct AdaptiveController {
    profile: Arc<Profile>,
    tuner: Tuner,
    staleness: Duration,
    inner: Mutex<Inner>,
}

impl AdaptiveController {
    /// A controller for `profile` under `config` (validated here), treating metrics older than
    /// the scheduler's default staleness bound as stale. Prefer
    /// [`for_scheduler`](Self::for_scheduler), which takes the scheduler's own bound.
    pub fn new(profile: Arc<Profile>, config: AdaptiveConfig) -> Result<Self, AdaptiveError> {
        let staleness = Duration::from_millis(SchedulerSettings::default().staleness_ms);
        Self::with_staleness(profile, config, staleness)
    }

    /// A controller for the default (first) profile of `scheduler`, under `config`, with the
    /// scheduler's staleness bound: the one staleness setting, `scheduler.stalenessMs`.
    pub fn for_scheduler(
        scheduler: &Scheduler,
        config: AdaptiveConfig,
    ) -> Result<Self, AdaptiveError> {
        let profile = scheduler
            .profiles()
            .first()
            .ok_or_else(|| AdaptiveError::Syntax("the scheduler has no profile".into()))?;
        Self::with_staleness(Arc::clone(profile), config, scheduler.staleness_bound())
    }

    /// A controller for `profile` under `config`, treating metrics older than `staleness` as
    /// stale.
    pub fn with_staleness(
        profile: Arc<Profile>,
        config: AdaptiveConfig,
        staleness: Duration,
    ) -> Result<Self, AdaptiveError> {
        let tuner = Tuner::new(config, ScorerLayout::from_profile(&profile))?;
        let inner = Inner {
            state: tuner.initial_state(),
            history: TickHistory::new(tuner.config().history_capacity),
        };
        Ok(AdaptiveController {
            profile,
            tuner,
            staleness,
            inner: Mutex::new(inner),
        })
    }

    /// Metrics older than this are left out of the statistics.
    pub fn staleness_bound(&self) -> Duration {
        self.staleness
    }

    /// The profile whose weights this controller sets.
    pub fn profile(&self) -> &Arc<Profile> {
        &self.profile
    }

    /// The pure loop this controller drives.
    pub fn tuner(&self) -> &Tuner {
        &self.tuner
    }

    /// The config.
    pub fn config(&self) -> &AdaptiveConfig {
        self.tuner.config()
    }

    /// How often a driver should call [`tick`](Self::tick).
    pub fn tick_interval(&self) -> Duration {
        self.tuner.config().tick_interval()
    }

    /// Samples `snapshot` at `now` and runs one tick.
    pub fn tick(&self, snapshot: &PoolSnapshot, now: Timestamp) -> TickRecord {
        let samples = sample_pool(snapshot, now, self.staleness);
        self.tick_with_samples(&samples, now)
    }

    /// Runs one tick on samples already taken.
    pub fn tick_with_samples(&self, samples: &[EndpointSample], now: Timestamp) -> TickRecord {
        let mut inner = self.inner.lock();
        let outcome = self.tuner.step(&inner.state, samples, now);
        let record = outcome.record;
        let in_force = self.profile.weights().load();
        if in_force.as_slice() != outcome.weights.as_slice() {
            let table = WeightTable::new(outcome.weights).with_reason(record.reason.as_str());
            if !self.profile.weights().store(table) {
                tracing::warn!(
                    profile = self.profile.name(),
                    "adaptive weights: weight table length mismatch, not published"
                );
            }
        }
        drop(in_force);
        if record.mode_changed() {
            tracing::info!(
                profile = self.profile.name(),
                tick = record.tick,
                from = %record.previous_mode,
                to = %record.mode,
                smoothed = record.smoothed,
                distribution_share = record.distribution_share,
                weights = ?record.weights,
                reason = %record.reason,
                "adaptive weights: mode change"
            );
        } else if record.weights_changed {
            tracing::debug!(
                profile = self.profile.name(),
                tick = record.tick,
                weights = ?record.weights,
                reason = %record.reason,
                "adaptive weights: new weights"
            );
        }
        inner.state = outcome.state;
        inner.history.push(record.clone());
        record
    }

    /// The loop's current state.
    pub fn state(&self) -> AdaptiveState {
        self.inner.lock().state.clone()
    }

    /// The newest tick record.
    pub fn latest(&self) -> Option<TickRecord> {
        self.inner.lock().history.latest().cloned()
    }

    /// A copy of the explanation ring (serializes as a JSON list, oldest first).
    pub fn history(&self) -> TickHistory {
        self.inner.lock().history.clone()
    }

    /// Calls `f` with the explanation ring, without copying it.
    pub fn with_history<R>(&self, f: impl FnOnce(&TickHistory) -> R) -> R {
        f(&self.inner.lock().history)
    }
}

impl std::fmt::Debug for AdaptiveController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdaptiveController")
            .field("profile", &self.profile.name())
            .field("state", &self.inner.lock().state)
            .finish()
    }
}
