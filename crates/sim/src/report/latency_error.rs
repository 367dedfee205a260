//! The latency model's prediction error over seeds: for a policy with a `latency-scorer`, the
//! mean absolute percentage error (MAPE) of its TTFT and TPOT predictions, per load level (the
//! running requests of the server when it predicted, [`LOAD_LEVELS`]) and overall, as the mean
//! over seeds with its 95 % interval.
//!
//! Each run's errors are the runner's tallies ([`RunResult::latency_errors`]); a seed whose
//! model never predicted at a level (no sample there) does not count at that level, so a
//! level's interval may rest on fewer seeds than the row's.
//!
//! ```
//! use shepherd_scorers::latency::ErrorTally;
//! use shepherd_sim::report::latency_error::over_seeds;
//!
//! let tally = |sum: f64, count: u64| ErrorTally { sum: [sum, 0.0, 0.0, 0.0], count: [count, 0, 0, 0] };
//! let per_seed = [Some((tally(1.0, 10), tally(2.0, 10))), Some((tally(3.0, 10), tally(2.0, 10)))];
//! let m = over_seeds(&per_seed).unwrap();
//! let light = m.ttft.by_level[0].unwrap();
//! assert_eq!((light.mean, light.n), (0.2, 2)); // MAPE 10 % and 30 %
//! assert_eq!(m.ttft.by_level[1], None); // no seed predicted there
//! assert_eq!(m.tpot.overall.unwrap().half_width, 0.0);
//! assert!(over_seeds(&[None, None]).is_none());
//! ```
//!
//! [`RunResult::latency_errors`]: crate::runner::RunResult::latency_errors

use serde::Serialize;
use shepherd_scorers::latency::{ErrorTally, LOAD_LEVELS};

use crate::stats::Interval;

/// One target's prediction error over seeds, fractions (0.12 is 12 %).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetError {
    /// Per load level ([`level_labels`]): MAPE mean and interval over the seeds with samples
    /// at that level; `null` when none had any.
    pub by_level: Vec<Option<Interval>>,
    /// Over every level: mean and interval over the seeds.
    pub overall: Option<Interval>,
}

/// A latency model's TTFT and TPOT prediction errors over seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyError {
    /// The load levels of `by_level`, by running requests at prediction: `<8`, `<32`, `<128`,
    /// `128+`.
    pub levels: Vec<String>,
    /// Time to first token.
    pub ttft: TargetError,
    /// Time per output token.
    pub tpot: TargetError,
}

/// The labels of the load levels: `<8`, `<32`, `<128`, then `128+`.
pub fn level_labels() -> Vec<String> {
    LOAD_LEVELS
        .iter()
        .map(|b| format!("<{b}"))
        .chain(LOAD_LEVELS.last().map(|b| format!("{b}+")))
        .collect()
}

/// The TTFT and TPOT errors over the seeds' tallies (`None` when no seed has any).
pub fn over_seeds(per_seed: &[Option<(ErrorTally, ErrorTally)>]) -> Option<LatencyError> {
    let tallies: Vec<&(ErrorTally, ErrorTally)> = per_seed.iter().flatten().collect();
    if tallies.is_empty() {
        return None;
    }
    let target = |pick: fn(&(ErrorTally, ErrorTally)) -> &ErrorTally| {
        let interval =
            |samples: Vec<f64>| (!samples.is_empty()).then(|| Interval::of(&samples).rounded());
        TargetError {
            by_level: (0..=LOAD_LEVELS.len())
                .map(|i| interval(tallies.iter().filter_map(|t| pick(t).mape(i)).collect()))
                .collect(),
            overall: interval(tallies.iter().filter_map(|t| pick(t).overall()).collect()),
        }
    };
    Some(LatencyError {
        levels: level_labels(),
        ttft: target(|t| &t.0),
        tpot: target(|t| &t.1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_labelled_from_the_model_bounds() {
        assert_eq!(level_labels(), ["<8", "<32", "<128", "128+"]);
    }
}
