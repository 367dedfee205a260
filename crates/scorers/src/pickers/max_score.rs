//! `max-score-picker`: the highest total wins; fallbacks follow in descending total.
//!
//! Candidates with equal totals are ordered uniformly at random (every candidate gets an
//! independent random draw as a secondary key), so a tie never favours the first endpoint in
//! address order.
//!
//! ```
//! use shepherd_scheduler_core::{plugin::Picker, rng::PickRng};
//! use shepherd_scorers::pickers::MaxScorePicker;
//!
//! let picked = MaxScorePicker::default().pick(&[0.2, 0.9, 0.5], 2, &mut PickRng::seed_from(1));
//! assert_eq!(picked, vec![1, 2]);
//! ```

use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::plugin::{Picker, PluginInstance};
use shepherd_scheduler_core::rng::PickRng;

use super::PickerParameters;
use super::ranking::{Ranked, sane_total, top, top_into};

/// Registry type name.
pub const TYPE_NAME: &str = "max-score-picker";

/// Highest total first, ties broken uniformly at random.
#[derive(Debug, Clone, Copy, Default)]
pub struct MaxScorePicker {
    parameters: PickerParameters,
}

impl MaxScorePicker {
    /// A picker with `parameters`.
    pub fn new(parameters: PickerParameters) -> Self {
        MaxScorePicker { parameters }
    }
}

impl Picker for MaxScorePicker {
    fn max_endpoints(&self) -> Option<usize> {
        self.parameters.max_num_of_endpoints
    }

    fn pick(&self, totals: &[f64], count: usize, rng: &mut PickRng) -> Vec<usize> {
        let count = self.parameters.limit(count, totals.len());
        let ranked = totals
            .iter()
            .enumerate()
            .map(|(index, &t)| Ranked {
                key: sane_total(t),
                tie: rng.next_u64(),
                index,
            })
            .collect();
        top(ranked, count)
    }

    fn pick_into(&self, totals: &[f64], count: usize, rng: &mut PickRng, out: &mut Vec<usize>) {
        let count = self.parameters.limit(count, totals.len());
        // One draw per candidate in order, as `pick`: the same answers for the same seed.
        let ranked = totals.iter().enumerate().map(|(index, &t)| Ranked {
            key: sane_total(t),
            tie: rng.next_u64(),
            index,
        });
        top_into(ranked, totals.len(), count, out);
    }
}

/// Builds a `max-score-picker` (parameter: `maxNumOfEndpoints`).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters = PickerParameters::from_args(args)?;
    Ok(PluginInstance::picker(Arc::new(MaxScorePicker::new(
        parameters,
    ))))
}
