//! Upstream's plugin stability levels: the types the llm-d router registers as *Alpha*
//! (experimental) load only when the picker runs with `--allow-experimental-plugins`.
//!
//! Upstream checks every plugin declared in `plugins` once the config is parsed, in the order
//! of their names, and refuses to start on the first Alpha one when the flag is not set.
//! Shepherd's binaries do the same at start and on every reload; [`check_stability`] is that
//! check, for any embedder that wants it too.
//!
//! ```
//! use shepherd_scheduler_core::config::{EndpointPickerConfig, check_stability, is_alpha};
//!
//! assert!(is_alpha("endpoint-attribute-scorer"));
//! assert!(!is_alpha("queue-scorer"));
//!
//! let config = EndpointPickerConfig::from_yaml(
//!     "plugins:\n- type: header-label-affinity-scorer\n  parameters: {headerName: x-tier}\n",
//! )
//! .unwrap();
//! let refused = check_stability(&config, false).unwrap_err();
//! assert!(refused.to_string().contains("--allow-experimental-plugins is not set"));
//! assert!(check_stability(&config, true).is_ok());
//! ```

use super::{ConfigError, EndpointPickerConfig};

/// Every type upstream registers with `StabilityAlpha` (`registerInTreePlugins`, llm-d router
/// at `ebab68792`).
pub const ALPHA_TYPES: &[&str] = &[
    "disaggregatedset-rollout-screener",
    "session-affinity-filter",
    "endpoint-attribute-filter",
    "topology-affinity-filter",
    "utilization-filter",
    "session-affinity-scorer",
    "header-label-affinity-scorer",
    "topology-extractor",
    "dcgm-data-source",
    "dcgm-extractor",
    "header-profile-handler",
    "endpoint-attribute-scorer",
    "topology-affinity-scorer",
    "burst-prefix-cache-producer",
    "p2p-source-producer",
    "multicluster-session-affinity-filter",
    "multicluster-queue-scorer",
    "multicluster-kv-cache-utilization-scorer",
    "multicluster-prefix-cache-scorer",
    "multicluster-approx-prefix-cache-producer",
    "sheddable-eviction-filter",
    "priority-then-time-eviction-order-policy",
    "priority-holdback-policy",
    "soft-reflective-ceiling-policy",
    "multicluster-metrics-data-source",
    "multicluster-metrics-extractor",
    "multicluster-file-discovery",
    "agent-identity",
];

/// Whether upstream registers `plugin_type` as Alpha.
pub fn is_alpha(plugin_type: &str) -> bool {
    ALPHA_TYPES.contains(&plugin_type)
}

/// Upstream's `ValidatePluginStability`: the first declared plugin (by name) of an Alpha type
/// is refused unless `allow_experimental` is set.
///
/// # Errors
///
/// [`ConfigError::ExperimentalPlugin`] naming that plugin and its type, in upstream's words.
pub fn check_stability(
    config: &EndpointPickerConfig,
    allow_experimental: bool,
) -> Result<(), ConfigError> {
    check_stability_of(
        config
            .plugins
            .iter()
            .map(|p| (p.name(), p.plugin_type.as_str())),
        allow_experimental,
    )
}

/// [`check_stability`] over declared plugins given as `(name, type)` pairs: for an embedder
/// that takes some plugins out of the config before building the scheduler (flow-control
/// policies, data-layer sources) and must still check them.
///
/// # Errors
///
/// As [`check_stability`].
pub fn check_stability_of<'a>(
    plugins: impl IntoIterator<Item = (&'a str, &'a str)>,
    allow_experimental: bool,
) -> Result<(), ConfigError> {
    if allow_experimental {
        return Ok(());
    }
    let first = plugins
        .into_iter()
        .filter(|(_, plugin_type)| is_alpha(plugin_type))
        .min();
    match first {
        Some((name, plugin_type)) => Err(ConfigError::ExperimentalPlugin {
            name: name.to_string(),
            plugin_type: plugin_type.to_string(),
        }),
        None => Ok(()),
    }
}
