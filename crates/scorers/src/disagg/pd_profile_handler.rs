//! `pd-profile-handler`: upstream's deprecated P/D profile handler, an alias of
//! `disagg-profile-handler` with the older flat parameters. Configs of the llm-d P/D guides
//! (inference scheduler v0.2–v0.7) still name it.
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `decodeProfile` | `decode` | the decode profile |
//! | `prefillProfile` | `prefill` | the prefill profile |
//! | `deciderPluginName` | `prefix-based-pd-decider` | the decider plugin; it must be declared, as upstream |
//! | `primaryPort` | 0 | data-parallel primary port; 1–65535 when set. Shepherd sends each rank's own `ip:port` (upstream rewrites the decode target to this port, which Istio ≥ 1.28.1 no longer needs) |
//! | `prefixPluginType`, `prefixPluginName`, `prefixMatchInfoProducerName` | — | accepted, unused (upstream never used the first two) |
//!
//! Like upstream's decoder, keys it does not know are ignored (the config's warnings list
//! them). Only the decode-first order exists for this type, as upstream.
//!
//! ```
//! use shepherd_scorers::disagg::pd_profile_handler::PdProfileHandlerParameters;
//!
//! let p: PdProfileHandlerParameters = serde_json::from_value(serde_json::json!({
//!     "primaryPort": 0, "deciderPluginName": "prefix-based-pd-decider", "threshold": 100
//! })).unwrap();
//! let spec = p.spec().unwrap();
//! assert_eq!(spec.decode_profile, "decode");
//! assert_eq!(spec.prefill_decider.as_deref(), Some("prefix-based-pd-decider"));
//! ```

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::disagg::{DEFAULT_ENCODE_PROFILE, ProfileHandlerSpec, StageOrder};
use shepherd_scheduler_core::plugin::PluginInstance;

/// Registry type name.
pub const TYPE_NAME: &str = "pd-profile-handler";

/// The decider upstream names when `deciderPluginName` is not given.
pub const DEFAULT_DECIDER: &str = "prefix-based-pd-decider";

/// The parameters `pd-profile-handler` reads (see the module docs). Unknown keys are ignored,
/// as upstream's decoder ignores them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PdProfileHandlerParameters {
    /// The decode profile.
    pub decode_profile: Option<String>,
    /// The prefill profile.
    pub prefill_profile: Option<String>,
    /// The decider's plugin name.
    pub decider_plugin_name: Option<String>,
    /// The data-parallel primary port (0: none).
    pub primary_port: Option<i64>,
    /// Unused upstream.
    pub prefix_plugin_type: Option<String>,
    /// Unused upstream.
    pub prefix_plugin_name: Option<String>,
    /// Which producer's prefix matches the decider reads (Shepherd's decider reads the decode
    /// profile's own estimate).
    pub prefix_match_info_producer_name: Option<String>,
}

/// The keys `pd-profile-handler` reads; others are ignored.
pub const KNOWN_KEYS: [&str; 7] = [
    "decodeProfile",
    "prefillProfile",
    "deciderPluginName",
    "primaryPort",
    "prefixPluginType",
    "prefixPluginName",
    "prefixMatchInfoProducerName",
];

impl PdProfileHandlerParameters {
    /// The handler's spec, or why the parameters are refused.
    pub fn spec(&self) -> Result<ProfileHandlerSpec, PluginError> {
        if let Some(port) = self.primary_port
            && port != 0
            && !(1..=65_535).contains(&port)
        {
            return Err(PluginError::invalid(
                "primaryPort",
                format!("must be between 1 and 65535, got {port}"),
            ));
        }
        let named = |value: &Option<String>, default: &str| {
            value
                .clone()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| default.to_string())
        };
        Ok(ProfileHandlerSpec {
            decode_profile: named(&self.decode_profile, "decode"),
            prefill_profile: named(&self.prefill_profile, "prefill"),
            prefill_decider: Some(named(&self.decider_plugin_name, DEFAULT_DECIDER)),
            encode_profile: DEFAULT_ENCODE_PROFILE.to_string(),
            encode_decider: None,
            stage_order: StageOrder::DecodeFirst,
        })
    }
}

/// Builds a `pd-profile-handler`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params: PdProfileHandlerParameters = args.parse()?;
    Ok(PluginInstance::profile_handler(params.spec()?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec(json: serde_json::Value) -> Result<ProfileHandlerSpec, String> {
        let p: PdProfileHandlerParameters =
            serde_json::from_value(json).map_err(|e| e.to_string())?;
        p.spec().map_err(|e| e.to_string())
    }

    #[test]
    fn upstream_defaults_and_the_guides_parameters() {
        let d = spec(serde_json::json!({})).unwrap();
        assert_eq!(
            (
                d.decode_profile.as_str(),
                d.prefill_profile.as_str(),
                d.prefill_decider.as_deref()
            ),
            ("decode", "prefill", Some(DEFAULT_DECIDER))
        );
        // The llm-d P/D guide's (v0.7): primaryPort 0, the decider by name.
        let g =
            spec(serde_json::json!({"primaryPort": 0, "deciderPluginName": "my-decider"})).unwrap();
        assert_eq!(g.prefill_decider.as_deref(), Some("my-decider"));
        // Older guides' keys upstream ignores.
        assert!(spec(serde_json::json!({"threshold": 100, "hashBlockSize": 5})).is_ok());
        assert!(spec(serde_json::json!({"primaryPort": 8000})).is_ok());
    }

    #[test]
    fn a_port_out_of_range_is_refused_as_upstream() {
        for port in [-1, 65_536] {
            let err = spec(serde_json::json!({ "primaryPort": port })).unwrap_err();
            assert!(err.contains("primaryPort"), "{err}");
        }
    }
}
