use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::sections::{DataLayerConfig, FeatureGates, PluginRef, RequestHandlerConfig};
use super::{ConfigError, ConfigPath, locate};

/// The `apiVersion`s this loader reads: the llm-d router's current group first, then the
/// Gateway API Inference Extension's older one. A config without `apiVersion` is read too.
pub const API_VERSIONS: [&str; 2] = [
    "llm-d.ai/v1alpha1",
    "inference.networking.x-k8s.io/v1alpha1",
];

/// The only `kind` this loader reads.
pub const KIND: &str = "EndpointPickerConfig";

/// Every top-level key the core schema reads itself: upstream's sections, then Shepherd's
/// `scheduler` and `adaptive`. [`FLOW_CONTROL_SECTION`] is upstream's too but kept for the
/// flow controller in [`EndpointPickerConfig::other`]; any other key is an error unless the
/// caller declares it (see [`EndpointPickerConfig::from_yaml_with`]).
pub const TOP_LEVEL_KEYS: [&str; 11] = [
    "apiVersion",
    "kind",
    "featureGates",
    "plugins",
    "schedulingProfiles",
    "dataLayer",
    "requestHandler",
    "saturationDetector",
    "parser",
    "scheduler",
    "adaptive",
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
    /// Upstream's feature gates (see [`FeatureGates`]).
    #[serde(default, skip_serializing_if = "FeatureGates::is_empty")]
    pub feature_gates: FeatureGates,
    /// Plugin instances.
    #[serde(default)]
    pub plugins: Vec<PluginSpec>,
    /// Scheduling profiles; the first is the default. Empty: one profile named `default`
    /// is made of every filter, scorer and picker declared, as upstream does (see
    /// [`build_scheduler_in`](super::build_scheduler_in)).
    #[serde(default)]
    pub scheduling_profiles: Vec<ProfileSpec>,
    /// Upstream's data-layer wiring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_layer: Option<DataLayerConfig>,
    /// Upstream's request handling (its parsers). The deprecated top-level `parser` is read
    /// into it when it has no parsers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_handler: Option<RequestHandlerConfig>,
    /// The deprecated top-level `parser`, as written (already copied into
    /// [`request_handler`](Self::request_handler) when that had no parsers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parser: Option<PluginRef>,
    /// The deprecated top-level `saturationDetector`: the flow controller uses it when
    /// `flowControl.saturationDetector` is unset, as upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturation_detector: Option<PluginRef>,
    /// Scheduler settings (Shepherd's own section).
    #[serde(default)]
    pub scheduler: SchedulerSettings,
    /// Adaptive weights section, read by `shepherd-adaptive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<serde_json::Value>,
    /// Sections read by someone else: upstream's `flowControl` (the flow controller's) and the
    /// sections the caller declared (see [`from_yaml_with`](Self::from_yaml_with)).
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
    /// Parses YAML text strictly, as upstream does: an unknown key anywhere in the schema is
    /// an error naming its line and column. Only upstream's `flowControl` is kept aside, in
    /// [`other`](Self::other), for the flow controller. A syntax error names its line and
    /// column too; references between sections (`requestHandler.parsers`, `dataLayer`,
    /// `saturationDetector`) must name declared plugins, and `featureGates` must be known.
    ///
    /// ```
    /// use shepherd_scheduler_core::config::{ConfigError, EndpointPickerConfig};
    ///
    /// let c = EndpointPickerConfig::from_yaml("apiVersion: llm-d.ai/v1alpha1\nfeatureGates: [flowControl]\n").unwrap();
    /// assert_eq!(c.feature_gates.0, ["flowControl"]);
    /// assert!(matches!(
    ///     EndpointPickerConfig::from_yaml("apiVersion: v2\n"),
    ///     Err(ConfigError::UnsupportedApiVersion { .. })
    /// ));
    /// let Err(ConfigError::Syntax { line, column, .. }) =
    ///     EndpointPickerConfig::from_yaml("plugins:\n- type: [1]\n") else { panic!() };
    /// assert_eq!((line, column), (Some(2), Some(9)));
    /// let Err(error) = EndpointPickerConfig::from_yaml("plugins: []\nmystery: 1\n") else { panic!() };
    /// assert_eq!(error.line(), Some(2));
    /// assert!(error.to_string().contains("`mystery`"));
    /// ```
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        Self::from_yaml_with(text, &[])
    }

    /// As [`from_yaml`](Self::from_yaml), also accepting the top-level `sections` an embedder
    /// reads itself (Shepherd's runtime declares `endpoints`, `scraping`, `server`,
    /// `gateway`): they are kept in [`other`](Self::other) for it.
    ///
    /// ```
    /// use shepherd_scheduler_core::config::EndpointPickerConfig;
    ///
    /// let c = EndpointPickerConfig::from_yaml_with("endpoints: [a]\n", &["endpoints"]).unwrap();
    /// assert!(c.other.contains_key("endpoints"));
    /// assert!(EndpointPickerConfig::from_yaml("endpoints: [a]\n").is_err());
    /// ```
    pub fn from_yaml_with(text: &str, sections: &[&str]) -> Result<Self, ConfigError> {
        super::limits::check(text)?;
        let mut config: EndpointPickerConfig = serde_norway::from_str(text).map_err(|e| {
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
        config.reject_unknown_sections(text, sections)?;
        config.validate_header()?;
        config.scheduler.validate()?;
        super::references::check(&config, text)?;
        config.apply_deprecated();
        Ok(config)
    }

    /// The first top-level key that is neither the schema's, `flowControl`, nor one of
    /// `sections`, as a syntax error at its line.
    fn reject_unknown_sections(&self, text: &str, sections: &[&str]) -> Result<(), ConfigError> {
        let Some(unknown) = self
            .other
            .keys()
            .find(|k| k.as_str() != FLOW_CONTROL_SECTION && !sections.contains(&k.as_str()))
        else {
            return Ok(());
        };
        let at = locate(text, &ConfigPath::root().key(unknown.as_str()));
        let mut expected: Vec<&str> = TOP_LEVEL_KEYS.to_vec();
        expected.push(FLOW_CONTROL_SECTION);
        expected.extend_from_slice(sections);
        Err(ConfigError::Syntax {
            message: format!(
                "unknown field `{unknown}`, expected one of {}",
                expected
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            line: at.map(|(l, _)| l),
            column: at.map(|(_, c)| c),
        })
    }

    /// Reads the deprecated top-level `parser` into `requestHandler.parsers` when that is
    /// empty, as upstream does.
    fn apply_deprecated(&mut self) {
        if let Some(parser) = &self.parser {
            let handler = self.request_handler.get_or_insert_with(Default::default);
            if handler.parsers.is_empty() {
                handler.parsers.push(parser.clone());
            }
        }
    }

    /// The parser plugins requests go through, by name (`requestHandler.parsers`, or the
    /// deprecated `parser`); empty when none is configured, which means upstream's default
    /// parsers (see [`parser_set`](Self::parser_set)).
    pub fn parser_refs(&self) -> Vec<&str> {
        self.request_handler
            .iter()
            .flat_map(|h| h.parsers.iter())
            .map(|p| p.plugin_ref.as_str())
            .collect()
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

    /// What loads but has no effect here, one warning each: sections kept for someone else
    /// (the flow controller's `flowControl` when only a scheduler is built, an embedder's
    /// own sections it did not take), and upstream settings Shepherd accepts without acting on
    /// them.
    pub fn warnings(&self) -> Vec<ConfigWarning> {
        let mut warnings: Vec<ConfigWarning> = self
            .other
            .keys()
            .map(|section| ConfigWarning {
                section: section.clone(),
                message: if section == FLOW_CONTROL_SECTION {
                    "read by the flow controller (FlowControlConfig::from_picker_config; \
                     shepherd-runtime runs it), not by the scheduler"
                        .into()
                } else {
                    "a section for the embedder; the scheduler does not read it".into()
                },
            })
            .collect();
        if self
            .feature_gates
            .get(FeatureGates::HA_POPULATE_NON_LEADER_DATASTORE)
            == Some(false)
        {
            warnings.push(ConfigWarning {
                section: "featureGates".into(),
                message: "haPopulateNonLeaderDatastore has no effect: Shepherd has no leader \
                          election, every replica keeps its own endpoint data"
                    .into(),
            });
        }
        warnings.extend(self.ignored_profile_entries().into_iter().map(|entry| {
            ConfigWarning {
                section: "schedulingProfiles".into(),
                message: format!(
                    "profile `{}` lists `{}`, a {}, which is not a scheduling plugin: the entry is \
                     ignored, as upstream ignores it",
                    entry.profile, entry.plugin_ref, entry.kind
                ),
            }
        }));
        for plugin in &self.plugins {
            let given = match &plugin.parameters {
                serde_json::Value::Null => false,
                serde_json::Value::Object(map) => !map.is_empty(),
                _ => true,
            };
            if plugin.plugin_type == super::SINGLE_PROFILE_HANDLER && given {
                warnings.push(ConfigWarning {
                    section: "plugins".into(),
                    message: format!(
                        "`{}` ({}) takes no parameters: the ones given are ignored, as upstream \
                         ignores them",
                        plugin.name(),
                        plugin.plugin_type
                    ),
                });
            }
        }
        for plugin in &self.plugins {
            if let Some(t) = super::upstream_type(&plugin.plugin_type)
                && t.note.starts_with("deprecated upstream")
            {
                warnings.push(ConfigWarning {
                    section: "plugins".into(),
                    message: format!("`{}` ({}): {}", plugin.name(), t.name, t.note),
                });
            }
        }
        for gate in self.feature_gates.deprecated_given() {
            warnings.push(ConfigWarning {
                section: "featureGates".into(),
                message: format!(
                    "`{gate}` is a deprecated gate of the Inference Extension's and the \
                     inference scheduler's pickers; it has no effect in Shepherd (its data \
                     layer, data producers and metrics are always on)"
                ),
            });
        }
        if let Some(layer) = &self.data_layer
            && layer.inject_defaults == Some(false)
        {
            warnings.push(ConfigWarning {
                section: "dataLayer".into(),
                message: "injectDefaults: false has no effect: Shepherd always scrapes the \
                          core metrics"
                    .into(),
            });
        }
        if let Ok(parsers) = self.parser_set() {
            warnings.extend(parsers.skipped().iter().map(|skipped| ConfigWarning {
                section: "requestHandler".into(),
                message: skipped.to_string(),
            }));
        }
        if self.saturation_detector.is_some() && !self.other.contains_key(FLOW_CONTROL_SECTION) {
            warnings.push(ConfigWarning {
                section: "saturationDetector".into(),
                message: "deprecated; without a flowControl section Shepherd has no \
                          saturation-based admission, so the detector is not used"
                    .into(),
            });
        }
        warnings
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
    /// The instance name: `name`, or the type when `name` is absent or empty (as upstream).
    pub fn name(&self) -> &str {
        match self.name.as_deref() {
            Some(name) if !name.is_empty() => name,
            _ => &self.plugin_type,
        }
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
