//! `request-attribute-reporter`: a value computed from a response's token usage, reported
//! back to the proxy (upstream's request-control plugin of that type).
//!
//! Each reporter has one attribute: a `key` (`namespace`, default `envoy.lb`, and `name`), an
//! `expression` giving a number, and an optional `condition` giving a boolean, both in the CEL
//! subset of [`expr`] over the variable `usage`. `usage` is what the response reported, shaped
//! as upstream's: `prompt_tokens`, `completion_tokens` and `total_tokens` always present (0
//! when the response reported none), and `prompt_tokens_details.cached_tokens` when the server
//! reported cached tokens.
//!
//! When the response ends, the condition (if any) must be `true`; then the expression's
//! number, truncated to an integer, is reported unless it is 0. A condition that is not a
//! boolean, an expression that is not a number, or an evaluation error reports nothing (the
//! adapters log it at debug level). The ext_proc adapter sends the value as dynamic metadata
//! (`namespace` → `name` → number) with its answer to the end of the response, as upstream.
//!
//! ```
//! use shepherd_scheduler_core::completion::Usage;
//! use shepherd_scheduler_core::report::AttributeReporter;
//!
//! let reporter = AttributeReporter::from_parameters("cost", &serde_json::json!({
//!     "attributes": [{
//!         "key": {"name": "x-gateway-inference-request-cost"},
//!         "expression": "usage.prompt_tokens + usage.completion_tokens",
//!         "condition": "has(usage.prompt_tokens) && has(usage.completion_tokens)",
//!     }]
//! })).unwrap();
//! assert_eq!(reporter.namespace(), "envoy.lb");
//! let usage = Usage { prompt_tokens: 7, completion_tokens: 3, cached_tokens: None };
//! assert_eq!(reporter.report(Some(&usage)), Ok(Some(10)));
//! assert_eq!(reporter.report(None), Ok(None)); // 0 is not reported
//! ```

pub mod expr;

use serde::Deserialize;
use thiserror::Error;

use crate::completion::Usage;
use expr::{EvalError, Expr, Value};

/// Upstream's plugin type.
pub const TYPE_NAME: &str = "request-attribute-reporter";

/// The dynamic-metadata namespace when the key names none.
pub const DEFAULT_NAMESPACE: &str = "envoy.lb";

/// One `request-attribute-reporter` instance, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct AttributeReporter {
    plugin: String,
    namespace: String,
    key: String,
    expression: Expr,
    condition: Option<Expr>,
}

/// Why a response gave no value beyond "condition false" or "0".
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The condition or the expression failed.
    #[error("{0}")]
    Eval(#[from] EvalError),
    /// The condition gave something other than a boolean.
    #[error("the condition gave a {0}, not a bool")]
    ConditionNotBool(&'static str),
    /// The expression gave something other than a number.
    #[error("the expression gave a {0}, not a number")]
    NotANumber(&'static str),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Parameters {
    #[serde(default)]
    attributes: Vec<AttributeParams>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AttributeParams {
    #[serde(default)]
    key: KeyParams,
    #[serde(default)]
    expression: String,
    #[serde(default)]
    condition: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyParams {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
}

impl AttributeReporter {
    /// Validates plugin `plugin`'s `parameters` as upstream does: exactly one attribute, a
    /// non-empty `key.name` and `expression`, both expressions in the supported subset.
    pub fn from_parameters(plugin: &str, parameters: &serde_json::Value) -> Result<Self, String> {
        let p: Parameters = if parameters.is_null() {
            Parameters::default()
        } else {
            Parameters::deserialize(parameters).map_err(|e| e.to_string())?
        };
        let [attribute] = <[AttributeParams; 1]>::try_from(p.attributes)
            .map_err(|_| "attributes must contain exactly one entry".to_string())?;
        if attribute.key.name.is_empty() {
            return Err("attributes[0].key.name cannot be empty".into());
        }
        if attribute.expression.trim().is_empty() {
            return Err("attributes[0].expression cannot be empty".into());
        }
        let expression = Expr::parse(&attribute.expression)
            .map_err(|e| format!("attributes[0].expression: {e}"))?;
        let condition = if attribute.condition.trim().is_empty() {
            None
        } else {
            Some(
                Expr::parse(&attribute.condition)
                    .map_err(|e| format!("attributes[0].condition: {e}"))?,
            )
        };
        let namespace = if attribute.key.namespace.is_empty() {
            DEFAULT_NAMESPACE.to_string()
        } else {
            attribute.key.namespace
        };
        Ok(AttributeReporter {
            plugin: plugin.to_string(),
            namespace,
            key: attribute.key.name,
            expression,
            condition,
        })
    }

    /// The plugin's name in the config.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// The dynamic-metadata namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The key within the namespace.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The value to report for a response that reported `usage` (`None`: none): `Ok(None)`
    /// when the condition is false or the value is 0.
    pub fn report(&self, usage: Option<&Usage>) -> Result<Option<i64>, ReportError> {
        let usage = usage_value(usage);
        if let Some(condition) = &self.condition {
            match condition.eval(&usage)? {
                Value::Bool(true) => {}
                Value::Bool(false) => return Ok(None),
                other => return Err(ReportError::ConditionNotBool(type_name(&other))),
            }
        }
        match self.expression.eval(&usage)? {
            // As upstream's int64(double): truncated toward zero, saturating.
            Value::Number(n) if n.is_finite() => {
                let value = n.trunc() as i64;
                Ok((value != 0).then_some(value))
            }
            Value::Number(_) => Ok(None),
            other => Err(ReportError::NotANumber(type_name(&other))),
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Object(_) => "object",
    }
}

/// `usage` as upstream's expressions see it (see the [module docs](self)).
pub fn usage_value(usage: Option<&Usage>) -> Value {
    let usage = usage.copied().unwrap_or_default();
    let count = |n: u64| Value::Number(n as f64);
    let mut fields = vec![
        ("prompt_tokens", count(usage.prompt_tokens)),
        ("completion_tokens", count(usage.completion_tokens)),
        (
            "total_tokens",
            count(usage.prompt_tokens.saturating_add(usage.completion_tokens)),
        ),
    ];
    if let Some(cached) = usage.cached_tokens {
        fields.push((
            "prompt_tokens_details",
            Value::object([("cached_tokens", count(cached))]),
        ));
    }
    Value::object(fields)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reporter(expression: &str, condition: &str) -> AttributeReporter {
        AttributeReporter::from_parameters(
            "r",
            &json!({"attributes": [{"key": {"name": "prompt_tokens"},
                "expression": expression, "condition": condition}]}),
        )
        .unwrap()
    }

    fn usage(prompt: u64, completion: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_tokens: None,
        }
    }

    /// Upstream's plugin_test.go configuration cases.
    #[test]
    fn upstreams_validation() {
        let ok = AttributeReporter::from_parameters(
            "r",
            &json!({"attributes": [{"key": {"name": "test-attribute", "namespace": "custom-ns"},
                "expression": "usage.prompt_tokens"}]}),
        )
        .unwrap();
        assert_eq!((ok.namespace(), ok.key()), ("custom-ns", "test-attribute"));
        for (params, says) in [
            (
                json!({"attributes": [{"key": {}, "expression": "usage.prompt_tokens"}]}),
                "key.name",
            ),
            (
                json!({"attributes": [{"key": {"name": "a"}}]}),
                "expression cannot be empty",
            ),
            (
                json!({"attributes": [{"key": {"name": "a"}, "expression": "usage.prompt_tokens + -"}]}),
                "attributes[0].expression",
            ),
            (
                json!({"attributes": [{"key": {"name": "a"}, "expression": "usage.prompt_tokens",
                    "condition": "usage.prompt_tokens > "}]}),
                "attributes[0].condition",
            ),
            (json!({"attributes": []}), "exactly one"),
            (
                json!({"attributes": [
                    {"key": {"name": "a"}, "expression": "usage.prompt_tokens"},
                    {"key": {"name": "b"}, "expression": "usage.prompt_tokens"}]}),
                "exactly one",
            ),
            (
                json!({"attributes": [{"key": {"name": "a"}, "expresion": "1"}]}),
                "unknown field",
            ),
        ] {
            let err = AttributeReporter::from_parameters("r", &params).unwrap_err();
            assert!(err.contains(says), "{params}: {err}");
        }
    }

    /// Upstream's plugin_test.go response cases.
    #[test]
    fn upstreams_responses() {
        assert_eq!(
            reporter("usage.prompt_tokens", "").report(Some(&usage(10, 5))),
            Ok(Some(10))
        );
        // Zero is not reported.
        assert_eq!(
            reporter("usage.prompt_tokens", "has(usage.prompt_tokens)").report(Some(&usage(0, 5))),
            Ok(None)
        );
        assert_eq!(
            reporter("usage.prompt_tokens", "usage.completion_tokens > 0")
                .report(Some(&usage(10, 0))),
            Ok(None)
        );
        assert_eq!(
            reporter("usage.prompt_tokens", "usage.prompt_tokens").report(Some(&usage(10, 5))),
            Err(ReportError::ConditionNotBool("number"))
        );
        assert_eq!(
            reporter("'not a number'", "").report(Some(&usage(10, 5))),
            Err(ReportError::NotANumber("string"))
        );
        assert!(matches!(
            reporter("usage.non_existent_field", "").report(Some(&usage(10, 5))),
            Err(ReportError::Eval(EvalError::NoSuchField(_)))
        ));
        let guarded = "(has(usage.prompt_tokens) ? usage.prompt_tokens : 0) + (has(usage.completion_tokens) ? usage.completion_tokens : 0)";
        assert_eq!(
            reporter(guarded, "").report(Some(&usage(10, 5))),
            Ok(Some(15))
        );
        assert_eq!(reporter(guarded, "").report(None), Ok(None));
    }

    #[test]
    fn cached_tokens_appear_when_reported() {
        let r = reporter(
            "has(usage.prompt_tokens_details) ? usage.prompt_tokens_details.cached_tokens : -1",
            "",
        );
        assert_eq!(r.report(Some(&usage(10, 5))), Ok(Some(-1)));
        let cached = Usage {
            cached_tokens: Some(4),
            ..usage(10, 5)
        };
        assert_eq!(r.report(Some(&cached)), Ok(Some(4)));
        assert_eq!(
            reporter("usage.total_tokens / 2", "").report(Some(&usage(10, 5))),
            Ok(Some(7))
        );
    }
}
