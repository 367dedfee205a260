//! The adaptive tick loop: drives the controller of the policy in force on its own interval,
//! on tokio time, through the [`TickDriver`] contract the simulator drives too.
//!
//! The loop is on whenever the policy has an `adaptive:` section (the adaptive preset, which
//! a config without `schedulingProfiles` runs, has one). On every config reload the runtime
//! builds a controller for the new scheduler's default profile and swaps it in here: the
//! loop picks it up at once and ticks it from then on (its history starts afresh; the old
//! controller's records stay readable until the swap). A policy without `adaptive:` stops the
//! ticking and keeps its configured weights.
//!
//! [`AdaptiveRunner`] is also a [`MetricsSource`] (the controller's signal, mode, share and
//! weights) and gives the recent tick records as JSON for the admin port's
//! `/debug/adaptive`.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_adaptive::preset::build_adaptive_scheduler_in;
//! use shepherd_runtime::adaptive::AdaptiveRunner;
//! use shepherd_scheduler_core::prelude::*;
//!
//! let shared = SharedState::new(Arc::new(Pool::new()));
//! shared.pool.set_members(["127.0.0.1:8000", "127.0.0.1:8001"]);
//! let (scheduler, controller) = build_adaptive_scheduler_in(&shared).unwrap();
//! let runner = AdaptiveRunner::new();
//! runner.replace(Some(controller));
//! let record = runner.controller().unwrap().tick(&shared.pool.snapshot(), scheduler.clock().now());
//! assert_eq!(record.weights, vec![3.0, 4.0, 2.0, 2.0, 1.0, 2.0]);
//! let json = runner.debug_json(None);
//! assert_eq!(json["enabled"], true);
//! assert_eq!(json["records"].as_array().unwrap().len(), 1);
//! ```

use std::sync::Arc;
use std::time::Duration;

use shepherd_adaptive::{
    AdaptiveController, AdaptiveError, AdaptiveSample, ControllerDriver, TickDriver,
};
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::config::EndpointPickerConfig;
use shepherd_scheduler_core::endpoint::{Pool, PoolSnapshot};
use shepherd_scheduler_core::metrics::{MetricsSource, MetricsVisitor};
use shepherd_scheduler_core::scheduler::Scheduler;
use tokio::sync::watch;

use crate::shutdown::ShutdownSignal;

/// The controller `policy` asks for, bound to `scheduler`'s default profile: `None` when the
/// policy has no `adaptive:` section.
pub fn build_controller(
    policy: &EndpointPickerConfig,
    scheduler: &Scheduler,
) -> Result<Option<AdaptiveController>, AdaptiveError> {
    Ok(ControllerDriver::from_config(policy, scheduler)?.map(ControllerDriver::into_controller))
}

/// The controller in force (if any), shared by the tick loop, the metrics and the debug
/// view. See the [module docs](self).
#[derive(Debug)]
pub struct AdaptiveRunner {
    current: watch::Sender<Option<Arc<AdaptiveController>>>,
}

impl Default for AdaptiveRunner {
    fn default() -> Self {
        AdaptiveRunner::new()
    }
}

impl AdaptiveRunner {
    /// No controller yet.
    pub fn new() -> Self {
        let (current, _rx) = watch::channel(None);
        AdaptiveRunner { current }
    }

    /// The controller in force.
    pub fn controller(&self) -> Option<Arc<AdaptiveController>> {
        self.current.borrow().clone()
    }

    /// Puts `controller` in force (`None` stops the ticking); the loop switches at once.
    pub fn replace(&self, controller: Option<AdaptiveController>) {
        self.current.send_replace(controller.map(Arc::new));
    }

    /// The debug view: whether a controller runs, its profile, mode and recent tick records
    /// (oldest first; the newest `limit` when given).
    pub fn debug_json(&self, limit: Option<usize>) -> serde_json::Value {
        let Some(controller) = self.controller() else {
            return serde_json::json!({ "enabled": false, "records": [] });
        };
        let records = controller.with_history(|history| {
            let skip = limit.map_or(0, |n| history.len().saturating_sub(n));
            history
                .iter()
                .skip(skip)
                .map(|r| serde_json::to_value(r).unwrap_or(serde_json::Value::Null))
                .collect::<Vec<_>>()
        });
        let state = controller.state();
        serde_json::json!({
            "enabled": true,
            "profile": controller.profile().name(),
            "tickIntervalMs": controller.tick_interval().as_millis() as u64,
            "mode": state.mode.to_string(),
            "smoothed": state.smoothed,
            "records": records,
        })
    }

    /// Ticks the controller in force on its interval (first tick at once) until `stop`.
    pub(crate) async fn run(self: Arc<Self>, pool: Arc<Pool>, stop: ShutdownSignal) {
        let mut changes = self.current.subscribe();
        loop {
            let controller = changes.borrow_and_update().clone();
            let Some(controller) = controller else {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    () = stop.wait() => return,
                }
                continue;
            };
            let mut driver = SharedDriver(controller);
            loop {
                driver.tick(&pool.snapshot(), pool.clock().now());
                tokio::select! {
                    () = tokio::time::sleep(driver.interval()) => {}
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        break;
                    }
                    () = stop.wait() => return,
                }
            }
        }
    }
}

impl MetricsSource for AdaptiveRunner {
    fn visit_metrics(&self, visitor: &mut dyn MetricsVisitor) {
        if let Some(controller) = self.controller() {
            controller.visit_metrics(visitor);
        }
    }
}

/// A shared controller as a [`TickDriver`] (the runner keeps it readable while it ticks).
#[derive(Debug)]
struct SharedDriver(Arc<AdaptiveController>);

impl TickDriver for SharedDriver {
    fn interval(&self) -> Duration {
        self.0.tick_interval()
    }

    fn tick(&mut self, pool: &PoolSnapshot, now: Timestamp) -> Option<AdaptiveSample> {
        Some(AdaptiveSample::from(&self.0.tick(pool, now)))
    }
}
