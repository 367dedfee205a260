//! The driver contract: what a loop outside this crate ticks, and what each tick yields.
//!
//! Shepherd's adaptive loop owns no thread and no timer. Whatever advances time (the
//! simulator's event queue on simulated time, an async runtime's interval on the wall clock)
//! holds a [`TickDriver`] and, every [`interval`](TickDriver::interval), hands it the pool's
//! current [`PoolSnapshot`] and the time; the driver may return an [`AdaptiveSample`] to keep
//! for reports, plots or metrics. Both sides share this one contract, so the simulator
//! exercises exactly the binding production runs.
//!
//! [`ControllerDriver`] is the binding of an [`AdaptiveController`] to the contract: one tick
//! of the driver is one [`AdaptiveController::tick`], and its sample is what the tick's
//! [`TickRecord`] says.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shepherd_adaptive::{AdaptiveConfig, AdaptiveController, ControllerDriver, TickDriver};
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
//!         .build(),
//! );
//! let controller = AdaptiveController::new(profile, AdaptiveConfig::default()).unwrap();
//! let mut driver: Box<dyn TickDriver> = Box::new(ControllerDriver::new(controller));
//! assert_eq!(driver.interval(), Duration::from_millis(200));
//!
//! let clock = Arc::new(ManualClock::default());
//! let pool = Pool::with_clock(clock.clone());
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//!
//! // The loop a simulator or runtime runs: tick on the driver's own period.
//! let mut samples = Vec::new();
//! let mut now = Timestamp::ZERO;
//! for _ in 0..3 {
//!     clock.set(now);
//!     for ep in pool.snapshot().endpoints() {
//!         ep.set_metrics(EndpointMetrics { running: 4, ..Default::default() });
//!     }
//!     if let Some(sample) = driver.tick(&pool.snapshot(), now) {
//!         samples.push(sample);
//!     }
//!     now = now.saturating_add(driver.interval());
//! }
//! assert_eq!(samples.len(), 3);
//! assert_eq!(samples[2].time, 400_000_000);
//! assert_eq!(samples[2].mode, "steady");
//! assert_eq!(samples[2].weights, vec![3.0, 2.0]); // a balanced pool keeps its weights
//! ```

use std::time::Duration;

use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::config::EndpointPickerConfig;
use shepherd_scheduler_core::endpoint::PoolSnapshot;
use shepherd_scheduler_core::scheduler::Scheduler;

use crate::config::AdaptiveConfig;
use crate::controller::AdaptiveController;
use crate::error::AdaptiveError;
use crate::record::TickRecord;

/// Something ticked with the pool on its own period: the adaptive weights controller, or a
/// test double.
///
/// The caller owns time. It calls [`tick`](Self::tick) first at the start of a run and then
/// every [`interval`](Self::interval) (read again after each tick, so a driver may change its
/// period), and keeps the samples it returns.
pub trait TickDriver: Send {
    /// How long to wait between ticks.
    fn interval(&self) -> Duration;

    /// Runs one tick on `pool` as it is at `now`; returns what to keep of it, if anything.
    fn tick(&mut self, pool: &PoolSnapshot, now: Timestamp) -> Option<AdaptiveSample>;
}

/// What a tick yields for reports and plots: the signal, the mode and the weights after it.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveSample {
    /// Time of the tick, in nanoseconds since the clock's origin.
    pub time: u64,
    /// Raw imbalance signal s ∈ [0, 1] of the tick (`None` when every endpoint was stale).
    pub signal: Option<f64>,
    /// Load imbalance nCV(p) the detector read (after its chance correction, if on).
    pub ncv_load: f64,
    /// KV-utilization imbalance nCV(k) the detector read.
    pub ncv_kv: f64,
    /// Smoothed signal r ∈ [0, 1] after the tick (what the hysteresis compares).
    pub smoothed: f64,
    /// Mode after the tick (`steady` or `burst`).
    pub mode: String,
    /// Distribution share of the weight budget after the tick.
    pub distribution_share: f64,
    /// The profile's weights after the tick, scorer order.
    pub weights: Vec<f64>,
    /// The controller's explanation, on ticks that changed the mode.
    pub reason: Option<String>,
}

impl From<&TickRecord> for AdaptiveSample {
    fn from(record: &TickRecord) -> Self {
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
}

/// An [`AdaptiveController`] as a [`TickDriver`]: ticks every
/// [`AdaptiveController::tick_interval`] and yields a sample of every tick.
#[derive(Debug)]
pub struct ControllerDriver {
    controller: AdaptiveController,
}

impl ControllerDriver {
    /// Drives `controller`.
    pub fn new(controller: AdaptiveController) -> Self {
        ControllerDriver { controller }
    }

    /// The driver `config` asks for, bound to the first (default) profile of `scheduler`:
    /// `None` when the config has no `adaptive` section or the scheduler has no profile.
    ///
    /// # Errors
    ///
    /// [`AdaptiveError`] when the `adaptive` section is invalid, or does not fit the profile.
    pub fn from_config(
        config: &EndpointPickerConfig,
        scheduler: &Scheduler,
    ) -> Result<Option<Self>, AdaptiveError> {
        if config.adaptive.is_none() {
            return Ok(None);
        }
        let adaptive = AdaptiveConfig::from_picker_config(config)?;
        if scheduler.profiles().is_empty() {
            return Ok(None);
        }
        let controller = AdaptiveController::for_scheduler(scheduler, adaptive)?;
        Ok(Some(ControllerDriver::new(controller)))
    }

    /// The controller driven (its state, history and profile).
    pub fn controller(&self) -> &AdaptiveController {
        &self.controller
    }

    /// Gives the controller back.
    pub fn into_controller(self) -> AdaptiveController {
        self.controller
    }
}

impl TickDriver for ControllerDriver {
    fn interval(&self) -> Duration {
        self.controller.tick_interval()
    }

    fn tick(&mut self, pool: &PoolSnapshot, now: Timestamp) -> Option<AdaptiveSample> {
        Some(AdaptiveSample::from(&self.controller.tick(pool, now)))
    }
}
