use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

use arc_swap::ArcSwap;

use super::peer_load::PeerCells;
use super::{EndpointHealth, EndpointMetrics, InFlightGuard, LoadMetrics};
use crate::clock::{Clock, Timestamp};

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
    /// Requests ever counted here, and of those, the ones that ended: in flight is the
    /// difference (one locked add at each end of a request, as a single up/down counter
    /// would need, and the start count doubles as the number of requests sent here).
    pub(super) started: AtomicU64,
    pub(super) finished: AtomicU64,
    pub(super) prompt_tokens: AtomicU64,
    pub(super) prefill_tokens: AtomicU64,
    /// Requests whose prefill is pending, and the sum (wrapping) of the clock times, in
    /// nanoseconds, at which they were sent: how long they have been pending is
    /// `count × now − sum`, kept in two adds per request.
    pub(super) prefill_requests: AtomicU64,
    pub(super) prefill_sent_at_sum: AtomicU64,
}

/// The longest a pending prefill counts as pending in
/// [`Endpoint::pending_prefill_elapsed_nanos`]: a minute.
const MAX_PENDING_NANOS: u64 = 60_000_000_000;

/// The numeric metrics mirrored in atomics, so the request path reads them without touching a
/// shared reference count.
#[derive(Debug)]
struct LoadCells {
    waiting: AtomicU32,
    running: AtomicU32,
    kv_bits: AtomicU64,
    /// Nanoseconds since the clock origin; `u64::MAX` = never scraped.
    scraped_at: AtomicU64,
}

impl Default for LoadCells {
    fn default() -> Self {
        LoadCells {
            waiting: AtomicU32::new(0),
            running: AtomicU32::new(0),
            kv_bits: AtomicU64::new(0f64.to_bits()),
            scraped_at: AtomicU64::new(u64::MAX),
        }
    }
}

/// One model server: its address, its latest metrics, its health, and its live in-flight
/// counters.
///
/// Metrics are stamped with the time they were stored, read from the clock of the pool that
/// created the endpoint: a scraper never supplies a timestamp of its own, so staleness is
/// always measured on one clock.
pub struct Endpoint {
    id: EndpointId,
    address: Arc<str>,
    metrics: ArcSwap<EndpointMetrics>,
    load: LoadCells,
    health: AtomicU8,
    labels: ArcSwap<EndpointLabels>,
    /// A stamp no other labels value of any endpoint has had: changed with every
    /// [`Endpoint::set_labels`].
    labels_stamp: AtomicU64,
    clock: Arc<dyn Clock>,
    pub(super) counters: Counters,
    pub(super) peers: PeerCells,
}

/// The next labels stamp (see [`Endpoint::labels_stamp`]).
fn next_labels_stamp() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// An endpoint's labels (the Kubernetes pod labels, or what discovery or an embedder sets),
/// read by label filters. Empty until set.
pub type EndpointLabels = BTreeMap<String, String>;

impl Endpoint {
    /// A standalone endpoint whose metrics are stamped by `clock` (pools create theirs with
    /// the pool's clock; this is for tests and embedders).
    pub fn new(id: EndpointId, address: impl Into<Arc<str>>, clock: Arc<dyn Clock>) -> Self {
        Endpoint {
            id,
            address: address.into(),
            metrics: ArcSwap::from_pointee(EndpointMetrics::default()),
            load: LoadCells::default(),
            health: AtomicU8::new(EndpointHealth::Enabled as u8),
            labels: ArcSwap::from_pointee(EndpointLabels::new()),
            labels_stamp: AtomicU64::new(next_labels_stamp()),
            clock,
            counters: Counters::default(),
            peers: PeerCells::default(),
        }
    }

    /// The endpoint's identity.
    #[inline]
    pub fn id(&self) -> EndpointId {
        self.id
    }

    /// The endpoint's labels (lock-free).
    pub fn labels(&self) -> arc_swap::Guard<Arc<EndpointLabels>> {
        self.labels.load()
    }

    /// Replaces the endpoint's labels.
    pub fn set_labels(&self, labels: EndpointLabels) {
        self.labels.store(Arc::new(labels));
        self.labels_stamp
            .store(next_labels_stamp(), Ordering::Release);
    }

    /// A stamp of the endpoint's labels, unique among every labels value any endpoint has
    /// had: a plugin that remembers what it derived from an endpoint's labels under this
    /// stamp knows them unchanged while the stamp is, at the cost of one atomic load (reading
    /// the labels costs more). Read the stamp before the labels: a change in between shows
    /// as a new stamp at the next read.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shepherd_scheduler_core::clock::SystemClock;
    /// use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId};
    ///
    /// let e = Endpoint::new(EndpointId(1), "10.0.0.1:8000", Arc::new(SystemClock::new()));
    /// let before = e.labels_stamp();
    /// assert_eq!(e.labels_stamp(), before);
    /// e.set_labels([("zone".to_string(), "a".to_string())].into_iter().collect());
    /// assert_ne!(e.labels_stamp(), before);
    /// ```
    #[inline]
    pub fn labels_stamp(&self) -> u64 {
        self.labels_stamp.load(Ordering::Acquire)
    }

    /// The endpoint's address, `ip:port`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The address as a shared string.
    pub fn address_arc(&self) -> &Arc<str> {
        &self.address
    }

    /// The latest metrics, all of them (lock-free; prefer [`Endpoint::load_metrics`] on hot
    /// paths that only need the numbers, and for the scrape time).
    pub fn metrics(&self) -> arc_swap::Guard<Arc<EndpointMetrics>> {
        self.metrics.load()
    }

    /// The latest waiting / running / KV-utilization / scrape-time figures: a few relaxed
    /// atomic loads, no reference counting, so concurrent picks do not contend.
    #[inline]
    pub fn load_metrics(&self) -> LoadMetrics {
        let scraped = self.load.scraped_at.load(Ordering::Acquire);
        LoadMetrics {
            waiting: self.load.waiting.load(Ordering::Relaxed),
            running: self.load.running.load(Ordering::Relaxed),
            kv_utilization: f64::from_bits(self.load.kv_bits.load(Ordering::Relaxed)),
            scraped_at: (scraped != u64::MAX).then(|| Timestamp::from_nanos(scraped)),
        }
    }

    /// When the latest metrics were stored, on the pool's clock; `None` if never.
    pub fn scraped_at(&self) -> Option<Timestamp> {
        let scraped = self.load.scraped_at.load(Ordering::Acquire);
        (scraped != u64::MAX).then(|| Timestamp::from_nanos(scraped))
    }

    /// Replaces the metrics with a fresh scrape, stamped now on the pool's clock.
    pub fn set_metrics(&self, metrics: EndpointMetrics) {
        self.load.waiting.store(metrics.waiting, Ordering::Relaxed);
        self.load.running.store(metrics.running, Ordering::Relaxed);
        self.load
            .kv_bits
            .store(metrics.kv_utilization.to_bits(), Ordering::Relaxed);
        let scraped = self.clock.now().as_nanos().min(u64::MAX - 1);
        self.metrics.store(Arc::new(metrics));
        // Published last: a reader that sees the new time also sees the new numbers above.
        self.load.scraped_at.store(scraped, Ordering::Release);
    }

    /// Forgets the metrics: the endpoint reads as never scraped (stale) until the next
    /// [`Endpoint::set_metrics`]. A scraper calls this when a server stops answering, so that
    /// its last figures are not trusted for longer than the staleness bound.
    pub fn clear_metrics(&self) {
        self.load.scraped_at.store(u64::MAX, Ordering::Release);
    }

    /// Whether the endpoint may be picked: enabled, draining (finishing what it has, taking
    /// nothing new) or disabled.
    pub fn health(&self) -> EndpointHealth {
        EndpointHealth::from_u8(self.health.load(Ordering::Relaxed))
    }

    /// Sets the endpoint's health; [`Pool::set_health`](super::Pool::set_health) calls it and
    /// records the change in a new snapshot.
    pub(super) fn set_health(&self, health: EndpointHealth) {
        self.health.store(health as u8, Ordering::Relaxed);
    }

    /// Whether metrics were stored within `max_age_nanos` before `now_nanos` (one atomic load:
    /// for the request path).
    #[inline]
    pub fn is_fresh_at(&self, now_nanos: u64, max_age_nanos: u64) -> bool {
        let scraped = self.load.scraped_at.load(Ordering::Acquire);
        scraped != u64::MAX && now_nanos.saturating_sub(scraped) <= max_age_nanos
    }

    /// Whether new requests may be sent here.
    #[inline]
    pub fn accepts_requests(&self) -> bool {
        self.health.load(Ordering::Relaxed) == EndpointHealth::Enabled as u8
    }

    /// Requests sent to this endpoint, ever: picked as primary, or moved here as a fallback
    /// (every [`InFlightGuard`] counted on it; dry runs count nothing).
    pub fn picks_total(&self) -> u64 {
        self.counters.started.load(Ordering::Relaxed)
    }

    /// Requests the scheduler has sent here that have not finished.
    #[inline]
    pub fn in_flight_requests(&self) -> u64 {
        // `finished` first: it never passes `started`, so the difference is never negative.
        let finished = self.counters.finished.load(Ordering::Relaxed);
        self.counters
            .started
            .load(Ordering::Relaxed)
            .saturating_sub(finished)
    }

    /// Prompt tokens of the requests in flight here.
    #[inline]
    pub fn in_flight_prompt_tokens(&self) -> u64 {
        self.counters.prompt_tokens.load(Ordering::Relaxed)
    }

    /// Uncached prompt tokens of the requests sent here whose first token has not come back
    /// yet: the prefill work this endpoint still has to do for this scheduler's requests.
    #[inline]
    pub fn pending_prefill_tokens(&self) -> u64 {
        self.counters.prefill_tokens.load(Ordering::Relaxed)
    }

    /// How long, summed over the requests counted in [`Endpoint::pending_prefill_tokens`],
    /// each has been pending as of `now` (the pool's clock), in nanoseconds: with the pending
    /// tokens, how far their prefill has got. Under concurrent starts and ends the two counters
    /// behind it may be read a moment apart (they are updated so that such a read comes out
    /// too small, usually below zero, which reads as zero); each pending request counts for at
    /// most a minute.
    #[inline]
    pub fn pending_prefill_elapsed_nanos(&self, now: Timestamp) -> u64 {
        let sum = self.counters.prefill_sent_at_sum.load(Ordering::Relaxed);
        let requests = self.counters.prefill_requests.load(Ordering::Relaxed);
        // Exact in wrapping arithmetic whenever the two reads agree; a read between the two
        // updates of a start or an end comes out negative.
        let elapsed = requests.wrapping_mul(now.as_nanos()).wrapping_sub(sum) as i64;
        (elapsed.max(0) as u64).min(requests.saturating_mul(MAX_PENDING_NANOS))
    }

    /// The clock this endpoint stamps its metrics and requests with.
    pub(super) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Counts a request with `prompt_tokens` in flight until the returned guard drops, all of
    /// them pending prefill (nothing assumed cached).
    pub fn start_request(self: &Arc<Self>, prompt_tokens: u64) -> InFlightGuard {
        InFlightGuard::new(Arc::clone(self), prompt_tokens, prompt_tokens)
    }

    /// Counts a request with `prompt_tokens` in flight, of which `uncached_tokens` (capped at
    /// `prompt_tokens`) still need prefilling here; they stay pending until
    /// [`InFlightGuard::prefill_done`] or the guard drops.
    pub fn start_request_uncached(
        self: &Arc<Self>,
        prompt_tokens: u64,
        uncached_tokens: u64,
    ) -> InFlightGuard {
        InFlightGuard::new(
            Arc::clone(self),
            prompt_tokens,
            uncached_tokens.min(prompt_tokens),
        )
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("id", &self.id)
            .field("address", &self.address)
            .field("health", &self.health())
            .field("in_flight", &self.in_flight_requests())
            .field("pending_prefill", &self.pending_prefill_tokens())
            .finish()
    }
}
