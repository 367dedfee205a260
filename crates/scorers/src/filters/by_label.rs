//! `by-label` (deprecated upstream in favour of `label-selector-filter`) and the role filters
//! built on it: `decode-filter`, `prefill-filter`, `encode-filter`.
//!
//! `by-label` keeps a candidate whose label `label` has one of `validValues`, and, when
//! `allowsNoLabel` is true, a candidate without the label at all.
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `label` | — (required) | the label key tested |
//! | `validValues` | — | the accepted values (required unless `allowsNoLabel`) |
//! | `allowsNoLabel` | false | keep candidates without the label |
//!
//! The role filters take no parameters and test the `llm-d.ai/role` label, as upstream:
//!
//! | type | keeps roles | unlabeled |
//! |---|---|---|
//! | `decode-filter` | `decode`, `prefill-decode`, `both`, `encode-prefill-decode` | kept |
//! | `prefill-filter` | `prefill`, `encode-prefill`, `prefill-decode`, `both`, `encode-prefill-decode` | dropped |
//! | `encode-filter` | `encode`, `encode-prefill`, `encode-prefill-decode` | dropped |
//!
//! They only narrow a profile's candidates: running separate prefill and decode profiles for
//! one request (disaggregation) is a profile handler's work, not theirs. Labels are
//! [`Endpoint::labels`]: the pod labels under Kubernetes discovery, or the `labels` of an
//! `endpoints` entry in the config file. An endpoint without a role label is kept by
//! `decode-filter` and dropped by `prefill-filter`.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: by-label
//!   parameters:
//!     label: gpu.type
//!     validValues: [a100]
//! - type: decode-filter
//! - type: max-score-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: decode-filter
//!   - pluginRef: by-label
//!   - pluginRef: max-score-picker
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let snapshot = pool.snapshot();
//! snapshot.endpoints()[1].set_labels([("gpu.type".to_string(), "a100".to_string())].into());
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! let d = scheduler.schedule(&InferenceRequest::new("r", "m", Prompt::Text("hi".into()))).unwrap();
//! assert_eq!(d.primary().address(), "10.0.0.2:8000");
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{CycleState, Filter, PluginInstance};

use crate::params::NoParameters;

/// Registry type name of the generic filter.
pub const TYPE_NAME: &str = "by-label";
/// Registry type name of the decode role filter.
pub const DECODE_TYPE_NAME: &str = "decode-filter";
/// Registry type name of the prefill role filter.
pub const PREFILL_TYPE_NAME: &str = "prefill-filter";
/// Registry type name of the encode role filter.
pub const ENCODE_TYPE_NAME: &str = "encode-filter";

/// The label the role filters test.
pub const ROLE_LABEL: &str = "llm-d.ai/role";

/// The `by-label` parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ByLabelParameters {
    /// The label key tested.
    pub label: String,
    /// The accepted values.
    pub valid_values: Vec<String>,
    /// Keep candidates without the label.
    pub allows_no_label: bool,
}

/// Keeps candidates whose label has an accepted value (or, if allowed, no value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByLabelFilter {
    parameters: ByLabelParameters,
}

impl ByLabelFilter {
    /// A filter with `parameters`, or why they are invalid.
    pub fn new(parameters: ByLabelParameters) -> Result<Self, PluginError> {
        if parameters.label.is_empty() {
            return Err(PluginError::invalid("label", "must be specified"));
        }
        if parameters.valid_values.is_empty() && !parameters.allows_no_label {
            return Err(PluginError::invalid(
                "validValues",
                "must not be empty unless allowsNoLabel is true",
            ));
        }
        Ok(ByLabelFilter { parameters })
    }

    fn role(allows_no_label: bool, roles: &[&str]) -> Self {
        ByLabelFilter {
            parameters: ByLabelParameters {
                label: ROLE_LABEL.to_string(),
                valid_values: roles.iter().map(|r| r.to_string()).collect(),
                allows_no_label,
            },
        }
    }

    /// `decode-filter`.
    pub fn decode() -> Self {
        Self::role(
            true,
            &["decode", "prefill-decode", "both", "encode-prefill-decode"],
        )
    }

    /// `prefill-filter`.
    pub fn prefill() -> Self {
        Self::role(
            false,
            &[
                "prefill",
                "encode-prefill",
                "prefill-decode",
                "both",
                "encode-prefill-decode",
            ],
        )
    }

    /// `encode-filter`.
    pub fn encode() -> Self {
        Self::role(
            false,
            &["encode", "encode-prefill", "encode-prefill-decode"],
        )
    }

    /// Whether an endpoint with `value` for the label (None = unlabeled) is kept.
    pub fn keeps(&self, value: Option<&str>) -> bool {
        match value {
            None => self.parameters.allows_no_label,
            Some(v) => self.parameters.valid_values.iter().any(|x| x == v),
        }
    }
}

impl Filter for ByLabelFilter {
    fn filter(&self, _cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>) {
        let key = self.parameters.label.as_str();
        candidates.retain(|e| self.keeps(e.labels().get(key).map(String::as_str)));
    }
}

/// Builds a `by-label` filter.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: ByLabelParameters = args.parse()?;
    Ok(PluginInstance::filter(Arc::new(ByLabelFilter::new(
        parameters,
    )?)))
}

/// Builds a `decode-filter`.
pub fn decode_factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    args.parse::<NoParameters>()?;
    Ok(PluginInstance::filter(Arc::new(ByLabelFilter::decode())))
}

/// Builds a `prefill-filter`.
pub fn prefill_factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    args.parse::<NoParameters>()?;
    Ok(PluginInstance::filter(Arc::new(ByLabelFilter::prefill())))
}

/// Builds an `encode-filter`.
pub fn encode_factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    args.parse::<NoParameters>()?;
    Ok(PluginInstance::filter(Arc::new(ByLabelFilter::encode())))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn roles_keep_what_upstream_keeps() {
        let decode = ByLabelFilter::decode();
        assert!(decode.keeps(None));
        assert!(decode.keeps(Some("both")));
        assert!(!decode.keeps(Some("prefill")));
        let prefill = ByLabelFilter::prefill();
        assert!(!prefill.keeps(None));
        assert!(prefill.keeps(Some("prefill-decode")));
        assert!(!prefill.keeps(Some("decode")));
        let encode = ByLabelFilter::encode();
        assert!(encode.keeps(Some("encode-prefill")));
        assert!(!encode.keeps(Some("prefill")));
        assert!(!encode.keeps(None));
    }

    #[test]
    fn by_label_needs_a_label_and_values_or_allows_no_label() {
        let p = |json| serde_json::from_value::<ByLabelParameters>(json).unwrap();
        assert!(ByLabelFilter::new(p(serde_json::json!({"validValues": ["a"]}))).is_err());
        assert!(ByLabelFilter::new(p(serde_json::json!({"label": "x"}))).is_err());
        let f = ByLabelFilter::new(p(serde_json::json!({"label": "x", "allowsNoLabel": true})))
            .unwrap();
        assert!(f.keeps(None));
        assert!(!f.keeps(Some("a")));
    }
}
