//! The spans behind [`RequestTrace`](super::RequestTrace) with the `otel` feature: the request
//! span is a `tracing` span carried by `tracing-opentelemetry` (so what the request logs
//! becomes its events); its children are made with the OpenTelemetry API under its context.

use std::future::Future;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracer;
use shepherd_scheduler_core::decision::Decision;
use shepherd_scheduler_core::scheduler::{ScheduleError, ScheduleObserver};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::names::{self, bounded};
use super::observer::SpanObserver;
use super::trace::{ModeSource, Propagation};

/// The `tracing` target of the request span: the OpenTelemetry layer takes it, the log
/// layer leaves it out.
pub(crate) const TARGET: &str = "shepherd_otel";

/// The request span, to enter.
pub(crate) type SpanRef = tracing::Span;

/// A recording request.
pub(crate) struct Request {
    span: tracing::Span,
    cx: Context,
    mode: Option<ModeSource>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("span_context", self.cx.span().span_context())
            .finish()
    }
}

/// The tracer every child span is made with.
fn tracer() -> Option<&'static SdkTracer> {
    super::install::tracer()
}

/// `cx` with the caller's `traceparent` and `tracestate`, when valid.
fn extract(traceparent: Option<&str>, tracestate: Option<&str>) -> Context {
    struct Headers<'a>(Option<&'a str>, Option<&'a str>);
    impl opentelemetry::propagation::Extractor for Headers<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            match key {
                "traceparent" => self.0,
                "tracestate" => self.1,
                _ => None,
            }
        }
        fn keys(&self) -> Vec<&str> {
            vec!["traceparent", "tracestate"]
        }
    }
    match traceparent {
        Some(_) => TraceContextPropagator::new().extract(&Headers(traceparent, tracestate)),
        None => Context::new(),
    }
}

/// The `traceparent` / `tracestate` of the span in `cx`.
fn inject(cx: &Context) -> Propagation {
    #[derive(Default)]
    struct Headers(Option<String>, Option<String>);
    impl opentelemetry::propagation::Injector for Headers {
        fn set(&mut self, key: &str, value: String) {
            match key {
                "traceparent" => self.0 = Some(value),
                "tracestate" if !value.is_empty() => self.1 = Some(value),
                _ => {}
            }
        }
    }
    let mut headers = Headers::default();
    TraceContextPropagator::new().inject_context(cx, &mut headers);
    Propagation {
        traceparent: headers.0.unwrap_or_default(),
        tracestate: headers.1,
    }
}

impl Request {
    /// The request span, or `None` when it is not sampled (nothing more is made for it).
    pub(crate) fn start(
        traceparent: Option<&str>,
        tracestate: Option<&str>,
        mode: Option<ModeSource>,
    ) -> Option<Self> {
        let span = tracing::info_span!(target: TARGET, "gateway.request", otel.kind = "server");
        if span.is_disabled() {
            return None;
        }
        let parent = extract(traceparent, tracestate);
        // Only fails when the span was already started; it was just made.
        let _ = span.set_parent(parent);
        let cx = span.context();
        if !cx.span().span_context().is_sampled() {
            return None;
        }
        Some(Request { span, cx, mode })
    }

    pub(crate) fn set_str(&self, key: &'static str, value: &str) {
        self.cx
            .span()
            .set_attribute(KeyValue::new(key, bounded(value).to_string()));
    }

    pub(crate) fn set_i64(&self, key: &'static str, value: i64) {
        self.cx.span().set_attribute(KeyValue::new(key, value));
    }

    pub(crate) fn set_error(&self, kind: &str, message: &str) {
        set_error(&self.cx, kind, message);
    }

    pub(crate) fn propagation(&self) -> Propagation {
        inject(&self.cx)
    }

    pub(crate) fn flow_control(&self, priority: i64, fairness_id: Option<&str>) -> Option<Child> {
        let mut attributes = vec![KeyValue::new(names::PRIORITY, priority)];
        if let Some(id) = fairness_id {
            attributes.push(KeyValue::new(names::FAIRNESS_ID, bounded(id).to_string()));
        }
        Child::start(
            &self.cx,
            names::FLOW_CONTROL,
            SpanKind::Internal,
            attributes,
        )
    }

    pub(crate) fn scoring(&self) -> Option<Scoring> {
        let cx = start_span(
            &self.cx,
            names::SCORING.into(),
            SpanKind::Internal,
            Vec::new(),
        )?;
        Some(Scoring {
            observer: SpanObserver::new(cx),
            mode: self.mode.clone(),
        })
    }

    pub(crate) fn upstream(&self, endpoint: &str, attempt: u32) -> Option<Child> {
        Child::start(
            &self.cx,
            names::UPSTREAM,
            SpanKind::Client,
            vec![
                KeyValue::new(names::SERVER_ADDRESS, endpoint.to_string()),
                KeyValue::new(names::ATTEMPT, i64::from(attempt)),
            ],
        )
    }

    pub(crate) fn span(&self) -> tracing::Span {
        self.span.clone()
    }
}

/// `future`, inside `span` when there is one.
pub(crate) async fn instrument<F: Future>(span: Option<tracing::Span>, future: F) -> F::Output {
    match span {
        Some(span) => future.instrument(span).await,
        None => future.await,
    }
}

fn set_error(cx: &Context, kind: &str, message: &str) {
    let span = cx.span();
    span.set_attribute(KeyValue::new(names::ERROR_TYPE, bounded(kind).to_string()));
    span.set_status(Status::error(bounded(message).to_string()));
}

/// A recording child span: its context (which owns the span; dropping it ends the span).
pub(crate) struct Child {
    cx: Context,
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Child")
            .field("span_context", self.cx.span().span_context())
            .finish()
    }
}

impl Child {
    /// Starts `name` under the span of `parent`.
    pub(crate) fn start(
        parent: &Context,
        name: &'static str,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
    ) -> Option<Child> {
        start_span(parent, name.into(), kind, attributes).map(|cx| Child { cx })
    }

    pub(crate) fn set_str(&self, key: &'static str, value: &str) {
        self.cx
            .span()
            .set_attribute(KeyValue::new(key, bounded(value).to_string()));
    }

    pub(crate) fn set_i64(&self, key: &'static str, value: i64) {
        self.cx.span().set_attribute(KeyValue::new(key, value));
    }

    pub(crate) fn set_error(&self, kind: &str, message: &str) {
        set_error(&self.cx, kind, message);
    }

    pub(crate) fn propagation(&self) -> Propagation {
        inject(&self.cx)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.cx.span().end();
    }
}

/// A new span `name` under `parent`'s, as a context holding it (`None` when no tracer is
/// installed).
pub(crate) fn start_span(
    parent: &Context,
    name: std::borrow::Cow<'static, str>,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
) -> Option<Context> {
    let tracer = tracer()?;
    let span = tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes)
        .start_with_context(tracer, parent);
    Some(parent.with_span(span))
}

/// A recording scheduling span, with the observer that makes its children.
pub(crate) struct Scoring {
    observer: SpanObserver,
    mode: Option<ModeSource>,
}

impl std::fmt::Debug for Scoring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scoring")
            .field("observer", &self.observer)
            .finish()
    }
}

impl Scoring {
    pub(crate) fn observer(&self) -> &dyn ScheduleObserver {
        &self.observer
    }

    pub(crate) fn finish(self, outcome: Result<&Decision, &ScheduleError>) {
        let mode = self.mode.as_ref().and_then(|source| source());
        self.observer.finish(outcome, mode);
    }
}
