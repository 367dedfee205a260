//! The `adaptive:` section of the picker configuration.
//!
//! Every parameter is optional; a missing one takes the default documented on its field. The
//! defaults are tuned for the built-in profile (prefix 3 : queue 2 : kv 2, i.e. Affinity 3 and
//! Distribution 4 out of a budget of 7): a balanced or nearly idle pool gives back exactly the
//! configured weights, and a hot node moves up to 90 % of the budget to Distribution scorers.
//!
//! ```
//! use shepherd_adaptive::config::{AdaptiveConfig, Combine};
//! use shepherd_scheduler_core::config::EndpointPickerConfig;
//!
//! let yaml = r#"
//! adaptive:
//!   smoothing:
//!     alpha: 0.5
//!   signal:
//!     combine: weightedMean
//!   hysteresis:
//!     enter: 0.5
//!     exit: 0.3
//!   burst:
//!     maxShare: 0.95
//! "#;
//! let picker = EndpointPickerConfig::from_yaml(yaml).unwrap();
//! let config = AdaptiveConfig::from_picker_config(&picker).unwrap();
//! assert_eq!(config.smoothing.alpha, 0.5);
//! assert_eq!(config.signal.combine, Combine::WeightedMean);
//! assert_eq!(config.burst.min_share, AdaptiveConfig::default().burst.min_share);
//!
//! let bad = EndpointPickerConfig::from_yaml("adaptive:\n  hysteresis:\n    exit: 0.9\n").unwrap();
//! let err = AdaptiveConfig::from_picker_config(&bad).unwrap_err();
//! assert!(err.to_string().contains("hysteresis.exit"));
//! ```

mod curve;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use shepherd_scheduler_core::config::EndpointPickerConfig;

pub use curve::{ModeCurve, ShareBound};

use crate::error::AdaptiveError;
use curve::{Section, check};

/// Settings of the adaptive weights: detector, smoothing, hysteresis and the two mode curves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AdaptiveConfig {
    /// Whether weights adapt at all. When false every tick keeps the configured weights.
    /// Default `true`.
    pub enabled: bool,
    /// Tick interval in milliseconds, for the driver that calls the loop (1..=60000).
    /// Default 200.
    pub tick_ms: u64,
    /// The pool counts as nearly idle (signal 0) when its total load is below this many
    /// requests per fresh endpoint (≥ 0; 0 disables the idle rule). Default 1.0.
    pub idle_load_per_endpoint: f64,
    /// How the load and KV-utilization imbalances combine into one signal.
    pub signal: SignalConfig,
    /// Exponential smoothing of the signal.
    pub smoothing: SmoothingConfig,
    /// Thresholds and dwell of the `steady` / `burst` modes.
    pub hysteresis: HysteresisConfig,
    /// Curve and share range used while in `steady` mode.
    #[serde(deserialize_with = "curve::patch_steady")]
    pub steady: ModeCurve,
    /// Curve and share range used while in `burst` mode.
    #[serde(deserialize_with = "curve::patch_burst")]
    pub burst: ModeCurve,
    /// How many tick records the explanation ring keeps (1..=1000000). Default 256.
    pub history_capacity: usize,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            enabled: true,
            tick_ms: 200,
            idle_load_per_endpoint: 1.0,
            signal: SignalConfig::default(),
            smoothing: SmoothingConfig::default(),
            hysteresis: HysteresisConfig::default(),
            steady: ModeCurve::steady_default(),
            burst: ModeCurve::burst_default(),
            history_capacity: 256,
        }
    }
}

/// How the two normalized coefficients of variation become one signal s ∈ [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SignalConfig {
    /// The combination. Default `max`.
    pub combine: Combine,
    /// Weight of the load imbalance nCV(p), in `[0, 1]`. Default 1.
    pub load_weight: f64,
    /// Weight of the KV-utilization imbalance nCV(k), in `[0, 1]`. Default 1.
    pub kv_weight: f64,
    /// Count only the load imbalance chance cannot explain. M requests spread over N endpoints
    /// uniformly at random give nCV² ≈ 1/M on average, so a pool carrying a handful of
    /// requests always *looks* imbalanced; with this on, the load nCV becomes
    /// √(max(0, nCV² − 1/M) / (1 − 1/M)), which is 0 at chance level and still 1 when one
    /// endpoint carries everything (see [`crate::detector::beyond_chance`]). Default `true`.
    pub chance_correction: bool,
    /// KV-utilization imbalance counts in full only under memory pressure: nCV(k) is scaled by
    /// min(1, max(k) / `kvPressure`), so uneven KV use at a few percent (one server caching a
    /// long prompt on an otherwise idle pool) raises no alarm, while the same spread near
    /// capacity does. In `(0, 1]`; a tiny value restores the raw nCV(k). Default 0.5.
    pub kv_pressure: f64,
}

impl Default for SignalConfig {
    fn default() -> Self {
        SignalConfig {
            combine: Combine::Max,
            load_weight: 1.0,
            kv_weight: 1.0,
            chance_correction: true,
            kv_pressure: 0.5,
        }
    }
}

/// A way of combining nCV(p) and nCV(k) with weights w_p, w_k.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Combine {
    /// s = max(w_p·nCV(p), w_k·nCV(k)): either kind of imbalance alone raises the signal.
    Max,
    /// s = (w_p·nCV(p) + w_k·nCV(k)) / (w_p + w_k): both must agree to raise it fully.
    WeightedMean,
}

/// Exponential smoothing r ← α·r + (1 − α)·s.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SmoothingConfig {
    /// α, the weight kept by the previous smoothed value, in `[0, 0.99]` (0 = no smoothing).
    /// Default 0.7 (a time constant of about 3 ticks).
    pub alpha: f64,
    /// When the smoothed value comes within this distance of the signal it snaps onto it, so a
    /// steady input settles in a bounded number of ticks instead of creeping forever. In
    /// `(0, 0.5]`. Default 0.01.
    pub snap_epsilon: f64,
}

impl Default for SmoothingConfig {
    fn default() -> Self {
        SmoothingConfig {
            alpha: 0.7,
            snap_epsilon: 0.01,
        }
    }
}

/// When the configurator switches between `steady` and `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HysteresisConfig {
    /// Enter `burst` when the smoothed signal rises strictly above this, in `(0, 1)`.
    /// Default 0.40.
    pub enter: f64,
    /// Leave `burst` only when the smoothed signal falls strictly below this, in `[0, enter)`.
    /// Default 0.25.
    pub exit: f64,
    /// A mode must have lasted this many ticks before it may be left. Default 3.
    pub min_dwell_ticks: u64,
    /// ... and this many milliseconds (0 = no time requirement). Default 0.
    pub min_dwell_ms: u64,
}

impl Default for HysteresisConfig {
    fn default() -> Self {
        HysteresisConfig {
            enter: 0.40,
            exit: 0.25,
            min_dwell_ticks: 3,
            min_dwell_ms: 0,
        }
    }
}

impl AdaptiveConfig {
    /// Reads and validates the `adaptive` section of a picker configuration; defaults when the
    /// section is absent or null.
    pub fn from_picker_config(config: &EndpointPickerConfig) -> Result<Self, AdaptiveError> {
        match &config.adaptive {
            None => Ok(AdaptiveConfig::default()),
            Some(value) => AdaptiveConfig::from_value(value),
        }
    }

    /// Reads and validates an `adaptive` section given as a JSON value (null gives defaults).
    pub fn from_value(value: &serde_json::Value) -> Result<Self, AdaptiveError> {
        if value.is_null() {
            return Ok(AdaptiveConfig::default());
        }
        let config =
            AdaptiveConfig::deserialize(value).map_err(|e| AdaptiveError::Syntax(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// The tick interval.
    pub fn tick_interval(&self) -> Duration {
        Duration::from_millis(self.tick_ms)
    }

    /// Checks every field; the error names the first offending one.
    pub fn validate(&self) -> Result<(), AdaptiveError> {
        let whole = |field, value: u64, lo: u64, hi: u64, expected| {
            if (lo..=hi).contains(&value) {
                Ok(())
            } else {
                Err(AdaptiveError::OutOfRange {
                    field,
                    value: value as f64,
                    expected,
                })
            }
        };
        whole("tickMs", self.tick_ms, 1, 60_000, "1..=60000")?;
        whole(
            "historyCapacity",
            self.history_capacity as u64,
            1,
            1_000_000,
            "1..=1000000",
        )?;
        check(
            "idleLoadPerEndpoint",
            self.idle_load_per_endpoint,
            0.0,
            1e12,
            "a finite number ≥ 0",
        )?;
        check(
            "signal.loadWeight",
            self.signal.load_weight,
            0.0,
            1.0,
            "a number in [0, 1]",
        )?;
        check(
            "signal.kvWeight",
            self.signal.kv_weight,
            0.0,
            1.0,
            "a number in [0, 1]",
        )?;
        let p = self.signal.kv_pressure;
        if !(p.is_finite() && p > 0.0 && p <= 1.0) {
            return Err(AdaptiveError::OutOfRange {
                field: "signal.kvPressure",
                value: p,
                expected: "a number in (0, 1]",
            });
        }
        if self.signal.load_weight + self.signal.kv_weight <= 0.0 {
            return Err(AdaptiveError::Inconsistent {
                field: "signal",
                reason: "loadWeight and kvWeight cannot both be 0".into(),
            });
        }
        check(
            "smoothing.alpha",
            self.smoothing.alpha,
            0.0,
            0.99,
            "a number in [0, 0.99]",
        )?;
        let eps = self.smoothing.snap_epsilon;
        if !(eps.is_finite() && eps > 0.0 && eps <= 0.5) {
            return Err(AdaptiveError::OutOfRange {
                field: "smoothing.snapEpsilon",
                value: eps,
                expected: "a number in (0, 0.5]",
            });
        }
        let h = &self.hysteresis;
        if !(h.enter.is_finite() && h.enter > 0.0 && h.enter < 1.0) {
            return Err(AdaptiveError::OutOfRange {
                field: "hysteresis.enter",
                value: h.enter,
                expected: "a number in (0, 1)",
            });
        }
        check("hysteresis.exit", h.exit, 0.0, 1.0, "a number in [0, 1)")?;
        if h.exit >= h.enter {
            return Err(AdaptiveError::Inconsistent {
                field: "hysteresis.exit",
                reason: format!(
                    "exit threshold {} must be below the enter threshold {}",
                    h.exit, h.enter
                ),
            });
        }
        whole(
            "hysteresis.minDwellTicks",
            h.min_dwell_ticks,
            0,
            1_000_000,
            "0..=1000000",
        )?;
        whole(
            "hysteresis.minDwellMs",
            h.min_dwell_ms,
            0,
            86_400_000,
            "0..=86400000",
        )?;
        self.steady.validate(Section::Steady)?;
        self.burst.validate(Section::Burst)?;
        Ok(())
    }

    /// The number of ticks after which a constant input can no longer change the mode or the
    /// weights, whatever the state it started from (the *settle bound*).
    ///
    /// With constant input the signal s is constant, and the smoothed value reaches s exactly
    /// (by snapping) after m ticks, the smallest m ≥ 1 with α^m < ε (α = `smoothing.alpha`,
    /// ε = `smoothing.snapEpsilon`). Until then r moves monotonically toward s, so at most one
    /// mode change can happen, delayed at most by the dwell: d = max(`minDwellTicks`,
    /// ⌈`minDwellMs` / `tickMs`⌉) ticks. The bound is m + d: the output of every tick from
    /// index m + d − 1 on (counting the first tick with the new input as 0) is the same.
    /// With the defaults, m = 13 and d = 3, so the bound is 16 ticks (3.2 s at 200 ms).
    pub fn settle_bound_ticks(&self) -> u64 {
        let alpha = self.smoothing.alpha.clamp(0.0, 0.99);
        let eps = self.smoothing.snap_epsilon.clamp(f64::MIN_POSITIVE, 0.5);
        let mut m = 1u64;
        let mut power = alpha;
        while power >= eps && m < 100_000 {
            power *= alpha;
            m += 1;
        }
        let h = &self.hysteresis;
        let by_time = h.min_dwell_ms.div_ceil(self.tick_ms.max(1));
        m + h.min_dwell_ticks.max(by_time)
    }
}
