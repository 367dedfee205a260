//! The built-in default configuration: prefix cache 3 : queue 2 : KV-cache utilization 2, with
//! the max-score picker.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::build_default_scheduler;
//!
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["127.0.0.1:8000", "127.0.0.1:8001"]);
//! let scheduler = build_default_scheduler(pool).unwrap();
//! let decision = scheduler.schedule(&InferenceRequest::new("r1", "llama", Prompt::Text("hi".into()))).unwrap();
//! println!("{}", decision.breakdown);
//! ```

use std::sync::Arc;

use shepherd_scheduler_core::config::{
    ConfigError, EndpointPickerConfig, PluginSpec, ProfilePluginRef, ProfileSpec, build_scheduler,
};
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::scheduler::Scheduler;

use crate::builtin_registry;

/// The default configuration as YAML (what [`default_config`] returns, and a starting point for
/// a config file of your own).
pub const DEFAULT_CONFIG_YAML: &str = "\
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: max-score-picker
";

/// The default configuration (equal to parsing [`DEFAULT_CONFIG_YAML`]).
pub fn default_config() -> EndpointPickerConfig {
    let plugin = |plugin_type: &str| PluginSpec {
        plugin_type: plugin_type.to_string(),
        name: None,
        parameters: serde_json::Value::Null,
    };
    let reference = |name: &str, weight: Option<f64>| ProfilePluginRef {
        plugin_ref: name.to_string(),
        weight,
    };
    EndpointPickerConfig {
        api_version: Some("llm-d.ai/v1alpha1".into()),
        kind: Some("EndpointPickerConfig".into()),
        plugins: vec![
            plugin("prefix-cache-scorer"),
            plugin("queue-scorer"),
            plugin("kv-cache-utilization-scorer"),
            plugin("max-score-picker"),
        ],
        scheduling_profiles: vec![ProfileSpec {
            name: "default".into(),
            plugins: vec![
                reference("prefix-cache-scorer", Some(3.0)),
                reference("queue-scorer", Some(2.0)),
                reference("kv-cache-utilization-scorer", Some(2.0)),
                reference("max-score-picker", None),
            ],
        }],
        ..Default::default()
    }
}

/// Builds a scheduler over `pool` from [`default_config`] with [`builtin_registry`].
pub fn build_default_scheduler(pool: Arc<Pool>) -> Result<Scheduler, ConfigError> {
    build_scheduler(&default_config(), &builtin_registry(), pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_and_typed_default_agree() {
        let parsed = EndpointPickerConfig::from_yaml(DEFAULT_CONFIG_YAML).unwrap();
        assert_eq!(parsed, default_config());
    }
}
