//! Warnings for parameters a built-in plugin accepts and does not use (upstream keys whose
//! job Shepherd does differently, keys upstream's own decoder ignores): loading never fails on
//! them, and the runtime logs each line at start and on every reload.
//!
//! ```
//! let warnings = shepherd_scorers::parameter_warnings(
//!     "precise-prefix-cache-scorer",
//!     &serde_json::json!({"indexerConfig": {"prefixStoreConfig": {"cacheSize": 10}}}),
//! );
//! assert_eq!(warnings.len(), 1);
//! assert!(shepherd_scorers::parameter_warnings("queue-scorer", &serde_json::Value::Null).is_empty());
//! ```

use crate::producers::PrecisePrefixParameters;
use crate::producers::precise_prefix;
use crate::producers::token::{self, TokenProducerParameters, hub_cache_roots};

/// The warnings for a plugin of `plugin_type` with `parameters` (none for types that refuse
/// what they do not use, or parameters that do not parse: building them says why).
pub fn parameter_warnings(plugin_type: &str, parameters: &serde_json::Value) -> Vec<String> {
    let precise = [precise_prefix::TYPE_NAME, precise_prefix::SCORER_TYPE_NAME];
    if precise.contains(&plugin_type) && !parameters.is_null() {
        return serde_json::from_value::<PrecisePrefixParameters>(parameters.clone())
            .map(|p| p.warnings())
            .unwrap_or_default();
    }
    let tokens = [token::TYPE_NAME, token::LEGACY_TYPE_NAME];
    if tokens.contains(&plugin_type) && !parameters.is_null() {
        return serde_json::from_value::<TokenProducerParameters>(parameters.clone())
            .map(|p| p.warnings_in(&hub_cache_roots()))
            .unwrap_or_default();
    }
    if plugin_type == crate::producers::burst_prefix::TYPE_NAME {
        return vec![crate::producers::burst_prefix::WARNING.to_string()];
    }
    if plugin_type == crate::producers::p2p_source::TYPE_NAME {
        return serde_json::from_value::<crate::producers::p2p_source::P2pSourceParameters>(
            parameters.clone(),
        )
        .map(|p| p.warnings())
        .unwrap_or_default();
    }
    if plugin_type == crate::topology::extractor::TYPE_NAME {
        return vec![crate::topology::extractor::WARNING.to_string()];
    }
    if plugin_type == crate::screener::rollout::TYPE_NAME {
        return vec![crate::screener::rollout::WARNING.to_string()];
    }
    if plugin_type == crate::disagg::data_parallel::TYPE_NAME {
        return vec![crate::disagg::data_parallel::WARNING.to_string()];
    }
    Vec::new()
}
