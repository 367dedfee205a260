//! Parameters shared by the pickers.

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};

use crate::error::ParameterError;

/// Parameters every built-in picker accepts (the Gateway API Inference Extension's names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PickerParameters {
    /// Most endpoints to return (primary plus fallbacks). When absent, the scheduler's
    /// `maxEndpoints` setting decides alone; when set, the smaller of the two wins.
    pub max_num_of_endpoints: Option<usize>,
}

impl PickerParameters {
    /// Reads and checks a picker's parameters from its config arguments.
    pub fn from_args(args: &PluginArgs<'_>) -> Result<Self, PluginError> {
        Ok(args.parse::<PickerParameters>()?.validate()?)
    }

    /// Checks the values.
    pub fn validate(self) -> Result<Self, ParameterError> {
        if let Some(n) = self.max_num_of_endpoints {
            ParameterError::require_positive("maxNumOfEndpoints", n)?;
        }
        Ok(self)
    }

    /// How many endpoints to return when the scheduler asks for `count` out of `available`.
    pub(crate) fn limit(self, count: usize, available: usize) -> usize {
        count
            .min(self.max_num_of_endpoints.unwrap_or(usize::MAX))
            .min(available)
    }
}
