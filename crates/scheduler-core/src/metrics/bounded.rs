use std::collections::HashSet;
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

/// The value a [`LabelBound`] gives every value past its cap (upstream's overflow value).
pub const OVERFLOW_LABEL: &str = "other";

/// Caps the distinct values a request-derived label (a model name, a fairness id) may take:
/// the first `max` distinct values keep their own label, every later one is folded into
/// [`OVERFLOW_LABEL`], so a client sending a million model names grows no more than `max + 1`
/// series. A value once admitted always keeps its label, so paired updates (a running-request
/// gauge going up, then down) stay balanced. Values named in the configuration can be
/// [pinned](LabelBound::pin): they never count against the cap.
///
/// Reads take no lock (an atomically swapped set); admitting a new value copies the set under
/// a mutex, at most `max` times in the process's life.
///
/// ```
/// use shepherd_scheduler_core::metrics::{LabelBound, OVERFLOW_LABEL};
///
/// let models = LabelBound::new(2);
/// models.pin("llama");
/// assert_eq!(&*models.bound("a"), "a");
/// assert_eq!(&*models.bound("b"), "b");
/// assert_eq!(&*models.bound("c"), OVERFLOW_LABEL);
/// assert_eq!(&*models.bound("a"), "a");
/// assert_eq!(&*models.bound("llama"), "llama");
/// assert_eq!(models.admitted(), 2);
/// ```
#[derive(Debug)]
pub struct LabelBound {
    sets: ArcSwap<Sets>,
    admit: Mutex<()>,
    max: usize,
    overflow: Arc<str>,
}

#[derive(Debug, Default, Clone)]
struct Sets {
    /// Values admitted under the cap.
    seen: HashSet<Arc<str>>,
    /// Values that never count against it.
    pinned: HashSet<Arc<str>>,
}

impl Sets {
    fn get(&self, value: &str) -> Option<&Arc<str>> {
        self.seen.get(value).or_else(|| self.pinned.get(value))
    }
}

impl LabelBound {
    /// A bound admitting at most `max` distinct values besides pinned ones.
    pub fn new(max: usize) -> Self {
        LabelBound {
            sets: ArcSwap::from_pointee(Sets::default()),
            admit: Mutex::new(()),
            max,
            overflow: Arc::from(OVERFLOW_LABEL),
        }
    }

    /// The label for `value`: itself when pinned, admitted already, or there is room; else
    /// [`OVERFLOW_LABEL`].
    pub fn bound(&self, value: &str) -> Arc<str> {
        if let Some(v) = self.sets.load().get(value) {
            return Arc::clone(v);
        }
        let _guard = self.admit.lock();
        let current = self.sets.load_full();
        if let Some(v) = current.get(value) {
            return Arc::clone(v);
        }
        if current.seen.len() >= self.max {
            return Arc::clone(&self.overflow);
        }
        let v: Arc<str> = Arc::from(value);
        let mut next = (*current).clone();
        next.seen.insert(Arc::clone(&v));
        self.sets.store(Arc::new(next));
        v
    }

    /// Admits `value` for good without counting it against the cap (a model the configuration
    /// names).
    pub fn pin(&self, value: &str) {
        let _guard = self.admit.lock();
        let current = self.sets.load_full();
        if current.pinned.contains(value) {
            return;
        }
        let mut next = (*current).clone();
        next.pinned.insert(Arc::from(value));
        self.sets.store(Arc::new(next));
    }

    /// Distinct values admitted under the cap (pinned ones not counted).
    pub fn admitted(&self) -> usize {
        self.sets.load().seen.len()
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_folded() {
        let b = LabelBound::new(100);
        for i in 0..100_000 {
            let _ = b.bound(&format!("model-{i}"));
        }
        assert_eq!(b.admitted(), 100);
        assert_eq!(&*b.bound("model-5"), "model-5");
        assert_eq!(&*b.bound("model-500"), OVERFLOW_LABEL);
    }

    #[test]
    fn pinning_twice_counts_once() {
        let b = LabelBound::new(1);
        b.pin("x");
        b.pin("x");
        assert_eq!(b.admitted(), 0);
        assert_eq!(&*b.bound("y"), "y");
        assert_eq!(&*b.bound("z"), OVERFLOW_LABEL);
    }
}
