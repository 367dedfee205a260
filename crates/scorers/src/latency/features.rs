//! [`LatencyFeatures`]: what the latency model reads about one candidate at pick time, and
//! the design vector it is turned into — every feature clamped to a sane range, so garbage
//! metrics never reach the regression.
//!
//! ```
//! use shepherd_scorers::latency::{DESIGN, LatencyFeatures};
//!
//! let f = LatencyFeatures { uncached_tokens: 2000.0, running: f64::NAN, ..LatencyFeatures::default() };
//! let x = f.design();
//! assert_eq!(x.len(), DESIGN);
//! assert_eq!((x[0], x[1], x[2]), (1.0, 2.0, 4.0)); // constant, thousands of tokens, squared
//! assert_eq!(x[5], 0.0); // a NaN count reads as 0
//! ```

/// Entries of the design vector.
pub const DESIGN: usize = 10;

/// What the model reads about one candidate at pick time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencyFeatures {
    /// Prompt tokens of the request.
    pub prompt_tokens: f64,
    /// Of those, tokens the candidate is not believed to cache.
    pub uncached_tokens: f64,
    /// Prefill tokens this scheduler sent to the candidate whose first token is not back.
    pub pending_prefill_tokens: f64,
    /// Milliseconds since those requests were sent, summed over them: how far their prefill
    /// has got (a 16k-token prefill sent 400 ms ago is nearly done).
    pub pending_prefill_age_ms: f64,
    /// Requests waiting on the candidate (scraped).
    pub waiting: f64,
    /// Requests running on the candidate (scraped).
    pub running: f64,
    /// Requests this scheduler has in flight there.
    pub in_flight: f64,
    /// KV-cache utilization in [0, 1] (scraped).
    pub kv_utilization: f64,
    /// Milliseconds since the candidate's metrics were scraped (how stale the three scraped
    /// figures are); the design vector takes at most a minute.
    pub metrics_age_ms: f64,
}

/// Largest value a count feature is taken at (beyond it, garbage).
const MAX_COUNT: f64 = 1e6;

/// Largest metrics age taken, in seconds (older metrics are as good as none).
const MAX_AGE_S: f64 = 60.0;

/// `v` as a count: clamped to [0, [`MAX_COUNT`]], non-finite → 0.
#[inline]
fn count(v: f64) -> f64 {
    if v.is_finite() {
        v.clamp(0.0, MAX_COUNT)
    } else {
        0.0
    }
}

/// The integer count `v` as [`count`] takes it (the same value, without float checks).
#[inline]
fn count_of(v: u64) -> f64 {
    v.min(MAX_COUNT as u64) as f64
}

impl LatencyFeatures {
    /// The design vector: every feature clamped to a sane range (non-finite → 0), token
    /// counts in thousands.
    #[inline]
    pub fn design(&self) -> [f64; DESIGN] {
        let kilo = |v: f64| count(v) * 1e-3;
        design_from(
            [
                kilo(self.uncached_tokens),
                kilo(self.pending_prefill_tokens),
                count(self.waiting),
                count(self.running),
                count(self.in_flight),
            ],
            self.kv_utilization,
            self.metrics_age_ms,
            self.pending_prefill_age_ms,
        )
    }

    /// The design vector of features given as integer counts — `[uncached tokens, pending
    /// prefill tokens, waiting, running, in flight]` — with the KV utilization, the
    /// metrics' age and the pending prefills' summed age in ms: the same as
    /// [`LatencyFeatures::design`] of those values.
    #[inline]
    pub fn design_of_counts(
        counts: [u64; 5],
        kv_utilization: f64,
        metrics_age_ms: f64,
        pending_prefill_age_ms: f64,
    ) -> [f64; DESIGN] {
        let [uncached, pending, waiting, running, in_flight] = counts;
        design_from(
            [
                count_of(uncached) * 1e-3,
                count_of(pending) * 1e-3,
                count_of(waiting),
                count_of(running),
                count_of(in_flight),
            ],
            kv_utilization,
            metrics_age_ms,
            pending_prefill_age_ms,
        )
    }
}

/// The design vector from the clamped counts (tokens in thousands), the raw KV utilization,
/// metrics age and pending prefills' age.
#[inline]
fn design_from(
    counts: [f64; 5],
    kv_utilization: f64,
    metrics_age_ms: f64,
    pending_prefill_age_ms: f64,
) -> [f64; DESIGN] {
    let [uncached, pending, waiting, running, in_flight] = counts;
    let kv = if kv_utilization.is_finite() {
        kv_utilization.clamp(0.0, 1.0)
    } else {
        0.0
    };
    [
        1.0,
        uncached,
        uncached * uncached,
        pending,
        waiting,
        running,
        in_flight,
        kv,
        // Seconds: multiplied by 1e-3 rather than divided by 1000 (a division per candidate
        // costs more than the rest of this vector's arithmetic).
        (count(metrics_age_ms) * 1e-3).min(MAX_AGE_S),
        count(pending_prefill_age_ms) * 1e-3,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
    /// Integer counts give the design vector the float features give.
    #[test]
    fn design_of_counts_is_design(
        counts in proptest::array::uniform5(prop_oneof![0u64..3_000_000, Just(u64::MAX)]),
        kv in prop_oneof![-1.0..2.0f64, Just(f64::NAN), Just(f64::INFINITY)],
        age in prop_oneof![0.0..1e8f64, Just(f64::NAN), Just(1e6)],
        pending_age in prop_oneof![0.0..1e9f64, Just(f64::NAN), Just(f64::INFINITY)],
    ) {
        let [uncached, pending, waiting, running, in_flight] = counts.map(|c| c as f64);
        let features = LatencyFeatures {
            uncached_tokens: uncached,
            pending_prefill_tokens: pending,
            waiting,
            running,
            in_flight,
            kv_utilization: kv,
            metrics_age_ms: age,
            pending_prefill_age_ms: pending_age,
            ..LatencyFeatures::default()
        };
        let a = features.design().map(f64::to_bits);
        let b = LatencyFeatures::design_of_counts(counts, kv, age, pending_age).map(f64::to_bits);
        prop_assert_eq!(a, b);
    }
    }
}
