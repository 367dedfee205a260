use std::sync::atomic::{AtomicU64, Ordering};

use super::HistogramSnapshot;
use super::striped::{THREAD_SLOTS, bump, thread_slot};

/// A histogram over fixed upper bounds of any unit (seconds, bytes, tokens, ratios), for
/// families whose buckets are given by someone else (upstream's, for example).
///
/// Two layouts: [`BucketHistogram::striped`] gives every one of the first threads a row of
/// its own (no locked instruction, no shared cache line: for a family with one series that
/// every request writes), [`BucketHistogram::shared`] keeps one row updated with atomic adds
/// (a fraction of the memory: for a family with many series, each written by few requests).
/// The sum is kept as an integer in units of `1 / scale` (`1e9` for seconds: nanoseconds),
/// so writing it takes no compare-and-swap loop.
///
/// ```
/// use shepherd_scheduler_core::metrics::BucketHistogram;
///
/// static BOUNDS: [f64; 3] = [0.1, 0.5, 1.0];
/// let h = BucketHistogram::shared(&BOUNDS, 1e9);
/// h.observe(0.05);
/// h.observe(0.7);
/// h.observe(9.0);
/// let s = h.snapshot();
/// assert_eq!(s.count, 3);
/// assert_eq!(s.buckets, vec![(0.1, 1), (0.5, 1), (1.0, 2)]);
/// assert!((s.sum - 9.75).abs() < 1e-6);
/// ```
#[derive(Debug)]
pub struct BucketHistogram {
    bounds: &'static [f64],
    scale: f64,
    /// Rows of `bounds.len() + 2` cells: the buckets, the count, the scaled sum.
    cells: Box<[AtomicU64]>,
    rows: usize,
}

impl BucketHistogram {
    /// One row per thread slot: for a series every request writes.
    pub fn striped(bounds: &'static [f64], scale: f64) -> Self {
        Self::with_rows(bounds, scale, THREAD_SLOTS + 1)
    }

    /// One row, written with atomic adds: for one of many series.
    pub fn shared(bounds: &'static [f64], scale: f64) -> Self {
        Self::with_rows(bounds, scale, 1)
    }

    fn with_rows(bounds: &'static [f64], scale: f64, rows: usize) -> Self {
        // Rows padded to whole cache lines (16 cells of 8 bytes = 128 bytes) when striped.
        let width = Self::width_of(bounds, rows);
        BucketHistogram {
            bounds,
            scale: if scale.is_finite() && scale > 0.0 {
                scale
            } else {
                1.0
            },
            cells: (0..width * rows).map(|_| AtomicU64::new(0)).collect(),
            rows,
        }
    }

    fn width_of(bounds: &[f64], rows: usize) -> usize {
        let used = bounds.len() + 2;
        if rows == 1 {
            used
        } else {
            used.div_ceil(16) * 16
        }
    }

    fn width(&self) -> usize {
        Self::width_of(self.bounds, self.rows)
    }

    /// The upper bounds.
    pub fn bounds(&self) -> &'static [f64] {
        self.bounds
    }

    /// Records one observation (NaN is ignored; a negative value counts in the first bucket).
    #[inline]
    pub fn observe(&self, value: f64) {
        if value.is_nan() {
            return;
        }
        let width = self.width();
        let (row, slot) = if self.rows == 1 {
            (0, THREAD_SLOTS)
        } else {
            let slot = thread_slot();
            (slot.min(self.rows - 1), slot)
        };
        let Some(cells) = self.cells.get(row * width..row * width + width) else {
            return;
        };
        let n = self.bounds.len();
        if let Some(b) = self.bounds.iter().position(|&bound| value <= bound) {
            bump(&cells[b], slot, 1);
        }
        bump(&cells[n], slot, 1);
        let scaled = (value.max(0.0) * self.scale).min(u64::MAX as f64) as u64;
        bump(&cells[n + 1], slot, scaled);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        let width = self.width();
        let n = self.bounds.len();
        (0..self.rows).fold(0u64, |a, r| {
            a.wrapping_add(self.cells[r * width + n].load(Ordering::Relaxed))
        })
    }

    /// Adds this histogram's figures to `into` (bucket by bucket; `into` must have the same
    /// bounds, or be empty, in which case it takes these bounds).
    pub fn add_to(&self, into: &mut HistogramSnapshot) {
        let s = self.snapshot();
        if into.buckets.is_empty() && into.count == 0 {
            *into = s;
            return;
        }
        if into.buckets.len() != s.buckets.len() {
            return;
        }
        for (a, b) in into.buckets.iter_mut().zip(&s.buckets) {
            a.1 = a.1.wrapping_add(b.1);
        }
        into.count = into.count.wrapping_add(s.count);
        into.sum += s.sum;
    }

    /// The histogram now: cumulative counts by upper bound.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let width = self.width();
        let n = self.bounds.len();
        let mut per_bucket = vec![0u64; n];
        let mut count = 0u64;
        let mut sum = 0u64;
        for r in 0..self.rows {
            let row = &self.cells[r * width..r * width + width];
            for (total, cell) in per_bucket.iter_mut().zip(row) {
                *total = total.wrapping_add(cell.load(Ordering::Relaxed));
            }
            count = count.wrapping_add(row[n].load(Ordering::Relaxed));
            sum = sum.wrapping_add(row[n + 1].load(Ordering::Relaxed));
        }
        let mut cumulative = 0u64;
        let buckets = self
            .bounds
            .iter()
            .zip(per_bucket)
            .map(|(&bound, k)| {
                cumulative = cumulative.wrapping_add(k);
                (bound, cumulative.min(count))
            })
            .collect();
        HistogramSnapshot {
            buckets,
            sum: sum as f64 / self.scale,
            count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static BOUNDS: [f64; 4] = [0.0, 0.5, 1.0, 2.0];

    #[test]
    fn striped_and_shared_agree_across_threads() {
        let striped = BucketHistogram::striped(&BOUNDS, 1e6);
        let shared = BucketHistogram::shared(&BOUNDS, 1e6);
        std::thread::scope(|s| {
            for t in 0..(THREAD_SLOTS + 4) {
                let (a, b) = (&striped, &shared);
                s.spawn(move || {
                    for i in 0..1000 {
                        let v = ((t + i) % 6) as f64 * 0.5;
                        a.observe(v);
                        b.observe(v);
                    }
                });
            }
        });
        assert_eq!(striped.snapshot(), shared.snapshot());
        assert_eq!(striped.count(), (THREAD_SLOTS as u64 + 4) * 1000);
        // 2.0 is the last finite bound; 2.5 only in +Inf.
        let s = shared.snapshot();
        assert!(s.buckets[3].1 < s.count);
    }

    #[test]
    fn zero_bucket_and_nan() {
        let h = BucketHistogram::shared(&BOUNDS, 1.0);
        h.observe(0.0);
        h.observe(f64::NAN);
        h.observe(-1.0);
        let s = h.snapshot();
        assert_eq!(s.count, 2);
        assert_eq!(s.buckets[0], (0.0, 2));
    }
}
