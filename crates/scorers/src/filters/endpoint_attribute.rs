//! `endpoint-attribute-filter` (upstream's name): keeps the endpoints whose numeric attribute
//! passes a threshold. The attribute is a custom metric of the `core-metrics-extractor`, as
//! for the [`endpoint-attribute-scorer`](crate::scorers::endpoint_attribute).
//!
//! | parameter | meaning |
//! |---|---|
//! | `attribute` | the attribute (required) |
//! | `producer` | as the scorer's: an `attribute` with a `/` needs it set |
//! | `onMissing` | `Pass` (default) keeps an endpoint without the attribute, `Fail` drops it |
//! | `fallbackOnEmpty` | keep every candidate when none passes (default `false`) |
//! | `algorithm.type` | `threshold` (upstream's only one so far) |
//! | `algorithm.threshold.operator` | `LessThan`, `LessThanOrEqual`, `GreaterThan`, `GreaterThanOrEqual`, `Equal`, `NotEqual` |
//! | `algorithm.threshold.value` | the value compared with |
//!
//! ```
//! use shepherd_scorers::filters::endpoint_attribute::Operator;
//!
//! assert!(Operator::LessThan.holds(9.0, 10.0));
//! assert!(!Operator::LessThan.holds(10.0, 10.0));
//! assert!(Operator::NotEqual.holds(1.0, 2.0));
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Column, Endpoint, EndpointAttributes};
use shepherd_scheduler_core::plugin::{CycleState, Filter, PluginInstance};

use crate::scorers::endpoint_attribute::{check_attribute_key, column_of};

/// Registry type name.
pub const TYPE_NAME: &str = "endpoint-attribute-filter";

/// A threshold's comparison: `value <op> threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Operator {
    /// `<`
    LessThan,
    /// `<=`
    LessThanOrEqual,
    /// `>`
    GreaterThan,
    /// `>=`
    GreaterThanOrEqual,
    /// `==`
    Equal,
    /// `!=`
    NotEqual,
}

impl Operator {
    /// Whether `value <op> threshold` holds.
    #[allow(clippy::float_cmp)]
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Operator::LessThan => value < threshold,
            Operator::LessThanOrEqual => value <= threshold,
            Operator::GreaterThan => value > threshold,
            Operator::GreaterThanOrEqual => value >= threshold,
            Operator::Equal => value == threshold,
            Operator::NotEqual => value != threshold,
        }
    }
}

/// `algorithm.threshold`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Threshold {
    /// The comparison.
    pub operator: Operator,
    /// The value compared with.
    #[serde(default)]
    pub value: f64,
}

/// `algorithm`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FilterAlgorithm {
    /// `threshold`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The threshold (required with `threshold`).
    pub threshold: Option<Threshold>,
}

/// The `endpoint-attribute-filter` parameters (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct EndpointAttributeFilterParameters {
    /// The attribute read.
    pub attribute: String,
    /// The plugin publishing it.
    pub producer: Option<String>,
    /// `Pass` or `Fail` (empty: `Pass`).
    pub on_missing: String,
    /// Keep every candidate when none passes.
    pub fallback_on_empty: bool,
    /// The test applied.
    pub algorithm: FilterAlgorithm,
}

/// The filter (see the module docs).
#[derive(Debug)]
pub struct EndpointAttributeFilter {
    table: Arc<EndpointAttributes>,
    column: Column,
    pass_on_missing: bool,
    fallback_on_empty: bool,
    operator: Operator,
    threshold: f64,
}

impl Filter for EndpointAttributeFilter {
    fn filter(&self, _cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>) {
        self.table.read(|values| {
            let keeps = |e: &&Arc<Endpoint>| match values.get(self.column, e.id()) {
                Some(v) => self.operator.holds(v, self.threshold),
                None => self.pass_on_missing,
            };
            if self.fallback_on_empty && !candidates.iter().any(keeps) {
                return;
            }
            candidates.retain(keeps);
        });
    }
}

/// Builds an `endpoint-attribute-filter`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let p: EndpointAttributeFilterParameters = args.parse()?;
    if p.attribute.is_empty() {
        return Err(PluginError::invalid(
            "attribute",
            "endpoint attribute filter requires a non-empty attribute",
        ));
    }
    let pass_on_missing = match p.on_missing.as_str() {
        "" | "Pass" => true,
        "Fail" => false,
        other => {
            return Err(PluginError::invalid(
                "onMissing",
                format!("must be \"Pass\" or \"Fail\", got {other:?}"),
            ));
        }
    };
    if p.algorithm.kind != "threshold" {
        return Err(PluginError::invalid(
            "algorithm.type",
            format!("must be \"threshold\", got {:?}", p.algorithm.kind),
        ));
    }
    let Some(threshold) = p.algorithm.threshold else {
        return Err(PluginError::invalid(
            "algorithm.threshold",
            "required when algorithm.type is \"threshold\"",
        ));
    };
    check_attribute_key("attribute", &p.attribute, p.producer.as_deref())?;
    let table = EndpointAttributes::of(args.resources);
    let column = column_of(&table, "attribute", &p.attribute)?;
    Ok(PluginInstance::filter(Arc::new(EndpointAttributeFilter {
        table,
        column,
        pass_on_missing,
        fallback_on_empty: p.fallback_on_empty,
        operator: threshold.operator,
        threshold: threshold.value,
    })))
}
