//! What the adapters call on the request path: a [`RequestTrace`] per request and its child
//! spans. Every type here is a no-op when tracing is off (no exporter configured, or the
//! `otel` feature left out) or when the request is not sampled: one branch on an `Option`,
//! no span made, no clock read, no allocation.
//!
//! ```
//! use shepherd_runtime::telemetry::{RequestTracing, names};
//!
//! let tracing = RequestTracing::new().with_mode_source(|| Some("steady".to_string()));
//! // Tracing was not installed in this process: everything below does nothing.
//! let trace = tracing.start(Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), None);
//! assert!(!trace.is_recording());
//! trace.set_str(names::MODEL, "llama");
//! let scoring = trace.scoring();
//! assert!(scoring.observer().is_none());
//! let upstream = trace.upstream("10.0.0.1:8000", 1);
//! assert!(upstream.propagation().is_none());
//! ```

use std::future::Future;
use std::sync::Arc;

use shepherd_scheduler_core::decision::Decision;
use shepherd_scheduler_core::scheduler::{ScheduleError, ScheduleObserver};

use super::sampling::{Parent, should_sample};
use super::settings::SamplerKind;

#[cfg(feature = "otel")]
use super::active as imp;
#[cfg(not(feature = "otel"))]
use super::inert as imp;

/// Reads the adaptive controller's mode for the scoring span (`None`: no controller).
pub type ModeSource = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// W3C trace-context headers to send on: `traceparent`, and `tracestate` when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Propagation {
    /// `00-<trace id>-<span id>-<flags>`.
    pub traceparent: String,
    /// The vendor state carried along, if any.
    pub tracestate: Option<String>,
}

/// Starts request traces; one per server, cheap to clone. See the [telemetry module docs](crate::telemetry).
#[derive(Clone, Default)]
pub struct RequestTracing {
    mode: Option<ModeSource>,
    disabled: bool,
    /// Overrides the process's sampler.
    sampler: Option<SamplerKind>,
}

impl std::fmt::Debug for RequestTracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestTracing")
            .field("enabled", &super::is_enabled())
            .field("mode_source", &self.mode.is_some())
            .field("disabled", &self.disabled)
            .finish()
    }
}

impl RequestTracing {
    /// Traces through the process's tracing (installed by [`super::init`]), without an
    /// adaptive mode.
    pub fn new() -> Self {
        RequestTracing::default()
    }

    /// Never traces, whatever the process's tracing (a server that must not, or a benchmark's
    /// "off" side).
    pub fn disabled() -> Self {
        RequestTracing {
            mode: None,
            disabled: true,
            sampler: None,
        }
    }

    /// Samples with `sampler` instead of the process's (`OTEL_TRACES_SAMPLER`).
    pub fn with_sampler(mut self, sampler: SamplerKind) -> Self {
        self.sampler = Some(sampler);
        self
    }

    /// Reads the adaptive controller's mode from `source` for every sampled pick.
    pub fn with_mode_source(
        mut self,
        source: impl Fn() -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.mode = Some(Arc::new(source));
        self
    }

    /// Starts the `gateway.request` span of one request, the child of the caller's
    /// `traceparent` (and `tracestate`) when given and valid. Not recording when tracing is
    /// off or the sampler says no.
    pub fn start(&self, traceparent: Option<&str>, tracestate: Option<&str>) -> RequestTrace {
        if self.disabled || !super::is_enabled() {
            return RequestTrace { active: None };
        }
        // Decided before any span is made: an unsampled request costs nothing more.
        let sampler = self.sampler.unwrap_or_else(super::process_sampler);
        if !should_sample(sampler, traceparent.and_then(Parent::parse)) {
            return RequestTrace { active: None };
        }
        RequestTrace {
            active: imp::Request::start(traceparent, tracestate, self.mode.clone()),
        }
    }
}

/// One request's span (`gateway.request`); ends when dropped. See the [telemetry module docs](crate::telemetry).
#[derive(Debug, Default)]
pub struct RequestTrace {
    active: Option<imp::Request>,
}

impl RequestTrace {
    /// A trace that records nothing.
    pub fn off() -> Self {
        RequestTrace::default()
    }

    /// Whether this request is being recorded (tracing on and sampled).
    pub fn is_recording(&self) -> bool {
        self.active.is_some()
    }

    /// Sets a string attribute (cut to [`names::MAX_ATTRIBUTE_BYTES`](super::names::MAX_ATTRIBUTE_BYTES)).
    pub fn set_str(&self, key: &'static str, value: &str) {
        if let Some(active) = &self.active {
            active.set_str(key, value);
        }
    }

    /// Sets an integer attribute.
    pub fn set_i64(&self, key: &'static str, value: i64) {
        if let Some(active) = &self.active {
            active.set_i64(key, value);
        }
    }

    /// Marks the request failed: `error.type` and the span's status.
    pub fn set_error(&self, kind: &str, message: &str) {
        if let Some(active) = &self.active {
            active.set_error(kind, message);
        }
    }

    /// The headers that make the next hop a child of this request's span.
    pub fn propagation(&self) -> Option<Propagation> {
        self.active.as_ref().map(imp::Request::propagation)
    }

    /// Starts the flow-control wait (`llm_d.epp.flow_control`); end it with
    /// [`ChildSpan::end`] once dispatched or dropped.
    pub fn flow_control(&self, priority: i64, fairness_id: Option<&str>) -> ChildSpan {
        ChildSpan {
            active: self
                .active
                .as_ref()
                .and_then(|a| a.flow_control(priority, fairness_id)),
        }
    }

    /// Starts the scheduling span (`llm_d.epp.scoring`): pass its
    /// [`observer`](Scoring::observer) to the scheduler, then [`finish`](Scoring::finish)
    /// it with the decision.
    pub fn scoring(&self) -> Scoring {
        Scoring {
            active: self.active.as_ref().and_then(imp::Request::scoring),
        }
    }

    /// Starts the call to the model server at `endpoint` (`gateway.upstream`, attempt
    /// `attempt`, 1 for the primary).
    pub fn upstream(&self, endpoint: &str, attempt: u32) -> ChildSpan {
        ChildSpan {
            active: self
                .active
                .as_ref()
                .and_then(|a| a.upstream(endpoint, attempt)),
        }
    }

    /// `future` run inside the request's span, so what it logs becomes the span's events.
    pub fn in_span<F: Future>(&self, future: F) -> impl Future<Output = F::Output> + use<F> {
        self.span_handle().instrument(future)
    }

    /// A handle on the request's span that does not borrow the trace (to run a future that
    /// borrows the trace mutably inside its span).
    pub fn span_handle(&self) -> SpanHandle {
        SpanHandle(self.active.as_ref().map(imp::Request::span))
    }
}

/// Runs futures inside a request's span ([`RequestTrace::span_handle`]).
#[derive(Debug, Default)]
pub struct SpanHandle(Option<imp::SpanRef>);

impl SpanHandle {
    /// `future`, run inside the span (as it is when the request is not recorded).
    pub fn instrument<F: Future>(self, future: F) -> impl Future<Output = F::Output> + use<F> {
        imp::instrument(self.0, future)
    }
}

/// A child span of a request (flow control, the upstream call); ends when dropped.
#[derive(Debug, Default)]
pub struct ChildSpan {
    active: Option<imp::Child>,
}

impl ChildSpan {
    /// Whether it records anything.
    pub fn is_recording(&self) -> bool {
        self.active.is_some()
    }

    /// Sets a string attribute.
    pub fn set_str(&self, key: &'static str, value: &str) {
        if let Some(active) = &self.active {
            active.set_str(key, value);
        }
    }

    /// Sets an integer attribute.
    pub fn set_i64(&self, key: &'static str, value: i64) {
        if let Some(active) = &self.active {
            active.set_i64(key, value);
        }
    }

    /// Marks it failed.
    pub fn set_error(&self, kind: &str, message: &str) {
        if let Some(active) = &self.active {
            active.set_error(kind, message);
        }
    }

    /// The headers that make the next hop this span's child.
    pub fn propagation(&self) -> Option<Propagation> {
        self.active.as_ref().map(imp::Child::propagation)
    }

    /// Ends it now (taking it ends it: the span ends when dropped).
    pub fn end(self) {}
}

/// The scheduling span and the observer that hangs a span per profile and per scorer under
/// it. See [`RequestTrace::scoring`].
#[derive(Debug, Default)]
pub struct Scoring {
    active: Option<imp::Scoring>,
}

impl Scoring {
    /// The observer to schedule with (`None` when not recording: schedule plainly).
    pub fn observer(&self) -> Option<&dyn ScheduleObserver> {
        self.active.as_ref().map(imp::Scoring::observer)
    }

    /// Records the decision (endpoint, cached tokens, adaptive mode, prefill stage) or the
    /// error, and ends the span.
    pub fn finish(self, outcome: Result<&Decision, &ScheduleError>) {
        if let Some(active) = self.active {
            active.finish(outcome);
        }
    }
}
