//! Scorer weights that can change at run time without the request path ever locking.
//!
//! Each [`Profile`](crate::profile::Profile) owns a [`Weights`] cell holding a [`WeightTable`]
//! aligned with its scorers. The request path loads it (one atomic load); the adaptive
//! controller stores a new table whenever it decides to.
//!
//! ```
//! use shepherd_scheduler_core::weights::{WeightTable, Weights};
//!
//! let weights = Weights::new(WeightTable::new(vec![3.0, 2.0, 2.0]));
//! assert_eq!(weights.load().get(0), 3.0);
//! weights.store(WeightTable::new(vec![1.0, 3.0, 3.0]).with_reason("burst"));
//! assert_eq!(weights.load().get(1), 3.0);
//! assert_eq!(weights.configured().get(0), 3.0);
//! ```

use std::sync::Arc;

use arc_swap::ArcSwap;

/// One weight per scorer of a profile, in the profile's scorer order.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightTable {
    weights: Vec<f64>,
    reason: Arc<str>,
}

impl WeightTable {
    /// A table of `weights` (negative, NaN and infinite weights become 0).
    pub fn new(weights: Vec<f64>) -> Self {
        let weights = weights
            .into_iter()
            .map(|w| if w.is_finite() && w > 0.0 { w } else { 0.0 })
            .collect();
        WeightTable {
            weights,
            reason: Arc::from("configured"),
        }
    }

    /// The same table, annotated with why it was chosen.
    pub fn with_reason(mut self, reason: impl Into<Arc<str>>) -> Self {
        self.reason = reason.into();
        self
    }

    /// Weight of scorer `i` (0 when out of range).
    pub fn get(&self, i: usize) -> f64 {
        self.weights.get(i).copied().unwrap_or(0.0)
    }

    /// All weights.
    pub fn as_slice(&self) -> &[f64] {
        &self.weights
    }

    /// Number of weights.
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    /// Why this table was chosen.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// The live weights of one profile, plus the weights its config asked for.
#[derive(Debug)]
pub struct Weights {
    configured: Arc<WeightTable>,
    current: ArcSwap<WeightTable>,
}

impl Weights {
    /// Live weights starting at (and configured as) `configured`.
    pub fn new(configured: WeightTable) -> Self {
        let configured = Arc::new(configured);
        Weights {
            current: ArcSwap::new(Arc::clone(&configured)),
            configured,
        }
    }

    /// The weights in force now (lock-free).
    pub fn load(&self) -> arc_swap::Guard<Arc<WeightTable>> {
        self.current.load()
    }

    /// Replaces the weights in force. A table of the wrong length is ignored and `false`
    /// returned, so a bug elsewhere cannot silently zero a scorer.
    pub fn store(&self, table: WeightTable) -> bool {
        if table.len() != self.configured.len() {
            return false;
        }
        self.current.store(Arc::new(table));
        true
    }

    /// Restores the configured weights.
    pub fn reset(&self) {
        self.current.store(Arc::clone(&self.configured));
    }

    /// The weights the config asked for.
    pub fn configured(&self) -> &WeightTable {
        &self.configured
    }
}
