//! The state machine of one ext_proc stream: one HTTP request and its response.
//!
//! Envoy opens a gRPC stream per HTTP request and sends it, in order, the request's headers,
//! body and trailers, then the response's headers, body and trailers (whichever its processing
//! mode asks for). An [`Exchange`] takes those messages one by one and says what to answer; it
//! does no I/O and never waits, so the same code runs under the tonic service, the property
//! tests and the fuzzer.
//!
//! ```text
//!            request headers            body … end_of_stream / trailers
//!   Start ──────────────────▶ Body ────────────────────────────────▶ Picking
//!     │ (no body: end_of_stream)                                       │ picked(Ok)      picked(Err)
//!     └───────────────────────────────────────────────────────────────▶│──────────▶ Done ◀──┘
//!                                                                      ▼
//!                         Forwarded ── response headers, body…, end_of_stream / trailers ──▶ Done
//! ```
//!
//! - **Request.** In `FULL_DUPLEX_STREAMED` mode nothing is answered until the body is
//!   complete; in `BUFFERED` mode the headers are answered at once (Envoy holds the body until
//!   they are). A body over the limit, or an unparsable one, is answered with an
//!   `ImmediateResponse` and the exchange is [done](Exchange::is_done). The body's buffer grows
//!   with what arrives and is charged to the picker's [`BodyBudget`] (see
//!   [`Exchange::with_body_budget`]); it stays charged while the request waits for its pick
//!   and while the body streams back, and is given back when the exchange drops it.
//! - **Picking.** When the request is complete, [`Exchange::on_message`] returns
//!   [`Step::Pick`] with the parsed request and the subset hint. The caller picks (admission,
//!   then the scheduler) and hands the outcome to [`Exchange::picked`], which returns the
//!   routing answer (see [`crate::answer`]) or the rejection — exactly one of the two.
//! - **Response.** The decision's [`RequestHandle`] is kept (never the request). The served
//!   endpoint report moves it to the fallback that answered, the first body chunk marks the
//!   first token, the body streams through a bounded [`UsageScanner`], and the end of the
//!   response finishes the handle with the usage found. If the stream ends before that, the
//!   exchange is dropped and with it the handle: the request counts as cancelled and its
//!   in-flight count is released.
//!
//! ```
//! use std::sync::{Arc, LazyLock};
//! use envoy_types::pb::envoy::config::core::v3::{HeaderMap, HeaderValue};
//! use envoy_types::pb::envoy::service::ext_proc::v3::{processing_request::Request, HttpBody, HttpHeaders, ProcessingRequest};
//! use shepherd_adapters_extproc::exchange::{Exchange, Step};
//! use shepherd_adapters_extproc::ExtProcOptions;
//!
//! let header = |k: &str, v: &str| HeaderValue { key: k.into(), raw_value: v.as_bytes().to_vec(), ..Default::default() };
//! let message = |r| ProcessingRequest { request: Some(r), ..Default::default() };
//! let mut exchange = Exchange::new(Arc::new(ExtProcOptions::default()));
//!
//! let headers = HttpHeaders { headers: Some(HeaderMap { headers: vec![header(":path", "/v1/completions")] }), ..Default::default() };
//! let Step::Reply(replies) = exchange.on_message(message(Request::RequestHeaders(headers))).unwrap() else { unreachable!() };
//! assert_eq!(replies.count(), 0); // full duplex: the headers wait for the body
//!
//! let body = HttpBody { body: br#"{"model":"m","prompt":"hi"}"#.to_vec(), end_of_stream: true, ..Default::default() };
//! let Step::Pick(job) = exchange.on_message(message(Request::RequestBody(body))).unwrap() else { unreachable!() };
//! assert_eq!(job.request.model, "m");
//! ```

use std::sync::{Arc, LazyLock};

use envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request;
use envoy_types::pb::envoy::service::ext_proc::v3::{HttpBody, HttpHeaders, ProcessingRequest};
use shepherd_scheduler_core::completion::RequestHandle;
use shepherd_scheduler_core::decision::Decision;
use shepherd_scheduler_core::report::AttributeReporter;
use shepherd_scheduler_core::request::{InferenceRequest, ParserSet};
use shepherd_scheduler_core::response_headers::ResponseHeader;

use crate::answer::{self, BodyChunks, Replies, Route};
use crate::assembly::RequestAssembly;
use crate::budget::{BodyBudget, BodyReservation};
use crate::error::{ProtocolError, Rejection};
use crate::hint::subset_hint;
use crate::options::{BodyMode, ExtProcOptions};
use crate::reject::immediate_response;
use shepherd_runtime::policies::RequestPolicies;
use shepherd_runtime::telemetry::RequestTrace;
use shepherd_runtime::upstream::{RequestObservation, UpstreamMetrics, error_code};
use shepherd_runtime::usage::UsageScanner;

mod report;
mod response;

/// What to do after a message. See the [module docs](self).
#[derive(Debug)]
pub enum Step {
    /// Send these answers (perhaps none) and read the next message.
    Reply(Replies),
    /// The request is complete: pick an endpoint for it and pass the outcome to
    /// [`Exchange::picked`].
    Pick(PickJob),
}

/// A complete request waiting for its pick.
#[derive(Debug)]
pub struct PickJob {
    /// The parsed request (its id, priority, fairness id and session key set from the
    /// headers).
    pub request: InferenceRequest,
    /// The gateway's subset hint, when it sent one (never empty: an empty hint is rejected
    /// before the pick).
    pub subset: Option<Vec<String>>,
    /// The client's W3C `traceparent`, when it sent one.
    pub traceparent: Option<String>,
    /// The client's `tracestate`, when it sent one.
    pub tracestate: Option<String>,
}

/// A request whose body is complete, waiting for its pick.
#[derive(Debug)]
struct Pending {
    body: Vec<u8>,
    /// A body message arrived (false for a request whose headers ended the stream).
    has_body: bool,
    /// The headers were answered already (buffered mode): route on the body's answer.
    headers_answered: bool,
    /// The request ended with trailers, which are answered after the body.
    ended_by_trailers: bool,
    remove: Vec<String>,
    /// A model rewrite changed the body: a buffered body's answer carries the new one.
    rewritten: bool,
    /// The body's bytes, counted until it is streamed back or dropped.
    held: BodyReservation,
}

/// The response being received.
#[derive(Debug)]
struct Serving {
    handle: RequestHandle,
    /// The response's status was not 2xx.
    failed: bool,
    started: bool,
    scanner: UsageScanner,
    /// The request's upstream figures, when recorded.
    observation: Option<RequestObservation>,
}

// One per stream, held in place: boxing the assembly would cost an allocation per request.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Phase {
    Start,
    Body {
        assembly: RequestAssembly,
        headers_answered: bool,
    },
    Picking(Pending),
    Forwarded(Box<Serving>),
    Done,
}

impl Phase {
    fn describe(&self) -> &'static str {
        match self {
            Phase::Start => "waiting for the request headers",
            Phase::Body { .. } => "receiving the request body",
            Phase::Picking(_) => "picking an endpoint",
            Phase::Forwarded(_) => "waiting for the response",
            Phase::Done => "done",
        }
    }
}

/// One stream's state. See the [module docs](self).
#[derive(Debug)]
pub struct Exchange {
    options: Arc<ExtProcOptions>,
    parsers: Arc<ParserSet>,
    request_mode: BodyMode,
    response_mode: BodyMode,
    subset: Option<Vec<String>>,
    budget: Arc<BodyBudget>,
    phase: Phase,
    /// The request was answered with an `ImmediateResponse`.
    rejected: bool,
    /// Where request figures are recorded, when they are.
    upstream: Option<Arc<UpstreamMetrics>>,
    /// The pool's objectives and model rewrites, when it has them.
    policies: Option<Arc<RequestPolicies>>,
    /// The current request's figures, from its parsed body until its response is in
    /// [`Serving`].
    observation: Option<RequestObservation>,
    /// The request's span, once picked (off unless tracing is on and it is sampled).
    trace: RequestTrace,
    /// Header names the config's plugins read, copied into the request.
    configured_headers: Arc<Vec<String>>,
    /// The config's `request-attribute-reporter`s, evaluated when the response ends.
    reporters: Arc<[AttributeReporter]>,
    /// Headers the config's plugins add to responses.
    response_headers: Arc<[ResponseHeader]>,
}

impl Exchange {
    /// A new stream, before its first message, reading requests with upstream's default
    /// parsers (see [`Exchange::with_parsers`]), its body charged to a budget of its own of
    /// [`ExtProcOptions::max_buffered_bytes`] (see [`Exchange::with_body_budget`]).
    pub fn new(options: Arc<ExtProcOptions>) -> Self {
        static DEFAULT_PARSERS: LazyLock<Arc<ParserSet>> =
            LazyLock::new(|| Arc::new(ParserSet::upstream_default()));
        Exchange {
            request_mode: options.default_request_body_mode,
            response_mode: options.default_response_body_mode,
            parsers: Arc::clone(&DEFAULT_PARSERS),
            subset: None,
            budget: Arc::new(BodyBudget::new(options.max_buffered_bytes)),
            trace: RequestTrace::off(),
            options,
            phase: Phase::Start,
            rejected: false,
            upstream: None,
            policies: None,
            observation: None,
            configured_headers: Arc::default(),
            reporters: Arc::new([]),
            response_headers: Arc::new([]),
        }
    }

    /// Hands plugins the request headers of `names` too (the service passes those the
    /// config in force reads when the stream opens).
    pub fn with_configured_headers(mut self, names: Arc<Vec<String>>) -> Self {
        self.configured_headers = names;
        self
    }

    /// Applies the pool's `InferenceObjective` priorities and `InferenceModelRewrite` rules to
    /// the request ([`shepherd_runtime::policies`]): a rewritten body is what is forwarded,
    /// with its new `content-length`.
    pub fn with_policies(mut self, policies: Arc<RequestPolicies>) -> Self {
        self.policies = Some(policies);
        self
    }

    /// Charges the request body to `budget`, shared by every stream of a service (set before
    /// the first message).
    pub fn with_body_budget(mut self, budget: Arc<BodyBudget>) -> Self {
        self.budget = budget;
        self
    }

    /// Reads the request with `parsers` (the service passes those of the scheduler in force
    /// when the stream opens).
    pub fn with_parsers(mut self, parsers: Arc<ParserSet>) -> Self {
        self.parsers = parsers;
        self
    }

    /// Evaluates `reporters` when the response ends and sends their values as dynamic
    /// metadata (the service passes those of the scheduler in force when the stream opens;
    /// see [`shepherd_scheduler_core::report`]).
    pub fn with_reporters(mut self, reporters: Arc<[AttributeReporter]>) -> Self {
        self.reporters = reporters;
        self
    }

    /// Adds `headers` to responses once the serving endpoint is known (the service passes
    /// those of the scheduler in force when the stream opens; see
    /// [`shepherd_scheduler_core::response_headers`]).
    pub fn with_response_headers(mut self, headers: Arc<[ResponseHeader]>) -> Self {
        self.response_headers = headers;
        self
    }

    /// Records the request in `upstream`'s `llm_d_epp_*` request families.
    pub fn with_upstream_metrics(mut self, upstream: Arc<UpstreamMetrics>) -> Self {
        self.upstream = Some(upstream);
        self
    }

    /// The current request's upstream figures, taken out while the caller picks (it records
    /// the flow-control wait and the scheduling in them), given back with
    /// [`Exchange::restore_observation`].
    pub fn take_observation(&mut self) -> Option<RequestObservation> {
        self.observation.take()
    }

    /// Gives back what [`Exchange::take_observation`] took.
    pub fn restore_observation(&mut self, observation: Option<RequestObservation>) {
        self.observation = observation;
    }

    /// The request body mode in force (from Envoy's `protocol_config`, else the default).
    pub fn request_body_mode(&self) -> BodyMode {
        self.request_mode
    }

    /// The response body mode in force.
    pub fn response_body_mode(&self) -> BodyMode {
        self.response_mode
    }

    /// Whether the exchange is over: the request was rejected, or its response ended.
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    /// Whether the request was answered with an `ImmediateResponse` (a rejection): the stream
    /// has nothing more to say.
    pub fn is_rejected(&self) -> bool {
        self.rejected
    }

    /// Whether the request's body is being received (its headers are in, its end is not).
    pub fn is_receiving_body(&self) -> bool {
        matches!(self.phase, Phase::Body { .. })
    }

    /// The body did not arrive within [`ExtProcOptions::body_read_timeout`]: the request is
    /// answered 408 `body_timeout` (its buffered bytes given back). `None` unless a body is
    /// being received.
    pub fn time_out_body(&mut self) -> Option<Replies> {
        if !self.is_receiving_body() {
            return None;
        }
        let waited_ms =
            u64::try_from(self.options.body_read_timeout.as_millis()).unwrap_or(u64::MAX);
        match self.reject(&Rejection::BodyTimeout { waited_ms }) {
            Some(Step::Reply(replies)) => Some(replies),
            _ => None,
        }
    }

    /// Whether a pick is awaited ([`Exchange::picked`] is next).
    pub fn is_picking(&self) -> bool {
        matches!(self.phase, Phase::Picking(_))
    }

    /// Flow control evicted the request in flight (`enableEviction`): the answer is an
    /// immediate 429 `evicted` (Envoy ends the response there, as upstream's picker does),
    /// and the request's handle ends as cancelled. Nothing once the exchange is over.
    pub fn evict(&mut self) -> Replies {
        if matches!(self.phase, Phase::Done) {
            return Replies::none();
        }
        match self.reject(&Rejection::Dropped(
            shepherd_scheduler_core::flow::DropReason::Evicted,
        )) {
            Some(Step::Reply(replies)) => replies,
            _ => Replies::none(),
        }
    }

    /// The handle of the request being served, once routed and until its response ends.
    pub fn handle(&self) -> Option<&RequestHandle> {
        match &self.phase {
            Phase::Forwarded(s) => Some(&s.handle),
            _ => None,
        }
    }

    /// Takes the next message from Envoy.
    pub fn on_message(&mut self, message: ProcessingRequest) -> Result<Step, ProtocolError> {
        let ProcessingRequest {
            metadata_context,
            protocol_config,
            request,
            ..
        } = message;
        if let Some(config) = protocol_config {
            self.request_mode = BodyMode::from_proto(config.request_body_mode);
            self.response_mode = BodyMode::from_proto(config.response_body_mode);
        }
        let request = request.ok_or(ProtocolError::Empty)?;
        if matches!(self.phase, Phase::Start | Phase::Body { .. })
            && let Some(hint) = subset_hint(metadata_context.as_ref(), &self.options.metadata)
        {
            self.subset = Some(hint);
        }
        match request {
            Request::RequestHeaders(headers) => self.on_request_headers(headers),
            Request::RequestBody(body) => self.on_request_body(body),
            Request::RequestTrailers(_) => self.on_request_trailers(),
            Request::ResponseHeaders(headers) => {
                self.on_response_headers(headers, metadata_context.as_ref())
            }
            Request::ResponseBody(body) => self.on_response_body(body),
            Request::ResponseTrailers(_) => self.on_response_trailers(),
        }
        .map(|step| step.unwrap_or_else(|| Step::Reply(Replies::none())))
    }

    fn unexpected(&self, message: &'static str) -> ProtocolError {
        ProtocolError::Unexpected {
            message,
            state: self.phase.describe(),
        }
    }

    fn reject(&mut self, rejection: &Rejection) -> Option<Step> {
        if tracing::enabled!(tracing::Level::DEBUG) {
            // The client's text (a model name) logged bounded.
            let message = rejection.to_string();
            let message = shepherd_scheduler_core::echo::truncated(
                &message,
                shepherd_scheduler_core::echo::MAX_MESSAGE_BYTES,
            );
            tracing::debug!(reason = rejection.reason(), rejection = %message, "request rejected");
        }
        self.phase = Phase::Done;
        self.rejected = true;
        if let Some(mut observation) = self.observation.take() {
            observation.error(error_code::for_status(rejection.http_status()));
        }
        Some(Step::Reply(Replies::one(immediate_response(
            rejection,
            &self.options,
        ))))
    }

    fn on_request_headers(&mut self, headers: HttpHeaders) -> Result<Option<Step>, ProtocolError> {
        if !matches!(self.phase, Phase::Start) {
            return Err(self.unexpected("request headers"));
        }
        let usable = matches!(
            self.request_mode,
            BodyMode::FullDuplexStreamed | BodyMode::Buffered | BodyMode::BufferedPartial
        );
        if !usable && !headers.end_of_stream {
            return Err(ProtocolError::UnsupportedBodyMode(format!(
                "{:?}",
                self.request_mode
            )));
        }
        let assembly = match RequestAssembly::from_headers(headers.headers.as_ref(), &self.options)
        {
            Ok(a) => a
                .charged_to(&self.budget)
                .with_configured_headers(headers.headers.as_ref(), &self.configured_headers),
            Err(rejection) => return Ok(self.reject(&rejection)),
        };
        if headers.end_of_stream {
            return Ok(self.complete(assembly, false, false, false));
        }
        if self.request_mode.is_buffered() {
            let reply = answer::pass_headers(assembly.client_owned_headers());
            self.phase = Phase::Body {
                assembly,
                headers_answered: true,
            };
            return Ok(Some(Step::Reply(Replies::one(reply))));
        }
        self.phase = Phase::Body {
            assembly,
            headers_answered: false,
        };
        Ok(None)
    }

    fn on_request_body(&mut self, body: HttpBody) -> Result<Option<Step>, ProtocolError> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Body {
                mut assembly,
                headers_answered,
            } => {
                if let Err(rejection) = assembly.push_body_vec(body.body, &self.options) {
                    return Ok(self.reject(&rejection));
                }
                // A buffered body is whole in one message (trailers, if any, follow only after
                // it was answered).
                if body.end_of_stream || headers_answered {
                    return Ok(self.complete(assembly, true, headers_answered, false));
                }
                self.phase = Phase::Body {
                    assembly,
                    headers_answered,
                };
                Ok(None)
            }
            // After a rejection Envoy stops; anything still in flight is ignored.
            Phase::Done => Ok(None),
            other => {
                self.phase = other;
                Err(self.unexpected("request body"))
            }
        }
    }

    fn on_request_trailers(&mut self) -> Result<Option<Step>, ProtocolError> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Body {
                assembly,
                headers_answered,
            } => Ok(self.complete(assembly, true, headers_answered, true)),
            Phase::Forwarded(serving) => {
                self.phase = Phase::Forwarded(serving);
                Ok(Some(Step::Reply(Replies::one(answer::request_trailers()))))
            }
            Phase::Done => Ok(None),
            other => {
                self.phase = other;
                Err(self.unexpected("request trailers"))
            }
        }
    }

    /// The request is complete: parse it and ask for a pick.
    fn complete(
        &mut self,
        mut assembly: RequestAssembly,
        has_body: bool,
        headers_answered: bool,
        ended_by_trailers: bool,
    ) -> Option<Step> {
        let remove = if headers_answered {
            Vec::new() // removed when the headers were answered
        } else {
            assembly.client_owned_headers().to_vec()
        };
        let held = assembly.take_reservation();
        let (traceparent, tracestate) = assembly.trace_context();
        let (request, body, rewritten) =
            match assembly.finish_with(&self.options, &self.parsers, self.policies.as_deref()) {
                Ok(parsed) => parsed,
                Err(rejection) => return self.reject(&rejection),
            };
        if let (Some(upstream), Some(rewrite)) = (&self.upstream, &rewritten) {
            upstream.record_rewrite(&rewrite.rule, &rewrite.incoming, &rewrite.target);
        }
        let incoming = rewritten.as_ref().map(|r| r.incoming.as_str());
        self.observation = self.upstream.as_ref().map(|upstream| {
            upstream.observe(
                incoming.unwrap_or(&request.model),
                request.target_model(),
                request.fairness_id.as_deref(),
                request.priority,
                request.body_size,
                request.stream,
            )
        });
        if self.subset.as_ref().is_some_and(Vec::is_empty) {
            return self.reject(&Rejection::EmptySubset);
        }
        self.phase = Phase::Picking(Pending {
            body,
            has_body,
            headers_answered,
            ended_by_trailers,
            remove,
            rewritten: rewritten.is_some_and(|r| r.body.is_some()),
            held,
        });
        Some(Step::Pick(PickJob {
            request,
            subset: self.subset.take(),
            traceparent,
            tracestate,
        }))
    }

    /// The body of the request waiting for its pick (after [`Step::Pick`]), as it came.
    pub fn pending_body(&self) -> Option<&[u8]> {
        match &self.phase {
            Phase::Picking(pending) => Some(&pending.body),
            _ => None,
        }
    }

    /// Keeps the request's trace for the rest of the stream: its span ends with the
    /// exchange, and the routing answer hands its context to the model server.
    pub fn attach_trace(&mut self, trace: RequestTrace) {
        self.trace = trace;
    }

    /// The outcome of the pick [`Step::Pick`] asked for: the routing answer, or the rejection.
    /// Called in any other state it answers nothing.
    pub fn picked(&mut self, outcome: Result<Decision, Rejection>) -> Replies {
        let Phase::Picking(pending) = std::mem::replace(&mut self.phase, Phase::Done) else {
            return Replies::none();
        };
        let decision = match outcome {
            Ok(decision) => decision,
            Err(rejection) => {
                return match self.reject(&rejection) {
                    Some(Step::Reply(replies)) => replies,
                    _ => Replies::none(),
                };
            }
        };
        let destination = decision.destination_header();
        let prefill = decision
            .prefill()
            .map(|stage| stage.endpoint().address().to_string());
        let encode = decision.encode().map(|stage| stage.header_value());
        let kv_source = decision.kv_cache_source().map(str::to_string);
        let handle = decision.into_handle();
        let trace = self.trace.propagation();
        let options = &self.options;
        let replies = if pending.headers_answered {
            let route = Route {
                destination: &destination,
                content_length: pending.rewritten.then_some(pending.body.len()),
                remove: &pending.remove,
                prefill: prefill.as_deref(),
                encode: encode.as_deref(),
                kv_source: kv_source.as_deref(),
                trace: trace.as_ref(),
                body: pending.rewritten.then_some(pending.body.as_slice()),
            };
            let mut replies = vec![answer::route_body(&route, options)];
            if pending.ended_by_trailers {
                replies.push(answer::request_trailers());
            }
            Replies::new(replies, None, None)
        } else if !pending.has_body {
            let route = Route {
                destination: &destination,
                content_length: None,
                remove: &pending.remove,
                prefill: prefill.as_deref(),
                encode: encode.as_deref(),
                kv_source: kv_source.as_deref(),
                trace: trace.as_ref(),
                body: None,
            };
            Replies::one(answer::route_headers(&route, options))
        } else {
            let route = Route {
                destination: &destination,
                content_length: Some(pending.body.len()),
                remove: &pending.remove,
                prefill: prefill.as_deref(),
                encode: encode.as_deref(),
                kv_source: kv_source.as_deref(),
                trace: trace.as_ref(),
                body: None,
            };
            let head = vec![answer::route_headers(&route, options)];
            let body = BodyChunks::new(
                pending.body,
                options.chunk_size,
                !pending.ended_by_trailers,
                true,
            )
            .holding(pending.held);
            let tail = pending.ended_by_trailers.then(answer::request_trailers);
            Replies::new(head, Some(body), tail)
        };
        self.phase = Phase::Forwarded(Box::new(Serving {
            handle,
            failed: false,
            started: false,
            scanner: UsageScanner::new(options.usage_scan_bytes),
            observation: self.observation.take(),
        }));
        replies
    }
}
