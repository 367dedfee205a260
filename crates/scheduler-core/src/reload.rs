//! Swapping a rebuilt scheduler in when the configuration changes.
//!
//! A [`ReloadableScheduler`] holds the current [`Scheduler`] behind an `ArcSwap`: the request
//! path loads it without locking, and a reload builds a new scheduler over the same
//! [`SharedState`] and swaps it in. Nothing is lost: in-flight counts and scraped metrics live
//! in the pool's endpoints, counters in the shared [`CoreMetrics`](crate::metrics::CoreMetrics),
//! plugin state such as the prefix index in the shared [`Resources`](crate::resources::Resources).
//! Nothing leaks either: the old scheduler is freed once the last request it scheduled ends,
//! and the membership listeners it registered (held weakly by the pool) go with it.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scheduler_core::config::Registry;
//!
//! let shared = SharedState::new(Arc::new(Pool::new()));
//! shared.pool.set_members(["10.0.0.1:8000"]);
//! let yaml = "schedulingProfiles:\n- name: default\n";
//! let config = EndpointPickerConfig::from_yaml(yaml).unwrap();
//! let scheduler = ReloadableScheduler::build(&config, &Registry::new(), shared).unwrap();
//!
//! let request = InferenceRequest::new("r1", "llama", Prompt::Text("hi".into()));
//! let decision = scheduler.schedule(&request).unwrap();
//! scheduler.reload(&config, &Registry::new()).unwrap(); // while r1 is in flight
//! assert_eq!(decision.primary().in_flight_requests(), 1);
//! decision.finish(Completion::success(None));
//! assert_eq!(scheduler.generation(), 1);
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;

use crate::config::{ConfigError, EndpointPickerConfig, Registry, build_scheduler_in};
use crate::decision::Decision;
use crate::metrics::{MetricsSource, MetricsVisitor};
use crate::request::InferenceRequest;
use crate::scheduler::{ScheduleError, ScheduleOptions, Scheduler};
use crate::shared::SharedState;

/// The current scheduler, replaceable at run time. See the [module docs](self).
pub struct ReloadableScheduler {
    current: ArcSwap<Scheduler>,
    shared: SharedState,
    generation: AtomicU64,
}

impl ReloadableScheduler {
    /// Starts with `scheduler`; reloads build over its [`SharedState`].
    pub fn new(scheduler: Scheduler) -> Self {
        let shared = scheduler.shared().clone();
        ReloadableScheduler {
            current: ArcSwap::from_pointee(scheduler),
            shared,
            generation: AtomicU64::new(0),
        }
    }

    /// Builds the first scheduler from `config` over `shared`.
    pub fn build(
        config: &EndpointPickerConfig,
        registry: &Registry,
        shared: SharedState,
    ) -> Result<Self, ConfigError> {
        Ok(ReloadableScheduler::new(build_scheduler_in(
            config, registry, &shared,
        )?))
    }

    /// The current scheduler, for one request (no lock, no reference count).
    pub fn load(&self) -> arc_swap::Guard<Arc<Scheduler>> {
        self.current.load()
    }

    /// The current scheduler, to keep.
    pub fn load_full(&self) -> Arc<Scheduler> {
        self.current.load_full()
    }

    /// The state every scheduler built here shares.
    pub fn shared(&self) -> &SharedState {
        &self.shared
    }

    /// How many times a scheduler was swapped in.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Builds a scheduler from `config` and swaps it in. On error the current scheduler stays.
    pub fn reload(
        &self,
        config: &EndpointPickerConfig,
        registry: &Registry,
    ) -> Result<(), ConfigError> {
        let next = build_scheduler_in(config, registry, &self.shared)?;
        self.swap(next);
        Ok(())
    }

    /// Swaps `next` in. It should be built over this [`SharedState`]
    /// ([`Scheduler::builder_in`]): a scheduler over another pool would not see the live
    /// counters of this one.
    pub fn swap(&self, next: Scheduler) {
        self.current.store(Arc::new(next));
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// Schedules `request` with the current scheduler's default profile.
    pub fn schedule(&self, request: &InferenceRequest) -> Result<Decision, ScheduleError> {
        self.current.load().schedule(request)
    }

    /// Schedules `request` with the current scheduler.
    pub fn schedule_with(
        &self,
        request: &InferenceRequest,
        options: ScheduleOptions<'_>,
    ) -> Result<Decision, ScheduleError> {
        self.current.load().schedule_with(request, options)
    }

    /// Schedules `request` with the current scheduler, telling `observer` about every
    /// profile and scorer ([`Scheduler::schedule_observed`]).
    pub fn schedule_observed(
        &self,
        request: &InferenceRequest,
        options: ScheduleOptions<'_>,
        observer: &dyn crate::scheduler::ScheduleObserver,
    ) -> Result<Decision, ScheduleError> {
        self.current
            .load()
            .schedule_observed(request, options, observer)
    }
}

impl MetricsSource for ReloadableScheduler {
    fn visit_metrics(&self, visitor: &mut dyn MetricsVisitor) {
        self.current.load().visit_metrics(visitor);
    }
}

impl std::fmt::Debug for ReloadableScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadableScheduler")
            .field("current", &*self.current.load())
            .field("generation", &self.generation())
            .finish()
    }
}
