//! Saturation detectors: is the pool too busy to take one more request?
//!
//! A [`SaturationDetector`] reads a [`PoolSnapshot`] at a given time and answers with a
//! saturation level: `0.0` idle, `1.0` and above saturated. The flow controller holds requests
//! (and sheds sheddable ones) while the level is at or above 1.
//!
//! Two detectors, under their upstream plugin type names and parameter names (from the Gateway
//! API Inference Extension and the llm-d router: the `utilization-detector` and
//! `concurrency-detector` plugins under `pkg/epp/framework/plugins/flowcontrol/saturationdetector/`
//! and their READMEs; the legacy `saturationDetector` section of
//! `apix/config/v1alpha1/endpointpickerconfig_types.go` used the same threshold names):
//!
//! - [`UtilizationDetector`] (`utilization-detector`): per endpoint
//!   `max(waiting / queueDepthThreshold, kv / kvCacheUtilThreshold)`, averaged over the
//!   endpoints that accept requests; an endpoint whose metrics are older than
//!   `metricsStalenessThreshold` (or were never scraped) scores 1. Defaults 5, 0.8 and 200 ms.
//! - [`ConcurrencyDetector`] (`concurrency-detector`): requests (or prompt tokens) in flight
//!   from this scheduler against `maxConcurrency` (or `maxTokenConcurrency`) per endpoint, in
//!   `concurrencyMode` `requests`, `tokens` or `hybrid`. Defaults `requests`, 100, 1,000,000.
//!
//! A pool with no endpoint that accepts requests is saturated (level 1): requests wait for
//! one to appear (scale from zero).
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::clock::{Clock, ManualClock};
//! use shepherd_scheduler_core::endpoint::{EndpointMetrics, Pool};
//! use shepherd_scheduler_core::flow::{SaturationDetector, UtilizationDetector};
//!
//! let clock = Arc::new(ManualClock::default());
//! let pool = Pool::with_clock(clock.clone());
//! let endpoint = pool.add("10.0.0.1:8000");
//! endpoint.set_metrics(EndpointMetrics { waiting: 10, kv_utilization: 0.2, ..Default::default() });
//!
//! let detector = UtilizationDetector::default();
//! let snapshot = pool.snapshot();
//! assert_eq!(detector.saturation(&snapshot, clock.now()), 2.0); // 10 waiting / 5
//! assert!(detector.is_saturated(&snapshot, clock.now()));
//! ```

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::config::{FlowConfigError, GoDuration};
use crate::clock::Timestamp;
use crate::endpoint::PoolSnapshot;

/// Decides how saturated the pool is. Pure: the answer depends only on the snapshot and `now`.
pub trait SaturationDetector: Send + Sync + fmt::Debug {
    /// The saturation level: `0.0` idle, `>= 1.0` saturated.
    fn saturation(&self, snapshot: &PoolSnapshot, now: Timestamp) -> f64;

    /// Whether the pool is saturated (level at or above 1; NaN counts as saturated).
    fn is_saturated(&self, snapshot: &PoolSnapshot, now: Timestamp) -> bool {
        is_saturated_level(self.saturation(snapshot, now))
    }

    /// The saturation level counting `pending` requests as well: requests the flow controller
    /// let through that the snapshot cannot show yet (admitted, not yet scheduled). The
    /// default ignores them; the built-in detectors count them as one more waiting request
    /// (utilization) or one more request in flight (concurrency), spread over the endpoints.
    fn saturation_with_pending(
        &self,
        snapshot: &PoolSnapshot,
        now: Timestamp,
        pending: Pending,
    ) -> f64 {
        let _ = pending;
        self.saturation(snapshot, now)
    }
}

/// Whether a saturation level means saturated: at or above 1, or NaN.
pub fn is_saturated_level(level: f64) -> bool {
    level.is_nan() || level >= 1.0
}

/// Requests let through by the flow controller that a pool snapshot does not show yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pending {
    /// How many.
    pub requests: u64,
    /// Their prompt tokens (estimated).
    pub prompt_tokens: u64,
}

/// The `utilization-detector`: waiting queue and KV-cache utilization against thresholds.
#[derive(Debug, Clone, PartialEq)]
pub struct UtilizationDetector {
    queue_depth_threshold: f64,
    kv_cache_util_threshold: f64,
    staleness_nanos: u64,
    headroom: f64,
}

impl UtilizationDetector {
    /// Upstream plugin type name.
    pub const TYPE: &'static str = "utilization-detector";
    /// Default `queueDepthThreshold`.
    pub const DEFAULT_QUEUE_DEPTH_THRESHOLD: u32 = 5;
    /// Default `kvCacheUtilThreshold`.
    pub const DEFAULT_KV_CACHE_UTIL_THRESHOLD: f64 = 0.8;
    /// Default `metricsStalenessThreshold`.
    pub const DEFAULT_METRICS_STALENESS_THRESHOLD: Duration = Duration::from_millis(200);

    /// A detector with these thresholds; `queue_depth_threshold` must be positive and
    /// `kv_cache_util_threshold` in `(0, 1]`.
    pub fn new(
        queue_depth_threshold: u32,
        kv_cache_util_threshold: f64,
        metrics_staleness_threshold: Duration,
    ) -> Result<Self, FlowConfigError> {
        UtilizationParams {
            queue_depth_threshold: Some(queue_depth_threshold),
            kv_cache_util_threshold: Some(kv_cache_util_threshold),
            metrics_staleness_threshold: Some(GoDuration(metrics_staleness_threshold)),
            headroom: None,
        }
        .build()
    }

    /// Builds the detector from its upstream `parameters` (JSON; `null` means all defaults).
    pub fn from_parameters(parameters: &serde_json::Value) -> Result<Self, FlowConfigError> {
        plugin_parameters::<UtilizationParams>(Self::TYPE, parameters)?.build()
    }

    /// How old an endpoint's metrics may be before they count as stale.
    pub fn staleness_threshold(&self) -> Duration {
        Duration::from_nanos(self.staleness_nanos)
    }

    /// The `headroom` parameter (accepted for compatibility: upstream uses it only in the
    /// detector's scheduling filter, which Shepherd does not run).
    pub fn headroom(&self) -> f64 {
        self.headroom
    }

    /// One endpoint's score, or `None` if its metrics are stale.
    fn endpoint_score(&self, endpoint: &crate::endpoint::Endpoint, now: Timestamp) -> Option<f64> {
        if !endpoint.is_fresh_at(now.as_nanos(), self.staleness_nanos) {
            return None;
        }
        let m = endpoint.load_metrics();
        let queue = f64::from(m.waiting) / self.queue_depth_threshold;
        let kv = m.kv_utilization_clamped() / self.kv_cache_util_threshold;
        Some(queue.max(kv))
    }
}

impl Default for UtilizationDetector {
    fn default() -> Self {
        UtilizationDetector {
            queue_depth_threshold: f64::from(Self::DEFAULT_QUEUE_DEPTH_THRESHOLD),
            kv_cache_util_threshold: Self::DEFAULT_KV_CACHE_UTIL_THRESHOLD,
            staleness_nanos: duration_nanos(Self::DEFAULT_METRICS_STALENESS_THRESHOLD),
            headroom: 0.0,
        }
    }
}

impl SaturationDetector for UtilizationDetector {
    fn saturation(&self, snapshot: &PoolSnapshot, now: Timestamp) -> f64 {
        self.saturation_with_pending(snapshot, now, Pending::default())
    }

    fn saturation_with_pending(
        &self,
        snapshot: &PoolSnapshot,
        now: Timestamp,
        pending: Pending,
    ) -> f64 {
        let mut total = 0.0;
        let mut count = 0u32;
        for endpoint in snapshot.endpoints().iter().filter(|e| e.accepts_requests()) {
            total += self.endpoint_score(endpoint, now).unwrap_or(1.0);
            count += 1;
        }
        if count == 0 {
            return 1.0;
        }
        // Pending requests will wait somewhere: spread over the endpoints' queues.
        (total + pending.requests as f64 / self.queue_depth_threshold) / f64::from(count)
    }
}

/// The upstream `utilization-detector` parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UtilizationParams {
    queue_depth_threshold: Option<u32>,
    kv_cache_util_threshold: Option<f64>,
    metrics_staleness_threshold: Option<GoDuration>,
    headroom: Option<f64>,
}

impl UtilizationParams {
    fn build(self) -> Result<UtilizationDetector, FlowConfigError> {
        let d = UtilizationDetector::default();
        let queue = self
            .queue_depth_threshold
            .unwrap_or(UtilizationDetector::DEFAULT_QUEUE_DEPTH_THRESHOLD);
        if queue == 0 {
            return Err(invalid(
                UtilizationDetector::TYPE,
                "queueDepthThreshold",
                "must be at least 1",
            ));
        }
        let kv = self
            .kv_cache_util_threshold
            .unwrap_or(UtilizationDetector::DEFAULT_KV_CACHE_UTIL_THRESHOLD);
        if !(kv > 0.0 && kv <= 1.0) {
            return Err(invalid(
                UtilizationDetector::TYPE,
                "kvCacheUtilThreshold",
                "must be in (0, 1]",
            ));
        }
        let headroom = check_headroom(UtilizationDetector::TYPE, self.headroom)?;
        let staleness = self
            .metrics_staleness_threshold
            .map_or(d.staleness_nanos, |g| duration_nanos(g.0));
        if staleness == 0 {
            return Err(invalid(
                UtilizationDetector::TYPE,
                "metricsStalenessThreshold",
                "must be positive",
            ));
        }
        Ok(UtilizationDetector {
            queue_depth_threshold: f64::from(queue),
            kv_cache_util_threshold: kv,
            staleness_nanos: staleness,
            headroom,
        })
    }
}

/// What the [`ConcurrencyDetector`] counts (upstream `concurrencyMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConcurrencyMode {
    /// Requests in flight against `maxConcurrency`, pool-wide.
    #[default]
    Requests,
    /// Prompt tokens in flight against `maxTokenConcurrency`, pool-wide.
    Tokens,
    /// Per endpoint the larger of the two ratios, averaged over endpoints.
    Hybrid,
}

/// The `concurrency-detector`: what this scheduler has in flight against per-endpoint limits.
#[derive(Debug, Clone, PartialEq)]
pub struct ConcurrencyDetector {
    mode: ConcurrencyMode,
    max_concurrency: u64,
    max_token_concurrency: u64,
    headroom: f64,
}

impl ConcurrencyDetector {
    /// Upstream plugin type name.
    pub const TYPE: &'static str = "concurrency-detector";
    /// Default `maxConcurrency`.
    pub const DEFAULT_MAX_CONCURRENCY: u64 = 100;
    /// Default `maxTokenConcurrency`.
    pub const DEFAULT_MAX_TOKEN_CONCURRENCY: u64 = 1_000_000;

    /// A detector counting in `mode` against these per-endpoint limits (both at least 1).
    pub fn new(
        mode: ConcurrencyMode,
        max_concurrency: u64,
        max_token_concurrency: u64,
    ) -> Result<Self, FlowConfigError> {
        ConcurrencyParams {
            concurrency_mode: Some(mode),
            max_concurrency: Some(max_concurrency),
            max_token_concurrency: Some(max_token_concurrency),
            headroom: None,
        }
        .build()
    }

    /// Builds the detector from its upstream `parameters` (JSON; `null` means all defaults).
    pub fn from_parameters(parameters: &serde_json::Value) -> Result<Self, FlowConfigError> {
        plugin_parameters::<ConcurrencyParams>(Self::TYPE, parameters)?.build()
    }

    /// The counting mode.
    pub fn mode(&self) -> ConcurrencyMode {
        self.mode
    }

    /// The `headroom` parameter (accepted for compatibility; see
    /// [`UtilizationDetector::headroom`]).
    pub fn headroom(&self) -> f64 {
        self.headroom
    }
}

impl Default for ConcurrencyDetector {
    fn default() -> Self {
        ConcurrencyDetector {
            mode: ConcurrencyMode::Requests,
            max_concurrency: Self::DEFAULT_MAX_CONCURRENCY,
            max_token_concurrency: Self::DEFAULT_MAX_TOKEN_CONCURRENCY,
            headroom: 0.0,
        }
    }
}

impl SaturationDetector for ConcurrencyDetector {
    fn saturation(&self, snapshot: &PoolSnapshot, now: Timestamp) -> f64 {
        self.saturation_with_pending(snapshot, now, Pending::default())
    }

    fn saturation_with_pending(
        &self,
        snapshot: &PoolSnapshot,
        _now: Timestamp,
        pending: Pending,
    ) -> f64 {
        let mut count = 0u64;
        let mut requests = pending.requests;
        let mut tokens = pending.prompt_tokens;
        let req_cap = self.max_concurrency as f64;
        let tok_cap = self.max_token_concurrency as f64;
        let mut hybrid =
            (pending.requests as f64 / req_cap).max(pending.prompt_tokens as f64 / tok_cap);
        for endpoint in snapshot.endpoints().iter().filter(|e| e.accepts_requests()) {
            let r = endpoint.total_in_flight_requests();
            let t = endpoint.total_in_flight_prompt_tokens();
            requests = requests.saturating_add(r);
            tokens = tokens.saturating_add(t);
            hybrid += (r as f64 / req_cap).max(t as f64 / tok_cap);
            count += 1;
        }
        if count == 0 {
            return 1.0;
        }
        let n = count as f64;
        match self.mode {
            ConcurrencyMode::Requests => requests as f64 / (req_cap * n),
            ConcurrencyMode::Tokens => tokens as f64 / (tok_cap * n),
            ConcurrencyMode::Hybrid => hybrid / n,
        }
    }
}

/// The upstream `concurrency-detector` parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConcurrencyParams {
    concurrency_mode: Option<ConcurrencyMode>,
    max_concurrency: Option<u64>,
    max_token_concurrency: Option<u64>,
    headroom: Option<f64>,
}

impl ConcurrencyParams {
    fn build(self) -> Result<ConcurrencyDetector, FlowConfigError> {
        let max_concurrency = self
            .max_concurrency
            .unwrap_or(ConcurrencyDetector::DEFAULT_MAX_CONCURRENCY);
        if max_concurrency == 0 {
            return Err(invalid(
                ConcurrencyDetector::TYPE,
                "maxConcurrency",
                "must be at least 1",
            ));
        }
        let max_token_concurrency = self
            .max_token_concurrency
            .unwrap_or(ConcurrencyDetector::DEFAULT_MAX_TOKEN_CONCURRENCY);
        if max_token_concurrency == 0 {
            return Err(invalid(
                ConcurrencyDetector::TYPE,
                "maxTokenConcurrency",
                "must be at least 1",
            ));
        }
        Ok(ConcurrencyDetector {
            mode: self.concurrency_mode.unwrap_or_default(),
            max_concurrency,
            max_token_concurrency,
            headroom: check_headroom(ConcurrencyDetector::TYPE, self.headroom)?,
        })
    }
}

/// A detector chosen by configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum Detector {
    /// `utilization-detector`.
    Utilization(UtilizationDetector),
    /// `concurrency-detector`.
    Concurrency(ConcurrencyDetector),
}

impl Detector {
    /// Builds the detector of upstream plugin type `plugin_type` from its `parameters`.
    pub fn from_plugin(
        plugin_type: &str,
        parameters: &serde_json::Value,
    ) -> Result<Self, FlowConfigError> {
        match plugin_type {
            UtilizationDetector::TYPE => Ok(Detector::Utilization(
                UtilizationDetector::from_parameters(parameters)?,
            )),
            ConcurrencyDetector::TYPE => Ok(Detector::Concurrency(
                ConcurrencyDetector::from_parameters(parameters)?,
            )),
            other => Err(FlowConfigError::UnknownDetector(other.to_owned())),
        }
    }
}

impl Default for Detector {
    fn default() -> Self {
        Detector::Utilization(UtilizationDetector::default())
    }
}

impl SaturationDetector for Detector {
    fn saturation(&self, snapshot: &PoolSnapshot, now: Timestamp) -> f64 {
        match self {
            Detector::Utilization(d) => d.saturation(snapshot, now),
            Detector::Concurrency(d) => d.saturation(snapshot, now),
        }
    }

    fn saturation_with_pending(
        &self,
        snapshot: &PoolSnapshot,
        now: Timestamp,
        pending: Pending,
    ) -> f64 {
        match self {
            Detector::Utilization(d) => d.saturation_with_pending(snapshot, now, pending),
            Detector::Concurrency(d) => d.saturation_with_pending(snapshot, now, pending),
        }
    }
}

fn check_headroom(plugin: &'static str, headroom: Option<f64>) -> Result<f64, FlowConfigError> {
    let h = headroom.unwrap_or(0.0);
    if !(h >= 0.0 && h.is_finite()) {
        return Err(invalid(
            plugin,
            "headroom",
            "must be a finite fraction >= 0",
        ));
    }
    Ok(h)
}

fn invalid(plugin: &'static str, field: &'static str, message: &'static str) -> FlowConfigError {
    FlowConfigError::Invalid {
        field: format!("{plugin}.parameters.{field}"),
        message: message.to_owned(),
    }
}

/// A flow-control plugin's `parameters` (`null`: all defaults), errors naming the plugin.
pub(crate) fn plugin_parameters<P: serde::de::DeserializeOwned + Default>(
    plugin: &'static str,
    parameters: &serde_json::Value,
) -> Result<P, FlowConfigError> {
    if parameters.is_null() {
        return Ok(P::default());
    }
    P::deserialize(parameters).map_err(|e| FlowConfigError::Parameters {
        plugin,
        message: e.to_string(),
    })
}

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
