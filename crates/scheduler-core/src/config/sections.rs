//! The upstream top-level sections besides `plugins` and `schedulingProfiles`, typed and
//! strictly decoded: `featureGates`, `dataLayer`, `requestHandler`, and the deprecated
//! top-level `parser` and `saturationDetector`.
//!
//! What each does in Shepherd:
//!
//! | section | here |
//! |---|---|
//! | `featureGates` | the gates upstream registers: `flowControl` (an explicit `flowControl=false` turns Shepherd's flow control off even when the section is present; otherwise the section's presence turns it on), `haPopulateNonLeaderDatastore` (no effect: Shepherd has no leader election), and the Inference Extension's and inference scheduler's `dataLayer` and `enableLegacyMetrics`, and the Inference Extension's `prepareDataPlugins` (v1.3 and v1.4) (deprecated no-ops, a warning each). Any other gate is an error, as upstream. |
//! | `dataLayer.sources` | each source and extractor must name a declared plugin; `metrics-data-source` / `core-metrics-extractor` are what the runtime scrapes with |
//! | `dataLayer.injectDefaults` | accepted; Shepherd always scrapes the core metrics |
//! | `dataLayer.discovery` | must name a declared discovery plugin: `file-discovery`, whose endpoints file the runtime reads (and watches with `watchFile`) |
//! | `peerDiscovery`, `crossReplicaSyncerPluginRef`, `crossReplicaSyncInterval` | not implemented yet: an error naming the area |
//! | `requestHandler.parsers` | each must name a declared parser plugin (see [`PluginKind::Parser`](super::PluginKind)) |
//! | `parser` (deprecated) | becomes `requestHandler.parsers` when that is empty, as upstream |
//! | `saturationDetector` (deprecated) | becomes `flowControl.saturationDetector` when that is unset, as upstream |
//!
//! ```
//! use shepherd_scheduler_core::config::{EndpointPickerConfig, FeatureGates};
//!
//! let config = EndpointPickerConfig::from_yaml("
//! featureGates: [flowControl]
//! plugins:
//! - type: openai-parser
//! parser: {pluginRef: openai-parser}
//! ").unwrap();
//! assert_eq!(config.feature_gates.get(FeatureGates::FLOW_CONTROL), Some(true));
//! assert_eq!(config.parser_refs(), ["openai-parser"]);
//! ```

use serde::{Deserialize, Serialize};

/// `featureGates`: gate names, each optionally suffixed `=true` or `=false`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FeatureGates(pub Vec<String>);

impl FeatureGates {
    /// The flow-control gate.
    pub const FLOW_CONTROL: &'static str = "flowControl";
    /// Upstream's gate for filling the datastore of non-leader replicas.
    pub const HA_POPULATE_NON_LEADER_DATASTORE: &'static str = "haPopulateNonLeaderDatastore";
    /// The Inference Extension's and the inference scheduler's gate for their experimental
    /// data layer (on by default upstream now; deprecated, no effect here).
    pub const DATA_LAYER: &'static str = "dataLayer";
    /// The same pickers' gate for their older metrics-scraping path (deprecated, no effect
    /// here: it chooses how upstream scrapes, not which names it exports).
    pub const ENABLE_LEGACY_METRICS: &'static str = "enableLegacyMetrics";
    /// The Inference Extension's gate (registered by its v1.3 and v1.4 releases, removed in
    /// v1.5) that turned its data-producer (then "prepare data") plugins on: deprecated, no
    /// effect here (Shepherd's producers always run).
    pub const PREPARE_DATA_PLUGINS: &'static str = "prepareDataPlugins";
    /// Every gate upstream registers (the llm-d router's two, and the two the Inference
    /// Extension and the inference scheduler still register); others are refused.
    pub const KNOWN: [&'static str; 5] = [
        Self::FLOW_CONTROL,
        Self::HA_POPULATE_NON_LEADER_DATASTORE,
        Self::DATA_LAYER,
        Self::ENABLE_LEGACY_METRICS,
        Self::PREPARE_DATA_PLUGINS,
    ];
    /// The gates Shepherd accepts as deprecated no-ops (a warning each when given).
    pub const DEPRECATED: [&'static str; 3] = [
        Self::DATA_LAYER,
        Self::ENABLE_LEGACY_METRICS,
        Self::PREPARE_DATA_PLUGINS,
    ];

    /// The deprecated gates given (any value), in the order given, without repeats.
    pub fn deprecated_given(&self) -> Vec<&'static str> {
        Self::DEPRECATED
            .into_iter()
            .filter(|gate| self.get(gate).is_some())
            .collect()
    }

    /// Whether no gate is given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value given for `gate` (the last entry naming it wins), `None` when not given.
    /// An entry whose value does not parse counts as not given ([`check`](Self::check)
    /// refuses it).
    pub fn get(&self, gate: &str) -> Option<bool> {
        self.0
            .iter()
            .filter_map(|entry| parse_gate(entry).ok())
            .filter(|(name, _)| *name == gate)
            .map(|(_, value)| value)
            .next_back()
    }

    /// Checks every entry: a known gate, and a value of `true` or `false` when given.
    /// Returns the index and the message of the first bad entry.
    pub fn check(&self) -> Result<(), (usize, String)> {
        for (i, entry) in self.0.iter().enumerate() {
            let (name, _) = parse_gate(entry).map_err(|m| (i, m))?;
            if !Self::KNOWN.contains(&name) {
                return Err((
                    i,
                    format!(
                        "feature gate `{name}` is unknown (known: {})",
                        Self::KNOWN.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Splits `name[=value]`; the value is read as Go's `strconv.ParseBool` reads it.
fn parse_gate(entry: &str) -> Result<(&str, bool), String> {
    let (name, value) = match entry.split_once('=') {
        None => return Ok((entry.trim(), true)),
        Some((name, value)) => (name.trim(), value.trim()),
    };
    let value = match value.to_ascii_lowercase().as_str() {
        "1" | "t" | "true" => true,
        "0" | "f" | "false" => false,
        _ => {
            return Err(format!(
                "`{value}` is not a valid value for the feature gate `{name}` (use true or false)"
            ));
        }
    };
    Ok((name, value))
}

/// A reference to a plugin instance by name: `{pluginRef: NAME}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginRef {
    /// The plugin's name.
    pub plugin_ref: String,
}

/// `dataLayer`: which sources feed the endpoints' attributes, endpoint discovery, and (not
/// implemented yet) peer discovery and replica synchronisation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataLayerConfig {
    /// Whether upstream injects its default metrics source and extractor (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inject_defaults: Option<bool>,
    /// Data sources, each with its extractors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<DataLayerSource>,
    /// An endpoint-discovery plugin: `file-discovery` (the runtime reads its endpoints file
    /// instead of the `endpoints` section).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<PluginRef>,
    /// A peer-discovery plugin (not implemented yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_discovery: Option<PluginRef>,
    /// A cross-replica syncer plugin (not implemented yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_replica_syncer_plugin_ref: Option<String>,
    /// How often replicas publish their state to the syncer (not implemented yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_replica_sync_interval: Option<String>,
}

impl DataLayerConfig {
    /// The fields set that Shepherd does not implement yet, by their YAML names.
    pub fn unimplemented_fields(&self) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if self.peer_discovery.is_some() {
            fields.push("peerDiscovery");
        }
        if self.cross_replica_syncer_plugin_ref.is_some() {
            fields.push("crossReplicaSyncerPluginRef");
        }
        if self.cross_replica_sync_interval.is_some() {
            fields.push("crossReplicaSyncInterval");
        }
        fields
    }
}

/// One `dataLayer.sources` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataLayerSource {
    /// The source plugin.
    pub plugin_ref: String,
    /// Its extractors.
    #[serde(default)]
    pub extractors: Vec<PluginRef>,
}

/// `requestHandler`: how requests are parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestHandlerConfig {
    /// Parser plugins, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parsers: Vec<PluginRef>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn gates(entries: &[&str]) -> FeatureGates {
        FeatureGates(entries.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn gates_read_as_upstream_reads_them() {
        let g = gates(&["flowControl=False", "haPopulateNonLeaderDatastore"]);
        assert_eq!(g.get("flowControl"), Some(false));
        assert_eq!(g.get("haPopulateNonLeaderDatastore"), Some(true));
        assert_eq!(g.get("other"), None);
        assert!(g.check().is_ok());
        assert_eq!(
            gates(&["flowControl", "flowControl=0"]).get("flowControl"),
            Some(false)
        );
    }

    #[test]
    fn the_older_pickers_gates_are_known_and_deprecated() {
        let g = gates(&["dataLayer", "enableLegacyMetrics=false", "flowControl"]);
        assert!(g.check().is_ok());
        assert_eq!(g.deprecated_given(), ["dataLayer", "enableLegacyMetrics"]);
        // The Inference Extension's troubleshooting guide (v1.5.0) still sets this one; its
        // v1.3.0 and v1.4.0 runners register it.
        let g = gates(&["prepareDataPlugins"]);
        assert!(g.check().is_ok());
        assert_eq!(g.deprecated_given(), ["prepareDataPlugins"]);
        assert!(gates(&["flowControl"]).deprecated_given().is_empty());
    }

    #[test]
    fn unknown_gates_and_bad_values_are_refused_with_their_index() {
        let (i, message) = gates(&["flowControl", "x"]).check().unwrap_err();
        assert_eq!(i, 1);
        assert!(message.contains("`x` is unknown"), "{message}");
        let (i, message) = gates(&["flowControl=maybe"]).check().unwrap_err();
        assert_eq!(i, 0);
        assert!(message.contains("maybe"), "{message}");
    }
}
