use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;

use super::{EndpointMetrics, InFlightGuard};

/// A compact, process-unique endpoint identity. Never reused for another endpoint, so indexes
/// keyed by it cannot confuse an endpoint that left with one that joined later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EndpointId(pub u32);

impl fmt::Display for EndpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) requests: AtomicU64,
    pub(super) prompt_tokens: AtomicU64,
}

/// One model server: its address, its latest metrics, and its live in-flight counters.
pub struct Endpoint {
    id: EndpointId,
    address: Arc<str>,
    metrics: ArcSwap<EndpointMetrics>,
    pub(super) counters: Counters,
}

impl Endpoint {
    /// A standalone endpoint (pools create theirs; this is for tests and embedders).
    pub fn new(id: EndpointId, address: impl Into<Arc<str>>) -> Self {
        Endpoint {
            id,
            address: address.into(),
            metrics: ArcSwap::from_pointee(EndpointMetrics::default()),
            counters: Counters::default(),
        }
    }

    /// The endpoint's identity.
    pub fn id(&self) -> EndpointId {
        self.id
    }

    /// The endpoint's address, `ip:port`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The address as a shared string.
    pub fn address_arc(&self) -> &Arc<str> {
        &self.address
    }

    /// The latest metrics (a cheap, lock-free load).
    pub fn metrics(&self) -> arc_swap::Guard<Arc<EndpointMetrics>> {
        self.metrics.load()
    }

    /// Replaces the metrics with a fresh scrape.
    pub fn set_metrics(&self, metrics: EndpointMetrics) {
        self.metrics.store(Arc::new(metrics));
    }

    /// Requests the scheduler has sent here that have not finished.
    pub fn in_flight_requests(&self) -> u64 {
        self.counters.requests.load(Ordering::Relaxed)
    }

    /// Prompt tokens of the requests in flight here.
    pub fn in_flight_prompt_tokens(&self) -> u64 {
        self.counters.prompt_tokens.load(Ordering::Relaxed)
    }

    /// Counts a request with `prompt_tokens` in flight until the returned guard drops.
    pub fn start_request(self: &Arc<Self>, prompt_tokens: u64) -> InFlightGuard {
        InFlightGuard::new(Arc::clone(self), prompt_tokens)
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("id", &self.id)
            .field("address", &self.address)
            .field("in_flight", &self.in_flight_requests())
            .finish()
    }
}
