//! `weighted-random-picker`: picks with probability proportional to the total score.
//!
//! Uses weighted random sampling without replacement by exponential keys (Efraimidis and
//! Spirakis' A-Res, in log form): each candidate draws `u` uniform in `(0, 1]` and gets the key
//! `ln(u) / total`; the largest keys win. The primary is then drawn with probability
//! `total / Σ totals`, and each fallback likewise among those not yet drawn. Candidates with a
//! total of zero (or a negative or NaN one) come last, in random order; when every total is
//! zero the pick is uniform.
//!
//! ```
//! use shepherd_scheduler_core::{plugin::Picker, rng::PickRng};
//! use shepherd_scorers::pickers::WeightedRandomPicker;
//!
//! // The zero-total candidate is never preferred over a positive one.
//! let picked = WeightedRandomPicker::default().pick(&[0.0, 1.0, 3.0], 2, &mut PickRng::seed_from(3));
//! assert!(!picked.contains(&0));
//! ```

use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::plugin::{Picker, PluginInstance};
use shepherd_scheduler_core::rng::PickRng;

use super::PickerParameters;
use super::ranking::{Ranked, top};

/// Registry type name.
pub const TYPE_NAME: &str = "weighted-random-picker";

/// Random choice with probability ∝ total score, without replacement for the fallbacks.
#[derive(Debug, Clone, Copy, Default)]
pub struct WeightedRandomPicker {
    parameters: PickerParameters,
}

impl WeightedRandomPicker {
    /// A picker with `parameters`.
    pub fn new(parameters: PickerParameters) -> Self {
        WeightedRandomPicker { parameters }
    }
}

/// A usable weight: positive and finite, else 0.
fn weight_of(total: f64) -> f64 {
    if total.is_nan() || total <= 0.0 {
        0.0
    } else {
        total.min(f64::MAX)
    }
}

impl Picker for WeightedRandomPicker {
    fn max_endpoints(&self) -> Option<usize> {
        self.parameters.max_num_of_endpoints
    }

    fn pick(&self, totals: &[f64], count: usize, rng: &mut PickRng) -> Vec<usize> {
        let count = self.parameters.limit(count, totals.len());
        let all_zero = totals.iter().all(|&t| weight_of(t) == 0.0);
        let ranked = totals
            .iter()
            .enumerate()
            .map(|(index, &t)| {
                let weight = if all_zero { 1.0 } else { weight_of(t) };
                // u in (0, 1], so ln(u) is finite and ≤ 0.
                let u = 1.0 - rng.unit_f64();
                let key = if weight > 0.0 {
                    u.ln() / weight
                } else {
                    f64::NEG_INFINITY
                };
                Ranked {
                    key,
                    tie: rng.next_u64(),
                    index,
                }
            })
            .collect();
        top(ranked, count)
    }
}

/// Builds a `weighted-random-picker` (parameter: `maxNumOfEndpoints`).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters = PickerParameters::from_args(args)?;
    Ok(PluginInstance::picker(Arc::new(WeightedRandomPicker::new(
        parameters,
    ))))
}
