//! Flow control on the request path: requests wait here, before scheduling, while the pool is
//! saturated; they leave by priority and fairness as capacity returns, or are shed.
//!
//! The decisions are the core's ([`shepherd_scheduler_core::flow`]: the saturation detectors
//! and the [`FlowQueue`](shepherd_scheduler_core::flow::FlowQueue)); this module is their async
//! driver, shared by both adapters:
//!
//! - [`FlowController::admit`]: called with a request's priority, fairness id and size before
//!   it is scheduled. When nothing is queued and the pool is not saturated it answers at once
//!   (a short lock, no task switch). Otherwise a sheddable request (negative priority) under
//!   saturation is refused ([`DropReason::Shed`], 429), the others wait in the queue
//!   ([`DropReason::QueueFull`], 429, when their band has no room) until they are dispatched
//!   or their time-to-live runs out ([`DropReason::TtlExpired`], 503). Dropping the future
//!   (the client went away) takes the request out of the queue without a trace.
//! - [`FlowController::run_until`]: the loop that dispatches queued requests whenever the pool is
//!   not saturated (checked every [`DISPATCH_POLL`] while anything waits, and at once on every
//!   arrival) and expires them on time. A pool with no endpoint at all is saturated, so
//!   requests wait through a scale-from-zero and leave as soon as an endpoint can take them.
//! - [`FlowPermit`]: what an admitted request holds until it is scheduled; until then it
//!   counts as [`Pending`](shepherd_scheduler_core::flow::Pending) load, so a burst of
//!   dispatches does not overshoot before the pool's figures show it.
//! - [`EvictionLease`]: with `enableEviction`, what a dispatched request holds until its
//!   response is over ([`FlowPermit::take_lease`]); when a band with queued requests is held
//!   back by saturation, flow control evicts sheddable requests in flight
//!   ([`shepherd_scheduler_core::flow::eviction`]) and the adapter answers each 429
//!   ([`DropReason::Evicted`]).
//! - [`FlowStats`]: the counters and gauges exported on `/metrics`.
//!
//! Flow control is on when the config has a `flowControl` section (the upstream name and
//! schema; `docs/flow-control.md`).
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shepherd_runtime::TokioClock;
//! use shepherd_runtime::flow::{FlowController, FlowRequest};
//! use shepherd_scheduler_core::endpoint::Pool;
//! use shepherd_scheduler_core::flow::{DropReason, FlowSettings};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let pool = Arc::new(Pool::with_clock(Arc::new(TokioClock::new())));
//! let flow = FlowController::new(FlowSettings::default(), Arc::clone(&pool));
//! tokio::spawn(flow.clone().run_until(std::future::pending()));
//!
//! // No endpoint at all: the pool is saturated. A sheddable request is refused at once ...
//! let batch = FlowRequest { priority: -1, ..FlowRequest::default() };
//! assert_eq!(flow.admit(batch).await.unwrap_err(), DropReason::Shed);
//!
//! // ... a standard one waits for its whole time-to-live (60 s by default), then gets 503.
//! let started = tokio::time::Instant::now();
//! assert_eq!(flow.admit(FlowRequest::default()).await.unwrap_err(), DropReason::TtlExpired);
//! assert_eq!(started.elapsed(), Duration::from_secs(60));
//! assert_eq!(flow.stats().dropped(DropReason::TtlExpired), 1);
//! # }
//! ```

mod controller;
mod lease;
mod permit;
mod request;
mod stats;

pub use controller::{DISPATCH_POLL, FlowController};
pub use lease::EvictionLease;
pub use permit::FlowPermit;
pub use request::FlowRequest;
pub use stats::FlowStats;

pub use shepherd_scheduler_core::flow::DropReason;
