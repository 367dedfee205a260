//! The pending prefill *left* on a candidate: of the prefill tokens this scheduler sent there
//! whose first token is not back, the part not yet done if the endpoint drains them at a
//! rate learned with the model.
//!
//! Pending tokens alone overstate a prefill that started long ago: a 16k-token document sent
//! 500 ms ago to a server that prefills 32k tokens a second is done, and a chat request sent
//! behind it now waits for nothing. What is left is `max(0, pending − rate × age)`, with `age`
//! the pending requests' time since they were sent, summed. A linear model cannot express
//! that kink, so the model takes the hinge itself as a feature, for a drain rate chosen at
//! refit time: the rate, on a geometric grid and then refined around the best, whose fit has
//! the least weighted error over the window. The rate is one number per model — the pool's
//! prefill speed as the requests' latencies show it — so it is also worth reading
//! ([`LatencyModel::drain_rate`](super::LatencyModel::drain_rate)).
//!
//! ```
//! use shepherd_scorers::latency::{LatencyFeatures, LatencyModel, LatencyModelParameters};
//!
//! // Endpoints that prefill 40k tokens/s, one request at a time, first come first served:
//! // a request waits for whatever of the earlier prefills is left, then for its own.
//! let model = LatencyModel::new(LatencyModelParameters { min_samples: 50, ..Default::default() });
//! for i in 0..600u32 {
//!     let pending = f64::from(i % 7) * 4000.0;
//!     let age_ms = f64::from(i % 11) * 60.0;
//!     let left = (pending - 40.0 * age_ms).max(0.0);
//!     let f = LatencyFeatures {
//!         uncached_tokens: 1000.0 + f64::from(i % 5) * 500.0,
//!         pending_prefill_tokens: pending,
//!         pending_prefill_age_ms: age_ms,
//!         ..LatencyFeatures::default()
//!     };
//!     let ttft = 5.0 + (left + f.uncached_tokens) / 40.0;
//!     model.learn(&f, Some(ttft), Some(7.0));
//! }
//! let rate = model.drain_rate().unwrap();
//! assert!((rate - 40.0).abs() < 4.0, "{rate}k tokens/s");
//! ```

use super::NormalEquations;
use super::features::DESIGN;

/// Index of the pending prefill tokens (thousands) in the design vector.
pub(super) const PENDING: usize = 3;

/// Index of the pending prefills' summed age (seconds) in the design vector; the model
/// replaces it by the pending prefill left ([`with_left`]).
pub(super) const PENDING_AGE: usize = 9;

/// `x` with its pending prefills' age replaced by the pending prefill left (thousand tokens)
/// at `rate` (thousand tokens per second).
#[inline(always)]
pub(super) fn with_left(x: &[f64; DESIGN], rate: f64) -> [f64; DESIGN] {
    let mut x = *x;
    x[PENDING_AGE] = left(x[PENDING], x[PENDING_AGE], rate);
    x
}

/// The pending prefill left (thousand tokens) of `pending` thousand tokens pending for
/// `age` seconds (summed over their requests) at `rate` thousand tokens per second.
#[inline(always)]
pub(super) fn left(pending: f64, age: f64, rate: f64) -> f64 {
    (pending - rate * age).max(0.0)
}

/// The coarse grid of drain rates tried, thousand tokens per second: 1k to 512k tokens/s by
/// doublings, which spans a small GPU's prefill to a large node's.
const COARSE: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

/// Factors tried around the best coarse rate (quarter and half doublings either side).
const REFINE: [f64; 4] = [
    std::f64::consts::FRAC_1_SQRT_2,
    0.840_896_415,
    1.189_207_115,
    std::f64::consts::SQRT_2,
];

/// The weighted ridge fit of `samples` with the pending prefill left at `rate`, and its
/// weighted squared error; `None` when the system cannot be solved.
pub(super) fn fit(
    samples: impl Iterator<Item = ([f64; DESIGN], f64)> + Clone,
    rate: f64,
    lambda: f64,
) -> Option<([f64; DESIGN], f64)> {
    // Relative error is what counts: weight each sample by 1 / y², so a 10 % miss on a
    // 20 ms TTFT counts as much as one on a 2 s TTFT.
    let weight = |y: f64| 1.0 / (y * y).max(1e-6);
    let mut eq = NormalEquations::<DESIGN>::default();
    for (x, y) in samples.clone() {
        eq.add(&with_left(&x, rate), y, weight(y));
    }
    let c = eq.solve(lambda)?;
    let error = samples
        .map(|(x, y)| {
            let miss = super::model::dot(&c, &with_left(&x, rate)).max(0.0) - y;
            weight(y) * miss * miss
        })
        .sum::<f64>();
    error.is_finite().then_some((c, error))
}

/// The drain rate whose fit of `samples` has the least weighted error: the best of the coarse
/// grid, then of the refinements around it; `None` when no rate gives a solvable fit.
pub(super) fn best_rate(
    samples: impl Iterator<Item = ([f64; DESIGN], f64)> + Clone,
    lambda: f64,
) -> Option<f64> {
    let best_of = |rates: &mut dyn Iterator<Item = f64>| {
        rates
            .filter_map(|r| fit(samples.clone(), r, lambda).map(|(_, e)| (r, e)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    };
    let (coarse, error) = best_of(&mut COARSE.into_iter())?;
    let (refined, refined_error) = best_of(&mut REFINE.iter().map(|f| coarse * f))?;
    Some(if refined_error < error {
        refined
    } else {
        coarse
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_left_is_the_pending_less_what_the_rate_drained_and_never_negative() {
        let mut x = [0.0; DESIGN];
        x[PENDING] = 16.0;
        x[PENDING_AGE] = 0.25;
        assert_eq!(with_left(&x, 32.0)[PENDING_AGE], 8.0);
        assert_eq!(with_left(&x, 128.0)[PENDING_AGE], 0.0);
        // Everything else is untouched.
        assert_eq!(with_left(&x, 32.0)[PENDING], 16.0);
    }
}
