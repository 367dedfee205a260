use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Threads that get a cell of their own in every striped counter; later threads share one
/// overflow cell (updated with atomic read-modify-writes, still exact).
pub(super) const THREAD_SLOTS: usize = 16;

static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's slot: `0..THREAD_SLOTS` for the first threads that count anything (each its
/// own, never shared while the process lives), `THREAD_SLOTS` (the shared overflow cell) for
/// the rest.
#[inline]
pub(super) fn thread_slot() -> usize {
    SLOT.with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT_SLOT.fetch_add(1, Ordering::Relaxed).min(THREAD_SLOTS);
        s.set(v);
        v
    })
}

/// Adds `n` to `cell` from the thread owning `slot`: a plain load and store when the slot is
/// the thread's own (one writer: nothing is lost, and no locked instruction is needed), an
/// atomic add in the shared overflow slot.
#[inline]
pub(super) fn bump(cell: &AtomicU64, slot: usize, n: u64) {
    if slot < THREAD_SLOTS {
        let v = cell.load(Ordering::Relaxed);
        cell.store(v.wrapping_add(n), Ordering::Relaxed);
    } else {
        cell.fetch_add(n, Ordering::Relaxed);
    }
}

/// One cell per cache line.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Cellule(AtomicU64);

/// A counter that many threads add to without a locked instruction or a shared cache line:
/// each of the first `THREAD_SLOTS` threads writes a cell of its own (single writer), later
/// threads share one overflow cell; a read sums the cells.
///
/// ```
/// use shepherd_scheduler_core::metrics::StripedCounter;
///
/// let c = StripedCounter::default();
/// c.add(3);
/// std::thread::scope(|s| { s.spawn(|| c.add(4)); });
/// assert_eq!(c.get(), 7);
/// ```
#[derive(Debug, Default)]
pub struct StripedCounter {
    cells: [Cellule; THREAD_SLOTS + 1],
}

impl StripedCounter {
    /// Adds `n` (wrapping at `u64::MAX`, which no real counter reaches).
    #[inline]
    pub fn add(&self, n: u64) {
        let slot = thread_slot();
        if let Some(cell) = self.cells.get(slot) {
            bump(&cell.0, slot, n);
        }
    }

    /// The sum over all cells.
    pub fn get(&self) -> u64 {
        self.cells
            .iter()
            .fold(0u64, |acc, s| acc.wrapping_add(s.0.load(Ordering::Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_threads_count_exactly() {
        let c = StripedCounter::default();
        std::thread::scope(|s| {
            for _ in 0..(THREAD_SLOTS + 8) {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        c.add(1);
                    }
                });
            }
        });
        assert_eq!(c.get(), (THREAD_SLOTS as u64 + 8) * 10_000);
    }
}
