//! One cap on the request-body bytes buffered across every stream, and the guard through which
//! each stream holds its share.
//!
//! The per-request limit ([`ExtProcOptions::max_body_bytes`](crate::ExtProcOptions)) bounds one
//! body; without a global cap, 2,000 streams that each send 1 MiB and stall would still hold
//! 2 GiB. A [`BodyBudget`] counts the bytes every stream has reserved for its body; a stream
//! grows its [`BodyReservation`] before its buffer grows, and a growth that would take the total
//! over the cap is refused (the request is then answered 503 `body_buffer_full`, see
//! [`Rejection::BodyBufferFull`](crate::Rejection::BodyBufferFull)). The reservation is an RAII
//! guard: whatever it holds is given back when it drops, so a stream that ends in any way —
//! answered, rejected, reset, or dropped by its client — returns its bytes.
//!
//! **Small bodies keep a reserve.** A reservation that grows past [`SMALL_BODY_BYTES`] may only
//! take the total up to the cap less [`BodyBudget::reserve`] (an eighth of the cap); the last
//! eighth is for bodies that stay small. So clients parking large partial bodies fill at most
//! seven eighths of the cap, and ordinary requests (a chat prompt is a few KiB) are still
//! served while they stall.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_adapters_extproc::budget::BodyBudget;
//!
//! let budget = Arc::new(BodyBudget::new(8 << 20)); // 8 MiB; 7 MiB for large bodies
//! let mut large = budget.reservation();
//! large.grow_to(7 << 20).unwrap();
//! let mut another = budget.reservation();
//! assert!(another.grow_to(1 << 20).is_err()); // large: over seven eighths
//! assert!(another.grow_to(16 << 10).is_ok()); // small: uses the reserve
//! drop(large);
//! assert_eq!(budget.used(), 16 << 10);
//! assert_eq!(budget.refused(), 1);
//! ```

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use thiserror::Error;

/// Bodies up to this size (64 KiB) may use the whole cap, the reserve included; larger ones
/// only the cap less [`BodyBudget::reserve`].
pub const SMALL_BODY_BYTES: usize = 64 * 1024;

const BUFFERED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_extproc_buffered_body_bytes",
    "Bytes the ext_proc streams hold now: request bodies (buffer=\"body\", capacity reserved) and gRPC messages still arriving (buffer=\"message\").",
);
const LIMIT: MetricDesc<'static> = MetricDesc::new(
    "shepherd_extproc_buffered_body_limit_bytes",
    "The cap on request-body bytes held across every ext_proc stream.",
);
const PEAK: MetricDesc<'static> = MetricDesc::new(
    "shepherd_extproc_buffered_body_peak_bytes",
    "The most request-body bytes held at once since the picker started.",
);
const REFUSED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_extproc_body_buffer_full_total",
    "Refusals at the cap: requests answered 503 body_buffer_full (buffer=\"body\"), streams ended RESOURCE_EXHAUSTED for a message they declared (buffer=\"message\").",
);

/// A growth the budget refused. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("{wanted} more body bytes would take the {in_use} buffered over {ceiling} (cap {limit})")]
pub struct BudgetExhausted {
    /// Bytes the reservation asked for on top of what it held.
    pub wanted: usize,
    /// Bytes held across every stream when it asked.
    pub in_use: usize,
    /// The total this reservation may take the budget to (the cap, less the reserve for a
    /// large body).
    pub ceiling: usize,
    /// The cap.
    pub limit: usize,
}

/// The cap on buffered request-body bytes shared by every stream of a picker. See the
/// [module docs](self).
#[derive(Debug)]
pub struct BodyBudget {
    /// What it counts, its metrics' `buffer` label: `body` (request bodies being assembled)
    /// or `message` (gRPC messages still arriving, [`crate::framing`]).
    buffer: &'static str,
    limit: usize,
    reserve: usize,
    used: AtomicUsize,
    peak: AtomicUsize,
    refused: AtomicU64,
}

impl BodyBudget {
    /// A budget of `limit` bytes for request bodies, an eighth of which is kept for small
    /// bodies.
    pub fn new(limit: usize) -> Self {
        BodyBudget::counting("body", limit)
    }

    /// A budget of `limit` bytes for the gRPC messages still arriving on the streams
    /// ([`crate::framing`]), with the same reserve for small ones.
    pub fn for_messages(limit: usize) -> Self {
        BodyBudget::counting("message", limit)
    }

    fn counting(buffer: &'static str, limit: usize) -> Self {
        BodyBudget {
            buffer,
            limit,
            reserve: limit / 8,
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// A reservation holding nothing yet, charged to this budget.
    pub fn reservation(self: &Arc<Self>) -> BodyReservation {
        BodyReservation {
            budget: Some(Arc::clone(self)),
            held: 0,
        }
    }

    /// The cap, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes only bodies of at most [`SMALL_BODY_BYTES`] may use (an eighth of the cap).
    pub fn reserve(&self) -> usize {
        self.reserve
    }

    /// The largest total a body over [`SMALL_BODY_BYTES`] may take the budget to: the cap less
    /// the reserve. One body larger than this can never be buffered.
    pub fn large_body_ceiling(&self) -> usize {
        self.limit - self.reserve
    }

    /// Bytes held now, across every stream.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The most bytes held at once so far.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Growths refused so far (each one a request answered 503).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Takes `extra` more bytes for a reservation that will then hold `held_after`, if that
    /// keeps the total within the ceiling for its size.
    fn take(&self, extra: usize, held_after: usize) -> Result<(), BudgetExhausted> {
        let ceiling = if held_after <= SMALL_BODY_BYTES {
            self.limit
        } else {
            self.large_body_ceiling()
        };
        match self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(extra).filter(|total| *total <= ceiling)
            }) {
            Ok(before) => {
                self.peak.fetch_max(before + extra, Ordering::Relaxed);
                Ok(())
            }
            Err(in_use) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                Err(BudgetExhausted {
                    wanted: extra,
                    in_use,
                    ceiling,
                    limit: self.limit,
                })
            }
        }
    }

    fn give_back(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

impl MetricsSource for BodyBudget {
    fn visit_metrics(&self, visitor: &mut dyn MetricsVisitor) {
        let labels = [("buffer", self.buffer)];
        visitor.gauge(BUFFERED, &labels, self.used() as f64);
        visitor.gauge(LIMIT, &labels, self.limit as f64);
        visitor.gauge(PEAK, &labels, self.peak() as f64);
        visitor.counter(REFUSED, &labels, self.refused());
    }
}

/// The bytes one stream holds for its request body, given back when it drops. See the
/// [module docs](self).
pub struct BodyReservation {
    budget: Option<Arc<BodyBudget>>,
    held: usize,
}

impl BodyReservation {
    /// A reservation charged to no budget: it grows without limit (for a
    /// [`RequestAssembly`](crate::assembly::RequestAssembly) used on its own).
    pub fn unbudgeted() -> Self {
        BodyReservation {
            budget: None,
            held: 0,
        }
    }

    /// Bytes held.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Grows the reservation to hold `total` bytes (a smaller `total` changes nothing), or
    /// refuses if the budget cannot give the difference; a refusal holds what it held before.
    pub fn grow_to(&mut self, total: usize) -> Result<(), BudgetExhausted> {
        let Some(extra) = total.checked_sub(self.held).filter(|e| *e > 0) else {
            return Ok(());
        };
        if let Some(budget) = &self.budget {
            budget.take(extra, total)?;
        }
        self.held = total;
        Ok(())
    }

    /// Gives back everything held now (the reservation stays usable).
    pub fn release(&mut self) {
        if let Some(budget) = &self.budget {
            budget.give_back(self.held);
        }
        self.held = 0;
    }
}

impl Drop for BodyReservation {
    fn drop(&mut self) {
        self.release();
    }
}

impl fmt::Debug for BodyReservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyReservation")
            .field("held", &self.held)
            .field("budgeted", &self.budget.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_refused_growth_holds_what_it_held() {
        let budget = Arc::new(BodyBudget::new(1 << 20));
        let mut a = budget.reservation();
        a.grow_to(400 << 10).unwrap();
        let mut b = budget.reservation();
        b.grow_to(400 << 10).unwrap();
        let error = b.grow_to(600 << 10).unwrap_err();
        assert_eq!(error.wanted, 200 << 10);
        assert_eq!(error.in_use, 800 << 10);
        assert_eq!(error.ceiling, (1 << 20) - (1 << 17));
        assert_eq!(b.held(), 400 << 10);
        assert_eq!(budget.used(), 800 << 10);
        assert_eq!(budget.refused(), 1);
        drop(a);
        b.grow_to(600 << 10).unwrap();
        assert_eq!(budget.used(), 600 << 10);
        assert_eq!(budget.peak(), 800 << 10);
    }

    #[test]
    fn small_bodies_may_use_the_reserve_large_ones_may_not() {
        let budget = Arc::new(BodyBudget::new(1 << 20));
        assert_eq!(budget.large_body_ceiling(), 7 << 17);
        let mut large = budget.reservation();
        large.grow_to(7 << 17).unwrap();
        let mut more = budget.reservation();
        assert!(more.grow_to(SMALL_BODY_BYTES + 1).is_err());
        // Two small bodies fit in the reserve (128 KiB)…
        let mut small = budget.reservation();
        small.grow_to(SMALL_BODY_BYTES).unwrap();
        more.grow_to(SMALL_BODY_BYTES).unwrap();
        // … and the cap itself still holds.
        assert!(budget.reservation().grow_to(1).is_err());
        assert_eq!(budget.used(), 1 << 20);
    }

    #[test]
    fn shrinking_or_zero_changes_nothing_and_unbudgeted_grows_freely() {
        let budget = Arc::new(BodyBudget::new(100));
        let mut r = budget.reservation();
        r.grow_to(50).unwrap();
        r.grow_to(10).unwrap();
        r.grow_to(0).unwrap();
        assert_eq!((r.held(), budget.used()), (50, 50));
        r.release();
        assert_eq!((r.held(), budget.used()), (0, 0));
        let mut free = BodyReservation::unbudgeted();
        free.grow_to(usize::MAX).unwrap();
        assert_eq!(free.held(), usize::MAX);
    }

    #[test]
    fn reservations_dropped_on_other_threads_give_everything_back() {
        let budget = Arc::new(BodyBudget::new(64 << 20));
        std::thread::scope(|scope| {
            for t in 0..4 {
                let budget = Arc::clone(&budget);
                scope.spawn(move || {
                    for i in 0..2_000usize {
                        let mut r = budget.reservation();
                        let _ = r.grow_to(1 + (i * 7919 + t) % (1 << 20));
                        let _ = r.grow_to(1 + (i * 104_729 + t) % (4 << 20));
                    }
                });
            }
        });
        assert_eq!(budget.used(), 0);
        assert!(budget.peak() <= 64 << 20);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Open,
        Grow { which: usize, to: usize },
        Release { which: usize },
        Drop { which: usize },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Open),
            (any::<usize>(), 0usize..300_000).prop_map(|(which, to)| Op::Grow { which, to }),
            any::<usize>().prop_map(|which| Op::Release { which }),
            any::<usize>().prop_map(|which| Op::Drop { which }),
        ]
    }

    proptest! {
        /// Whatever the reservations do, the budget's count is the sum of what they hold, never
        /// over the cap, and zero once they are gone: the accounting never leaks.
        #[test]
        fn accounting_never_leaks(limit in 1usize..1_000_000, ops in proptest::collection::vec(op(), 0..200)) {
            let budget = Arc::new(BodyBudget::new(limit));
            let mut open: Vec<BodyReservation> = Vec::new();
            for op in ops {
                match op {
                    Op::Open => open.push(budget.reservation()),
                    Op::Grow { which, to } if !open.is_empty() => {
                        let n = open.len();
                        let r = &mut open[which % n];
                        let before = r.held();
                        match r.grow_to(to) {
                            Ok(()) => prop_assert_eq!(r.held(), before.max(to)),
                            Err(_) => prop_assert_eq!(r.held(), before),
                        }
                    }
                    Op::Release { which } if !open.is_empty() => {
                        let n = open.len();
                        open[which % n].release();
                    }
                    Op::Drop { which } if !open.is_empty() => {
                        let n = open.len();
                        open.swap_remove(which % n);
                    }
                    _ => {}
                }
                let held: usize = open.iter().map(BodyReservation::held).sum();
                prop_assert_eq!(budget.used(), held);
                prop_assert!(held <= limit);
            }
            drop(open);
            prop_assert_eq!(budget.used(), 0);
        }
    }
}
