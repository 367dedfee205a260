//! `disagg-profile-handler`: schedules each request with the decode profile; then, when the
//! encode profile exists and the encode decider says so, with the encode profile (the servers
//! that encode the request's media); then, when the prefill decider says so, with the prefill
//! profile (see [`shepherd_scheduler_core::disagg`]). Upstream's four layouts: decode only,
//! P/D, E/PD (an encode decider only) and E/P/D (both deciders).
//!
//! ## Parameters
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `profiles.decode` | `decode` | the decode profile (always run: its pick is the destination) |
//! | `profiles.prefill` | `prefill` | the prefill profile |
//! | `profiles.encode` | `encode` | the encode profile; when the config has no profile of that name, the encode stage never runs (as upstream) |
//! | `deciders.prefill` | — | the decider plugin's name; without one, every request is served aggregated by the decode profile |
//! | `deciders.encode` | — | the encode decider plugin's name (`always-disagg-multimodal-decider`); without one, no request is encoded separately |
//! | `stageOrder` | `decode-first` | `decode-first`, or `prefill-first`: the prefill profile runs first for every request (whenever it exists), then the decode profile with the prefill pick as its peer (what `topology-affinity-filter` and `-scorer` compare with); a prefill decider is refused in that order, as upstream. Case, `-` and `_` are ignored (`PrefillFirst`, `prefill`). |
//!
//! Upstream's deprecated flat form loads too (`decodeProfile`, `prefillProfile`,
//! `encodeProfile`, `prefillDeciderPluginName`, `deciderPluginName`,
//! `encodeDeciderPluginName`), but not mixed with the nested one.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: prefix-cache-scorer
//! - type: decode-filter
//! - type: prefill-filter
//! - type: prefix-based-pd-decider
//!   parameters: {nonCachedTokens: 256}
//! - type: disagg-profile-handler
//!   parameters:
//!     deciders: {prefill: prefix-based-pd-decider}
//! - type: max-score-picker
//! schedulingProfiles:
//! - name: decode
//!   plugins: [{pluginRef: decode-filter}, {pluginRef: prefix-cache-scorer}, {pluginRef: max-score-picker}]
//! - name: prefill
//!   plugins: [{pluginRef: prefill-filter}, {pluginRef: prefix-cache-scorer}, {pluginRef: max-score-picker}]
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! for (address, role) in [("10.0.0.1:8000", "prefill"), ("10.0.0.2:8000", "decode")] {
//!     let labels = [("llm-d.ai/role".to_string(), role.to_string())].into_iter().collect();
//!     pool.add(address).set_labels(labels);
//! }
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! // A long prompt nobody caches: prefilled on the prefill server, decoded on the decode one.
//! let long = InferenceRequest::new("r1", "m", Prompt::Tokens(vec![3; 1024]));
//! let d = scheduler.schedule(&long).unwrap();
//! assert_eq!(d.primary().address(), "10.0.0.2:8000");
//! assert_eq!(d.prefill().unwrap().endpoint().address(), "10.0.0.1:8000");
//! d.finish(Completion::success(None));
//! // A short one is served aggregated.
//! let short = InferenceRequest::new("r2", "m", Prompt::Tokens(vec![4; 100]));
//! let d = scheduler.schedule(&short).unwrap();
//! assert!(d.prefill().is_none());
//! d.finish(Completion::success(None));
//! ```

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::disagg::{DEFAULT_ENCODE_PROFILE, ProfileHandlerSpec, StageOrder};
use shepherd_scheduler_core::plugin::PluginInstance;

/// Registry type name.
pub const TYPE_NAME: &str = "disagg-profile-handler";

/// The profiles.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Profiles {
    /// The decode profile.
    pub decode: Option<String>,
    /// The prefill profile.
    pub prefill: Option<String>,
    /// The encode profile.
    pub encode: Option<String>,
}

/// The deciders.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Deciders {
    /// The prefill decider's plugin name.
    pub prefill: Option<String>,
    /// The encode decider's plugin name.
    pub encode: Option<String>,
}

/// The `disagg-profile-handler` parameters (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct DisaggProfileHandlerParameters {
    /// `decode-first` (default) or `prefill-first`.
    pub stage_order: Option<String>,
    /// The profiles.
    pub profiles: Option<Profiles>,
    /// The deciders.
    pub deciders: Option<Deciders>,
    /// Deprecated flat form of `profiles.decode`.
    pub decode_profile: Option<String>,
    /// Deprecated flat form of `profiles.prefill`.
    pub prefill_profile: Option<String>,
    /// Deprecated flat form of `profiles.encode`.
    pub encode_profile: Option<String>,
    /// Deprecated flat form of `deciders.prefill`.
    pub prefill_decider_plugin_name: Option<String>,
    /// Older deprecated flat form of `deciders.prefill`.
    pub decider_plugin_name: Option<String>,
    /// Deprecated flat form of `deciders.encode`.
    pub encode_decider_plugin_name: Option<String>,
}

impl DisaggProfileHandlerParameters {
    /// The handler's spec, or why the parameters are refused.
    pub fn spec(&self) -> Result<ProfileHandlerSpec, PluginError> {
        let flat = self.decode_profile.is_some()
            || self.prefill_profile.is_some()
            || self.encode_profile.is_some()
            || self.prefill_decider_plugin_name.is_some()
            || self.decider_plugin_name.is_some()
            || self.encode_decider_plugin_name.is_some();
        if flat && (self.profiles.is_some() || self.deciders.is_some()) {
            return Err(PluginError::invalid(
                "profiles",
                "use one format: the nested `profiles` / `deciders` or the deprecated flat fields",
            ));
        }
        let stage_order =
            StageOrder::parse(self.stage_order.as_deref().unwrap_or("")).ok_or_else(|| {
                PluginError::invalid(
                    "stageOrder",
                    format!(
                        "invalid stage order {:?}, must be \"decode-first\" or \"prefill-first\"",
                        self.stage_order.as_deref().unwrap_or("")
                    ),
                )
            })?;
        let profiles = self.profiles.clone().unwrap_or_default();
        let deciders = self.deciders.clone().unwrap_or_default();
        let encode_decider = deciders
            .encode
            .or_else(|| self.encode_decider_plugin_name.clone())
            .filter(|d| !d.is_empty());
        let encode = profiles
            .encode
            .or_else(|| self.encode_profile.clone())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| DEFAULT_ENCODE_PROFILE.into());
        let decode = profiles
            .decode
            .or_else(|| self.decode_profile.clone())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "decode".into());
        let prefill = profiles
            .prefill
            .or_else(|| self.prefill_profile.clone())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "prefill".into());
        let decider = deciders
            .prefill
            .or_else(|| self.prefill_decider_plugin_name.clone())
            .or_else(|| self.decider_plugin_name.clone())
            .filter(|d| !d.is_empty());
        if stage_order == StageOrder::PrefillFirst && decider.is_some() {
            return Err(PluginError::invalid(
                "deciders.prefill",
                "prefill decider is not supported in prefill-first stage order",
            ));
        }
        Ok(ProfileHandlerSpec {
            decode_profile: decode,
            prefill_profile: prefill,
            prefill_decider: decider,
            encode_profile: encode,
            encode_decider,
            stage_order,
        })
    }
}

/// Builds a `disagg-profile-handler`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params: DisaggProfileHandlerParameters = args.parse()?;
    Ok(PluginInstance::profile_handler(params.spec()?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec(json: serde_json::Value) -> Result<ProfileHandlerSpec, String> {
        let p: DisaggProfileHandlerParameters =
            serde_json::from_value(json).map_err(|e| e.to_string())?;
        p.spec().map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_nested_and_flat_forms() {
        let d = spec(serde_json::json!({})).unwrap();
        assert_eq!(
            (d.decode_profile.as_str(), d.prefill_profile.as_str()),
            ("decode", "prefill")
        );
        assert_eq!(d.prefill_decider, None);
        let n = spec(serde_json::json!({"profiles": {"decode": "d", "prefill": "p"}, "deciders": {"prefill": "x"}})).unwrap();
        assert_eq!(
            (
                n.decode_profile.as_str(),
                n.prefill_profile.as_str(),
                n.prefill_decider.as_deref()
            ),
            ("d", "p", Some("x"))
        );
        let f = spec(serde_json::json!({"decodeProfile": "d", "prefillProfile": "p", "deciderPluginName": "y"})).unwrap();
        assert_eq!(
            (
                f.decode_profile.as_str(),
                f.prefill_profile.as_str(),
                f.prefill_decider.as_deref()
            ),
            ("d", "p", Some("y"))
        );
        assert!(spec(serde_json::json!({"stageOrder": "Decode_First"})).is_ok());
    }

    #[test]
    fn encode_profile_and_decider_nested_and_flat() {
        let d = spec(serde_json::json!({})).unwrap();
        assert_eq!(
            (d.encode_profile.as_str(), d.encode_decider),
            ("encode", None)
        );
        let n = spec(serde_json::json!({"profiles": {"encode": "e"}, "deciders": {"encode": "mm", "prefill": "p"}})).unwrap();
        assert_eq!(
            (
                n.encode_profile.as_str(),
                n.encode_decider.as_deref(),
                n.prefill_decider.as_deref()
            ),
            ("e", Some("mm"), Some("p"))
        );
        let f = spec(serde_json::json!({"encodeProfile": "e2", "encodeDeciderPluginName": "mm2"}))
            .unwrap();
        assert_eq!(
            (
                f.encode_profile.as_str(),
                f.encode_decider.as_deref(),
                f.prefill_decider
            ),
            ("e2", Some("mm2"), None)
        );
    }

    #[test]
    fn what_is_not_built_is_refused_by_name() {
        for (json, field) in [
            (serde_json::json!({"stageOrder": "sideways"}), "stageOrder"),
            (
                serde_json::json!({"decodeProfile": "d", "profiles": {"decode": "e"}}),
                "profiles",
            ),
        ] {
            let err = spec(json).unwrap_err();
            assert!(err.contains(field), "{err}");
        }
        assert!(spec(serde_json::json!({"unknown": 1})).is_err());
    }

    /// Upstream's `TestDisaggProfileHandlerFactory_StageOrder` cases
    /// (disagg_profile_handler_test.go @ ebab68792).
    #[test]
    fn stage_orders_as_upstream_parses_them() {
        for (json, order) in [
            (serde_json::json!({}), StageOrder::DecodeFirst),
            (
                serde_json::json!({"stageOrder": "decode-first"}),
                StageOrder::DecodeFirst,
            ),
            (
                serde_json::json!({"stageOrder": "prefill-first"}),
                StageOrder::PrefillFirst,
            ),
            (
                serde_json::json!({"stageOrder": "PrefillFirst"}),
                StageOrder::PrefillFirst,
            ),
            (
                serde_json::json!({"stageOrder": "prefill_first"}),
                StageOrder::PrefillFirst,
            ),
            (
                serde_json::json!({"stageOrder": "prefill-first", "profiles": {"decode": "d", "prefill": "p"}}),
                StageOrder::PrefillFirst,
            ),
            (
                serde_json::json!({"stageOrder": "prefill-first", "deciders": {"encode": "mm"}}),
                StageOrder::PrefillFirst,
            ),
        ] {
            assert_eq!(spec(json.clone()).unwrap().stage_order, order, "{json}");
        }
        // A prefill decider, in any of its spellings, is refused in prefill-first.
        for json in [
            serde_json::json!({"stageOrder": "prefill-first", "deciders": {"prefill": "p"}}),
            serde_json::json!({"stageOrder": "prefill-first", "deciderPluginName": "p"}),
            serde_json::json!({"stageOrder": "prefill-first", "prefillDeciderPluginName": "p"}),
        ] {
            let err = spec(json).unwrap_err();
            assert!(err.contains("not supported in prefill-first"), "{err}");
        }
        let err = spec(serde_json::json!({"stageOrder": "invalid-order"})).unwrap_err();
        assert!(err.contains("invalid stage order"), "{err}");
    }
}
