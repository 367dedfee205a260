//! Why an adaptive configuration was rejected.

use thiserror::Error;

/// An invalid `adaptive:` section. Every variant names the offending field, as a path inside
/// the section (for example `hysteresis.exit`).
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum AdaptiveError {
    /// The section does not match the schema (unknown field, wrong type, ...).
    #[error("adaptive: {0}")]
    Syntax(String),
    /// A number lies outside its allowed range.
    #[error("adaptive.{field}: {value} is out of range (expected {expected})")]
    OutOfRange {
        /// Field path inside the `adaptive` section.
        field: &'static str,
        /// The rejected value.
        value: f64,
        /// The allowed range, in words.
        expected: &'static str,
    },
    /// Fields are individually valid but inconsistent with each other.
    #[error("adaptive.{field}: {reason}")]
    Inconsistent {
        /// Field path inside the `adaptive` section.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}
