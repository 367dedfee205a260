//! Label and field selectors as the API server reads them.
//!
//! Labels: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, joined by commas.
//! Fields: `path=v`, `path==v`, `path!=v` on `metadata.name`, `metadata.namespace` and
//! `status.podIP`/`status.phase` (what the double's tests use).

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed label selector; empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

/// A parsed field selector; empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// Splits on commas outside parentheses.
fn split_top(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn set_values(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    /// Parses a `labelSelector` parameter.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for part in split_top(text) {
            let requirement = if let Some((key, values)) = part.split_once(" notin ") {
                Requirement::NotIn(
                    key.trim().to_string(),
                    set_values(values).ok_or_else(|| format!("bad set in {part:?}"))?,
                )
            } else if let Some((key, values)) = part.split_once(" in ") {
                Requirement::In(
                    key.trim().to_string(),
                    set_values(values).ok_or_else(|| format!("bad set in {part:?}"))?,
                )
            } else if let Some((key, value)) = part.split_once("!=") {
                Requirement::NotEquals(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, value)) = part.split_once("==") {
                Requirement::Equals(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, value)) = part.split_once('=') {
                Requirement::Equals(key.trim().to_string(), value.trim().to_string())
            } else if let Some(key) = part.strip_prefix('!') {
                Requirement::NotExists(key.trim().to_string())
            } else {
                Requirement::Exists(part.to_string())
            };
            let key = match &requirement {
                Requirement::Equals(k, _)
                | Requirement::NotEquals(k, _)
                | Requirement::Exists(k)
                | Requirement::NotExists(k)
                | Requirement::In(k, _)
                | Requirement::NotIn(k, _) => k,
            };
            if key.is_empty() || key.contains(char::is_whitespace) {
                return Err(format!("invalid label selector requirement {part:?}"));
            }
            requirements.push(requirement);
        }
        Ok(LabelSelector(requirements))
    }

    /// Whether `object`'s `metadata.labels` satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let get = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
            Requirement::In(k, vs) => get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|v| !vs.iter().any(|x| x == v)),
        })
    }
}

impl FieldSelector {
    /// Parses a `fieldSelector` parameter.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in split_top(text) {
            let (path, equal, value) = if let Some((p, v)) = part.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = part.split_once("==") {
                (p, true, v)
            } else if let Some((p, v)) = part.split_once('=') {
                (p, true, v)
            } else {
                return Err(format!("invalid field selector {part:?}"));
            };
            let path = path.trim();
            if !matches!(
                path,
                "metadata.name" | "metadata.namespace" | "status.podIP" | "status.phase"
            ) {
                return Err(format!("field label not supported: {path}"));
            }
            terms.push((path.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    /// Whether `object` satisfies every term.
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, equal, value)| {
            let pointer = format!("/{}", path.replace('.', "/"));
            let actual = object
                .pointer(&pointer)
                .and_then(Value::as_str)
                .unwrap_or("");
            (actual == value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn label_requirements() {
        let pod = json!({"metadata": {"name": "a", "labels": {"app": "vllm", "tier": "gpu"}}});
        for (selector, expected) in [
            ("app=vllm", true),
            ("app==vllm,tier=gpu", true),
            ("app!=vllm", false),
            ("app", true),
            ("!zone", true),
            ("tier in (cpu, gpu)", true),
            ("tier notin (gpu)", false),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(selector).unwrap().matches(&pod),
                expected,
                "{selector}"
            );
        }
        assert!(LabelSelector::parse("a b").is_err());
    }

    #[test]
    fn field_terms() {
        let pod = json!({"metadata": {"name": "a", "namespace": "ns"}});
        assert!(
            FieldSelector::parse("metadata.name=a")
                .unwrap()
                .matches(&pod)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=a")
                .unwrap()
                .matches(&pod)
        );
        assert!(FieldSelector::parse("spec.nodeName=x").is_err());
    }
}
