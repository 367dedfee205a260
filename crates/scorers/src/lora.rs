//! How ready an endpoint is to serve a LoRA adapter, shared by the LoRA scorer and filter.

use std::time::Duration;

use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::endpoint::Endpoint;

/// An endpoint's readiness for one adapter, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum LoraReadiness {
    /// The adapter has running requests on the endpoint.
    Running,
    /// The endpoint has room to load another adapter.
    Room,
    /// The adapter has waiting requests (it is queued to load) and there is no room.
    Waiting,
    /// None of the above.
    Unavailable,
    /// The metrics are stale: no judgement.
    Unknown,
}

impl LoraReadiness {
    /// Judges `metrics` for `adapter` at `now`.
    pub(crate) fn of(
        endpoint: &Endpoint,
        adapter: &str,
        now: Timestamp,
        staleness_bound: Duration,
    ) -> Self {
        if endpoint.load_metrics().is_stale(now, staleness_bound) {
            return LoraReadiness::Unknown;
        }
        let metrics = endpoint.metrics();
        if metrics.lora.is_running(adapter) {
            LoraReadiness::Running
        } else if metrics.lora.has_room() {
            LoraReadiness::Room
        } else if metrics.lora.is_waiting(adapter) {
            LoraReadiness::Waiting
        } else {
            LoraReadiness::Unavailable
        }
    }
}
