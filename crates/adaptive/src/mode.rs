//! The configurator's modes and the loop's state between ticks.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The configurator's mode. Each mode has its own curve and share range, so within a mode the
/// Distribution share is monotonic in the smoothed signal; the switch between modes follows the
/// hysteresis thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Normal operation: weights close to the configured ones.
    Steady,
    /// The pool is imbalanced: Distribution scorers get most of the budget.
    Burst,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Steady => "steady",
            Mode::Burst => "burst",
        })
    }
}

/// When the current mode was entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModeEntry {
    /// Index of the tick that entered it.
    pub tick: u64,
    /// Time of that tick, in nanoseconds since the clock's origin.
    pub at_nanos: u64,
}

/// Everything the adaptive loop carries from one tick to the next.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdaptiveState {
    /// Ticks taken so far (the index of the next tick).
    pub ticks: u64,
    /// r, the smoothed signal, in `[0, 1]`.
    pub smoothed: f64,
    /// The current mode.
    pub mode: Mode,
    /// When the current mode was entered; `None` for the initial mode, which may be left at
    /// once (no dwell applies to it).
    pub mode_entered: Option<ModeEntry>,
    /// The Distribution share of the budget in force.
    pub distribution_share: f64,
    /// The weights in force, in the profile's scorer order.
    pub weights: Vec<f64>,
}
