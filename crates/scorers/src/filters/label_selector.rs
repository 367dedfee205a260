//! `label-selector-filter` (also its deprecated name `by-label-selector`): keeps the candidates
//! whose labels match a Kubernetes label selector.
//!
//! The parameters are a Kubernetes `LabelSelector`, as upstream:
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `matchLabels` | — | `{key: value}` pairs that must all be present and equal |
//! | `matchExpressions` | — | requirements `{key, operator, values}`, all of which must hold: `In` (label present, value listed), `NotIn` (label absent or value not listed), `Exists`, `DoesNotExist`; `In`/`NotIn` need values, `Exists`/`DoesNotExist` take none |
//!
//! An empty selector keeps every candidate; a selector no candidate matches leaves none.
//! Labels are [`Endpoint::labels`]: set by the embedder or discovery. Shepherd's static and
//! file discovery do not set labels yet, so there every endpoint is unlabeled.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: label-selector-filter
//!   parameters:
//!     matchLabels:
//!       inference-role: decode
//!     matchExpressions:
//!     - key: hardware-type
//!       operator: In
//!       values: [H100, H200]
//! - type: queue-scorer
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: label-selector-filter
//!   - pluginRef: queue-scorer
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let labels = |role: &str, hw: &str| {
//!     [("inference-role", role), ("hardware-type", hw)]
//!         .into_iter()
//!         .map(|(k, v)| (k.to_string(), v.to_string()))
//!         .collect()
//! };
//! let snapshot = pool.snapshot();
//! snapshot.endpoints()[0].set_labels(labels("prefill", "H100"));
//! snapshot.endpoints()[1].set_labels(labels("decode", "H200"));
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! let d = scheduler.schedule(&InferenceRequest::new("r", "m", Prompt::Text("hi".into()))).unwrap();
//! assert_eq!(d.primary().address(), "10.0.0.2:8000");
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointLabels};
use shepherd_scheduler_core::plugin::{CycleState, Filter, PluginInstance};

/// Registry type name.
pub const TYPE_NAME: &str = "label-selector-filter";

/// The deprecated name upstream still accepts.
pub const DEPRECATED_TYPE_NAME: &str = "by-label-selector";

/// A selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Operator {
    /// The label is present with one of the values.
    In,
    /// The label is absent, or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One `matchExpressions` requirement.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// How the label is tested.
    pub operator: Operator,
    /// The values for `In` and `NotIn`.
    #[serde(default)]
    pub values: Vec<String>,
}

impl Requirement {
    fn check(&self) -> Result<(), PluginError> {
        let needs_values = matches!(self.operator, Operator::In | Operator::NotIn);
        if self.key.is_empty() {
            return Err(PluginError::invalid("matchExpressions", "a key is empty"));
        }
        if needs_values == self.values.is_empty() {
            let reason = if needs_values {
                format!("`{:?}` on `{}` needs values", self.operator, self.key)
            } else {
                format!("`{:?}` on `{}` takes no values", self.operator, self.key)
            };
            return Err(PluginError::invalid("matchExpressions", reason));
        }
        Ok(())
    }

    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &EndpointLabels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// A Kubernetes label selector: the filter's parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LabelSelector {
    /// Pairs that must all match.
    pub match_labels: BTreeMap<String, String>,
    /// Requirements that must all hold.
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    /// Whether `labels` match every pair and requirement.
    pub fn matches(&self, labels: &EndpointLabels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

/// Keeps the candidates whose labels match the selector.
#[derive(Debug, Clone)]
pub struct LabelSelectorFilter {
    selector: LabelSelector,
}

impl LabelSelectorFilter {
    /// A filter with `selector`, or why it is invalid.
    pub fn new(selector: LabelSelector) -> Result<Self, PluginError> {
        for requirement in &selector.match_expressions {
            requirement.check()?;
        }
        Ok(LabelSelectorFilter { selector })
    }
}

impl Filter for LabelSelectorFilter {
    fn filter(&self, _cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>) {
        candidates.retain(|e| self.selector.matches(&e.labels()));
    }
}

/// Builds a `label-selector-filter`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let selector: LabelSelector = args.parse()?;
    Ok(PluginInstance::filter(Arc::new(LabelSelectorFilter::new(
        selector,
    )?)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> EndpointLabels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn selector(json: serde_json::Value) -> LabelSelector {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn match_labels_are_anded() {
        let s = selector(serde_json::json!({"matchLabels": {"a": "1", "b": "2"}}));
        assert!(s.matches(&labels(&[("a", "1"), ("b", "2"), ("c", "3")])));
        assert!(!s.matches(&labels(&[("a", "1")])));
        assert!(!s.matches(&labels(&[("a", "1"), ("b", "3")])));
        assert!(LabelSelector::default().matches(&labels(&[])));
    }

    #[test]
    fn operators_follow_kubernetes() {
        let r = |op: &str, values: &[&str]| {
            serde_json::from_value::<Requirement>(
                serde_json::json!({"key": "k", "operator": op, "values": values}),
            )
            .unwrap()
        };
        let with = labels(&[("k", "x")]);
        let other = labels(&[("k", "y")]);
        let none = labels(&[]);
        assert!(r("In", &["x"]).matches(&with));
        assert!(!r("In", &["x"]).matches(&other));
        assert!(!r("In", &["x"]).matches(&none));
        assert!(!r("NotIn", &["x"]).matches(&with));
        assert!(r("NotIn", &["x"]).matches(&other));
        assert!(r("NotIn", &["x"]).matches(&none));
        assert!(r("Exists", &[]).matches(&with));
        assert!(!r("Exists", &[]).matches(&none));
        assert!(r("DoesNotExist", &[]).matches(&none));
        assert!(!r("DoesNotExist", &[]).matches(&with));
    }

    #[test]
    fn malformed_selectors_are_errors() {
        let bad = |json| LabelSelectorFilter::new(selector(json)).is_err();
        assert!(bad(
            serde_json::json!({"matchExpressions": [{"key": "k", "operator": "In"}]})
        ));
        assert!(bad(
            serde_json::json!({"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["x"]}]})
        ));
        assert!(
            serde_json::from_value::<LabelSelector>(
                serde_json::json!({"matchExpressions": [{"key": "k", "operator": "Near"}]})
            )
            .is_err()
        );
        assert!(
            serde_json::from_value::<LabelSelector>(serde_json::json!({"labels": {}})).is_err()
        );
    }
}
