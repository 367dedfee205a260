//! Why a built-in plugin rejected its parameters.

use shepherd_scheduler_core::config::PluginError;
use thiserror::Error;

/// A parameter value that parses but makes no sense.
///
/// Factories turn it into the reason string of
/// [`ConfigError::BadParameters`](shepherd_scheduler_core::config::ConfigError::BadParameters),
/// which also names the plugin.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ParameterError {
    /// A count that must be at least 1 was 0.
    #[error("`{field}` must be at least 1")]
    ZeroCount {
        /// The parameter, as spelled in YAML.
        field: &'static str,
    },
    /// A number outside its allowed range.
    #[error("`{field}` must be within [{min}, {max}], got {value}")]
    OutOfRange {
        /// The parameter, as spelled in YAML.
        field: &'static str,
        /// The value given.
        value: f64,
        /// Smallest allowed value.
        min: f64,
        /// Largest allowed value.
        max: f64,
    },
}

impl ParameterError {
    /// Checks that `value` is at least 1.
    pub(crate) fn require_positive<T: Copy + PartialEq + From<u8>>(
        field: &'static str,
        value: T,
    ) -> Result<T, Self> {
        if value == T::from(0) {
            Err(ParameterError::ZeroCount { field })
        } else {
            Ok(value)
        }
    }

    /// Checks that `value` is finite and within `[min, max]`.
    pub(crate) fn require_range(
        field: &'static str,
        value: f64,
        min: f64,
        max: f64,
    ) -> Result<f64, Self> {
        if value.is_finite() && (min..=max).contains(&value) {
            Ok(value)
        } else {
            Err(ParameterError::OutOfRange {
                field,
                value,
                min,
                max,
            })
        }
    }
}

impl ParameterError {
    /// The parameter, as spelled in YAML.
    pub fn field(&self) -> &'static str {
        match self {
            ParameterError::ZeroCount { field } | ParameterError::OutOfRange { field, .. } => field,
        }
    }
}

impl From<ParameterError> for PluginError {
    fn from(e: ParameterError) -> Self {
        let reason = match &e {
            ParameterError::ZeroCount { .. } => "must be at least 1".to_string(),
            ParameterError::OutOfRange {
                value, min, max, ..
            } => format!("must be within [{min}, {max}], got {value}"),
        };
        PluginError::InvalidValue {
            parameter: e.field().to_string(),
            reason,
        }
    }
}
