//! The upstream picker's metric names beside Shepherd's own: the llm-d router's
//! `llm_d_epp_*` families, with its labels and buckets, and on request the deprecated
//! `inference_objective_*` / `inference_pool_*` / `inference_extension_*` names older
//! dashboards query (`metrics.legacyNames: true`).
//!
//! [`UpstreamMetrics`] is built by the runtime (its settings come from the config's
//! `metrics` section, [`MetricsConfig`](crate::config::MetricsConfig)) and rendered on the
//! admin `/metrics` after Shepherd's families. Request-level families are recorded by the
//! adapters through a [`RequestObservation`] per request (created once the body is parsed);
//! pool, prefix-index and flow-control families are read from the pool, the scheduler's
//! figures and the flow controller when `/metrics` is read.
//!
//! Label cardinality is bounded as upstream bounds it: at most
//! [`max_label_values`](UpstreamSettings::max_label_values) distinct model names and as many
//! fairness ids keep their own label, later ones are folded into `other`; on top of that, at
//! most [`max_series`](UpstreamSettings::max_series) request label sets get series of their
//! own. The request path takes no lock: bounded label sets and the series map are read
//! through atomically swapped maps, and figures are atomic adds on the request's own series.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_runtime::upstream::{UpstreamMetrics, UpstreamSettings};
//! use shepherd_scheduler_core::completion::Usage;
//! use shepherd_scheduler_core::metrics::render_prometheus;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let metrics = Arc::new(UpstreamMetrics::new(UpstreamSettings { legacy_names: true, ..UpstreamSettings::default() }));
//! let mut request = metrics.observe("llama", "llama", None, 0, 120, false);
//! request.scheduled(std::time::Duration::from_micros(40), Some("10.0.0.1:8000"));
//! request.first_byte();
//! request.response_bytes(300);
//! request.finish(Some(&Usage { prompt_tokens: 30, completion_tokens: 10, cached_tokens: Some(16) }));
//!
//! let text = render_prometheus(&[&*metrics]);
//! assert!(text.contains(r#"llm_d_epp_request_total{model_name="llama",target_model_name="llama",fairness_id="",priority="0"} 1"#));
//! assert!(text.contains(r#"inference_objective_request_total{model_name="llama",target_model_name="llama",priority="0"} 1"#));
//! assert!(text.contains("llm_d_epp_request_output_tokens_count"));
//! # }
//! ```

mod legacy;
mod names;
mod observation;
mod render;
mod series;
mod table;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use shepherd_scheduler_core::metrics::{BucketHistogram, LabelBound, OVERFLOW_LABEL};
use shepherd_scheduler_core::reload::ReloadableScheduler;

use crate::flow::FlowController;
pub use observation::{FlowOutcome, RequestObservation, error_code};
use series::{RequestSeries, SeriesKey};
use table::SeriesMap;

/// Default cap on distinct model names and on distinct fairness ids (upstream's 1000).
pub const DEFAULT_MAX_LABEL_VALUES: usize = 1000;
/// Default cap on request label sets with series of their own.
pub const DEFAULT_MAX_SERIES: usize = 2000;
/// Default pool name (the `name` and `inference_pool` labels).
pub const DEFAULT_POOL_NAME: &str = "shepherd";

/// How the upstream families are exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamSettings {
    /// Also export the deprecated `inference_objective_*`, `inference_pool_*` and
    /// `inference_extension_*` names (default off).
    pub legacy_names: bool,
    /// Distinct model names, and distinct fairness ids, that keep their own label (1000).
    pub max_label_values: usize,
    /// Request label sets with series of their own (2000); later ones share `other`'s.
    pub max_series: usize,
    /// The pool's name in the `name` / `inference_pool` labels (`shepherd`).
    pub pool_name: String,
}

impl Default for UpstreamSettings {
    fn default() -> Self {
        UpstreamSettings {
            legacy_names: false,
            max_label_values: DEFAULT_MAX_LABEL_VALUES,
            max_series: DEFAULT_MAX_SERIES,
            pool_name: DEFAULT_POOL_NAME.to_owned(),
        }
    }
}

/// gRPC status names, in code order (upstream labels `extproc_streams_total` with them).
pub const GRPC_CODES: [&str; 17] = [
    "OK",
    "Canceled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
];

/// Scheduling attempts: `(success, target model, endpoint)`.
type AttemptKey = (bool, Arc<str>, Arc<str>);

/// Model rewrite decisions: `(rewrite name, incoming model, target model)`.
type RewriteKey = (Arc<str>, Arc<str>, Arc<str>);

/// The parts of the runtime the pool and flow families are read from.
#[derive(Debug)]
struct Attached {
    scheduler: Arc<ReloadableScheduler>,
    flow: Option<FlowController>,
}

/// The upstream families. See the [module docs](self).
#[derive(Debug)]
pub struct UpstreamMetrics {
    settings: UpstreamSettings,
    legacy: AtomicBool,
    models: LabelBound,
    fairness: LabelBound,
    series: SeriesMap<SeriesKey, RequestSeries>,
    scheduler_e2e: BucketHistogram,
    attempts: SeriesMap<AttemptKey, AtomicU64>,
    rewrites: SeriesMap<RewriteKey, AtomicU64>,
    streams_enabled: AtomicBool,
    streams_open: AtomicI64,
    streams_total: [AtomicU64; GRPC_CODES.len()],
    stream_duration: BucketHistogram,
    attached: OnceLock<Attached>,
}

impl UpstreamMetrics {
    /// Empty families with these settings.
    pub fn new(settings: UpstreamSettings) -> Self {
        UpstreamMetrics {
            legacy: AtomicBool::new(settings.legacy_names),
            models: LabelBound::new(settings.max_label_values),
            fairness: LabelBound::new(settings.max_label_values),
            series: SeriesMap::new(settings.max_series),
            scheduler_e2e: BucketHistogram::striped(&names::SCHEDULING, names::SECONDS),
            attempts: SeriesMap::new(settings.max_series),
            rewrites: SeriesMap::new(settings.max_series),
            streams_enabled: AtomicBool::new(false),
            streams_open: AtomicI64::new(0),
            streams_total: std::array::from_fn(|_| AtomicU64::new(0)),
            stream_duration: BucketHistogram::striped(
                &names::EXTPROC_STREAM_BUCKETS,
                names::SECONDS,
            ),
            attached: OnceLock::new(),
            settings,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &UpstreamSettings {
        &self.settings
    }

    /// Whether the deprecated names are exported.
    pub fn legacy_names(&self) -> bool {
        self.legacy.load(Ordering::Relaxed)
    }

    /// Turns the deprecated names on or off (a config reload).
    pub fn set_legacy_names(&self, on: bool) {
        self.legacy.store(on, Ordering::Relaxed);
    }

    /// Reads the pool families from `scheduler`'s pool and the flow families from `flow`
    /// (the runtime calls this once; later calls are ignored).
    pub fn attach(&self, scheduler: Arc<ReloadableScheduler>, flow: Option<FlowController>) {
        let _ = self.attached.set(Attached { scheduler, flow });
    }

    /// Keeps `model`'s own label whatever the cap (a model the configuration names).
    pub fn pin_model(&self, model: &str) {
        self.models.pin(model);
    }

    /// Starts observing a request whose body was parsed: counts it (`request_total`) and its
    /// size. `model` is the body's model, `target_model` the one endpoints must serve.
    pub fn observe(
        self: &Arc<Self>,
        model: &str,
        target_model: &str,
        fairness_id: Option<&str>,
        priority: i32,
        request_bytes: usize,
        streaming: bool,
    ) -> RequestObservation {
        let key = SeriesKey {
            model: self.models.bound(model),
            target: self.models.bound(target_model),
            fairness: self.fairness.bound(fairness_id.unwrap_or("")),
            priority,
        };
        let target = Arc::clone(&key.target);
        let series = self.series.get(key, || {
            let other: Arc<str> = Arc::from(OVERFLOW_LABEL);
            SeriesKey {
                model: Arc::clone(&other),
                target: Arc::clone(&other),
                fairness: other,
                priority: 0,
            }
        });
        RequestObservation::new(
            Arc::clone(self),
            series,
            target,
            request_bytes,
            streaming,
            tokio::time::Instant::now(),
        )
    }

    pub(crate) fn scheduled(&self, elapsed: Duration, endpoint: Option<&str>, target: &Arc<str>) {
        self.scheduler_e2e.observe(elapsed.as_secs_f64());
        let key = (
            endpoint.is_some(),
            Arc::clone(target),
            Arc::from(endpoint.unwrap_or("")),
        );
        let other: Arc<str> = Arc::from(OVERFLOW_LABEL);
        let ok = key.0;
        self.attempts
            .get(key, || (ok, Arc::clone(&other), other))
            .fetch_add(1, Ordering::Relaxed);
    }

    /// A model rewrite decided where a request for `model` goes (`rule`: the
    /// `InferenceModelRewrite`'s name). The rule and target names come from the cluster's
    /// objects; the incoming model, from the request, is bounded like every model label.
    pub fn record_rewrite(&self, rule: &str, model: &str, target: &str) {
        let key = (Arc::from(rule), self.models.bound(model), Arc::from(target));
        let other: Arc<str> = Arc::from(OVERFLOW_LABEL);
        self.rewrites
            .get(key, || (Arc::clone(&other), Arc::clone(&other), other))
            .fetch_add(1, Ordering::Relaxed);
    }

    /// An ext_proc stream opened (turns the `extproc_streams_*` families on); call
    /// [`UpstreamMetrics::stream_closed`] when it ends.
    pub fn stream_opened(&self) {
        self.streams_enabled.store(true, Ordering::Relaxed);
        self.streams_open.fetch_add(1, Ordering::Relaxed);
    }

    /// An ext_proc stream ended with gRPC status `code` (an index into [`GRPC_CODES`]) after
    /// `open`.
    pub fn stream_closed(&self, code: usize, open: Duration) {
        self.streams_open.fetch_sub(1, Ordering::Relaxed);
        if let Some(c) = self.streams_total.get(code.min(GRPC_CODES.len() - 1)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.stream_duration.observe(open.as_secs_f64());
    }

    /// Request label sets with series now (at most `max_series`).
    pub fn series_count(&self) -> usize {
        self.series.snapshot().len()
    }

    /// Distinct model names admitted under the cap.
    pub fn model_labels(&self) -> usize {
        self.models.admitted()
    }

    /// Distinct fairness ids admitted under the cap.
    pub fn fairness_labels(&self) -> usize {
        self.fairness.admitted()
    }
}
