//! The config's `request-attribute-reporter` plugins, validated into
//! [`AttributeReporter`](crate::report::AttributeReporter)s for the scheduler the config
//! builds (adapters evaluate them when a response ends).
//!
//! ```
//! use shepherd_scheduler_core::config::EndpointPickerConfig;
//!
//! let config = EndpointPickerConfig::from_yaml(r#"
//! plugins:
//! - name: cost
//!   type: request-attribute-reporter
//!   parameters:
//!     attributes:
//!     - key: {name: x-gateway-inference-request-cost}
//!       expression: usage.completion_tokens
//! "#).unwrap();
//! let reporters = config.reporters().unwrap();
//! assert_eq!(reporters[0].key(), "x-gateway-inference-request-cost");
//!
//! let bad = EndpointPickerConfig::from_yaml(r#"
//! plugins:
//! - type: request-attribute-reporter
//!   parameters: {attributes: [{key: {name: k}, expression: "size(usage)"}]}
//! "#).unwrap();
//! assert!(bad.reporters().unwrap_err().to_string().contains("function `size`"));
//! ```

use super::{ConfigError, EndpointPickerConfig};
use crate::report::{AttributeReporter, TYPE_NAME};

impl EndpointPickerConfig {
    /// Every `request-attribute-reporter` the config declares, in declaration order.
    ///
    /// Fails with [`ConfigError::InvalidSetting`] naming the plugin when its parameters are
    /// not upstream's or an expression is outside the supported subset.
    pub fn reporters(&self) -> Result<Vec<AttributeReporter>, ConfigError> {
        self.plugins
            .iter()
            .filter(|p| p.plugin_type == TYPE_NAME)
            .map(|p| {
                AttributeReporter::from_parameters(p.name(), &p.parameters).map_err(|reason| {
                    ConfigError::InvalidSetting {
                        field: format!("plugins ({}).parameters", p.name()),
                        reason,
                    }
                })
            })
            .collect()
    }
}
