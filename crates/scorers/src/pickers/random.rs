//! `random-picker`: ignores the scores and picks uniformly at random; fallbacks are further
//! uniform draws without replacement.
//!
//! ```
//! use shepherd_scheduler_core::{plugin::Picker, rng::PickRng};
//! use shepherd_scorers::pickers::RandomPicker;
//!
//! let picked = RandomPicker::default().pick(&[0.0; 5], 3, &mut PickRng::seed_from(7));
//! assert_eq!(picked.len(), 3);
//! ```

use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::plugin::{Picker, PluginInstance};
use shepherd_scheduler_core::rng::PickRng;

use super::PickerParameters;

/// Registry type name.
pub const TYPE_NAME: &str = "random-picker";

/// Uniform random choice, without replacement for the fallbacks.
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomPicker {
    parameters: PickerParameters,
}

impl RandomPicker {
    /// A picker with `parameters`.
    pub fn new(parameters: PickerParameters) -> Self {
        RandomPicker { parameters }
    }
}

impl Picker for RandomPicker {
    fn max_endpoints(&self) -> Option<usize> {
        self.parameters.max_num_of_endpoints
    }

    fn pick(&self, totals: &[f64], count: usize, rng: &mut PickRng) -> Vec<usize> {
        let count = self.parameters.limit(count, totals.len());
        // Partial Fisher-Yates: the first `count` slots end up a uniform sample, in random order.
        let mut order: Vec<usize> = (0..totals.len()).collect();
        for i in 0..count {
            let j = i + rng.below(order.len() - i);
            order.swap(i, j);
        }
        order.truncate(count);
        order
    }
}

/// Builds a `random-picker` (parameter: `maxNumOfEndpoints`).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters = PickerParameters::from_args(args)?;
    Ok(PluginInstance::picker(Arc::new(RandomPicker::new(
        parameters,
    ))))
}
