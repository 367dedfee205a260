//! Metric specifications: which series of a page a signal is read from.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Error;
use crate::prom::Sample;

/// A metric name with optional label equalities, written like a PromQL selector:
/// `vllm:num_requests_waiting` or `nv_trt_llm_request_metrics{request_type="waiting"}`.
/// Label values may be written with or without double quotes (`{request_type=waiting}`), as in
/// the upstream `core-metrics-extractor`. Only `=` is supported.
///
/// ```
/// use shepherd_runtime::mapping::MetricSpec;
///
/// let spec: MetricSpec = "queue_size{status=waiting}".parse().unwrap();
/// assert_eq!(spec.name(), "queue_size");
/// assert_eq!(spec.labels(), [("status".to_string(), "waiting".to_string())]);
/// assert_eq!(spec.to_string(), r#"queue_size{status="waiting"}"#);
/// assert!("queue size".parse::<MetricSpec>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetricSpec {
    name: String,
    labels: Vec<(String, String)>,
}

impl MetricSpec {
    /// A spec matching every series of the metric `name`.
    pub fn new(name: &str) -> Result<MetricSpec, Error> {
        name.parse()
    }

    /// The metric name (suffix included, for histogram parts).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The label equalities a series must satisfy.
    pub fn labels(&self) -> &[(String, String)] {
        &self.labels
    }

    /// Whether `sample` is a series of this spec: same name, and every spec label present
    /// with the same value.
    pub fn matches(&self, sample: &Sample<'_>) -> bool {
        sample.name == self.name
            && self
                .labels
                .iter()
                .all(|(name, value)| sample.label(name) == Some(value.as_str()))
    }
}

fn invalid(spec: &str, reason: &'static str) -> Error {
    Error::InvalidSpec {
        spec: spec.to_owned(),
        reason,
    }
}

impl FromStr for MetricSpec {
    type Err = Error;

    fn from_str(spec: &str) -> Result<MetricSpec, Error> {
        let text = spec.trim();
        let bytes = text.as_bytes();
        let name_end = bytes
            .iter()
            .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b':'))
            .unwrap_or(bytes.len());
        let name = text.get(..name_end).unwrap_or_default();
        if name.as_bytes().first().is_none_or(u8::is_ascii_digit) {
            return Err(invalid(
                spec,
                "expected a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)",
            ));
        }
        let mut rest = text.get(name_end..).unwrap_or_default().trim_start();
        let mut labels = Vec::new();
        if rest.is_empty() {
            return Ok(MetricSpec {
                name: name.to_owned(),
                labels,
            });
        }
        rest = rest
            .strip_prefix('{')
            .ok_or_else(|| invalid(spec, "expected `{` or the end after the metric name"))?;
        loop {
            rest = rest.trim_start();
            if let Some(after) = rest.strip_prefix('}') {
                if !after.trim().is_empty() {
                    return Err(invalid(spec, "unexpected text after `}`"));
                }
                break;
            }
            let label_end = rest
                .bytes()
                .position(|b| !(b.is_ascii_alphanumeric() || b == b'_'))
                .unwrap_or(rest.len());
            let label = rest.get(..label_end).unwrap_or_default();
            if label.as_bytes().first().is_none_or(u8::is_ascii_digit) {
                return Err(invalid(
                    spec,
                    "expected a label name ([a-zA-Z_][a-zA-Z0-9_]*)",
                ));
            }
            rest = rest.get(label_end..).unwrap_or_default().trim_start();
            rest = match rest.strip_prefix('=') {
                Some(after) if !after.starts_with('=') && !after.starts_with('~') => after,
                _ => return Err(invalid(spec, "only `label=value` matchers are supported")),
            };
            rest = rest.trim_start();
            let value;
            (value, rest) = if let Some(quoted) = rest.strip_prefix('"') {
                quoted_value(quoted).ok_or_else(|| invalid(spec, "bad quoted label value"))?
            } else {
                let end = rest
                    .find(|c: char| c == ',' || c == '}' || c.is_whitespace())
                    .unwrap_or(rest.len());
                let (value, after) = rest.split_at(end);
                if value.is_empty() || value.contains('"') {
                    return Err(invalid(spec, "expected a label value"));
                }
                (value.to_owned(), after)
            };
            if labels.iter().any(|(existing, _)| existing == label) {
                return Err(invalid(spec, "duplicate label name"));
            }
            labels.push((label.to_owned(), value));
            rest = rest.trim_start();
            if let Some(after) = rest.strip_prefix(',') {
                rest = after;
            } else if !rest.starts_with('}') {
                return Err(invalid(spec, "expected `,` or `}` after a label"));
            }
        }
        Ok(MetricSpec {
            name: name.to_owned(),
            labels,
        })
    }
}

/// After an opening quote: the unescaped value and what follows the closing quote.
fn quoted_value(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Some((value, text.get(at + 1..)?)),
            '\\' => match chars.next()?.1 {
                '\\' => value.push('\\'),
                '"' => value.push('"'),
                'n' => value.push('\n'),
                _ => return None,
            },
            c => value.push(c),
        }
    }
    None
}

impl fmt::Display for MetricSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if self.labels.is_empty() {
            return Ok(());
        }
        f.write_str("{")?;
        for (i, (name, value)) in self.labels.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let escaped = value
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            write!(f, "{name}=\"{escaped}\"")?;
        }
        f.write_str("}")
    }
}

impl Serialize for MetricSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MetricSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<MetricSpec, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(de::Error::custom)
    }
}

/// Where one signal is read from: metric specs tried in order, the first with a series on the
/// page wins. Empty means the signal is not read.
///
/// In configuration it is a string (one spec, or `""` for none, as upstream writes it) or a
/// list of strings (fallbacks, a Shepherd extension): `kvUsageSpec: [vllm:kv_cache_usage_perc,
/// vllm:gpu_cache_usage_perc]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Specs(Vec<MetricSpec>);

impl Specs {
    /// No spec: the signal is not read.
    pub fn none() -> Specs {
        Specs(Vec::new())
    }

    /// Specs parsed from strings, in order of preference.
    pub fn parse<'s>(specs: impl IntoIterator<Item = &'s str>) -> Result<Specs, Error> {
        specs
            .into_iter()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map(Specs)
    }

    /// The specs, in order of preference.
    pub fn as_slice(&self) -> &[MetricSpec] {
        &self.0
    }

    /// Whether the signal is not read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Vec<MetricSpec>> for Specs {
    fn from(specs: Vec<MetricSpec>) -> Specs {
        Specs(specs)
    }
}

impl Serialize for Specs {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [] => serializer.serialize_str(""),
            [one] => one.serialize(serializer),
            many => many.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Specs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Specs, D::Error> {
        struct SpecsVisitor;

        impl<'de> Visitor<'de> for SpecsVisitor {
            type Value = Specs;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a metric spec string or a list of them")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Specs, E> {
                if text.trim().is_empty() {
                    return Ok(Specs::none());
                }
                Specs::parse([text]).map_err(E::custom)
            }

            fn visit_unit<E: de::Error>(self) -> Result<Specs, E> {
                Ok(Specs::none())
            }

            fn visit_none<E: de::Error>(self) -> Result<Specs, E> {
                Ok(Specs::none())
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Specs, A::Error> {
                let mut specs = Vec::new();
                while let Some(spec) = seq.next_element::<MetricSpec>()? {
                    specs.push(spec);
                }
                Ok(Specs(specs))
            }
        }

        deserializer.deserialize_any(SpecsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_and_without_quotes() {
        let spec: MetricSpec = r#" m{a=x, b="y,z}" ,} "#.parse().unwrap();
        assert_eq!(spec.name(), "m");
        assert_eq!(
            spec.labels(),
            [("a".into(), "x".into()), ("b".into(), "y,z}".into())]
        );
        let spec: MetricSpec = r#"m{a="q\"\\\n"}"#.parse().unwrap();
        assert_eq!(spec.labels()[0].1, "q\"\\\n");
        assert_eq!(spec.to_string().parse::<MetricSpec>().unwrap(), spec);
        assert_eq!(
            "vllm:x".parse::<MetricSpec>().unwrap().to_string(),
            "vllm:x"
        );
    }

    #[test]
    fn bad_specs_are_errors() {
        for bad in [
            "",
            "1m",
            "m{",
            "m{a}",
            "m{a=}",
            "m{a!=b}",
            "m{a=~b}",
            "m{a==b}",
            "m{a=b",
            "m{a=b} x",
            "m x",
            "m{a=\"b}",
            "m{a=\"\\t\"}",
            "m{a=b,a=c}",
            "m{1=b}",
        ] {
            assert!(bad.parse::<MetricSpec>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn specs_deserialize_from_a_string_or_a_list() {
        let one: Specs = serde_json::from_str(r#""a""#).unwrap();
        assert_eq!(one, Specs::parse(["a"]).unwrap());
        let none: Specs = serde_json::from_str(r#""""#).unwrap();
        assert!(none.is_empty());
        let many: Specs = serde_json::from_str(r#"["a", "b{x=y}"]"#).unwrap();
        assert_eq!(many.as_slice().len(), 2);
        assert_eq!(
            serde_json::to_string(&many).unwrap(),
            r#"["a","b{x=\"y\"}"]"#
        );
        assert_eq!(serde_json::to_string(&one).unwrap(), r#""a""#);
        assert_eq!(serde_json::to_string(&none).unwrap(), r#""""#);
        let error = serde_json::from_str::<Specs>(r#""a b""#).unwrap_err();
        assert!(error.to_string().contains("a b"), "{error}");
        assert!(serde_json::from_str::<Specs>("3").is_err());
    }
}
