use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stripes per counter: enough that a handful of picking threads rarely share one.
pub(super) const STRIPES: usize = 8;

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's stripe index, assigned round-robin on first use.
#[inline]
pub(super) fn stripe_index() -> usize {
    STRIPE.with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
        s.set(v);
        v
    })
}

#[derive(Debug, Default)]
#[repr(align(128))]
struct Cellule(AtomicU64);

/// A counter that many threads add to without sharing a cache line: each thread adds to its
/// own stripe, and a read sums the stripes.
///
/// ```
/// use shepherd_scheduler_core::metrics::StripedCounter;
///
/// let c = StripedCounter::default();
/// c.add(3);
/// c.add(4);
/// assert_eq!(c.get(), 7);
/// ```
#[derive(Debug, Default)]
pub struct StripedCounter {
    stripes: [Cellule; STRIPES],
}

impl StripedCounter {
    /// Adds `n` (wrapping at `u64::MAX`, which no real counter reaches).
    #[inline]
    pub fn add(&self, n: u64) {
        self.stripes[stripe_index()]
            .0
            .fetch_add(n, Ordering::Relaxed);
    }

    /// The sum over all stripes.
    pub fn get(&self) -> u64 {
        self.stripes
            .iter()
            .fold(0u64, |acc, s| acc.wrapping_add(s.0.load(Ordering::Relaxed)))
    }
}
