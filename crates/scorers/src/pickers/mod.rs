//! The built-in pickers.
//!
//! Every picker returns distinct candidate indexes, the primary first, at most `count` of them
//! (and at most `maxNumOfEndpoints` when that parameter is set), and at least one whenever there
//! is a candidate. Randomness comes only from the [`PickRng`](shepherd_scheduler_core::rng::PickRng)
//! the scheduler hands in, so a fixed seed gives fixed picks.
//!
//! | type name | primary | fallbacks |
//! |---|---|---|
//! | `max-score-picker` | highest total (ties uniformly at random) | descending total |
//! | `random-picker` | uniform | uniform, without replacement |
//! | `weighted-random-picker` | probability ∝ total | weighted sampling without replacement |

mod max_score;
mod parameters;
mod random;
mod ranking;
mod weighted_random;

pub use max_score::MaxScorePicker;
pub use parameters::PickerParameters;
pub use random::RandomPicker;
pub use weighted_random::WeightedRandomPicker;

/// Registry type names and factories of the pickers.
pub mod factories {
    pub use super::max_score::{TYPE_NAME as MAX_SCORE, factory as max_score};
    pub use super::random::{TYPE_NAME as RANDOM, factory as random};
    pub use super::weighted_random::{TYPE_NAME as WEIGHTED_RANDOM, factory as weighted_random};
}
