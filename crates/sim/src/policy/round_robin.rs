//! `round-robin-picker`: a sim-local picker that cycles through the candidates in order,
//! ignoring scores (the baseline every router ships).

use std::sync::atomic::{AtomicU64, Ordering};

use shepherd_scheduler_core::plugin::Picker;
use shepherd_scheduler_core::rng::PickRng;

/// Registry type name.
pub(crate) const TYPE_NAME: &str = "round-robin-picker";

/// Cycles through candidates.
#[derive(Debug, Default)]
pub struct RoundRobinPicker {
    next: AtomicU64,
}

impl Picker for RoundRobinPicker {
    fn pick(&self, totals: &[f64], count: usize, _rng: &mut PickRng) -> Vec<usize> {
        let n = totals.len();
        if n == 0 || count == 0 {
            return Vec::new();
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) as usize % n;
        (0..count.min(n)).map(|k| (start + k) % n).collect()
    }
}
