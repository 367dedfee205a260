//! `header-profile-handler`: upstream's profile handler that runs the one profile a request
//! header names (`EPP-Profile: prefill`), for a coordinator that makes one scheduling call per
//! stage. The scheduler's [`HeaderProfileSelector`] does the choosing; this plugin configures
//! it and asks the adapters to copy the header.
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `headerName` | `EPP-Profile` | the header naming the profile (any case) |
//! | `defaultProfile` | `decode` | the profile run when the header is missing or blank and there are several |
//!
//! With one profile, it always runs. A header naming no configured profile fails the request
//! with HTTP 400 (upstream answers 429 and says 400 would be accurate). Alpha upstream:
//! needs `--allow-experimental-plugins`.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: prefill-filter
//! - type: decode-filter
//! - type: header-profile-handler
//! schedulingProfiles:
//! - name: prefill
//!   plugins:
//!   - pluginRef: prefill-filter
//! - name: decode
//!   plugins:
//!   - pluginRef: decode-filter
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000"]);
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! let mut request = InferenceRequest::new("r1", "m", Prompt::Text("hi".into()));
//! assert_eq!(scheduler.schedule(&request).unwrap().profile(), "decode");
//! request.headers.push(("epp-profile".into(), "prefill".into()));
//! // The one endpoint has no role label: it counts as decode, so prefill finds none.
//! assert!(scheduler.schedule(&request).is_err());
//! ```

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::request::ConfiguredHeaders;
use shepherd_scheduler_core::scheduler::HeaderProfileSelector;

/// Registry type name.
pub const TYPE_NAME: &str = "header-profile-handler";

/// `header-profile-handler` parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct HeaderProfileHandlerParameters {
    /// The header naming the profile.
    pub header_name: String,
    /// The profile run without the header.
    pub default_profile: String,
}

/// Builds a `header-profile-handler`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let p: HeaderProfileHandlerParameters = args.parse()?;
    let selector = HeaderProfileSelector::new(&p.header_name, &p.default_profile);
    if !ConfiguredHeaders::of(args.resources).add(selector.header()) {
        return Err(PluginError::invalid(
            "headerName",
            "the config's plugins read too many request headers",
        ));
    }
    Ok(PluginInstance::profile_selector(selector))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn parameters_as_upstream() {
        let p: HeaderProfileHandlerParameters =
            serde_json::from_value(serde_json::json!({"defaultProfile": "prefill"})).unwrap();
        let s = HeaderProfileSelector::new(&p.header_name, &p.default_profile);
        assert_eq!(
            (s.header(), s.default_profile()),
            ("epp-profile", "prefill")
        );
        assert!(
            serde_json::from_value::<HeaderProfileHandlerParameters>(
                serde_json::json!({"header": "x"})
            )
            .is_err()
        );
    }
}
