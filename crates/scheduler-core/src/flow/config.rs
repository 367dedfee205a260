//! The `flowControl` section of a picker configuration, under its upstream names.
//!
//! The names are those of the Gateway API Inference Extension's `FlowControlConfig` and
//! `PriorityBandConfig` (`apix/config/v1alpha1/endpointpickerconfig_types.go`):
//!
//! | upstream field | meaning here |
//! |---|---|
//! | `maxRequests`, `maxBytes` | limits over all bands (absent or 0: none) |
//! | `defaultRequestTTL` | how long a request may wait while the pool has endpoints (default `60s`; `0s` disables) |
//! | `noEndpointRequestTTL` | how long it may wait while the pool has none (default: as `defaultRequestTTL`; `0s` disables); each change of regime grants a fresh budget, the total wait stays within the longer of the two |
//! | `priorityBands[]` | `priority`, `maxRequests` (default 5000), `maxBytes` (default 1G) |
//! | `defaultPriorityBand` | template for priorities with no band of their own |
//! | `defaultNegativePriorityBand` | template for negative (sheddable) priorities |
//! | `usageLimitPolicyPluginRef` | a `static-usage-limit-policy` (default: threshold 1) or `priority-holdback-policy` plugin |
//! | `saturationDetector.pluginRef` | a `utilization-detector` (default) or `concurrency-detector` plugin |
//! | `fairnessPolicyRef` | `round-robin-fairness-policy` (Shepherd's default) or `global-strict-fairness-policy` (the oldest request of the band first, whatever its flow) |
//! | `orderingPolicyRef` | `fcfs-ordering-policy` (default), `edf-ordering-policy` or `slo-deadline-ordering-policy` ([`OrderingPolicy`]) |
//!
//! Quantities accept numbers or Kubernetes quantity strings (`"1k"`, `"500M"`, `"1Gi"`);
//! durations accept Go duration strings (`"60s"`, `"1m30s"`, `"200ms"`). Upstream defaults the
//! fairness policy to `global-strict-fairness-policy`; Shepherd's default is round-robin
//! (DESIGN.md section 6): a band gets global-strict when its `fairnessPolicyRef` names it.
//! `usageLimitPolicyPluginRef` names a `static-usage-limit-policy` or `priority-holdback-policy`
//! plugin ([`UsageLimitPolicy`]); `enableEviction: true` turns on in-flight eviction of
//! sheddable requests ([`eviction`](super::eviction)).
//!
//! ```
//! use std::time::Duration;
//! use shepherd_scheduler_core::flow::FlowControlConfig;
//!
//! let config: FlowControlConfig = serde_json::from_value(serde_json::json!({
//!     "defaultRequestTTL": "30s",
//!     "priorityBands": [{"priority": 0, "maxRequests": "1k", "maxBytes": "64Mi"}],
//! })).unwrap();
//! let settings = config.validate(&[]).unwrap();
//! assert_eq!(settings.ttl, Some(Duration::from_secs(30)));
//! assert_eq!(settings.band_limits(0).max_requests, 1000);
//! assert_eq!(settings.band_limits(0).max_bytes, 64 << 20);
//! assert_eq!(settings.band_limits(7).max_requests, 5000); // system default band
//! ```

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::ordering::OrderingPolicy;
use super::program_aware::{PROGRAM_AWARE_FAIRNESS_POLICY, ProgramAwareSettings};
use super::saturation::{Detector, UtilizationDetector};
use super::usage_limit::UsageLimitPolicy;
use crate::config::{EndpointPickerConfig, PluginSpec};

/// A `flowControl` section that does not validate: each names the offending field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FlowConfigError {
    /// The section does not have the expected shape.
    #[error("flowControl: {0}")]
    Syntax(String),
    /// A field has a value out of range.
    #[error("{field}: {message}")]
    Invalid {
        /// Path of the field, e.g. `flowControl.priorityBands[1].maxRequests`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A detector plugin's parameters do not parse.
    #[error("{plugin} parameters: {message}")]
    Parameters {
        /// The plugin type.
        plugin: &'static str,
        /// The parse error.
        message: String,
    },
    /// `saturationDetector.pluginRef` names a plugin of a type that is not a detector.
    #[error(
        "flowControl.saturationDetector.pluginRef: `{0}` is not a saturation detector (expected utilization-detector or concurrency-detector)"
    )]
    UnknownDetector(String),
}

/// A duration written as a Go duration string (`"1m30s"`, `"200ms"`) or a number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoDuration(pub Duration);

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Secs(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Secs(s) => Ok(GoDuration(Duration::from_secs(s))),
            Raw::Text(t) => parse_go_duration(&t).map(GoDuration).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "invalid duration `{t}` (expected e.g. \"60s\", \"1m30s\", \"200ms\")"
                ))
            }),
        }
    }
}

/// Parses a Go duration string: a sequence of decimal numbers with units `ns`, `us`, `µs`,
/// `ms`, `s`, `m`, `h` (`"0"` alone is allowed). Negative durations are refused.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let s = text.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut rest = s;
    let mut total_nanos: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total_nanos += value * scale;
    }
    if !total_nanos.is_finite() || total_nanos > u64::MAX as f64 {
        return None;
    }
    Some(Duration::from_nanos(total_nanos as u64))
}

/// A count or size written as a number or a Kubernetes quantity string (`"1k"`, `"1Gi"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity(pub u64);

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(Quantity(n)),
            Raw::Text(t) => parse_quantity(&t).map(Quantity).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "invalid quantity `{t}` (expected a whole number, optionally with k, M, G, T, Ki, Mi, Gi or Ti)"
                ))
            }),
        }
    }
}

/// Parses a non-negative whole Kubernetes quantity: digits, then optionally one of the suffixes
/// `k`, `M`, `G`, `T`, `P` (powers of 1000) or `Ki`, `Mi`, `Gi`, `Ti`, `Pi` (powers of 1024).
pub fn parse_quantity(text: &str) -> Option<u64> {
    let s = text.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if digits == 0 {
        return None;
    }
    let n: u64 = s[..digits].parse().ok()?;
    let mult: u64 = match &s[digits..] {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// One `priorityBands[]` entry (or a band template).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriorityBandConfig {
    /// The band's priority (higher is more important; negative is sheddable). Ignored in the
    /// templates.
    #[serde(default)]
    pub priority: i32,
    /// Most requests queued in this band (absent or 0: 5000).
    #[serde(default)]
    pub max_requests: Option<Quantity>,
    /// Most bytes queued in this band (absent or 0: 1G).
    #[serde(default)]
    pub max_bytes: Option<Quantity>,
    /// The fairness policy plugin across flows in this band.
    #[serde(default)]
    pub fairness_policy_ref: Option<String>,
    /// The ordering policy plugin within a flow.
    #[serde(default)]
    pub ordering_policy_ref: Option<String>,
}

/// The `saturationDetector` entry: which detector plugin instance to use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaturationDetectorConfig {
    /// Name of a plugin instance in the config's `plugins` (or a detector type name).
    #[serde(default)]
    pub plugin_ref: Option<String>,
}

/// The upstream `flowControl` section, as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FlowControlConfig {
    /// Most requests queued over all bands (absent or 0: no global limit).
    #[serde(default)]
    pub max_requests: Option<Quantity>,
    /// Most bytes queued over all bands (absent or 0: no global limit).
    #[serde(default)]
    pub max_bytes: Option<Quantity>,
    /// How long a request may wait while the pool has endpoints (absent: 60 s; `0s`: no
    /// limit).
    #[serde(default, rename = "defaultRequestTTL")]
    pub default_request_ttl: Option<GoDuration>,
    /// How long a request may wait while the pool has no endpoint (absent: as
    /// `defaultRequestTTL`; `0s`: no limit).
    #[serde(default, rename = "noEndpointRequestTTL")]
    pub no_endpoint_request_ttl: Option<GoDuration>,
    /// Template for priorities without a band of their own.
    #[serde(default)]
    pub default_priority_band: Option<PriorityBandConfig>,
    /// Template for negative priorities without a band of their own (falls back to
    /// `defaultPriorityBand`).
    #[serde(default)]
    pub default_negative_priority_band: Option<PriorityBandConfig>,
    /// Bands configured explicitly.
    #[serde(default)]
    pub priority_bands: Vec<PriorityBandConfig>,
    /// The usage-limit policy plugin (absent: the static policy, threshold 1).
    #[serde(default)]
    pub usage_limit_policy_plugin_ref: Option<String>,
    /// Which saturation detector to use (absent: `utilization-detector` with defaults).
    #[serde(default)]
    pub saturation_detector: Option<SaturationDetectorConfig>,
    /// Evict in-flight sheddable requests when a higher band is blocked (default false).
    #[serde(default)]
    pub enable_eviction: bool,
}

/// How a band chooses among its flows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Fairness {
    /// The flows take turns, one request each (`round-robin-fairness-policy`).
    #[default]
    RoundRobin,
    /// The band's oldest request first, whatever its flow (`global-strict-fairness-policy`
    /// over FCFS ordering: one global arrival order).
    GlobalStrict,
    /// The flow with the least attained service first (`program-aware-fairness`; its
    /// parameters are [`FlowSettings::program_aware`]).
    ProgramAware,
}

/// The limits of one priority band, and its fairness policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BandLimits {
    /// Most requests queued.
    pub max_requests: u64,
    /// Most bytes queued.
    pub max_bytes: u64,
    /// How the band chooses among its flows.
    pub fairness: Fairness,
    /// Which request of a flow goes first.
    pub ordering: OrderingPolicy,
}

impl BandLimits {
    /// Upstream's per-band default `maxRequests`.
    pub const DEFAULT_MAX_REQUESTS: u64 = 5000;
    /// Upstream's per-band default `maxBytes` (1G).
    pub const DEFAULT_MAX_BYTES: u64 = 1_000_000_000;
}

impl Default for BandLimits {
    fn default() -> Self {
        BandLimits {
            max_requests: Self::DEFAULT_MAX_REQUESTS,
            max_bytes: Self::DEFAULT_MAX_BYTES,
            fairness: Fairness::RoundRobin,
            ordering: OrderingPolicy::Fcfs,
        }
    }
}

/// A validated flow-control configuration: what [`FlowQueue`](super::FlowQueue) and the
/// driver run with.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSettings {
    /// How long a request may wait while the pool has endpoints; `None`: no limit.
    pub ttl: Option<Duration>,
    /// How long a request may wait while the pool has no endpoint: `None` follows
    /// [`ttl`](Self::ttl), `Some(None)` is no limit.
    pub no_endpoint_ttl: Option<Option<Duration>>,
    /// Most requests queued over all bands; `None`: no global limit.
    pub max_requests: Option<u64>,
    /// Most bytes queued over all bands; `None`: no global limit.
    pub max_bytes: Option<u64>,
    /// Bands configured explicitly, by priority (the first entry for a priority counts).
    pub bands: Vec<(i32, BandLimits)>,
    /// Limits of the other non-negative priorities.
    pub default_band: BandLimits,
    /// Limits of the other negative priorities.
    pub default_negative_band: BandLimits,
    /// The saturation detector.
    pub detector: Detector,
    /// How full the pool may get before each priority is held back.
    pub usage_limit: UsageLimitPolicy,
    /// The parameters of `program-aware-fairness` (the first instance a band names), for
    /// the bands whose fairness is [`Fairness::ProgramAware`].
    pub program_aware: ProgramAwareSettings,
    /// Whether in-flight sheddable requests are evicted for blocked higher bands
    /// (`enableEviction`; see [`eviction`](super::eviction)).
    pub enable_eviction: bool,
}

impl FlowSettings {
    /// The default time-to-live of a queued request.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(60);

    /// The wait budget while the pool has no endpoint (`None`: no limit).
    pub fn no_endpoint_budget(&self) -> Option<Duration> {
        self.no_endpoint_ttl.unwrap_or(self.ttl)
    }

    /// Whether any band uses `program-aware-fairness`.
    pub fn uses_program_aware(&self) -> bool {
        [self.default_band, self.default_negative_band]
            .iter()
            .chain(self.bands.iter().map(|(_, b)| b))
            .any(|b| b.fairness == Fairness::ProgramAware)
    }

    /// The limits of the band for `priority`.
    pub fn band_limits(&self, priority: i32) -> BandLimits {
        match self.bands.iter().find(|(p, _)| *p == priority) {
            Some((_, limits)) => *limits,
            None if priority < 0 => self.default_negative_band,
            None => self.default_band,
        }
    }
}

impl Default for FlowSettings {
    fn default() -> Self {
        FlowSettings {
            ttl: Some(Self::DEFAULT_TTL),
            no_endpoint_ttl: None,
            max_requests: None,
            max_bytes: None,
            bands: Vec::new(),
            default_band: BandLimits::default(),
            default_negative_band: BandLimits::default(),
            detector: Detector::default(),
            usage_limit: UsageLimitPolicy::default(),
            program_aware: ProgramAwareSettings::default(),
            enable_eviction: false,
        }
    }
}

impl FlowControlConfig {
    /// Reads the `flowControl` section of a parsed picker config (kept among its
    /// unrecognised sections), validated, with the detector resolved against its `plugins`;
    /// `Ok(None)` when the section is absent.
    pub fn from_picker_config(
        config: &EndpointPickerConfig,
    ) -> Result<Option<FlowSettings>, FlowConfigError> {
        let Some(section) = config.other.get("flowControl") else {
            return Ok(None);
        };
        let mut parsed = FlowControlConfig::deserialize(section)
            .map_err(|e| FlowConfigError::Syntax(e.to_string()))?;
        if parsed.saturation_detector.is_none()
            && let Some(detector) = &config.saturation_detector
        {
            // The deprecated top-level `saturationDetector`, read as upstream reads it.
            parsed.saturation_detector = Some(SaturationDetectorConfig {
                plugin_ref: Some(detector.plugin_ref.clone()),
            });
        }
        parsed.validate(&config.plugins).map(Some)
    }

    /// Validates the section; `plugins` are the config's plugin instances, against which
    /// `saturationDetector.pluginRef` is resolved (a bare detector type name also works).
    pub fn validate(&self, plugins: &[PluginSpec]) -> Result<FlowSettings, FlowConfigError> {
        let ttl = match self.default_request_ttl {
            None => Some(FlowSettings::DEFAULT_TTL),
            Some(GoDuration(d)) if d.is_zero() => None,
            Some(GoDuration(d)) => Some(d),
        };
        let no_endpoint_ttl = self
            .no_endpoint_request_ttl
            .map(|GoDuration(d)| (!d.is_zero()).then_some(d));
        let global = |q: Option<Quantity>| q.map(|q| q.0).filter(|&n| n > 0);
        let default_band = match &self.default_priority_band {
            Some(b) => band(
                "flowControl.defaultPriorityBand",
                b,
                BandLimits::default(),
                plugins,
            )?,
            None => BandLimits::default(),
        };
        let default_negative_band = match &self.default_negative_priority_band {
            Some(b) => band(
                "flowControl.defaultNegativePriorityBand",
                b,
                default_band,
                plugins,
            )?,
            None => default_band,
        };
        let mut bands = Vec::with_capacity(self.priority_bands.len());
        for (i, b) in self.priority_bands.iter().enumerate() {
            let path = format!("flowControl.priorityBands[{i}]");
            // Explicit bands fall back to the system defaults, as upstream.
            bands.push((b.priority, band(&path, b, BandLimits::default(), plugins)?));
        }
        bands.sort_by_key(|(p, _)| *p);
        if let Some(w) = bands.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(invalid(
                "flowControl.priorityBands",
                &format!("priority {} is configured twice", w[0].0),
            ));
        }
        Ok(FlowSettings {
            ttl,
            no_endpoint_ttl,
            max_requests: global(self.max_requests),
            max_bytes: global(self.max_bytes),
            bands,
            default_band,
            default_negative_band,
            detector: self.detector(plugins)?,
            usage_limit: self.usage_limit(plugins)?,
            program_aware: self.program_aware(plugins)?,
            enable_eviction: self.enable_eviction,
        })
    }

    /// The parameters of the first `program-aware-fairness` instance a band names (upstream's
    /// defaults when none does).
    fn program_aware(
        &self,
        plugins: &[PluginSpec],
    ) -> Result<ProgramAwareSettings, FlowConfigError> {
        let references = [
            &self.default_priority_band,
            &self.default_negative_priority_band,
        ]
        .into_iter()
        .flatten()
        .chain(&self.priority_bands)
        .filter_map(|b| b.fairness_policy_ref.as_deref());
        for reference in references {
            match plugins.iter().find(|p| p.name() == reference) {
                Some(p) if p.plugin_type == PROGRAM_AWARE_FAIRNESS_POLICY => {
                    return ProgramAwareSettings::from_parameters(&p.parameters);
                }
                None if reference == PROGRAM_AWARE_FAIRNESS_POLICY => {
                    return Ok(ProgramAwareSettings::default());
                }
                _ => {}
            }
        }
        Ok(ProgramAwareSettings::default())
    }

    fn usage_limit(&self, plugins: &[PluginSpec]) -> Result<UsageLimitPolicy, FlowConfigError> {
        let Some(reference) = self.usage_limit_policy_plugin_ref.as_deref() else {
            return Ok(UsageLimitPolicy::default());
        };
        match plugins.iter().find(|p| p.name() == reference) {
            Some(p) => UsageLimitPolicy::from_plugin(&p.plugin_type, &p.parameters),
            None => UsageLimitPolicy::from_plugin(reference, &serde_json::Value::Null),
        }
    }

    fn detector(&self, plugins: &[PluginSpec]) -> Result<Detector, FlowConfigError> {
        // Absent, upstream refers to the plugin named `utilization-detector` (a plugin of that
        // type without a name has that name), or that detector with its defaults.
        let reference = self
            .saturation_detector
            .as_ref()
            .and_then(|s| s.plugin_ref.as_deref())
            .unwrap_or(UtilizationDetector::TYPE);
        match plugins.iter().find(|p| p.name() == reference) {
            Some(p) => Detector::from_plugin(&p.plugin_type, &p.parameters),
            None => Detector::from_plugin(reference, &serde_json::Value::Null),
        }
    }
}

/// Shepherd's default fairness policy.
pub const ROUND_ROBIN_FAIRNESS_POLICY: &str = "round-robin-fairness-policy";
/// Upstream's default fairness policy (one arrival order across the band's flows).
pub const GLOBAL_STRICT_FAIRNESS_POLICY: &str = "global-strict-fairness-policy";
pub use super::ordering::{
    EDF_ORDERING_POLICY, FCFS_ORDERING_POLICY, SLO_DEADLINE_ORDERING_POLICY,
};

fn band(
    path: &str,
    b: &PriorityBandConfig,
    fallback: BandLimits,
    plugins: &[PluginSpec],
) -> Result<BandLimits, FlowConfigError> {
    let fairness_path = format!("{path}.fairnessPolicyRef");
    let fairness = match b.fairness_policy_ref.as_deref() {
        None => fallback.fairness,
        Some(reference) => {
            let strict = check_policy(
                &fairness_path,
                Some(reference),
                GLOBAL_STRICT_FAIRNESS_POLICY,
                plugins,
            );
            let program_aware = check_policy(
                &fairness_path,
                Some(reference),
                PROGRAM_AWARE_FAIRNESS_POLICY,
                plugins,
            );
            match (strict, program_aware) {
                (Ok(()), _) => Fairness::GlobalStrict,
                (_, Ok(())) => Fairness::ProgramAware,
                _ => {
                    check_policy(
                        &fairness_path,
                        Some(reference),
                        ROUND_ROBIN_FAIRNESS_POLICY,
                        plugins,
                    )?;
                    Fairness::RoundRobin
                }
            }
        }
    };
    let ordering = match b.ordering_policy_ref.as_deref() {
        None => fallback.ordering,
        Some(reference) => {
            ordering_policy(&format!("{path}.orderingPolicyRef"), reference, plugins)?
        }
    };
    let pick = |q: Option<Quantity>, d: u64| q.map(|q| q.0).filter(|&n| n > 0).unwrap_or(d);
    Ok(BandLimits {
        max_requests: pick(b.max_requests, fallback.max_requests),
        max_bytes: pick(b.max_bytes, fallback.max_bytes),
        fairness,
        ordering,
    })
}

/// The ordering policy a reference names: a plugin instance of an ordering type or, as a
/// shorthand, the type itself.
fn ordering_policy(
    path: &str,
    reference: &str,
    plugins: &[PluginSpec],
) -> Result<OrderingPolicy, FlowConfigError> {
    let plugin_type = plugins
        .iter()
        .find(|p| p.name() == reference)
        .map_or(reference, |p| p.plugin_type.as_str());
    if let Some(policy) = OrderingPolicy::from_type(plugin_type) {
        return Ok(policy);
    }
    let message = match crate::config::not_implemented_message(plugin_type) {
        Some(not_yet) => format!("`{reference}`: {not_yet}"),
        None => format!(
            "`{reference}` ({plugin_type}) is not an ordering policy (expected {FCFS_ORDERING_POLICY}, {EDF_ORDERING_POLICY} or {SLO_DEADLINE_ORDERING_POLICY})"
        ),
    };
    Err(invalid(path, &message))
}

/// A policy reference names a plugin instance (or, as a shorthand, a type); its type must be
/// the one policy Shepherd implements.
fn check_policy(
    path: &str,
    reference: Option<&str>,
    supported: &str,
    plugins: &[PluginSpec],
) -> Result<(), FlowConfigError> {
    let Some(reference) = reference else {
        return Ok(());
    };
    let plugin_type = plugins
        .iter()
        .find(|p| p.name() == reference)
        .map_or(reference, |p| p.plugin_type.as_str());
    if plugin_type == supported {
        return Ok(());
    }
    let message = match crate::config::not_implemented_message(plugin_type) {
        Some(not_yet) => format!("`{reference}`: {not_yet}"),
        None => format!("`{reference}` ({plugin_type}) is not supported (only {supported})"),
    };
    Err(invalid(path, &message))
}

fn invalid(field: &str, message: &str) -> FlowConfigError {
    FlowConfigError::Invalid {
        field: field.to_owned(),
        message: message.to_owned(),
    }
}
