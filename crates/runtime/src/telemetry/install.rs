//! Installing tracing in a binary: the tracer provider (sampler, resource, batch exporter),
//! the `tracing` subscriber (logs on stderr plus the OpenTelemetry layer), and the guard
//! that flushes the last spans at exit.

use std::io::IsTerminal;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::runtime::Tokio;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{BatchConfigBuilder, Sampler, SdkTracer, SdkTracerProvider};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{LevelFilter, filter_fn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use super::active::TARGET;
use super::console::ConsoleExporter;
use super::settings::{Exporter, Protocol, SamplerKind, TracingSettings};
use super::{SettingsError, TelemetryError};

static TRACER: OnceLock<SdkTracer> = OnceLock::new();
static SAMPLER: OnceLock<SamplerKind> = OnceLock::new();

/// The process's sampler (always on unless [`init`] read another).
pub(crate) fn sampler_kind() -> SamplerKind {
    SAMPLER.get().copied().unwrap_or(SamplerKind::AlwaysOn)
}
static ENABLED: AtomicBool = AtomicBool::new(false);

/// The installed tracer.
pub(crate) fn tracer() -> Option<&'static SdkTracer> {
    TRACER.get()
}

/// Whether tracing was installed in this process.
pub(crate) fn is_enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Flushes and stops the exporter when dropped; drop it before the tokio runtime, outside
/// any async task.
#[derive(Debug, Default)]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    /// Whether spans are exported.
    pub fn is_tracing(&self) -> bool {
        self.provider.is_some()
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            ENABLED.store(false, Ordering::Relaxed);
            if let Err(error) = provider.shutdown() {
                eprintln!("tracing: flushing the last spans failed: {error}");
            }
        }
    }
}

/// The SDK sampler for `kind`.
#[cfg(test)]
fn sampler(kind: SamplerKind) -> Sampler {
    use super::settings::ParentRoot;
    let root = |root: ParentRoot| match root {
        ParentRoot::AlwaysOn => Sampler::AlwaysOn,
        ParentRoot::AlwaysOff => Sampler::AlwaysOff,
        ParentRoot::TraceIdRatio(r) => Sampler::TraceIdRatioBased(r),
    };
    match kind {
        SamplerKind::AlwaysOn => Sampler::AlwaysOn,
        SamplerKind::AlwaysOff => Sampler::AlwaysOff,
        SamplerKind::TraceIdRatio(r) => Sampler::TraceIdRatioBased(r),
        SamplerKind::ParentBased(r) => Sampler::ParentBased(Box::new(root(r))),
    }
}

/// A tracer provider for `settings` (`None` when tracing is off). Must run inside a tokio
/// runtime: the batch exporter's task is spawned on it. It records every span it is asked
/// for: the request's sampling decision ([`settings.sampler`](TracingSettings::sampler)) is
/// taken before any span is made ([`super::sampling`]), and a request not sampled asks for
/// none.
pub fn provider(settings: &TracingSettings) -> Result<Option<SdkTracerProvider>, TelemetryError> {
    let resource = Resource::builder()
        .with_service_name(settings.service_name.clone())
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let builder = SdkTracerProvider::builder()
        .with_sampler(Sampler::AlwaysOn)
        .with_resource(resource);
    let batch = BatchConfigBuilder::default()
        .with_scheduled_delay(std::time::Duration::from_millis(500))
        .build();
    let builder = match settings.exporter {
        Exporter::None => return Ok(None),
        Exporter::Console => builder.with_span_processor(
            BatchSpanProcessor::builder(ConsoleExporter::stdout(), Tokio)
                .with_batch_config(batch)
                .build(),
        ),
        Exporter::Otlp => {
            let endpoint = settings.traces_endpoint();
            let exporter = match settings.protocol {
                Protocol::Grpc => {
                    let mut headers = axum::http::HeaderMap::new();
                    for (k, v) in &settings.headers {
                        let name = axum::http::HeaderName::from_bytes(k.as_bytes())
                            .map_err(|_| bad_header(k))?;
                        let value =
                            axum::http::HeaderValue::from_str(v).map_err(|_| bad_header(k))?;
                        headers.append(name, value);
                    }
                    opentelemetry_otlp::SpanExporter::builder()
                        .with_tonic()
                        .with_endpoint(endpoint)
                        .with_timeout(settings.timeout)
                        .with_metadata(
                            opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(
                                headers,
                            ),
                        )
                        .build()
                }
                Protocol::HttpProtobuf => {
                    let client = opentelemetry_http::hyper::HyperClient::with_default_connector(
                        settings.timeout,
                        None,
                    );
                    opentelemetry_otlp::SpanExporter::builder()
                        .with_http()
                        .with_http_client(client)
                        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                        .with_endpoint(endpoint)
                        .with_timeout(settings.timeout)
                        .with_headers(settings.headers.iter().cloned().collect())
                        .build()
                }
            }
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
            builder.with_span_processor(
                BatchSpanProcessor::builder(exporter, Tokio)
                    .with_batch_config(batch)
                    .build(),
            )
        }
    };
    Ok(Some(builder.build()))
}

fn bad_header(name: &str) -> TelemetryError {
    TelemetryError::Settings(SettingsError::BadHeader {
        variable: "OTEL_EXPORTER_OTLP_HEADERS",
        entry: name.to_string(),
    })
}

/// Installs logging and tracing for binary `service`: logs at `level` on stderr (ANSI
/// colours on a terminal), and, when the `OTEL_*` variables turn tracing on, the tracer
/// provider and the layer that turns request spans into OpenTelemetry spans. Call it once,
/// inside the tokio runtime; keep the guard until the runtime's work is done.
pub fn init(service: &str, level: LevelFilter) -> Result<TelemetryGuard, TelemetryError> {
    init_with(service, level)
}

/// The kube client's per-request failure log (see [`init_with`]).
const KUBE_CLIENT_RETRIES: &str = "kube_client::client::builder";

/// [`init`] with the log's own filter (an `EnvFilter` from `RUST_LOG`, say). The request
/// spans record the log lines at `INFO` and above written inside them.
pub fn init_with<F>(service: &str, log_filter: F) -> Result<TelemetryGuard, TelemetryError>
where
    F: tracing_subscriber::layer::Filter<tracing_subscriber::Registry> + Send + Sync + 'static,
{
    let level = LevelFilter::INFO;
    let settings = TracingSettings::from_env(service)?;
    let provider = provider(&settings)?;
    // The request spans belong to OpenTelemetry, not to the log. The kube client logs an
    // ERROR for every failed API request (every retry of an outage); Kubernetes discovery
    // logs the outage once and its end once, so those lines are left out.
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(log_filter)
        .with_filter(filter_fn(|meta| {
            meta.target() != TARGET && meta.target() != KUBE_CLIENT_RETRIES
        }));
    let Some(provider) = provider else {
        tracing_subscriber::registry()
            .with(logs)
            .try_init()
            .map_err(|e| TelemetryError::Subscriber(e.to_string()))?;
        return Ok(TelemetryGuard::default());
    };
    let tracer = provider.tracer("shepherd");
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer.clone())
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_target(false)
        .with_level(false)
        // Request spans, and the events (log lines) inside them at the log's level.
        .with_filter(filter_fn(move |meta| {
            meta.target() == TARGET || (meta.is_event() && *meta.level() <= level)
        }));
    tracing_subscriber::registry()
        .with(logs)
        .with(otel)
        .try_init()
        .map_err(|e| TelemetryError::Subscriber(e.to_string()))?;
    // A second init (tests) keeps the first tracer.
    let _ = TRACER.set(tracer);
    let _ = SAMPLER.set(settings.sampler);
    ENABLED.store(true, Ordering::Relaxed);
    tracing::info!(
        exporter = ?settings.exporter,
        protocol = ?settings.protocol,
        endpoint = %settings.traces_endpoint(),
        sampler = ?settings.sampler,
        service = %settings.service_name,
        "OpenTelemetry tracing on"
    );
    Ok(TelemetryGuard {
        provider: Some(provider),
    })
}

/// Installs `provider`'s tracer for the request spans without a `tracing` subscriber of
/// this crate's making (benchmarks, embedders with their own subscriber: add
/// [`tracing_opentelemetry::layer`] to it for the request span), sampling requests with
/// `sampler` (the provider should record every span: see [`provider`]). Returns whether it
/// was installed (only the first call in a process is).
pub fn install_tracer(provider: &SdkTracerProvider, sampler: SamplerKind) -> bool {
    let _ = SAMPLER.set(sampler);
    let installed = TRACER.set(provider.tracer("shepherd")).is_ok();
    if installed {
        ENABLED.store(true, Ordering::Relaxed);
    }
    installed
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use opentelemetry::trace::{SpanKind, TraceId};
    use opentelemetry_sdk::trace::{SamplingDecision, ShouldSample};

    use super::super::sampling::{Parent, should_sample};
    use super::*;

    /// Shepherd's up-front decision keeps exactly the traces the SDK's sampler would.
    #[test]
    fn the_up_front_decision_matches_the_sdk_sampler() {
        let mut x: u64 = 0x1234_5678_9abc_def1;
        for ratio in [0.0, 0.01, 0.1, 0.5, 0.9, 1.0] {
            let sdk = sampler(SamplerKind::TraceIdRatio(ratio));
            for _ in 0..2_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let id = format!("{:016x}{:016x}", x.rotate_left(7) | 1, x);
                let header = format!("00-{id}-00f067aa0ba902b7-01");
                let ours = should_sample(SamplerKind::TraceIdRatio(ratio), Parent::parse(&header));
                let theirs = sdk
                    .should_sample(
                        None,
                        TraceId::from_hex(&id).unwrap(),
                        "gateway.request",
                        &SpanKind::Server,
                        &[],
                        &[],
                    )
                    .decision
                    == SamplingDecision::RecordAndSample;
                assert_eq!(ours, theirs, "ratio {ratio}, trace {id}");
            }
        }
    }
}
