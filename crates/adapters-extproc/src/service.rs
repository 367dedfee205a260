//! The tonic service: `envoy.service.ext_proc.v3.ExternalProcessor` over a
//! [`ReloadableScheduler`].
//!
//! Each stream Envoy opens gets a task that reads its messages into an
//! [`Exchange`], picks when the exchange asks (first [`Admission`], if one is set, then the
//! scheduler with the gateway's subset hint), and sends the answers back through a small
//! bounded channel — a 6 MB body streamed back is built chunk by chunk as the channel drains,
//! never all at once.
//!
//! Every stream's request body is charged to one [`BodyBudget`] (the cap on buffered body bytes,
//! [`ExtProcOptions::max_buffered_bytes`]), exported on the admin port's `/metrics` when the
//! binary registers [`ExtProcService::body_budget`] as a metrics source.
//!
//! How a stream ends:
//! - Envoy closes or resets it (it resets the stream after every request: a normal end). A
//!   request still being served is then dropped, i.e. finished as cancelled.
//! - The request was rejected: after the `ImmediateResponse` the picker reads and ignores what
//!   still arrives until Envoy closes the stream (it does at once) or for at most
//!   [`REJECTED_LINGER`], then ends it (OK: the request was answered). A client that goes on
//!   sending after its rejection costs nothing for long, and the stream's buffers are freed.
//! - A [`ProtocolError`](crate::ProtocolError) ends it with a gRPC error status; so does a
//!   message the gRPC layer could not take (over [`ExtProcOptions::max_message_bytes`]:
//!   `RESOURCE_EXHAUSTED`), never a clean end without an answer.
//! - If the task dies without a word (a panic), the stream still ends with a gRPC `INTERNAL`
//!   status, never a silent OK: Envoy would take a clean close as "go on without the picker"
//!   and forward the request with no destination.
//!
//! ```no_run
//! use std::sync::Arc;
//! use shepherd_adapters_extproc::{ExtProcOptions, ExtProcService};
//! use shepherd_scheduler_core::prelude::*;
//!
//! # fn scheduler() -> Arc<ReloadableScheduler> { unimplemented!() }
//! let service = ExtProcService::new(scheduler(), ExtProcOptions::default());
//! let server = service.into_server(); // add to a tonic `Server`
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use envoy_types::pb::envoy::service::ext_proc::v3::ProcessingRequest;
use shepherd_runtime::flow::{EvictionLease, FlowPermit};
use shepherd_runtime::policies::RequestPolicies;
use shepherd_runtime::telemetry::{RequestTrace, RequestTracing, names};
use shepherd_runtime::upstream::{FlowOutcome, RequestObservation, UpstreamMetrics};
use shepherd_scheduler_core::decision::Decision;
use shepherd_scheduler_core::reload::ReloadableScheduler;
use shepherd_scheduler_core::request::ConfiguredHeaders;
use shepherd_scheduler_core::request::InferenceRequest;
use shepherd_scheduler_core::scheduler::ScheduleOptions;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::{Status, Streaming};

use crate::budget::BodyBudget;
use crate::codec::Outgoing;
use crate::connections::ConnectionCounts;
use crate::error::Rejection;
use crate::exchange::{Exchange, PickJob, Step};
use crate::grpc_server::ExtProcServer;
use crate::options::ExtProcOptions;

/// Answers sent ahead of Envoy reading them, per stream.
const CHANNEL_DEPTH: usize = 8;

/// How long a stream whose request was rejected stays open for the client to close it.
pub const REJECTED_LINGER: Duration = Duration::from_secs(1);

/// A boxed future, as [`Admission::admit`] returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Decides whether a complete request may be scheduled now: the hook for flow control.
///
/// It may wait (queue the request until capacity returns) or refuse with
/// [`Rejection::Shed`] (429), [`Rejection::Unavailable`] (503) or [`Rejection::Dropped`]. While
/// it waits, the stream's task waits; if Envoy goes away meanwhile, the future is dropped.
pub trait Admission: Send + Sync + fmt::Debug {
    /// Admits `request`, or says why not.
    fn admit<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<Admitted, Rejection>>;
}

/// An admission hook's yes, holding whatever the hook needs kept until the request is
/// scheduled (a flow-control permit), then dropped.
pub struct Admitted(Option<Box<dyn std::any::Any + Send + Sync>>);

impl Admitted {
    /// A yes with nothing to hold.
    pub fn now() -> Self {
        Admitted(None)
    }

    /// A yes holding `guard` until the request is scheduled.
    pub fn holding<T: Send + Sync + 'static>(guard: T) -> Self {
        Admitted(Some(Box::new(guard)))
    }
}

impl Admitted {
    /// The flow controller's eviction lease, when the hook holds a flow permit that has one
    /// (`enableEviction`): kept by the stream until the response is over.
    fn take_lease(&mut self) -> Option<EvictionLease> {
        self.0.as_mut()?.downcast_mut::<FlowPermit>()?.take_lease()
    }
}

impl fmt::Debug for Admitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Admitted").field(&self.0.is_some()).finish()
    }
}

struct Shared {
    scheduler: Arc<ReloadableScheduler>,
    options: Arc<ExtProcOptions>,
    admission: Option<Arc<dyn Admission>>,
    budget: Arc<BodyBudget>,
    messages: Arc<BodyBudget>,
    connections: Arc<ConnectionCounts>,
    upstream: Option<Arc<UpstreamMetrics>>,
    tracing: RequestTracing,
    policies: Option<Arc<RequestPolicies>>,
}

/// The ext_proc endpoint picker. See the [module docs](self).
#[derive(Clone)]
pub struct ExtProcService {
    shared: Arc<Shared>,
}

impl ExtProcService {
    /// A picker scheduling with `scheduler`, its streams' bodies charged to a budget of
    /// [`ExtProcOptions::max_buffered_bytes`].
    pub fn new(scheduler: Arc<ReloadableScheduler>, options: ExtProcOptions) -> Self {
        let budget = Arc::new(BodyBudget::new(options.max_buffered_bytes));
        let messages = Arc::new(BodyBudget::for_messages(options.max_buffered_bytes));
        ExtProcService {
            shared: Arc::new(Shared {
                scheduler,
                options: Arc::new(options),
                admission: None,
                budget,
                messages,
                connections: Arc::new(ConnectionCounts::new("extproc")),
                upstream: None,
                tracing: RequestTracing::new(),
                policies: None,
            }),
        }
    }

    /// Asks `admission` before scheduling each request.
    pub fn with_admission(self, admission: Arc<dyn Admission>) -> Self {
        self.rebuilt(|shared| shared.admission = Some(admission))
    }

    /// Charges request bodies to `budget` instead of a budget of its own (to share one cap
    /// between services, or to read it from elsewhere).
    pub fn with_body_budget(self, budget: Arc<BodyBudget>) -> Self {
        self.rebuilt(|shared| shared.budget = budget)
    }

    /// Charges the gRPC messages still arriving on the streams to `budget` ([`crate::framing`])
    /// instead of a budget of its own.
    pub fn with_message_budget(self, budget: Arc<BodyBudget>) -> Self {
        self.rebuilt(|shared| shared.messages = budget)
    }

    /// Traces requests with `tracing`: a `gateway.request` span per request when tracing is
    /// on ([`shepherd_runtime::telemetry`]), whose context the model server receives in
    /// `traceparent` through the header mutation.
    pub fn with_tracing(self, tracing: RequestTracing) -> Self {
        self.rebuilt(|shared| shared.tracing = tracing)
    }

    /// Counts the ext_proc port's connections in `counts` instead of counters of its own (to
    /// export them before the service exists).
    pub fn with_connection_counts(self, counts: Arc<ConnectionCounts>) -> Self {
        self.rebuilt(|shared| shared.connections = counts)
    }

    /// Records every request in `upstream`'s `llm_d_epp_*` request families and every stream
    /// in its `llm_d_epp_extproc_streams_*` families.
    pub fn with_upstream_metrics(self, upstream: Arc<UpstreamMetrics>) -> Self {
        self.rebuilt(|shared| shared.upstream = Some(upstream))
    }

    /// Applies the pool's `InferenceObjective` priorities and `InferenceModelRewrite` rules
    /// (kept by Kubernetes discovery) to every request before flow control and scheduling.
    pub fn with_request_policies(self, policies: Arc<RequestPolicies>) -> Self {
        self.rebuilt(|shared| shared.policies = Some(policies))
    }

    fn rebuilt(self, edit: impl FnOnce(&mut Shared)) -> Self {
        let Shared {
            scheduler,
            options,
            admission,
            budget,
            messages,
            connections,
            upstream,
            tracing,
            policies,
        } = &*self.shared;
        let mut shared = Shared {
            scheduler: Arc::clone(scheduler),
            options: Arc::clone(options),
            admission: admission.clone(),
            budget: Arc::clone(budget),
            messages: Arc::clone(messages),
            connections: Arc::clone(connections),
            upstream: upstream.clone(),
            tracing: tracing.clone(),
            policies: policies.clone(),
        };
        edit(&mut shared);
        ExtProcService {
            shared: Arc::new(shared),
        }
    }

    /// The cap on request-body bytes buffered across this service's streams; a
    /// [`MetricsSource`](shepherd_scheduler_core::metrics::MetricsSource) of its figures.
    pub fn body_budget(&self) -> &Arc<BodyBudget> {
        &self.shared.budget
    }

    /// The cap on the bytes of gRPC messages still arriving across this service's streams
    /// ([`crate::framing`]); a [`MetricsSource`](shepherd_scheduler_core::metrics::MetricsSource)
    /// of its figures.
    pub fn message_budget(&self) -> &Arc<BodyBudget> {
        &self.shared.messages
    }

    /// The ext_proc port's connection counters ([`crate::connections`]); a
    /// [`MetricsSource`](shepherd_scheduler_core::metrics::MetricsSource).
    pub fn connection_counts(&self) -> &Arc<ConnectionCounts> {
        &self.shared.connections
    }

    /// The options in force.
    pub fn options(&self) -> &ExtProcOptions {
        &self.shared.options
    }

    /// The scheduler.
    pub fn scheduler(&self) -> &Arc<ReloadableScheduler> {
        &self.shared.scheduler
    }

    /// The tonic server for this service, accepting messages as large as a whole body in
    /// `BUFFERED` mode ([`ExtProcOptions::max_message_bytes`]; tonic's default is 4 MiB).
    pub fn into_server(self) -> ExtProcServer {
        let limit = self.shared.options.max_message_bytes();
        ExtProcServer::new(self, limit)
    }

    /// Serves one stream Envoy opened: a task reads `inbound` and the answers come out of
    /// the returned stream.
    pub fn open(&self, inbound: Streaming<ProcessingRequest>) -> AnswerStream {
        let (tx, rx) = mpsc::channel(CHANNEL_DEPTH);
        let clean_end = Arc::new(AtomicBool::new(false));
        tokio::spawn(self.clone().drive(inbound, tx, Arc::clone(&clean_end)));
        AnswerStream {
            rx,
            clean_end,
            failed: false,
        }
    }

    /// Picks for a complete request: admission, then (when a `token-producer` has the `vllm`
    /// backend) the model server's render of the prompt (`shepherd_runtime::render`; `body`
    /// is the request's body as it came), then the scheduler.
    pub async fn pick(&self, job: PickJob, body: &[u8]) -> Result<Decision, Rejection> {
        self.pick_with(job, body, &mut None, &RequestTrace::off())
            .await
    }

    /// [`Self::pick`], recording the flow-control wait and the scheduling in `observation`
    /// (upstream's metric families) and under `trace` (the request's spans).
    pub async fn pick_with(
        &self,
        job: PickJob,
        body: &[u8],
        observation: &mut Option<RequestObservation>,
        trace: &RequestTrace,
    ) -> Result<Decision, Rejection> {
        self.pick_leased(job, body, observation, trace, &mut None)
            .await
    }

    /// [`Self::pick_with`], putting the request's eviction lease (with `enableEviction`) in
    /// `lease`.
    async fn pick_leased(
        &self,
        job: PickJob,
        body: &[u8],
        observation: &mut Option<RequestObservation>,
        trace: &RequestTrace,
        lease: &mut Option<EvictionLease>,
    ) -> Result<Decision, Rejection> {
        let request = &job.request;
        trace.set_str(names::MODEL, request.target_model());
        trace.set_str(names::REQUEST_ID, &request.id);
        let mut admitted = match &self.shared.admission {
            Some(admission) => {
                if let Some(observation) = observation.as_mut() {
                    observation.flow_enter(request.body_size);
                }
                let wait =
                    trace.flow_control(request.priority.into(), request.fairness_id.as_deref());
                let admitted = admission.admit(request).await;
                match &admitted {
                    Ok(_) => wait.set_str(names::FLOW_OUTCOME, "dispatched"),
                    Err(rejection) => {
                        wait.set_str(names::FLOW_OUTCOME, rejection.reason());
                        wait.set_error(rejection.reason(), &rejection.to_string());
                    }
                }
                wait.end();
                if let Some(observation) = observation.as_mut() {
                    observation.flow_done(match &admitted {
                        Ok(_) => FlowOutcome::Dispatched,
                        Err(Rejection::Dropped(reason)) => FlowOutcome::dropped(*reason),
                        Err(_) => FlowOutcome::RejectedOther,
                    });
                }
                admitted?
            }
            None => Admitted::now(),
        };
        let options = ScheduleOptions {
            subset: job.subset.as_deref(),
            ..Default::default()
        };
        let scheduler = self.shared.scheduler.load_full();
        let rendered = shepherd_runtime::render::prepare(&scheduler, request, body).await;
        let scheduling = tokio::time::Instant::now();
        let scoring = trace.scoring();
        let decision = match scoring.observer() {
            Some(observer) => self
                .shared
                .scheduler
                .schedule_observed(request, options, observer),
            None => self.shared.scheduler.schedule_with(request, options),
        };
        scoring.finish(decision.as_ref());
        drop(rendered);
        if let Some(observation) = observation.as_mut() {
            observation.scheduled(
                scheduling.elapsed(),
                decision.as_ref().ok().map(|d| d.primary().address()),
            );
        }
        // Scheduled (or not): the scheduler now counts it; the admission's hold ends (its
        // eviction lease, if any, lasts as long as the response).
        if decision.is_ok() {
            *lease = admitted.take_lease();
        }
        drop(admitted);
        if let Ok(decision) = &decision {
            trace.set_str(names::ENDPOINT, decision.primary().address());
        }
        Ok(decision?)
    }

    /// The status that ends a stream whose inbound side failed with `status`.
    fn inbound_failure(&self, status: Status) -> Status {
        if status.code() == tonic::Code::OutOfRange {
            // tonic's "decoded message length too large".
            let limit = self.shared.options.max_message_bytes();
            tracing::warn!(%status, limit, "ext_proc message over the size limit");
            return Status::resource_exhausted(format!(
                "request message over the endpoint picker's limit of {limit} bytes \
                 (its body limit is {} bytes): {}",
                self.shared.options.max_body_bytes,
                status.message()
            ));
        }
        tracing::trace!(%status, "ext_proc stream ended by the data plane");
        status
    }

    /// Runs one stream to its end. See the [module docs](self).
    async fn drive(
        self,
        mut inbound: Streaming<ProcessingRequest>,
        tx: mpsc::Sender<Result<Outgoing, Status>>,
        clean_end: Arc<AtomicBool>,
    ) {
        // The parsers of the config in force when the stream opens read its request.
        let parsers = Arc::clone(self.shared.scheduler.load().parsers());
        let reporters = Arc::clone(self.shared.scheduler.load().reporters());
        let response_headers = Arc::clone(self.shared.scheduler.load().response_headers());
        let configured = ConfiguredHeaders::of(&self.shared.scheduler.shared().resources).names();
        let mut exchange = Exchange::new(Arc::clone(&self.shared.options))
            .with_parsers(parsers)
            .with_reporters(reporters)
            .with_response_headers(response_headers)
            .with_configured_headers(configured)
            .with_body_budget(Arc::clone(&self.shared.budget));
        if let Some(upstream) = &self.shared.upstream {
            exchange = exchange.with_upstream_metrics(Arc::clone(upstream));
            upstream.stream_opened();
        }
        if let Some(policies) = &self.shared.policies {
            exchange = exchange.with_policies(Arc::clone(policies));
        }
        let opened = tokio::time::Instant::now();
        // gRPC status of the stream's end (an index of `GRPC_CODES`): OK unless said otherwise.
        let mut code = 0usize;
        // While a body is being received: when it must be whole.
        let mut body_deadline: Option<tokio::time::Instant> = None;
        // The request's eviction lease while its response lasts (`enableEviction`).
        let mut lease: Option<EvictionLease> = None;
        'stream: loop {
            let deadline = async {
                match body_deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            let evicted = async {
                match lease.as_mut() {
                    Some(lease) => lease.evicted().await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                next = inbound.message() => Some(next),
                () = deadline => None,
                () = evicted => {
                    drop(lease.take());
                    if exchange.is_done() {
                        // The response was over already: nothing to end.
                        continue 'stream;
                    }
                    let replies = exchange.evict();
                    // Flow control ended this sheddable request for a higher band: an
                    // immediate 429, as upstream's picker answers.
                    tracing::info!("flow control evicted a request in flight; answered 429");
                    for reply in replies {
                        if tx.send(Ok(reply)).await.is_err() {
                            break;
                        }
                    }
                    drain_after_rejection(&mut inbound).await;
                    break;
                }
            };
            let Some(next) = next else {
                // The body stalled: 408, and the stream is over.
                if let Some(replies) = exchange.time_out_body() {
                    tracing::info!("ext_proc request body did not arrive in time; answered 408");
                    for reply in replies {
                        if tx.send(Ok(reply)).await.is_err() {
                            break 'stream;
                        }
                    }
                }
                drain_after_rejection(&mut inbound).await;
                break;
            };
            let message = match next {
                Ok(Some(message)) => message,
                Ok(None) => break,
                Err(status) => {
                    // Envoy resets the stream once a request is over: not an error, and nobody
                    // hears the answer. Otherwise the data plane sent what the gRPC layer could
                    // not take: say so with an error status, never a clean end.
                    let status = self.inbound_failure(status);
                    code = status.code() as usize;
                    let _ = tx.send(Err(status)).await;
                    break;
                }
            };
            let replies = match exchange.on_message(message) {
                Ok(Step::Reply(replies)) => replies,
                Ok(Step::Pick(job)) => {
                    let mut observation = exchange.take_observation();
                    let trace = self
                        .shared
                        .tracing
                        .start(job.traceparent.as_deref(), job.tracestate.as_deref());
                    let body = exchange.pending_body().unwrap_or_default();
                    let outcome = tokio::select! {
                        outcome = trace.in_span(self.pick_leased(job, body, &mut observation, &trace, &mut lease)) => outcome,
                        () = tx.closed() => {
                            code = tonic::Code::Cancelled as usize;
                            break 'stream;
                        }
                    };
                    if let Err(rejection) = &outcome {
                        trace.set_error(rejection.reason(), &rejection.to_string());
                    }
                    exchange.restore_observation(observation);
                    exchange.attach_trace(trace);
                    exchange.picked(outcome)
                }
                Err(error) => {
                    tracing::warn!(%error, "ext_proc stream failed");
                    let status = error.to_status();
                    code = status.code() as usize;
                    let _ = tx.send(Err(status)).await;
                    break;
                }
            };
            for reply in replies {
                if tx.send(Ok(reply)).await.is_err() {
                    break 'stream;
                }
            }
            if exchange.is_done() {
                // The response is over: the request is no longer in flight.
                lease = None;
            }
            body_deadline = match (exchange.is_receiving_body(), body_deadline) {
                (true, None) => {
                    Some(tokio::time::Instant::now() + self.shared.options.body_read_timeout)
                }
                (true, deadline) => deadline,
                (false, _) => None,
            };
            if exchange.is_rejected() {
                // Answered with an ImmediateResponse: nothing more that arrives matters.
                drain_after_rejection(&mut inbound).await;
                break;
            }
        }
        clean_end.store(true, Ordering::Release);
        if let Some(upstream) = &self.shared.upstream {
            upstream.stream_closed(code, opened.elapsed());
        }
        // `exchange` drops here: a request still being served ends as cancelled.
    }
}

/// Reads and ignores what still arrives on a stream whose request was rejected, until the
/// client closes it or [`REJECTED_LINGER`] passed.
async fn drain_after_rejection(inbound: &mut Streaming<ProcessingRequest>) {
    let linger = tokio::time::sleep(REJECTED_LINGER);
    tokio::pin!(linger);
    loop {
        tokio::select! {
            message = inbound.message() => {
                if !matches!(message, Ok(Some(_))) {
                    return;
                }
            }
            () = &mut linger => return,
        }
    }
}

impl fmt::Debug for ExtProcService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExtProcService")
            .field("scheduler", &self.shared.scheduler)
            .field("options", &self.shared.options)
            .field("admission", &self.shared.admission)
            .finish()
    }
}

/// The answers of one stream. If the task writing them ends without saying it ended cleanly
/// (it panicked), the stream's last item is a gRPC `INTERNAL` error.
#[derive(Debug)]
pub struct AnswerStream {
    rx: mpsc::Receiver<Result<Outgoing, Status>>,
    clean_end: Arc<AtomicBool>,
    failed: bool,
}

impl Stream for AnswerStream {
    type Item = Result<Outgoing, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(None) if !self.failed && !self.clean_end.load(Ordering::Acquire) => {
                self.failed = true;
                Poll::Ready(Some(Err(Status::internal(
                    "the endpoint picker failed before answering",
                ))))
            }
            other => other,
        }
    }
}
