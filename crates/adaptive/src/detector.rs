//! The imbalance detector: normalized coefficients of variation and the combined signal.
//!
//! For values x₁..x_N (N fresh endpoints), CV(x) = σ(x)/μ(x) with the population standard
//! deviation, and nCV(x) = min(1, CV(x)/√(N − 1)). √(N − 1) is the largest CV N non-negative
//! values can have (all the mass on one of them), so nCV is 0 for a perfectly even pool and 1
//! when one endpoint carries everything. nCV is 0 when N ≤ 1 or μ = 0.
//!
//! Stale endpoints are left out: N counts fresh endpoints only. When *every* endpoint is stale
//! the reading has no signal at all and the configurator holds its state (see
//! [`Reading::signal`]). When the pool is nearly idle (total load below
//! `idleLoadPerEndpoint` × N) both nCVs are 0: a handful of requests says nothing about
//! imbalance, and at low load affinity should win.
//!
//! ```
//! use shepherd_adaptive::detector::ncv;
//!
//! assert_eq!(ncv(&[5.0, 5.0, 5.0, 5.0]), 0.0);
//! assert!((ncv(&[12.0, 0.0, 0.0, 0.0]) - 1.0).abs() < 1e-12);
//! assert_eq!(ncv(&[7.0]), 0.0);
//! ```

use serde::Serialize;

use crate::config::{AdaptiveConfig, Combine};
use crate::sample::EndpointSample;

/// nCV(x) = min(1, CV(x)/√(N − 1)); 0 for N ≤ 1, a zero mean, or non-finite values (and
/// below 10⁻¹², which is rounding noise).
pub fn ncv(values: &[f64]) -> f64 {
    let n = values.len();
    if n <= 1 {
        return 0.0;
    }
    let count = n as f64;
    let mean = values.iter().sum::<f64>() / count;
    if !(mean.is_finite() && mean > 0.0) {
        return 0.0;
    }
    let variance = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / count;
    let cv = variance.sqrt() / mean;
    let normalized = cv / (count - 1.0).sqrt();
    // Rounding leaves a tiny variance for equal values that are not exactly representable.
    if normalized.is_nan() || normalized < 1e-12 {
        0.0
    } else {
        normalized.clamp(0.0, 1.0)
    }
}

/// The part of a load nCV that chance does not explain, for M requests:
/// √(max(0, nCV² − 1/M) / (1 − 1/M)). 0 at or below chance level, 1 when one endpoint
/// carries everything (nCV = 1), non-decreasing in nCV; 0 when M ≤ 1 (nothing to balance).
///
/// ```
/// use shepherd_adaptive::detector::beyond_chance;
///
/// assert_eq!(beyond_chance(1.0, 50.0), 1.0);
/// assert_eq!(beyond_chance(0.3, 8.0), 0.0); // 8 requests: nCV² = 0.09 < 1/8
/// assert!((beyond_chance(0.378, 130.0) - 0.369).abs() < 1e-3); // 4 of 8 endpoints carry 130
/// ```
pub fn beyond_chance(ncv: f64, requests: f64) -> f64 {
    if !(requests.is_finite() && requests > 1.0 && ncv.is_finite()) {
        return 0.0;
    }
    let chance = 1.0 / requests;
    let excess = (ncv * ncv - chance).max(0.0) / (1.0 - chance);
    let v = excess.sqrt();
    if v < 1e-12 { 0.0 } else { v.clamp(0.0, 1.0) }
}

/// What the detector concluded on one tick.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reading {
    /// Endpoints in the pool.
    pub endpoints: usize,
    /// Endpoints with fresh metrics (the N of the statistics).
    pub fresh: usize,
    /// Σ pᵢ over fresh endpoints.
    pub total_load: f64,
    /// Whether the pool counted as nearly idle.
    pub idle: bool,
    /// Estimated distinct requests on fresh endpoints: Σ max(running + waiting, in-flight).
    pub requests: f64,
    /// nCV of the load (after the chance correction, when it is on).
    pub ncv_load: f64,
    /// nCV of the KV utilization, scaled by the memory pressure min(1, max(k)/`kvPressure`).
    pub ncv_kv: f64,
    /// The combined signal s ∈ [0, 1]; `None` when every endpoint was stale (nothing known,
    /// so the configurator holds its state). An empty pool gives `Some(0.0)`.
    pub signal: Option<f64>,
}

/// The largest load one endpoint counts with: far above any real request count, and far
/// enough below `f64::MAX` that sums and squares over any pool stay finite.
pub const LOAD_CEILING: f64 = 1e30;

/// A sample's load as the statistics read it: NaN and negative loads count as 0, larger ones
/// as [`LOAD_CEILING`] (samples made by [`EndpointSample::new`] are always in range; the
/// fields are public, so a hand-made one may not be).
fn load_of(sample: &EndpointSample) -> f64 {
    let load = sample.load;
    if load.is_nan() || load <= 0.0 {
        0.0
    } else {
        load.min(LOAD_CEILING)
    }
}

/// A sample's KV utilization as the statistics read it: clamped into `[0, 1]`, NaN as full
/// (what [`EndpointSample::new`] does).
fn kv_of(sample: &EndpointSample) -> f64 {
    let kv = sample.kv_utilization;
    if kv.is_nan() { 1.0 } else { kv.clamp(0.0, 1.0) }
}

/// Reads `samples` under `config`. Total for any sample values: every number in the reading
/// is finite.
pub fn detect(samples: &[EndpointSample], config: &AdaptiveConfig) -> Reading {
    let fresh: Vec<&EndpointSample> = samples.iter().filter(|s| !s.stale).collect();
    let total_load: f64 = fresh.iter().map(|s| load_of(s)).sum();
    if !samples.is_empty() && fresh.is_empty() {
        return Reading {
            endpoints: samples.len(),
            fresh: 0,
            total_load: 0.0,
            requests: 0.0,
            idle: false,
            ncv_load: 0.0,
            ncv_kv: 0.0,
            signal: None,
        };
    }
    let requests: f64 = fresh.iter().map(|s| s.requests()).sum();
    let idle = total_load < config.idle_load_per_endpoint * fresh.len() as f64;
    let (ncv_load, ncv_kv) = if idle {
        (0.0, 0.0)
    } else {
        let loads: Vec<f64> = fresh.iter().map(|s| load_of(s)).collect();
        let kvs: Vec<f64> = fresh.iter().map(|s| kv_of(s)).collect();
        let raw = ncv(&loads);
        let load = if config.signal.chance_correction {
            beyond_chance(raw, requests)
        } else {
            raw
        };
        let hottest = kvs.iter().copied().fold(0.0, f64::max);
        let pressure = (hottest / config.signal.kv_pressure).clamp(0.0, 1.0);
        (load, ncv(&kvs) * pressure)
    };
    Reading {
        endpoints: samples.len(),
        fresh: fresh.len(),
        total_load,
        requests,
        idle,
        ncv_load,
        ncv_kv,
        signal: Some(combine(ncv_load, ncv_kv, config)),
    }
}

/// Combines the two nCVs as `config.signal` says; always in `[0, 1]`.
pub fn combine(ncv_load: f64, ncv_kv: f64, config: &AdaptiveConfig) -> f64 {
    let s = &config.signal;
    let (wp, wk) = (s.load_weight, s.kv_weight);
    let value = match s.combine {
        Combine::Max => (wp * ncv_load).max(wk * ncv_kv),
        Combine::WeightedMean => {
            let total = wp + wk;
            if total > 0.0 {
                (wp * ncv_load + wk * ncv_kv) / total
            } else {
                0.0
            }
        }
    };
    if value.is_nan() {
        0.0
    } else {
        value.clamp(0.0, 1.0)
    }
}
