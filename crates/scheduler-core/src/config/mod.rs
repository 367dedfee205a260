//! Configuration: YAML in the shape of the Gateway API Inference Extension's
//! `EndpointPickerConfig`, and the [`Registry`] that turns plugin type names into plugins.
//!
//! ```
//! use shepherd_scheduler_core::config::EndpointPickerConfig;
//!
//! let yaml = r#"
//! apiVersion: llm-d.ai/v1alpha1
//! kind: EndpointPickerConfig
//! plugins:
//! - type: queue-scorer
//! - type: max-score-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: queue-scorer
//!     weight: 2
//!   - pluginRef: max-score-picker
//! "#;
//! let config = EndpointPickerConfig::from_yaml(yaml).unwrap();
//! assert_eq!(config.plugins[0].name(), "queue-scorer");
//! assert_eq!(config.scheduling_profiles[0].plugins[0].weight, Some(2.0));
//! ```

mod build;
mod error;
mod kinds;
pub mod limits;
mod locate;
mod parsers;
mod profile_entries;
mod references;
mod registry;
mod reporters;
mod schema;
mod sections;
mod stability;
mod upstream;

pub use build::{DEFAULT_PROFILE, MAX_WEIGHT, build_scheduler, build_scheduler_in};
pub use error::{ConfigError, PluginError};
pub use kinds::{
    DISAGG_HEADERS_HANDLER, EXTRACTOR_PRODUCERS, FrameworkPlugin, OPENAI_PARSER,
    PREFILL_HEADER_HANDLER, PluginKind, SINGLE_PROFILE_HANDLER, framework_plugin,
    framework_plugins, upstream_kind,
};
pub use locate::{ConfigPath, Segment, locate};
pub use profile_entries::IgnoredEntry;
pub use registry::{PluginArgs, PluginFactory, Registry};
pub use schema::{
    API_VERSIONS, ConfigWarning, EndpointPickerConfig, FLOW_CONTROL_SECTION, KIND, PluginSpec,
    ProfilePluginRef, ProfileSpec, SchedulerSettings, TOP_LEVEL_KEYS,
};
pub use sections::{
    DataLayerConfig, DataLayerSource, FeatureGates, PluginRef, RequestHandlerConfig,
};
pub use stability::{ALPHA_TYPES, check_stability, check_stability_of, is_alpha};
pub use upstream::{
    Area, OLDER_UPSTREAM_NAMES, SHEPHERD_EXTENSIONS, Status, UPSTREAM_TYPES, UpstreamType,
    not_implemented_message, upstream_type,
};
