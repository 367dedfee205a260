//! A policy plus extra config sections: how the `overload` report turns flow control on for a
//! policy without writing the policy out again.
//!
//! ```
//! use shepherd_sim::policy::{FLOW_CONTROL_OVERLAY, builtin_policy};
//!
//! let base = builtin_policy("adaptive").unwrap();
//! let with = base.with_overlay("adaptive+fc", FLOW_CONTROL_OVERLAY, "<flow-control>").unwrap();
//! assert!(with.config.other.contains_key("flowControl"));
//! // The detector and the usage-limit policy plugins.
//! assert_eq!(with.config.plugins.len(), base.config.plugins.len() + 2);
//! ```

use shepherd_scheduler_core::config::EndpointPickerConfig;

use super::Policy;
use crate::error::SimError;

/// The flow-control settings of the `overload` report (`policies/flow-control.yaml`):
/// a `concurrency-detector` plugin, a `priority-holdback-policy` plugin and a `flowControl`
/// section.
pub const FLOW_CONTROL_OVERLAY: &str = include_str!("../../policies/flow-control.yaml");

/// The same flow control without the priority-holdback usage limit
/// (`policies/flow-control-no-holdback.yaml`).
pub const FLOW_CONTROL_NO_HOLDBACK_OVERLAY: &str =
    include_str!("../../policies/flow-control-no-holdback.yaml");

/// The same flow control with the `utilization-detector` at its defaults
/// (`policies/flow-control-utilization.yaml`).
pub const FLOW_CONTROL_UTILIZATION_OVERLAY: &str =
    include_str!("../../policies/flow-control-utilization.yaml");

impl Policy {
    /// This policy named `name`, with the plugins of the config fragment `overlay` appended
    /// and its top-level sections other than plugins and profiles (such as `flowControl`)
    /// added, replacing any of the same name. `file` names the fragment in errors.
    pub fn with_overlay(&self, name: &str, overlay: &str, file: &str) -> Result<Policy, SimError> {
        let fragment = Policy::from_yaml(name, overlay, file)?.config;
        let EndpointPickerConfig {
            plugins,
            scheduling_profiles,
            adaptive,
            other,
            ..
        } = fragment;
        if !scheduling_profiles.is_empty() || adaptive.is_some() {
            return Err(SimError::yaml_input(
                file,
                0,
                "an overlay adds plugins and sections such as flowControl; it cannot replace \
                 schedulingProfiles or adaptive"
                    .into(),
            ));
        }
        let mut config = self.config.clone();
        config.plugins.extend(plugins);
        config.other.extend(other);
        Ok(Policy {
            name: name.to_string(),
            config,
        })
    }
}
