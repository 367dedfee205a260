use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::striped::{THREAD_SLOTS, bump, thread_slot};

/// Upper bounds of the latency buckets, in nanoseconds (the last bucket is `+Inf`).
const BOUNDS_NS: [u64; 12] = [
    1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 5_000_000,
    25_000_000,
];

/// One thread's figures, on one cache line (14 × 8 = 112 bytes).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe {
    count: AtomicU64,
    sum_ns: AtomicU64,
    buckets: [AtomicU64; BOUNDS_NS.len()],
}

/// A latency histogram for the request path: microsecond-to-tens-of-milliseconds buckets,
/// written per thread like [`StripedCounter`](super::StripedCounter) (no locked instruction).
///
/// ```
/// use std::time::Duration;
/// use shepherd_scheduler_core::metrics::LatencyHistogram;
///
/// let h = LatencyHistogram::default();
/// h.observe(Duration::from_micros(3));
/// h.observe(Duration::from_millis(2));
/// let s = h.snapshot();
/// assert_eq!(s.count, 2);
/// assert_eq!(s.buckets[2], (5e-6, 1)); // one observation ≤ 5 µs
/// ```
#[derive(Debug)]
pub struct LatencyHistogram {
    stripes: Box<[Stripe]>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            stripes: (0..=THREAD_SLOTS).map(|_| Stripe::default()).collect(),
        }
    }
}

/// A histogram read at one moment: cumulative bucket counts by upper bound in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// `(upper bound in seconds, observations ≤ bound)`, increasing; `+Inf` is `count`.
    pub buckets: Vec<(f64, u64)>,
    /// Sum of the observations, in seconds.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

impl LatencyHistogram {
    /// Records one observation.
    #[inline]
    pub fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let slot = thread_slot();
        let Some(stripe) = self.stripes.get(slot) else {
            return;
        };
        bump(&stripe.count, slot, 1);
        bump(&stripe.sum_ns, slot, ns);
        if let Some(b) = BOUNDS_NS.iter().position(|&bound| ns <= bound) {
            bump(&stripe.buckets[b], slot, 1);
        }
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.stripes
            .iter()
            .fold(0u64, |a, s| a.wrapping_add(s.count.load(Ordering::Relaxed)))
    }

    /// The histogram now.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut per_bucket = [0u64; BOUNDS_NS.len()];
        let mut count = 0u64;
        let mut sum_ns = 0u64;
        for s in self.stripes.iter() {
            count = count.wrapping_add(s.count.load(Ordering::Relaxed));
            sum_ns = sum_ns.wrapping_add(s.sum_ns.load(Ordering::Relaxed));
            for (total, b) in per_bucket.iter_mut().zip(&s.buckets) {
                *total = total.wrapping_add(b.load(Ordering::Relaxed));
            }
        }
        let mut cumulative = 0u64;
        let buckets = BOUNDS_NS
            .iter()
            .zip(per_bucket)
            .map(|(&bound, n)| {
                cumulative = cumulative.wrapping_add(n);
                (bound as f64 / 1e9, cumulative.min(count))
            })
            .collect();
        HistogramSnapshot {
            buckets,
            sum: sum_ns as f64 / 1e9,
            count,
        }
    }
}
