//! An `InferencePool`'s spec, read from the object the API server sends and checked the way
//! its CRD checks it, so that an invalid edit is refused here (and the last valid pool kept)
//! instead of emptying or widening the pool.
//!
//! Two shapes are read:
//!
//! | group / version | selector | ports | endpoint picker |
//! |---|---|---|---|
//! | `inference.networking.k8s.io/v1` | `spec.selector.matchLabels` | `spec.targetPorts[].number` (1–8, unique) | `spec.endpointPickerRef` |
//! | `inference.networking.x-k8s.io/v1alpha2` | `spec.selector` (a map) | `spec.targetPortNumber` | `spec.extensionRef` |

use serde_json::Value;
use thiserror::Error;

use crate::config::{ALPHA_POOL_GROUP, MAX_TARGET_PORTS};
use crate::discovery::{LabelSelector, SelectorError};

/// What Shepherd uses of an InferencePool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    /// The pods of the pool: those of its namespace carrying these labels.
    pub selector: LabelSelector,
    /// The model servers' ports on each pod: every one is an endpoint (data-parallel ranks).
    pub target_ports: Vec<u16>,
    /// `spec.appProtocol` (`http`, `kubernetes.io/h2c`), for logs.
    pub app_protocol: Option<String>,
    /// The endpoint picker the pool names (`spec.endpointPickerRef.name`), for logs.
    pub endpoint_picker: Option<String>,
}

/// Why a pool's spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PoolError {
    /// The object has no `spec` map.
    #[error("the pool has no spec")]
    NoSpec,
    /// The selector is missing or not valid.
    #[error("spec.selector: {0}")]
    Selector(SelectorError),
    /// The selector has a shape other than a map of strings.
    #[error("spec.selector: {0}")]
    SelectorShape(&'static str),
    /// The ports are missing, too many, repeated or out of range.
    #[error("{field}: {reason}")]
    Ports {
        /// The field (`spec.targetPorts`).
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

impl PoolSpec {
    /// Reads the spec of a pool of `group` from its object (a JSON value with `spec`).
    ///
    /// ```
    /// use serde_json::json;
    /// use shepherd_runtime::discovery::kubernetes::PoolSpec;
    ///
    /// let object = json!({"spec": {
    ///     "selector": {"matchLabels": {"app": "vllm"}},
    ///     "targetPorts": [{"number": 8000}, {"number": 8001}],
    ///     "endpointPickerRef": {"name": "shepherd-epp", "port": {"number": 9002}},
    /// }});
    /// let spec = PoolSpec::from_object("inference.networking.k8s.io", &object).unwrap();
    /// assert_eq!(spec.selector.to_string(), "app=vllm");
    /// assert_eq!(spec.target_ports, [8000, 8001]);
    ///
    /// let nine: Vec<_> = (8000..8009).map(|p| json!({"number": p})).collect();
    /// let object = json!({"spec": {"selector": {"matchLabels": {"app": "vllm"}}, "targetPorts": nine}});
    /// assert!(PoolSpec::from_object("inference.networking.k8s.io", &object).is_err());
    /// ```
    pub fn from_object(group: &str, object: &Value) -> Result<Self, PoolError> {
        let spec = object
            .get("spec")
            .filter(|s| s.is_object())
            .ok_or(PoolError::NoSpec)?;
        if group == ALPHA_POOL_GROUP {
            Self::from_v1alpha2(spec)
        } else {
            Self::from_v1(spec)
        }
    }

    fn from_v1(spec: &Value) -> Result<Self, PoolError> {
        let labels = spec
            .get("selector")
            .and_then(|s| s.get("matchLabels"))
            .ok_or(PoolError::Selector(SelectorError::Empty))?;
        let selector = selector(labels)?;
        let field = "spec.targetPorts";
        let Some(list) = spec.get("targetPorts").and_then(Value::as_array) else {
            return Err(ports_error(field, "missing (give 1 to 8 ports)"));
        };
        if list.is_empty() || list.len() > MAX_TARGET_PORTS {
            return Err(ports_error(
                field,
                format!("{} ports; 1 to {MAX_TARGET_PORTS} are allowed", list.len()),
            ));
        }
        let mut target_ports = Vec::with_capacity(list.len());
        for entry in list {
            let port = port_number(entry.get("number"), field)?;
            if target_ports.contains(&port) {
                return Err(ports_error(field, format!("port {port} is given twice")));
            }
            target_ports.push(port);
        }
        let picker = spec.get("endpointPickerRef");
        Ok(PoolSpec {
            selector,
            target_ports,
            app_protocol: string_at(spec.get("appProtocol")),
            endpoint_picker: string_at(picker.and_then(|p| p.get("name"))),
        })
    }

    fn from_v1alpha2(spec: &Value) -> Result<Self, PoolError> {
        let labels = spec
            .get("selector")
            .ok_or(PoolError::Selector(SelectorError::Empty))?;
        let selector = selector(labels)?;
        let port = port_number(spec.get("targetPortNumber"), "spec.targetPortNumber")?;
        Ok(PoolSpec {
            selector,
            target_ports: vec![port],
            app_protocol: None,
            endpoint_picker: string_at(spec.get("extensionRef").and_then(|p| p.get("name"))),
        })
    }
}

fn selector(labels: &Value) -> Result<LabelSelector, PoolError> {
    let map = labels
        .as_object()
        .ok_or(PoolError::SelectorShape("not a map of labels"))?;
    let mut pairs = Vec::with_capacity(map.len());
    for (key, value) in map {
        let value = value
            .as_str()
            .ok_or(PoolError::SelectorShape("a label value is not a string"))?;
        pairs.push((key.as_str(), value));
    }
    LabelSelector::from_labels(pairs).map_err(PoolError::Selector)
}

fn port_number(value: Option<&Value>, field: &'static str) -> Result<u16, PoolError> {
    let Some(value) = value else {
        return Err(ports_error(field, "a port has no number"));
    };
    value
        .as_u64()
        .filter(|&n| (1..=65_535).contains(&n))
        .and_then(|n| u16::try_from(n).ok())
        .ok_or_else(|| ports_error(field, format!("{value} is not a port number (1-65535)")))
}

fn ports_error(field: &'static str, reason: impl Into<String>) -> PoolError {
    PoolError::Ports {
        field,
        reason: reason.into(),
    }
}

fn string_at(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .map(|s| s.chars().take(253).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_the_alpha_pool() {
        let object = json!({"spec": {"selector": {"app": "vllm"}, "targetPortNumber": 8000,
            "extensionRef": {"name": "epp"}}});
        let spec = PoolSpec::from_object(ALPHA_POOL_GROUP, &object).unwrap();
        assert_eq!(spec.target_ports, [8000]);
        assert_eq!(spec.endpoint_picker.as_deref(), Some("epp"));
    }

    #[test]
    fn refuses_bad_specs() {
        let group = "inference.networking.k8s.io";
        for spec in [
            json!({"selector": {"matchLabels": {}}, "targetPorts": [{"number": 1}]}),
            json!({"selector": {"matchLabels": {"a b": "x"}}, "targetPorts": [{"number": 1}]}),
            json!({"selector": {"matchLabels": {"a": 1}}, "targetPorts": [{"number": 1}]}),
            json!({"selector": {"matchLabels": {"a": "b"}}, "targetPorts": []}),
            json!({"selector": {"matchLabels": {"a": "b"}}, "targetPorts": [{"number": 0}]}),
            json!({"selector": {"matchLabels": {"a": "b"}}, "targetPorts": [{"number": 70000}]}),
            json!({"selector": {"matchLabels": {"a": "b"}}, "targetPorts": [{"number": 1}, {"number": 1}]}),
        ] {
            let object = json!({ "spec": spec });
            assert!(PoolSpec::from_object(group, &object).is_err(), "{object}");
        }
        assert_eq!(
            PoolSpec::from_object(group, &json!({})),
            Err(PoolError::NoSpec)
        );
    }
}
