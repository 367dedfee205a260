//! Kubernetes label selectors in their string form (`labels.Parse`): comma-separated
//! requirements `key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)`,
//! `key notin (a,b)`. All must hold.
//!
//! ```
//! use shepherd_scorers::screener::selector::Selector;
//!
//! let s: Selector = "disaggregatedset.x-k8s.io/name=my-set, tier in (a, b), !canary".parse().unwrap();
//! let labels = [("disaggregatedset.x-k8s.io/name", "my-set"), ("tier", "b")];
//! assert!(s.matches(|k| labels.iter().find(|(l, _)| *l == k).map(|(_, v)| *v)));
//! assert!("a in b".parse::<Selector>().is_err());
//! ```

use std::str::FromStr;

/// Longest selector read.
pub const MAX_SELECTOR_LEN: usize = 4096;

/// One requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Exists(String),
    NotExists(String),
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed selector (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector(Vec<Requirement>);

fn is_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b))
    });
    name_ok && prefix_ok
}

fn is_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && value.as_bytes()[0].is_ascii_alphanumeric()
            && value.as_bytes()[value.len() - 1].is_ascii_alphanumeric())
}

/// Splits at commas outside parentheses.
fn split_top(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err("unbalanced parentheses".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses".into());
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn set_of(text: &str) -> Result<Vec<String>, String> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format!("{text:?} is not a parenthesized set of values"))?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    if let Some(bad) = values.iter().find(|v| !is_value(v)) {
        return Err(format!("{bad:?} is not a label value"));
    }
    Ok(values)
}

fn requirement(part: &str) -> Result<Requirement, String> {
    let part = part.trim();
    let key_checked = |key: &str| {
        let key = key.trim();
        if is_key(key) {
            Ok(key.to_string())
        } else {
            Err(format!("{key:?} is not a label key"))
        }
    };
    let value_checked = |value: &str| {
        let value = value.trim();
        if is_value(value) {
            Ok(value.to_string())
        } else {
            Err(format!("{value:?} is not a label value"))
        }
    };
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::NotExists(key_checked(key)?));
    }
    if let Some((key, value)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(
            key_checked(key)?,
            value_checked(value)?,
        ));
    }
    if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(Requirement::Equals(
            key_checked(key)?,
            value_checked(value)?,
        ));
    }
    let mut words = part.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default();
    match words.next().map(str::trim_start) {
        None => Ok(Requirement::Exists(key_checked(key)?)),
        Some(rest) => {
            if let Some(set) = rest.strip_prefix("notin") {
                Ok(Requirement::NotIn(key_checked(key)?, set_of(set)?))
            } else if let Some(set) = rest.strip_prefix("in") {
                Ok(Requirement::In(key_checked(key)?, set_of(set)?))
            } else {
                Err(format!("{part:?} is not a label requirement"))
            }
        }
    }
}

impl FromStr for Selector {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.len() > MAX_SELECTOR_LEN {
            return Err(format!("longer than {MAX_SELECTOR_LEN} bytes"));
        }
        if text.trim().is_empty() {
            return Ok(Selector::default());
        }
        split_top(text)?
            .into_iter()
            .map(requirement)
            .collect::<Result<Vec<_>, _>>()
            .map(Selector)
    }
}

impl Selector {
    /// Whether labels (read through `label`) satisfy every requirement.
    pub fn matches<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::NotExists(k) => label(k).is_none(),
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn matches(selector: &str, labels: &[(&str, &str)]) -> bool {
        let s: Selector = selector.parse().unwrap();
        s.matches(|k| labels.iter().find(|(l, _)| *l == k).map(|(_, v)| *v))
    }

    #[test]
    fn every_operator() {
        let labels = [("app", "vllm"), ("tier", "gold")];
        assert!(matches("app=vllm", &labels));
        assert!(matches("app==vllm,tier", &labels));
        assert!(matches("app!=sglang,!canary", &labels));
        assert!(matches("tier in (gold, silver)", &labels));
        assert!(matches("tier notin (bronze),zone notin (a)", &labels));
        assert!(!matches("app=sglang", &labels));
        assert!(!matches("!tier", &labels));
        assert!(!matches("zone in (a)", &labels));
    }

    #[test]
    fn bad_selectors_are_refused() {
        for bad in [
            "a b",
            "a in b",
            "x=(",
            "=v",
            "k=v v",
            "a in (b",
            "Bad/Prefix=x",
        ] {
            assert!(bad.parse::<Selector>().is_err(), "{bad}");
        }
    }
}
