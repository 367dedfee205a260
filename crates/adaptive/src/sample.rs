//! What the detector reads from each endpoint on a tick.
//!
//! Load pᵢ = running + waiting (from the scraped metrics) + the scheduler's own in-flight count;
//! KV utilization kᵢ from the scraped metrics. An endpoint whose metrics are stale (older than
//! the staleness bound, or never scraped) is marked so and left out of the statistics.
//!
//! ```
//! use std::time::Duration;
//! use shepherd_adaptive::sample::sample_pool;
//! use shepherd_scheduler_core::clock::{ManualClock, Timestamp};
//! use shepherd_scheduler_core::endpoint::{EndpointMetrics, Pool};
//!
//! let pool = Pool::with_clock(std::sync::Arc::new(ManualClock::default())); // at time zero
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let snapshot = pool.snapshot();
//! let ep = snapshot.get_by_address("10.0.0.1:8000").unwrap();
//! ep.set_metrics(EndpointMetrics {
//!     running: 4, waiting: 2, kv_utilization: 0.5, ..Default::default()
//! });
//! let _guard = ep.start_request(10);
//!
//! let samples = sample_pool(&snapshot, Timestamp::from_millis(50), Duration::from_millis(200));
//! assert_eq!(samples[0].load, 7.0);
//! assert!(!samples[0].stale);
//! assert!(samples[1].stale); // never scraped
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::endpoint::{Endpoint, PoolSnapshot};

/// One endpoint's inputs to one tick.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSample {
    /// The endpoint's address.
    pub address: Arc<str>,
    /// Requests running, from the scraped metrics.
    pub running: u32,
    /// Requests waiting, from the scraped metrics.
    pub waiting: u32,
    /// Requests in flight from this scheduler.
    pub in_flight: u64,
    /// pᵢ = running + waiting + in_flight.
    pub load: f64,
    /// kᵢ, KV-cache utilization in `[0, 1]`.
    pub kv_utilization: f64,
    /// Whether the metrics were stale (the endpoint is left out of the statistics).
    pub stale: bool,
}

impl EndpointSample {
    /// A sample; computes the load and clamps the KV utilization into `[0, 1]` (NaN counts as
    /// full, like the core's `kv_utilization_clamped`).
    pub fn new(
        address: impl Into<Arc<str>>,
        running: u32,
        waiting: u32,
        in_flight: u64,
        kv_utilization: f64,
        stale: bool,
    ) -> Self {
        EndpointSample {
            address: address.into(),
            running,
            waiting,
            in_flight,
            load: f64::from(running) + f64::from(waiting) + in_flight as f64,
            kv_utilization: if kv_utilization.is_nan() {
                1.0
            } else {
                kv_utilization.clamp(0.0, 1.0)
            },
            stale,
        }
    }

    /// Estimated distinct requests at the endpoint: max(running + waiting, in-flight). The
    /// scheduler's own in-flight requests are normally also among the server's running and
    /// waiting ones, so the larger of the two counts is the better estimate.
    pub fn requests(&self) -> f64 {
        (f64::from(self.running) + f64::from(self.waiting)).max(self.in_flight as f64)
    }

    /// Reads one endpoint at `now`.
    pub fn read(endpoint: &Endpoint, now: Timestamp, staleness: Duration) -> Self {
        let metrics = endpoint.load_metrics();
        EndpointSample::new(
            Arc::clone(endpoint.address_arc()),
            metrics.running,
            metrics.waiting,
            endpoint.total_in_flight_requests(),
            metrics.kv_utilization_clamped(),
            metrics.is_stale(now, staleness),
        )
    }
}

/// Reads every endpoint of `snapshot` at `now` (in the snapshot's order, by address).
pub fn sample_pool(
    snapshot: &PoolSnapshot,
    now: Timestamp,
    staleness: Duration,
) -> Vec<EndpointSample> {
    snapshot
        .endpoints()
        .iter()
        .map(|e| EndpointSample::read(e, now, staleness))
        .collect()
}
