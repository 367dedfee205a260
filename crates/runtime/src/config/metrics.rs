//! The `metrics` section: how the upstream metric families are exported.

use serde::{Deserialize, Serialize};

use crate::upstream::{
    DEFAULT_MAX_LABEL_VALUES, DEFAULT_MAX_SERIES, DEFAULT_POOL_NAME, UpstreamSettings,
};

/// Shepherd exports the llm-d router's `llm_d_epp_*` families beside its own
/// (`docs/observability.md`). This section tunes them:
///
/// ```
/// use shepherd_runtime::config::MetricsConfig;
///
/// let metrics: MetricsConfig = serde_norway::from_str("legacyNames: true\npoolName: chat\n").unwrap();
/// assert!(metrics.legacy_names);
/// assert_eq!(metrics.max_label_values, 1000);
/// assert_eq!(metrics.settings().pool_name, "chat");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Also export the deprecated `inference_objective_*`, `inference_pool_*` and
    /// `inference_extension_*` names, for older dashboards (default off).
    pub legacy_names: bool,
    /// Distinct model names, and distinct fairness ids, that keep a label of their own; later
    /// ones are folded into `other` (default 1000, as upstream).
    pub max_label_values: usize,
    /// Request label sets (model, target model, fairness id, priority) with series of their
    /// own (default 2000); later ones share the `other` series.
    pub max_series: usize,
    /// The pool's name in the `name` and `inference_pool` labels (default `shepherd`).
    pub pool_name: String,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            legacy_names: false,
            max_label_values: DEFAULT_MAX_LABEL_VALUES,
            max_series: DEFAULT_MAX_SERIES,
            pool_name: DEFAULT_POOL_NAME.to_owned(),
        }
    }
}

impl MetricsConfig {
    /// The upstream families' settings.
    pub fn settings(&self) -> UpstreamSettings {
        UpstreamSettings {
            legacy_names: self.legacy_names,
            max_label_values: self.max_label_values,
            max_series: self.max_series,
            pool_name: self.pool_name.clone(),
        }
    }
}
