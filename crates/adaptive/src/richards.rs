//! The generalized logistic (Richards) curve used by the configurator.
//!
//! σ(r) = 1 / (1 + Q·e^(−k(r − r₀)))^(1/ν) is smooth, bounded in (0, 1) and increasing in r for
//! k > 0. [`RichardsCurve::unit`] rescales it over `[0, 1]` so that it starts exactly at 0 and
//! ends exactly at 1, which lets a share range be hit exactly at both ends.
//!
//! ```
//! use shepherd_adaptive::richards::RichardsCurve;
//!
//! let curve = RichardsCurve::new(0.5, 10.0, 1.0, 1.0);
//! assert!((curve.value(0.5) - 0.5).abs() < 1e-12); // the plain logistic's midpoint
//! assert_eq!(curve.unit(0.0), 0.0);
//! assert_eq!(curve.unit(1.0), 1.0);
//! assert!(curve.unit(0.3) < curve.unit(0.7));
//! ```

use serde::Serialize;

/// A Richards curve with midpoint r₀, steepness k, offset factor Q and asymmetry ν.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RichardsCurve {
    midpoint: f64,
    steepness: f64,
    q: f64,
    nu: f64,
    at_zero: f64,
    span: f64,
}

impl RichardsCurve {
    /// A curve with midpoint `midpoint` (r₀), steepness `steepness` (k > 0), offset factor `q`
    /// (Q > 0) and asymmetry `nu` (ν > 0). Parameters outside those ranges are replaced by 1
    /// (the configuration validates them before they get here).
    pub fn new(midpoint: f64, steepness: f64, q: f64, nu: f64) -> Self {
        let positive = |v: f64| if v.is_finite() && v > 0.0 { v } else { 1.0 };
        let mut curve = RichardsCurve {
            midpoint: if midpoint.is_finite() { midpoint } else { 0.5 },
            steepness: positive(steepness),
            q: positive(q),
            nu: positive(nu),
            at_zero: 0.0,
            span: 1.0,
        };
        curve.at_zero = curve.value(0.0);
        curve.span = curve.value(1.0) - curve.at_zero;
        curve
    }

    /// σ(r).
    pub fn value(&self, r: f64) -> f64 {
        // ln(1 + Q·e^z) computed without overflow, z = −k(r − r₀).
        let a = self.q.ln() - self.steepness * (r - self.midpoint);
        let log_term = if a > 35.0 { a } else { a.exp().ln_1p() };
        (-log_term / self.nu).exp()
    }

    /// σ rescaled over `[0, 1]`: 0 at r ≤ 0, 1 at r ≥ 1, non-decreasing in between.
    pub fn unit(&self, r: f64) -> f64 {
        if r.is_nan() || r <= 0.0 {
            return 0.0;
        }
        if r >= 1.0 {
            return 1.0;
        }
        if self.span.is_nan() || self.span <= 0.0 {
            // A degenerate (flat) curve: step at the midpoint.
            return if r >= self.midpoint { 1.0 } else { 0.0 };
        }
        ((self.value(r) - self.at_zero) / self.span).clamp(0.0, 1.0)
    }
}
