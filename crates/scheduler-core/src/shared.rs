//! The state that outlives any one scheduler: the pool (with its clock and its endpoints' live
//! counters), the plugins' shared [`Resources`], and the [`CoreMetrics`].
//!
//! Build it once, then build schedulers over it — at start and at every config reload — so
//! nothing that matters is lost when the configuration changes.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scheduler_core::shared::SharedState;
//!
//! let shared = SharedState::new(Arc::new(Pool::new()));
//! shared.pool.set_members(["10.0.0.1:8000"]);
//! let scheduler = Scheduler::builder_in(&shared).profile(Profile::builder("p").build()).build().unwrap();
//! assert!(Arc::ptr_eq(scheduler.metrics(), &shared.metrics));
//! ```

use std::sync::Arc;

use crate::endpoint::Pool;
use crate::metrics::CoreMetrics;
use crate::resources::Resources;

/// The pool, the resources and the metrics every scheduler over one pool shares.
#[derive(Debug, Clone)]
pub struct SharedState {
    /// The endpoints, their counters and metrics, and the clock.
    pub pool: Arc<Pool>,
    /// Plugins' shared state, by name.
    pub resources: Arc<Resources>,
    /// The scheduler's counters.
    pub metrics: Arc<CoreMetrics>,
}

impl SharedState {
    /// Fresh resources and metrics over `pool`.
    pub fn new(pool: Arc<Pool>) -> Self {
        SharedState {
            pool,
            resources: Arc::new(Resources::new()),
            metrics: Arc::new(CoreMetrics::new()),
        }
    }
}
