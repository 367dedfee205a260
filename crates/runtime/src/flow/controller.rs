//! The async flow controller: admission on the request path, dispatch and expiry in a loop.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::flow::ProgramLedger;
use shepherd_scheduler_core::flow::{
    Arrival, Demand, Detector, DropReason, EvictionSettings, Evictor, FlowCounters, FlowQueue,
    FlowSettings, Pending, SaturationDetector, Ticket, is_saturated_level,
};
use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use shepherd_scheduler_core::request::InferenceRequest;
use shepherd_scheduler_core::resources::Resources;
use shepherd_scorers::attributes::RequestAttributes;
use shepherd_scorers::attributes::agent_identity::AgentIdentity;
use tokio::sync::{Notify, oneshot};

use super::lease::{EvictionLease, Untrack};
use super::permit::{FlowPermit, PendingLoad};
use super::request::FlowRequest;
use super::stats::{FlowStats, WaitHistogram};

/// How often the dispatch loop re-reads the pool's saturation while requests are queued.
pub const DISPATCH_POLL: Duration = Duration::from_millis(5);

type Answer = Result<FlowPermit, DropReason>;

/// A queued request: where to send the answer.
struct Waiter {
    answer: oneshot::Sender<Answer>,
    enqueued_at: Timestamp,
    prompt_tokens: u64,
    /// Its id and program, for the program-aware ledger (when one is kept).
    program: Option<(Box<str>, Box<str>)>,
    priority: i32,
}

struct State {
    queue: FlowQueue<Waiter>,
    waits: WaitHistogram,
    closed: bool,
    /// In-flight eviction (`enableEviction`), and the signal of each tracked request.
    evictor: Option<Evictor>,
    signals: HashMap<u64, oneshot::Sender<()>>,
}

struct Inner {
    state: Mutex<State>,
    /// Mirrors `queue.len()` so that the fast path can skip the lock.
    queued: AtomicU64,
    admitted_immediately: AtomicU64,
    pool: Arc<Pool>,
    detector: Detector,
    /// The ceiling of every priority when the usage-limit policy has one for all.
    uniform_ceiling: Option<f64>,
    pending: Arc<PendingLoad>,
    wake: Notify,
    /// Where a declared `agent-identity` publishes the request's agent session: the fairness
    /// id of a request that sends no fairness header.
    attributes: Option<Arc<RequestAttributes>>,
    /// The program-aware ledger, when a band uses `program-aware-fairness`: each admitted
    /// request is noted there so that its completion is charged to its program.
    ledger: Option<Arc<ProgramLedger>>,
    /// Itself, for the eviction leases.
    me: Weak<Inner>,
}

/// Holds requests while the pool is saturated; see the [module docs](super).
///
/// Cheap to clone: clones share one queue.
#[derive(Clone)]
pub struct FlowController {
    inner: Arc<Inner>,
}

impl FlowController {
    /// A controller with these settings over `pool` (time is the pool's clock).
    pub fn new(settings: FlowSettings, pool: Arc<Pool>) -> Self {
        Self::build(settings, pool, None, None)
    }

    /// A controller in a runtime whose schedulers share `resources`:
    ///
    /// - a request that sends no fairness header takes its fairness id from the
    ///   `agent-identity` attribute (a declared `agent-identity` plugin publishes it there), as
    ///   upstream's director does;
    /// - when a band uses `program-aware-fairness`, the [`ProgramLedger`] in `resources`
    ///   ([`ProgramLedger::install`]; install it before building the schedulers, which run it
    ///   as a completion hook) charges each admitted request's tokens to its program when it
    ///   completes.
    pub fn with_resources(settings: FlowSettings, pool: Arc<Pool>, resources: &Resources) -> Self {
        let attributes = RequestAttributes::of(resources);
        let ledger = settings
            .uses_program_aware()
            .then(|| ProgramLedger::install(resources, settings.program_aware.clone()));
        Self::build(settings, pool, Some(attributes), ledger)
    }

    fn build(
        settings: FlowSettings,
        pool: Arc<Pool>,
        attributes: Option<Arc<RequestAttributes>>,
        ledger: Option<Arc<ProgramLedger>>,
    ) -> Self {
        let detector = settings.detector.clone();
        let uniform_ceiling = settings
            .usage_limit
            .is_uniform()
            .then(|| settings.usage_limit.ceiling(&[], 0));
        let enable_eviction = settings.enable_eviction;
        let queue = match &ledger {
            Some(ledger) => FlowQueue::with_ledger(settings, Arc::clone(ledger)),
            None => FlowQueue::new(settings),
        };
        let evictor = enable_eviction.then(|| {
            let lag = match &detector {
                // Its counts drop as soon as a stream ends.
                Detector::Concurrency(_) => None,
                // Scraped: the freed room shows after a scrape and the staleness bound.
                Detector::Utilization(u) => {
                    Some(SCRAPE_INTERVAL_BOUND.saturating_add(u.staleness_threshold()))
                }
            };
            Evictor::new(EvictionSettings::for_sensor(lag))
        });
        FlowController {
            inner: Arc::new_cyclic(|me| Inner {
                state: Mutex::new(State {
                    queue,
                    waits: WaitHistogram::default(),
                    closed: false,
                    evictor,
                    signals: HashMap::new(),
                }),
                queued: AtomicU64::new(0),
                admitted_immediately: AtomicU64::new(0),
                pool,
                detector,
                uniform_ceiling,
                pending: Arc::new(PendingLoad::default()),
                wake: Notify::new(),
                attributes,
                ledger,
                me: me.clone(),
            }),
        }
    }

    /// The flow-control view of `request` ([`FlowRequest::of`]), its fairness id the
    /// fairness header's (`x-llm-d-inference-fairness-id`) or else, when an `agent-identity`
    /// plugin is declared, the agent session it resolves (upstream's director does the same);
    /// else the default flow.
    pub fn request_of<'a>(&self, request: &'a InferenceRequest) -> FlowRequest<'a> {
        let mut flow = FlowRequest::of(request);
        if request.fairness_id.as_deref().is_none_or(str::is_empty)
            && let Some(attributes) = &self.inner.attributes
            && let Some(agent) = attributes.value(&AgentIdentity::key(), request)
        {
            flow.flow_id = agent;
        }
        flow
    }

    /// The settings in force.
    pub fn settings(&self) -> FlowSettings {
        self.inner.state.lock().queue.settings().clone()
    }

    /// Lets `request` through now, or once the pool has room, or says why not.
    ///
    /// Hold the returned permit until the request is scheduled. Dropping this future while it
    /// waits (the client went away) removes the request from the queue.
    ///
    /// # Errors
    ///
    /// The [`DropReason`]: `Shed` or `QueueFull` at once, `TtlExpired` after waiting,
    /// `ShuttingDown` when the controller stopped.
    pub async fn admit(&self, request: FlowRequest<'_>) -> Result<FlowPermit, DropReason> {
        let inner = &self.inner;
        let now = inner.pool.clock().now();
        let level = inner.saturation(now);
        let saturated = is_saturated_level(level);
        // Straight through when nothing waits and the pool is below this priority's ceiling.
        if inner.uniform_ceiling.is_some_and(|c| level < c)
            && inner.queued.load(Ordering::Acquire) == 0
        {
            inner.admitted_immediately.fetch_add(1, Ordering::Relaxed);
            inner.expect(&request);
            let lease = inner.lease_unlocked(request.priority, now);
            return Ok(FlowPermit::new(
                &inner.pending,
                request.prompt_tokens,
                lease,
            ));
        }
        let (ticket, answer) = {
            let mut state = inner.state.lock();
            state.queue.note_level(request.priority, now);
            if inner.uniform_ceiling.is_none()
                && state.queue.is_empty()
                && state.queue.admits_now(request.priority, level)
            {
                let lease = inner.lease(&mut state, request.priority, now);
                drop(state);
                inner.admitted_immediately.fetch_add(1, Ordering::Relaxed);
                inner.expect(&request);
                return Ok(FlowPermit::new(
                    &inner.pending,
                    request.prompt_tokens,
                    lease,
                ));
            }
            state.queue.admit(request.priority, saturated)?;
            if state.closed {
                return Err(DropReason::ShuttingDown);
            }
            let (tx, rx) = oneshot::channel();
            let waiter = Waiter {
                answer: tx,
                enqueued_at: now,
                prompt_tokens: request.prompt_tokens,
                program: inner
                    .ledger
                    .as_ref()
                    .map(|_| (request.id.into(), request.flow_id.into())),
                priority: request.priority,
            };
            let arrival = Arrival {
                priority: request.priority,
                flow_id: request.flow_id,
                bytes: request.bytes,
                ttl: state.queue.settings().ttl,
                slo_ttft: request.slo_ttft,
            };
            let ticket = state
                .queue
                .enqueue_arrival(waiter, arrival, now)
                .map_err(|rejected| rejected.reason)?;
            // Requests are queued and the pool may have room: serve them in order now.
            inner.pump(&mut state, now);
            inner
                .queued
                .store(state.queue.len() as u64, Ordering::Release);
            (ticket, rx)
        };
        inner.wake.notify_one();
        let mut guard = CancelOnDrop {
            inner,
            ticket: Some(ticket),
        };
        let outcome = answer.await;
        guard.ticket = None;
        match outcome {
            Ok(answer) => answer,
            // The controller went away with the request in it.
            Err(_) => Err(DropReason::ShuttingDown),
        }
    }

    /// Dispatches and expires queued requests until `stop` completes, then answers every
    /// request still queued with [`DropReason::ShuttingDown`] and refuses new ones that would
    /// have to wait.
    pub async fn run_until(self, stop: impl Future<Output = ()>) {
        let inner = &self.inner;
        tokio::pin!(stop);
        loop {
            let wait = {
                let mut state = inner.state.lock();
                let now = inner.pool.clock().now();
                inner.pump(&mut state, now);
                inner
                    .queued
                    .store(state.queue.len() as u64, Ordering::Release);
                if state.queue.is_empty() {
                    None
                } else {
                    let poll = now.saturating_add(DISPATCH_POLL);
                    let until = state.queue.next_deadline().map_or(poll, |d| d.min(poll));
                    Some(Duration::from_nanos(
                        until.as_nanos().saturating_sub(now.as_nanos()),
                    ))
                }
            };
            let sleep = async {
                match wait {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = &mut stop => break,
                () = inner.wake.notified() => {}
                () = sleep => {}
            }
        }
        inner.close();
    }

    /// The saturation level now, counting requests admitted but not yet scheduled.
    pub fn saturation(&self) -> f64 {
        let now = self.inner.pool.clock().now();
        self.inner.saturation(now)
    }

    /// What the controller has counted.
    pub fn stats(&self) -> FlowStats {
        let state = self.inner.state.lock();
        FlowStats {
            admitted_immediately: self.inner.admitted_immediately.load(Ordering::Relaxed),
            counters: state.counters(),
            queued: state.queue.len() as u64,
            queued_bytes: state.queue.bytes(),
        }
    }
}

impl Inner {
    /// Notes an admitted request in the program-aware ledger, if one is kept.
    fn expect(&self, request: &FlowRequest<'_>) {
        if let Some(ledger) = &self.ledger {
            ledger.expect(request.id, request.flow_id);
        }
    }

    fn pending(&self) -> Pending {
        Pending {
            requests: self.pending.requests.load(Ordering::Relaxed),
            prompt_tokens: self.pending.prompt_tokens.load(Ordering::Relaxed),
        }
    }

    fn saturation(&self, now: Timestamp) -> f64 {
        self.detector
            .saturation_with_pending(&self.pool.load(), now, self.pending())
    }

    /// Answers expired requests, then dispatches while the pool has room.
    fn pump(&self, state: &mut State, now: Timestamp) {
        let empty = !self
            .pool
            .load()
            .endpoints()
            .iter()
            .any(|e| e.accepts_requests());
        state.queue.set_pool_empty(empty, now);
        for (waiter, reason) in state.queue.expire(now) {
            let _ = waiter.answer.send(Err(reason));
        }
        while !state.queue.is_empty() && !state.closed {
            let level = self.saturation(now);
            let Some(waiter) = state.queue.dispatch_next_under(now, level) else {
                break;
            };
            let waited = now.as_nanos().saturating_sub(waiter.enqueued_at.as_nanos());
            state.waits.observe(waited as f64 / 1e9);
            if let (Some(ledger), Some((id, program))) = (&self.ledger, &waiter.program) {
                ledger.expect(id, program);
            }
            let lease = self.lease(state, waiter.priority, now);
            let permit = FlowPermit::new(&self.pending, waiter.prompt_tokens, lease);
            // A client that left just now drops the permit with the channel.
            let _ = waiter.answer.send(Ok(permit));
        }
        if !state.queue.is_empty() && !state.closed {
            self.evict_for_blocked(state, now);
        }
    }

    /// Requests wait for room: evict sheddable requests in flight for them, as
    /// `enableEviction` says (nothing when it is off).
    fn evict_for_blocked(&self, state: &mut State, now: Timestamp) {
        let Some(evictor) = state.evictor.as_mut() else {
            return;
        };
        if evictor.victim_priority().is_none() {
            return;
        }
        let level = self.saturation(now);
        let demand: Vec<Demand> = state
            .queue
            .queued_priorities()
            .map(|priority| Demand {
                priority,
                ceiling: state.queue.ceiling(priority),
                queued: true,
            })
            .collect();
        for id in evictor.reclaim(now, level, &demand) {
            tracing::info!(
                saturation = level,
                blocked_priority = demand.first().map_or(0, |d| d.priority),
                "flow control evicted an in-flight sheddable request"
            );
            if let Some(signal) = state.signals.remove(&id) {
                let _ = signal.send(());
            }
        }
    }

    /// A lease for a request of `priority` dispatched at `now`, when eviction is on.
    fn lease(&self, state: &mut State, priority: i32, now: Timestamp) -> Option<EvictionLease> {
        let evictor = state.evictor.as_mut()?;
        let id = evictor.track(priority, now);
        let (tx, rx) = oneshot::channel();
        state.signals.insert(id, tx);
        let owner: Weak<dyn Untrack> = self.me.clone();
        Some(EvictionLease::new(owner, id, rx))
    }

    /// [`Inner::lease`], taking the lock only when eviction is on.
    fn lease_unlocked(&self, priority: i32, now: Timestamp) -> Option<EvictionLease> {
        if !self.eviction_on() {
            return None;
        }
        let mut state = self.state.lock();
        self.lease(&mut state, priority, now)
    }

    fn eviction_on(&self) -> bool {
        self.state.lock().evictor.is_some()
    }

    /// Stops: answers every queued request, refuses new ones that would wait.
    fn close(&self) {
        let mut state = self.state.lock();
        state.closed = true;
        let now = self.pool.clock().now();
        for (waiter, reason) in state.queue.drain(DropReason::ShuttingDown, now) {
            let _ = waiter.answer.send(Err(reason));
        }
        self.queued.store(0, Ordering::Release);
    }
}

impl State {
    /// The queue's counters, with the evictions of requests in flight.
    fn counters(&self) -> FlowCounters {
        let mut counters = self.queue.counters();
        if let Some(evictor) = &self.evictor {
            counters.add_dropped(DropReason::Evicted, evictor.counters().evicted);
        }
        counters
    }
}

impl Untrack for Inner {
    fn untrack(&self, id: u64) {
        let now = self.pool.clock().now();
        {
            let mut state = self.state.lock();
            if let Some(evictor) = state.evictor.as_mut() {
                evictor.untrack(id, now);
            }
            state.signals.remove(&id);
        }
        // Room may have returned.
        self.wake.notify_one();
    }
}

/// A bound on the metrics scrape interval, for the eviction pacing of a scraped detector
/// (Shepherd's default interval is 50 ms; upstream's refresh interval is the same order).
const SCRAPE_INTERVAL_BOUND: Duration = Duration::from_millis(50);

/// Takes a waiting request out of the queue when its `admit` future is dropped.
struct CancelOnDrop<'a> {
    inner: &'a Inner,
    ticket: Option<Ticket>,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            let mut state = self.inner.state.lock();
            state.queue.cancel(ticket);
            self.inner
                .queued
                .store(state.queue.len() as u64, Ordering::Release);
        }
    }
}

impl fmt::Debug for FlowController {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlowController")
            .field("detector", &self.inner.detector)
            .field("stats", &self.stats())
            .finish()
    }
}

const ADMITTED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_flow_admitted_total",
    "Requests flow control let through, at once or after waiting in the queue.",
);
const ENQUEUED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_flow_enqueued_total",
    "Requests that waited in the flow-control queue.",
);
const CANCELLED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_flow_cancelled_total",
    "Queued requests whose client went away.",
);
const DROPPED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_flow_dropped_total",
    "Requests flow control refused, by reason.",
);
const QUEUED: MetricDesc<'static> =
    MetricDesc::new("shepherd_flow_queued_requests", "Requests queued now.");
const QUEUED_BYTES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_flow_queued_bytes",
    "Bytes of the requests queued now.",
);
const SATURATION: MetricDesc<'static> = MetricDesc::new(
    "shepherd_flow_saturation",
    "The saturation detector's level (1 and above: saturated).",
);
const WAIT: MetricDesc<'static> = MetricDesc::new(
    "shepherd_flow_queue_wait_seconds",
    "How long dispatched requests waited in the flow-control queue.",
);

impl MetricsSource for FlowController {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let (stats, waits) = {
            let state = self.inner.state.lock();
            let stats = FlowStats {
                admitted_immediately: self.inner.admitted_immediately.load(Ordering::Relaxed),
                counters: state.counters(),
                queued: state.queue.len() as u64,
                queued_bytes: state.queue.bytes(),
            };
            (stats, state.waits.snapshot())
        };
        v.counter(
            ADMITTED,
            &[("path", "immediate")],
            stats.admitted_immediately,
        );
        v.counter(ADMITTED, &[("path", "queued")], stats.counters.dispatched);
        v.counter(ENQUEUED, &[], stats.counters.enqueued);
        v.counter(CANCELLED, &[], stats.counters.cancelled);
        for reason in DropReason::ALL {
            v.counter(
                DROPPED,
                &[("reason", reason.as_str())],
                stats.dropped(reason),
            );
        }
        v.gauge(QUEUED, &[], stats.queued as f64);
        v.gauge(QUEUED_BYTES, &[], stats.queued_bytes as f64);
        v.gauge(SATURATION, &[], self.saturation());
        v.histogram(WAIT, &[], &waits);
    }
}
