//! OpenTelemetry tracing: one trace per request across the gateway or the ext_proc picker,
//! the model server, and whatever called them.
//!
//! Off by default. The binaries turn it on from OpenTelemetry's standard environment
//! variables ([`settings`]: `OTEL_TRACES_EXPORTER=otlp|console`, the sampler, the OTLP
//! endpoint, protocol and headers, `OTEL_SERVICE_NAME`) through [`init`], which also
//! installs the log on stderr. The adapters then call a [`RequestTracing`] on the request
//! path: a `gateway.request` span per request (the child of the caller's W3C
//! `traceparent`), `llm_d.epp.flow_control` while flow control holds it,
//! `llm_d.epp.scoring` around the pick with a `llm_d.epp.profile` span per profile run and a
//! `llm_d.epp.scorer.<type>` span per scorer under it, and the gateway's
//! `gateway.upstream` call, whose `traceparent` goes to the model server ([`names`] lists
//! every span and attribute).
//!
//! Free when off: with no exporter (or without the `otel` cargo feature) every call is a
//! branch on an `Option`. The sampling decision ([`sampling`]) is taken from the caller's
//! `traceparent` before any span exists, so a request that is not sampled makes no span at
//! all and the scheduler is called without an observer.
//!
//! ```
//! use shepherd_runtime::telemetry::RequestTracing;
//!
//! let tracing = RequestTracing::new();
//! let trace = tracing.start(None, None); // not installed here: records nothing
//! let scoring = trace.scoring();
//! // let decision = match scoring.observer() {
//! //     Some(observer) => scheduler.schedule_observed(&request, options, observer),
//! //     None => scheduler.schedule_with(&request, options),
//! // };
//! // scoring.finish(decision.as_ref());
//! # drop(scoring);
//! ```

pub mod names;
pub mod sampling;
pub mod settings;
mod trace;

#[cfg(feature = "otel")]
mod active;
#[cfg(feature = "otel")]
mod console;
#[cfg(not(feature = "otel"))]
mod inert;
#[cfg(feature = "otel")]
mod install;
#[cfg(feature = "otel")]
mod observer;

pub use settings::{Exporter, ParentRoot, Protocol, SamplerKind, SettingsError, TracingSettings};
pub use trace::{
    ChildSpan, ModeSource, Propagation, RequestTrace, RequestTracing, Scoring, SpanHandle,
};

#[cfg(feature = "otel")]
pub use install::{TelemetryGuard, init, init_with, install_tracer, provider};

/// The W3C trace-context header a caller's span arrives in and the next hop's leaves in.
pub const TRACEPARENT: &str = "traceparent";
/// Its vendor-state companion.
pub const TRACESTATE: &str = "tracestate";

/// Why tracing cannot start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// An `OTEL_*` variable holds a value Shepherd cannot use.
    #[error("tracing settings: {0}")]
    Settings(#[from] SettingsError),
    /// The OTLP exporter could not be built.
    #[error("tracing exporter: {0}")]
    Exporter(String),
    /// A `tracing` subscriber was installed already.
    #[error("log and tracing subscriber: {0}")]
    Subscriber(String),
}

/// The sampler [`init`] read from `OTEL_TRACES_SAMPLER` (always on when tracing was
/// installed another way).
pub fn process_sampler() -> SamplerKind {
    #[cfg(feature = "otel")]
    {
        install::sampler_kind()
    }
    #[cfg(not(feature = "otel"))]
    {
        SamplerKind::AlwaysOff
    }
}

/// Whether tracing is on in this process.
pub fn is_enabled() -> bool {
    #[cfg(feature = "otel")]
    {
        install::is_enabled()
    }
    #[cfg(not(feature = "otel"))]
    {
        false
    }
}
