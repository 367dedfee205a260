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

pub mod max_score;
mod parameters;
pub mod random;
mod ranking;
pub mod weighted_random;

pub use max_score::MaxScorePicker;
pub use parameters::PickerParameters;
pub use random::RandomPicker;
pub use weighted_random::WeightedRandomPicker;
