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

/// Entries of the design vector after the constant and the uncached tokens' two
/// ([`RawFeatures::load_terms`]).
pub const LOAD_TERMS: usize = DESIGN - 3;

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
    /// Requests in flight there, from this scheduler and its peers.
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

/// Longest metrics age read, in nanoseconds (a minute: the design vector takes no more).
pub const MAX_AGE_NANOS: u64 = 60_000_000_000;

/// Nanoseconds as milliseconds.
#[inline]
fn nanos_ms(nanos: u64) -> f64 {
    nanos as f64 * 1e-6
}

/// One candidate's figures as read at pick time, before any conversion: integer counts, the
/// scraped KV utilization, and ages in nanoseconds. [`RawFeatures::design`] turns them into
/// the design vector without the checks garbage floats need (only the KV utilization is a
/// float); the [`LatencyFeatures`] made from them give the same design vector.
///
/// ```
/// use shepherd_scorers::latency::{LatencyFeatures, RawFeatures};
///
/// let raw = RawFeatures { uncached_tokens: 1500, waiting: 2, metrics_age_nanos: 40_000_000, ..RawFeatures::default() };
/// assert_eq!(raw.design(), LatencyFeatures::from(raw).design());
/// assert_eq!(LatencyFeatures::from(raw).metrics_age_ms, 40.0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RawFeatures {
    /// Prompt tokens of the request.
    pub prompt_tokens: u64,
    /// Of those, tokens the candidate is not believed to cache.
    pub uncached_tokens: u64,
    /// Prefill tokens this scheduler sent to the candidate whose first token is not back.
    pub pending_prefill_tokens: u64,
    /// Nanoseconds since those requests were sent, summed over them.
    pub pending_prefill_age_nanos: u64,
    /// Requests waiting on the candidate (scraped).
    pub waiting: u32,
    /// Requests running on the candidate (scraped).
    pub running: u32,
    /// Requests in flight there, from this scheduler and its peers.
    pub in_flight: u64,
    /// KV-cache utilization (scraped; anything, it is clamped).
    pub kv_utilization: f64,
    /// Nanoseconds since the candidate's metrics were scraped (taken at most
    /// [`MAX_AGE_NANOS`]).
    pub metrics_age_nanos: u64,
}

impl RawFeatures {
    /// The design vector: the same as [`LatencyFeatures::design`] of
    /// `LatencyFeatures::from(self)`, bit for bit. It is the constant,
    /// [`RawFeatures::uncached_terms`] and [`RawFeatures::load_terms`], in that order.
    #[inline]
    pub fn design(&self) -> [f64; DESIGN] {
        design_of(
            Self::uncached_terms(self.uncached_tokens),
            self.load_terms(),
        )
    }

    /// The design vector's entries for `uncached` prompt tokens: thousands of them, and its
    /// square (entries 1 and 2). They depend on the candidate only through its cached
    /// prefix, so the candidates caching none of the prompt share them.
    #[inline]
    pub fn uncached_terms(uncached: u64) -> [f64; 2] {
        let uncached = count_of(uncached) * 1e-3;
        [uncached, uncached * uncached]
    }

    /// The design vector's entries after the uncached tokens' (entries 3 to 9): the
    /// candidate's load and how old its figures are.
    #[inline]
    pub fn load_terms(&self) -> [f64; LOAD_TERMS] {
        // Under a minute, the nanoseconds convert as a signed integer (one instruction) to
        // the value an unsigned conversion gives; the milliseconds are then at most 60 000,
        // finite and non-negative, which is what the float path's clamp leaves them.
        let metrics_ms = self.metrics_age_nanos.min(MAX_AGE_NANOS) as i64 as f64 * 1e-6;
        load_terms_from(
            [
                count_of(self.pending_prefill_tokens) * 1e-3,
                count_of(u64::from(self.waiting)),
                count_of(u64::from(self.running)),
                count_of(self.in_flight),
            ],
            self.kv_utilization,
            (metrics_ms * 1e-3).min(MAX_AGE_S),
            nanos_ms(self.pending_prefill_age_nanos).min(MAX_COUNT) * 1e-3,
        )
    }
}

impl From<RawFeatures> for LatencyFeatures {
    fn from(raw: RawFeatures) -> Self {
        LatencyFeatures {
            prompt_tokens: raw.prompt_tokens as f64,
            uncached_tokens: raw.uncached_tokens as f64,
            pending_prefill_tokens: raw.pending_prefill_tokens as f64,
            pending_prefill_age_ms: nanos_ms(raw.pending_prefill_age_nanos),
            waiting: f64::from(raw.waiting),
            running: f64::from(raw.running),
            in_flight: raw.in_flight as f64,
            kv_utilization: raw.kv_utilization,
            metrics_age_ms: nanos_ms(raw.metrics_age_nanos.min(MAX_AGE_NANOS)),
        }
    }
}

impl LatencyFeatures {
    /// The design vector: every feature clamped to a sane range (non-finite → 0), token
    /// counts in thousands.
    #[inline]
    pub fn design(&self) -> [f64; DESIGN] {
        let kilo = |v: f64| count(v) * 1e-3;
        let uncached = kilo(self.uncached_tokens);
        let load = load_terms_from(
            [
                kilo(self.pending_prefill_tokens),
                count(self.waiting),
                count(self.running),
                count(self.in_flight),
            ],
            self.kv_utilization,
            (count(self.metrics_age_ms) * 1e-3).min(MAX_AGE_S),
            count(self.pending_prefill_age_ms) * 1e-3,
        );
        design_of([uncached, uncached * uncached], load)
    }
}

/// The design vector: the constant, the uncached tokens' two entries, the load's.
#[inline]
fn design_of(uncached: [f64; 2], load: [f64; LOAD_TERMS]) -> [f64; DESIGN] {
    let mut x = [1.0; DESIGN];
    x[1..3].copy_from_slice(&uncached);
    x[3..].copy_from_slice(&load);
    x
}

/// The design vector's load entries ([`RawFeatures::load_terms`]) from the clamped counts
/// (pending tokens in thousands), the raw KV utilization, and the clamped metrics age and
/// pending prefills' age, in seconds.
#[inline]
fn load_terms_from(
    counts: [f64; 4],
    kv_utilization: f64,
    metrics_age_s: f64,
    pending_prefill_age_s: f64,
) -> [f64; LOAD_TERMS] {
    let [pending, waiting, running, in_flight] = counts;
    let kv = if kv_utilization.is_finite() {
        kv_utilization.clamp(0.0, 1.0)
    } else {
        0.0
    };
    [
        pending,
        waiting,
        running,
        in_flight,
        kv,
        metrics_age_s,
        pending_prefill_age_s,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
    /// The raw figures give the design vector the float features made from them give.
    #[test]
    fn raw_design_is_the_features_design(
        counts in proptest::array::uniform3(prop_oneof![0u64..3_000_000, Just(u64::MAX)]),
        in_flight in prop_oneof![0u64..3_000_000, Just(u64::MAX)],
        queues in proptest::array::uniform2(prop_oneof![0u32..3_000_000, Just(u32::MAX)]),
        kv in prop_oneof![-1.0..2.0f64, Just(f64::NAN), Just(f64::INFINITY)],
        age in prop_oneof![0u64..100_000_000_000, Just(MAX_AGE_NANOS), Just(u64::MAX)],
        pending_age in prop_oneof![0u64..2_000_000_000_000, Just(u64::MAX)],
    ) {
        let [prompt, uncached, pending] = counts;
        let raw = RawFeatures {
            prompt_tokens: prompt,
            uncached_tokens: uncached,
            pending_prefill_tokens: pending,
            pending_prefill_age_nanos: pending_age,
            waiting: queues[0],
            running: queues[1],
            in_flight,
            kv_utilization: kv,
            metrics_age_nanos: age,
        };
        let a = raw.design().map(f64::to_bits);
        let b = LatencyFeatures::from(raw).design().map(f64::to_bits);
        prop_assert_eq!(a, b);
    }
    }
}
