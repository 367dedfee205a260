//! Model-server endpoints: identity, scraped metrics, health, live counters and the pool.
//!
//! The [`Pool`] holds an immutable [`PoolSnapshot`] of its members, swapped atomically when
//! membership changes. The pool owns the clock that stamps every endpoint's metrics when they
//! are stored. Each [`Endpoint`] carries its own live counters (requests and prompt
//! tokens in flight, counted by [`InFlightGuard`]s) and its latest [`EndpointMetrics`], so a
//! membership swap never loses them. The guard also counts the request's *pending prefill*
//! (uncached prompt tokens) until the first token comes back ([`InFlightGuard::prefill_done`]).
//!
//! ```
//! use shepherd_scheduler_core::endpoint::{EndpointMetrics, Pool};
//! use shepherd_scheduler_core::endpoint::EndpointHealth;
//!
//! let pool = Pool::new();
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let snapshot = pool.snapshot();
//! assert_eq!(snapshot.len(), 2);
//!
//! let ep = snapshot.get_by_address("10.0.0.1:8000").unwrap();
//! ep.set_metrics(EndpointMetrics { waiting: 3, ..Default::default() });
//! assert_eq!(ep.metrics().waiting, 3);
//! assert_eq!(ep.load_metrics().waiting, 3);
//! assert!(ep.scraped_at().is_some()); // stamped on the pool's clock
//!
//! pool.set_health("10.0.0.1:8000", EndpointHealth::Draining); // no new requests go there
//! assert!(!ep.accepts_requests());
//! assert!(!pool.snapshot().all_enabled());
//!
//! let guard = ep.start_request(100);
//! assert_eq!(ep.in_flight_requests(), 1);
//! drop(guard);
//! assert_eq!(ep.in_flight_requests(), 0);
//! ```

mod attributes;
mod counters;
mod exported;
mod metrics;
mod node;
mod peer_load;
mod pool;

pub use attributes::{
    Column, ColumnValues, ENDPOINT_ATTRIBUTES, EndpointAttributes, MAX_ATTRIBUTE_KEYS, MAX_ROWS,
    Values,
};
pub use counters::InFlightGuard;
pub use metrics::{EndpointHealth, EndpointMetrics, LoadMetrics, LoraState};
pub use node::{Endpoint, EndpointId, EndpointLabels};
pub use peer_load::PeerLoad;
pub use pool::{MembershipListener, Pool, PoolSnapshot};
