use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// The `apiVersion`s this loader reads: the llm-d router's current group first, then the
/// Gateway API Inference Extension's older one. A config without `apiVersion` is read too.
pub const API_VERSIONS: [&str; 2] = [
    "llm-d.ai/v1alpha1",
    "inference.networking.x-k8s.io/v1alpha1",
];

/// The only `kind` this loader reads.
pub const KIND: &str = "EndpointPickerConfig";

/// Upstream top-level sections Shepherd recognises but does not act on yet: a config that has
/// them loads, with a warning naming them (an error in strict mode).
pub const RECOGNISED_UNSUPPORTED_SECTIONS: [&str; 4] = [
    "featureGates",
    "dataLayer",
    "requestHandler",
    "saturationDetector",
];

/// The upstream flow-control section: not the scheduler's to act on, but the flow
/// controller's ([`FlowControlConfig`](crate::flow::FlowControlConfig); `shepherd-runtime`
/// runs it). A config that has it gets a warning saying so when only a scheduler is built.
pub const FLOW_CONTROL_SECTION: &str = "flowControl";

/// A whole picker configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPickerConfig {
    /// One of [`API_VERSIONS`], or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// [`KIND`], or absent.
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

/// Something in a config that loads but will be ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The top-level section.
    pub section: String,
    /// What happens to it.
    pub message: String,
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}`: {}", self.section, self.message)
    }
}

impl EndpointPickerConfig {
    /// Parses YAML text. Sections this schema does not know are kept and reported by
    /// [`warnings`](Self::warnings); use [`from_yaml_strict`](Self::from_yaml_strict) to make
    /// them errors. A syntax error names its line and column.
    ///
    /// ```
    /// use shepherd_scheduler_core::config::{ConfigError, EndpointPickerConfig};
    ///
    /// let c = EndpointPickerConfig::from_yaml("apiVersion: llm-d.ai/v1alpha1\nfeatureGates: [x]\n").unwrap();
    /// assert_eq!(c.warnings()[0].section, "featureGates");
    /// assert!(EndpointPickerConfig::from_yaml_strict("featureGates: [x]\n").is_err());
    /// assert!(matches!(
    ///     EndpointPickerConfig::from_yaml("apiVersion: v2\n"),
    ///     Err(ConfigError::UnsupportedApiVersion { .. })
    /// ));
    /// let Err(ConfigError::Syntax { line, column, .. }) =
    ///     EndpointPickerConfig::from_yaml("plugins:\n- type: [1]\n") else { panic!() };
    /// assert_eq!((line, column), (Some(2), Some(9)));
    /// ```
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        super::limits::check(text)?;
        let config: EndpointPickerConfig = serde_norway::from_str(text).map_err(|e| {
            let location = e.location();
            let mut message = e.to_string();
            // The location is reported in its own fields; keep it out of the message.
            if let Some(l) = &location {
                let suffix = format!(" at line {} column {}", l.line(), l.column());
                if let Some(stripped) = message.strip_suffix(&suffix) {
                    message = stripped.to_string();
                }
            }
            ConfigError::Syntax {
                message,
                line: location.as_ref().map(|l| l.line()),
                column: location.as_ref().map(|l| l.column()),
            }
        })?;
        config.validate_header()?;
        config.scheduler.validate()?;
        Ok(config)
    }

    /// Parses YAML text, failing on anything [`warnings`](Self::warnings) would report.
    pub fn from_yaml_strict(text: &str) -> Result<Self, ConfigError> {
        let config = Self::from_yaml(text)?;
        let warnings = config.warnings();
        if warnings.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Strict {
                warnings: warnings.iter().map(ToString::to_string).collect(),
            })
        }
    }

    fn validate_header(&self) -> Result<(), ConfigError> {
        if let Some(v) = &self.api_version
            && !API_VERSIONS.contains(&v.as_str())
        {
            return Err(ConfigError::UnsupportedApiVersion {
                found: v.clone(),
                expected: API_VERSIONS.join(", "),
            });
        }
        if let Some(k) = &self.kind
            && k != KIND
        {
            return Err(ConfigError::UnsupportedKind(k.clone()));
        }
        Ok(())
    }

    /// What will be ignored: one warning per top-level section this schema does not act on.
    pub fn warnings(&self) -> Vec<ConfigWarning> {
        self.other
            .keys()
            .map(|section| ConfigWarning {
                section: section.clone(),
                message: if section == FLOW_CONTROL_SECTION {
                    "read by the flow controller (FlowControlConfig::from_picker_config; \
                     shepherd-runtime runs it), not by the scheduler"
                        .into()
                } else if RECOGNISED_UNSUPPORTED_SECTIONS.contains(&section.as_str()) {
                    "an upstream section Shepherd does not support yet; ignored".into()
                } else {
                    "unknown section; ignored".into()
                },
            })
            .collect()
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
    /// Metrics older than this many milliseconds are stale: the one staleness setting, read
    /// by the scorers, the scheduler and the adaptive controller alike.
    pub staleness_ms: u64,
    /// Endpoints named per decision: primary plus fallbacks.
    pub max_endpoints: usize,
    /// Leave out endpoints with stale metrics while other candidates have fresh ones (instead
    /// of scoring them as neutral).
    pub avoid_stale_endpoints: bool,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        SchedulerSettings {
            seed: 0x5EED,
            staleness_ms: 200,
            max_endpoints: 3,
            avoid_stale_endpoints: true,
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
