//! Kubernetes label selectors of the `matchLabels` kind: `key=value` pairs, all of which a pod's
//! labels must carry. Parsed from upstream's `--endpoint-selector` form (`app=vllm,env=prod`),
//! checked against Kubernetes' rules for label keys and values, and written back in the form
//! the API server's `labelSelector` parameter takes.

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

/// Most labels a selector may name (the InferencePool CRD's `maxProperties`).
pub const MAX_SELECTOR_LABELS: usize = 64;

/// A label selector that a pod's labels must all match.
///
/// ```
/// use shepherd_runtime::discovery::LabelSelector;
///
/// let selector: LabelSelector = "app=vllm, llm-d.ai/role=decode".parse().unwrap();
/// assert_eq!(selector.to_string(), "app=vllm,llm-d.ai/role=decode");
/// let labels = [("app", "vllm"), ("llm-d.ai/role", "decode"), ("zone", "a")];
/// assert!(selector.matches(labels.iter().map(|&(k, v)| (k, v))));
/// assert!("app".parse::<LabelSelector>().is_err()); // key=value only
/// assert!("app=a b".parse::<LabelSelector>().is_err()); // not a label value
/// assert!("".parse::<LabelSelector>().is_err()); // selects nothing in particular
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    labels: BTreeMap<String, String>,
}

/// Why a selector was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SelectorError {
    /// No label at all: a selector must narrow the pods.
    #[error("the selector names no label (give at least one key=value)")]
    Empty,
    /// More labels than the CRD allows.
    #[error("the selector names {0} labels; at most {MAX_SELECTOR_LABELS} are allowed")]
    TooMany(usize),
    /// An entry that is not `key=value`.
    #[error("selector entry {0:?} is not key=value")]
    NotPair(String),
    /// A key that is not a Kubernetes label key.
    #[error("{0:?} is not a label key ([prefix/]name, name of 1-63 alphanumerics, '-', '_', '.')")]
    Key(String),
    /// A value that is not a Kubernetes label value.
    #[error(
        "{value:?} (for {key:?}) is not a label value (at most 63 alphanumerics, '-', '_', '.')"
    )]
    Value {
        /// The key.
        key: String,
        /// The refused value.
        value: String,
    },
    /// The same key twice with different values.
    #[error("the selector gives {0:?} twice")]
    Duplicate(String),
}

impl LabelSelector {
    /// A selector of `labels`, checked.
    pub fn from_labels<K, V>(
        labels: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, SelectorError>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let mut map = BTreeMap::new();
        for (key, value) in labels {
            let (key, value) = (key.into(), value.into());
            if !is_label_key(&key) {
                return Err(SelectorError::Key(key));
            }
            if !is_label_value(&value) {
                return Err(SelectorError::Value { key, value });
            }
            if let Some(previous) = map.insert(key.clone(), value.clone())
                && previous != value
            {
                return Err(SelectorError::Duplicate(key));
            }
        }
        if map.is_empty() {
            return Err(SelectorError::Empty);
        }
        if map.len() > MAX_SELECTOR_LABELS {
            return Err(SelectorError::TooMany(map.len()));
        }
        Ok(LabelSelector { labels: map })
    }

    /// The required labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// Whether `labels` carry every required label.
    pub fn matches<'a>(&self, labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
        let mut found = 0;
        for (key, value) in labels {
            if self.labels.get(key).is_some_and(|v| v == value) {
                found += 1;
            }
        }
        found == self.labels.len()
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = SelectorError;

    /// Parses `key=value[,key=value...]` (spaces around entries are ignored).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut pairs = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some((key, value)) = entry.split_once('=') else {
                return Err(SelectorError::NotPair(entry.to_string()));
            };
            let value = value.strip_prefix('=').unwrap_or(value);
            pairs.push((key.trim().to_string(), value.trim().to_string()));
        }
        LabelSelector::from_labels(pairs)
    }
}

/// `key=value,...`, the form of the API server's `labelSelector` parameter.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (key, value)) in self.labels.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{key}={value}")?;
        }
        Ok(())
    }
}

/// Whether `key` is a Kubernetes label key: an optional DNS-subdomain prefix (at most 253
/// characters) and `/`, then a name of 1–63 alphanumerics, `-`, `_` or `.`, starting and
/// ending with an alphanumeric.
pub fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && !is_dns_subdomain(prefix)
    {
        return false;
    }
    !name.is_empty() && is_label_value(name)
}

/// Whether `value` is a Kubernetes label value: empty, or at most 63 alphanumerics, `-`, `_`
/// or `.`, starting and ending with an alphanumeric.
pub fn is_label_value(value: &str) -> bool {
    if value.is_empty() {
        return true;
    }
    let bytes = value.as_bytes();
    value.len() <= 63
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn is_dns_subdomain(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|part| {
            let bytes = part.as_bytes();
            !part.is_empty()
                && part.len() <= 63
                && bytes
                    .first()
                    .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && bytes
                    .last()
                    .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values() {
        assert!(is_label_key("app"));
        assert!(is_label_key("llm-d.ai/role"));
        assert!(!is_label_key("Bad_Prefix/x"));
        assert!(!is_label_key("/x"));
        assert!(!is_label_key("a/"));
        assert!(!is_label_key(&"a".repeat(64)));
        assert!(is_label_value(""));
        assert!(!is_label_value("-a"));
        assert!(!is_label_value("a b"));
    }

    #[test]
    fn parses_double_equals_and_refuses_conflicts() {
        let selector: LabelSelector = "a==1,b=2".parse().unwrap();
        assert_eq!(selector.to_string(), "a=1,b=2");
        assert_eq!(
            "a=1,a=2".parse::<LabelSelector>(),
            Err(SelectorError::Duplicate("a".into()))
        );
        let many: String = (0..65).map(|i| format!("k{i}=v,")).collect();
        assert_eq!(
            many.parse::<LabelSelector>(),
            Err(SelectorError::TooMany(65))
        );
    }
}
