//! The crate's error type.

use thiserror::Error;

/// What can go wrong in this crate: a metrics page that is refused as a whole, or
/// configuration that does not make sense.
///
/// A malformed *line* of a metrics page is not an `Error`: the parser skips it and reports it
/// as a [`LineError`](crate::prom::LineError) beside the samples it could read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// The metrics page is larger than [`MAX_INPUT_BYTES`](crate::prom::MAX_INPUT_BYTES).
    #[error("metrics page of {size} bytes is over the {limit}-byte limit")]
    InputTooLarge {
        /// Size of the page in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// A metric specification (`name` or `name{label=value,...}`) does not parse.
    #[error("invalid metric spec {spec:?}: {reason}")]
    InvalidSpec {
        /// The specification as written.
        spec: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A plugin parameter has a value that cannot be used.
    #[error("invalid parameter `{parameter}` = {value:?}: {reason}")]
    InvalidParameter {
        /// The parameter's name as written in the configuration.
        parameter: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}
