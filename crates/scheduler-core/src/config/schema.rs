use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// A whole picker configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPickerConfig {
    /// `inference.networking.x-k8s.io/v1alpha1` in GIE configs; not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `EndpointPickerConfig` in GIE configs; not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Plugin instances.
    #[serde(default)]
    pub plugins: Vec<PluginSpec>,
    /// Scheduling profiles; the first is the default.
    #[serde(default)]
    pub scheduling_profiles: Vec<ProfileSpec>,
    /// Scheduler settings (Shepherd's own section).
    #[serde(default)]
    pub scheduler: SchedulerSettings,
    /// Adaptive weights section, read by `shepherd-adaptive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<serde_json::Value>,
    /// Sections this schema does not know (kept so callers can warn about them).
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl EndpointPickerConfig {
    /// Parses YAML text.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        super::limits::check(text)?;
        let config: EndpointPickerConfig =
            serde_norway::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))?;
        config.scheduler.validate()?;
        Ok(config)
    }

    /// Names of top-level sections that were ignored.
    pub fn ignored_sections(&self) -> Vec<&str> {
        self.other.keys().map(String::as_str).collect()
    }
}

/// One plugin instance: `type`, optional `name` (defaults to the type), `parameters`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSpec {
    /// Registered type name, e.g. `prefix-cache-scorer`.
    #[serde(rename = "type")]
    pub plugin_type: String,
    /// Instance name referenced by profiles; the type when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Type-specific parameters.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub parameters: serde_json::Value,
}

impl PluginSpec {
    /// The instance name.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.plugin_type)
    }
}

/// A scheduling profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSpec {
    /// Profile name.
    pub name: String,
    /// Plugins used, in order.
    #[serde(default)]
    pub plugins: Vec<ProfilePluginRef>,
}

/// A plugin used by a profile, with its weight when it is a scorer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfilePluginRef {
    /// Name of a plugin instance.
    pub plugin_ref: String,
    /// Scorer weight (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

/// Shepherd's scheduler settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SchedulerSettings {
    /// Seed for tie-breaking and random pickers.
    pub seed: u64,
    /// Metrics older than this many milliseconds are stale.
    pub staleness_ms: u64,
    /// Endpoints named per decision: primary plus fallbacks.
    pub max_endpoints: usize,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        SchedulerSettings {
            seed: 0x5EED,
            staleness_ms: 200,
            max_endpoints: 3,
        }
    }
}

impl SchedulerSettings {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.max_endpoints == 0 {
            return Err(ConfigError::InvalidSetting {
                field: "scheduler.maxEndpoints".into(),
                reason: "must be at least 1".into(),
            });
        }
        if self.staleness_ms == 0 {
            return Err(ConfigError::InvalidSetting {
                field: "scheduler.stalenessMs".into(),
                reason: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}
