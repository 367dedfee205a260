//! The async flow controller: admission on the request path, dispatch and expiry in a loop.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::flow::ProgramLedger;
use shepherd_scheduler_core::flow::{
    Arrival, Detector, DropReason, FlowQueue, FlowSettings, Pending, SaturationDetector, Ticket,
    is_saturated_level,
};
use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use shepherd_scheduler_core::request::InferenceRequest;
use shepherd_scheduler_core::resources::Resources;
use shepherd_scorers::attributes::RequestAttributes;
use shepherd_scorers::attributes::agent_identity::AgentIdentity;
use tokio::sync::{Notify, oneshot};

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
}

struct State {
    queue: FlowQueue<Waiter>,
    waits: WaitHistogram,
    closed: bool,
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
        let queue = match &ledger {
            Some(ledger) => FlowQueue::with_ledger(settings, Arc::clone(ledger)),
            None => FlowQueue::new(settings),
        };
        FlowController {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    queue,
                    waits: WaitHistogram::default(),
                    closed: false,
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
            return Ok(FlowPermit::new(&inner.pending, request.prompt_tokens));
        }
        let (ticket, answer) = {
            let mut state = inner.state.lock();
            state.queue.note_level(request.priority, now);
            if inner.uniform_ceiling.is_none()
                && state.queue.is_empty()
                && state.queue.admits_now(request.priority, level)
            {
                drop(state);
                inner.admitted_immediately.fetch_add(1, Ordering::Relaxed);
                inner.expect(&request);
                return Ok(FlowPermit::new(&inner.pending, request.prompt_tokens));
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
            counters: state.queue.counters(),
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
            let permit = FlowPermit::new(&self.pending, waiter.prompt_tokens);
            // A client that left just now drops the permit with the channel.
            let _ = waiter.answer.send(Ok(permit));
        }
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
                counters: state.queue.counters(),
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
