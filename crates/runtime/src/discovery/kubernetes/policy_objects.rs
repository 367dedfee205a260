//! `InferenceObjective` and `InferenceModelRewrite` objects read from the JSON the API server
//! sends: which pool they belong to, the objective's priority, the rewrite's rules.
//!
//! Both kinds reference their pool with `spec.poolRef` (`name`, and `group` defaulting to
//! `inference.networking.k8s.io` as the CRDs default it); only the objects of this picker's
//! pool count. A rule match of a type other than `Exact` (the only one the CRD allows) makes
//! the rule unusable; it is skipped with a log line rather than widened into a generic rule.

use serde_json::Value;

use crate::config::DEFAULT_POOL_GROUP;
use crate::policies::{RewriteObject, RewriteRule, RewriteTarget};

/// Whether an object's `spec.poolRef` names the pool `name` of `group`.
///
/// ```
/// use serde_json::json;
/// use shepherd_runtime::discovery::kubernetes::references_pool;
///
/// let object = json!({"spec": {"poolRef": {"name": "llama"}}});
/// assert!(references_pool(&object, "llama", "inference.networking.k8s.io"));
/// assert!(!references_pool(&object, "llama", "inference.networking.x-k8s.io"));
/// ```
pub fn references_pool(object: &Value, name: &str, group: &str) -> bool {
    let Some(pool_ref) = object.pointer("/spec/poolRef") else {
        return false;
    };
    let ref_group = pool_ref
        .get("group")
        .and_then(Value::as_str)
        .filter(|g| !g.is_empty())
        .unwrap_or(DEFAULT_POOL_GROUP);
    pool_ref.get("name").and_then(Value::as_str) == Some(name) && ref_group == group
}

/// An objective's `spec.priority`, `None` when absent or out of `i32`.
pub fn objective_priority(object: &Value) -> Option<i32> {
    object
        .pointer("/spec/priority")
        .and_then(Value::as_i64)
        .and_then(|p| i32::try_from(p).ok())
}

/// A rewrite object's rules, as [`RewriteObject`] (name and creation time from `metadata`).
pub fn rewrite_object(object: &Value) -> RewriteObject {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let name = text("/metadata/name");
    let rules = object
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .map(|rules| {
            rules
                .iter()
                .enumerate()
                .filter_map(|(i, rule)| rewrite_rule(&name, i, rule))
                .collect()
        })
        .unwrap_or_default();
    RewriteObject {
        created: text("/metadata/creationTimestamp"),
        name,
        rules,
    }
}

fn rewrite_rule(object: &str, index: usize, rule: &Value) -> Option<RewriteRule> {
    let mut matches = Vec::new();
    for entry in rule
        .get("matches")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(model) = entry.get("model") else {
            continue;
        };
        let kind = model.get("type").and_then(Value::as_str).unwrap_or("Exact");
        let value = model.get("value").and_then(Value::as_str);
        match (kind, value) {
            ("Exact", Some(value)) if !value.is_empty() => matches.push(value.to_string()),
            _ => {
                tracing::warn!(
                    rewrite = object,
                    rule = index,
                    match_type = kind,
                    "InferenceModelRewrite rule skipped: a model match needs type Exact and a value"
                );
                return None;
            }
        }
    }
    let targets: Vec<RewriteTarget> = rule
        .get("targets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|target| {
            let model = target.get("modelRewrite").and_then(Value::as_str)?;
            let weight = target
                .get("weight")
                .and_then(Value::as_u64)
                .and_then(|w| u32::try_from(w).ok());
            Some(RewriteTarget {
                model: model.to_string(),
                weight,
            })
        })
        .filter(|t| !t.model.is_empty())
        .collect();
    if targets.is_empty() {
        tracing::warn!(
            rewrite = object,
            rule = index,
            "InferenceModelRewrite rule skipped: no targets"
        );
        return None;
    }
    Some(RewriteRule { matches, targets })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn a_rewrite_reads_as_upstream_writes_it() {
        let object = json!({
            "metadata": {"name": "canary", "creationTimestamp": "2026-01-01T00:00:05Z"},
            "spec": {
                "poolRef": {"group": "inference.networking.k8s.io", "name": "pool"},
                "rules": [
                    {"matches": [{"model": {"type": "Exact", "value": "food-review"}}],
                     "targets": [{"modelRewrite": "v1", "weight": 90}, {"modelRewrite": "v2", "weight": 10}]},
                    {"targets": [{"modelRewrite": "fallback"}]},
                    {"matches": [{"model": {"type": "Prefix", "value": "f"}}], "targets": [{"modelRewrite": "x"}]},
                    {"matches": [{"model": {"value": "no-targets"}}]}
                ]
            }
        });
        let rewrite = rewrite_object(&object);
        assert_eq!(rewrite.name, "canary");
        assert_eq!(rewrite.created, "2026-01-01T00:00:05Z");
        assert_eq!(rewrite.rules.len(), 2);
        assert_eq!(rewrite.rules[0].matches, ["food-review"]);
        assert_eq!(rewrite.rules[0].targets[1].weight, Some(10));
        assert!(rewrite.rules[1].matches.is_empty());
        assert!(references_pool(&object, "pool", DEFAULT_POOL_GROUP));
        assert!(!references_pool(&object, "other", DEFAULT_POOL_GROUP));
    }

    #[test]
    fn priorities_out_of_range_are_none() {
        assert_eq!(
            objective_priority(&json!({"spec": {"priority": -2}})),
            Some(-2)
        );
        assert_eq!(
            objective_priority(&json!({"spec": {"priority": 1e12}})),
            None
        );
        assert_eq!(objective_priority(&json!({"spec": {}})), None);
        assert_eq!(
            objective_priority(&json!({"spec": {"priority": 9_999_999_999i64}})),
            None
        );
    }
}
