//! Flow control: holding requests while the pool is saturated, dispatching them by priority
//! and fairness as capacity returns, and shedding what is sheddable (DESIGN.md section 6).
//!
//! The pure part, one concept per module:
//!
//! - [`saturation`]: is the pool saturated? ([`SaturationDetector`]: the upstream
//!   `utilization-detector` and `concurrency-detector`);
//! - [`queue`]: the [`FlowQueue`] state machine (bands, fair flows, limits, TTL, cancel);
//! - [`usage_limit`]: how full the pool may get before each priority is held back
//!   ([`UsageLimitPolicy`]: upstream's `static-usage-limit-policy`, `priority-holdback-policy`
//!   and `soft-reflective-ceiling-policy`, whose schedule is [`soft_ceiling`]);
//! - [`eviction`]: in-flight eviction of sheddable requests for blocked higher bands
//!   ([`Evictor`]: upstream's `enableEviction`);
//! - [`ordering`]: which request of a flow goes first ([`OrderingPolicy`]: FCFS, EDF, SLO
//!   deadline);
//! - [`reason`]: why a request was dropped ([`DropReason`]: header value and HTTP status);
//! - [`config`]: the upstream `flowControl` section ([`FlowControlConfig`]) validated into
//!   [`FlowSettings`].
//!
//! An adapter's driver puts them together: on each request, [`FlowQueue::admit`] with the
//! detector's verdict, then [`FlowQueue::enqueue`]; whenever the pool has room (not saturated),
//! [`FlowQueue::dispatch_next`]; on a timer, [`FlowQueue::expire`].
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::clock::{Clock, ManualClock};
//! use shepherd_scheduler_core::endpoint::{EndpointMetrics, Pool};
//! use shepherd_scheduler_core::flow::{
//!     DropReason, FlowQueue, FlowSettings, SaturationDetector,
//! };
//!
//! let clock = Arc::new(ManualClock::default());
//! let pool = Pool::with_clock(clock.clone());
//! pool.add("10.0.0.1:8000")
//!     .set_metrics(EndpointMetrics { waiting: 9, ..Default::default() });
//! let settings = FlowSettings::default();
//! let saturated = settings.detector.is_saturated(&pool.snapshot(), clock.now());
//! assert!(saturated);
//!
//! let mut queue = FlowQueue::new(settings);
//! assert_eq!(queue.admit(-5, saturated), Err(DropReason::Shed));
//! queue.admit(0, saturated).unwrap();
//! queue.enqueue("request", 0, "", 512, clock.now()).unwrap();
//! assert_eq!(queue.len(), 1);
//! ```

pub mod config;
pub mod eviction;
pub mod ordering;
pub mod program_aware;
pub mod queue;
pub mod reason;
pub mod saturation;
pub mod soft_ceiling;
pub mod usage_limit;

pub use config::{
    BandLimits, Fairness, FlowConfigError, FlowControlConfig, FlowSettings, PriorityBandConfig,
    SaturationDetectorConfig, parse_go_duration,
};
pub use eviction::{Demand, EvictionSettings, Evictor};
pub use ordering::OrderingPolicy;
pub use program_aware::ProgramLedger;
pub use queue::{Arrival, FlowCounters, FlowQueue, Ticket};
pub use reason::{DropReason, Rejected};
pub use saturation::{
    ConcurrencyDetector, ConcurrencyMode, Detector, Pending, SaturationDetector,
    UtilizationDetector, is_saturated_level,
};
pub use usage_limit::{HoldbackDomain, UsageLimitPolicy};
