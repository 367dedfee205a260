//! Where `session-affinity-scorer` reads a request's session, in upstream's parameter shape:
//! a `strategy` and its `sessionIdConfig` (or `encodedEndpointHeaderConfig`).

use serde::Deserialize;
use shepherd_scheduler_core::config::PluginError;
use shepherd_scheduler_core::request::InferenceRequest;

use crate::attributes::{AttributeKey, RequestAttributes};

/// The header Shepherd's adapters read into
/// [`InferenceRequest::session_key`](shepherd_scheduler_core::request::InferenceRequest::session_key).
pub const SESSION_ID_HEADER: &str = "x-session-id";

/// Upstream's session strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Stateless: the picked endpoint, encoded in a response header the client echoes. Not
    /// supported: Shepherd's plugins cannot write response headers yet.
    EncodedEndpointHeader,
    /// Stateful: a client session id bound to the endpoint that served it.
    SessionId,
}

/// One place a session id is read from: exactly one of `header` and `attribute`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSource {
    /// A request header.
    #[serde(default)]
    pub header: Option<String>,
    /// A request attribute published by another plugin of the config (`agent-identity`, or
    /// `SessionIDDataKey` from a `session-id-producer`; see [`crate::attributes`]).
    #[serde(default)]
    pub attribute: Option<String>,
    /// The plugin publishing the attribute (empty: the attribute's producer-agnostic key).
    #[serde(default)]
    pub producer: Option<String>,
}

/// `sessionIdConfig`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SessionIdConfig {
    /// Sources in priority order (default: the `x-session-id` header).
    pub sources: Vec<SessionSource>,
    /// Seconds a binding survives unused (default 300 upstream; 0 means the default).
    pub eviction_ttl_seconds: Option<f64>,
    /// Accepted, not used: expired bindings are dropped when met, or evicted by capacity.
    pub eviction_sweep_seconds: Option<f64>,
}

impl SessionIdConfig {
    /// Checks, as upstream, that every source names exactly one place and the TTL and sweep
    /// are not negative (0 means the default).
    pub(crate) fn check(&self) -> Result<(), PluginError> {
        for (i, source) in self.sources.iter().enumerate() {
            let header = source.header.as_deref().is_some_and(|h| !h.is_empty());
            let attribute = source.attribute.as_deref().is_some_and(|a| !a.is_empty());
            if header == attribute {
                return Err(PluginError::invalid(
                    format!("sessionIdConfig.sources[{i}]"),
                    "exactly one of header or attribute must be set",
                ));
            }
        }
        for (name, value) in [
            ("evictionTtlSeconds", self.eviction_ttl_seconds),
            ("evictionSweepSeconds", self.eviction_sweep_seconds),
        ] {
            if let Some(v) = value
                && !(v.is_finite() && v >= 0.0)
            {
                return Err(PluginError::invalid(
                    format!("sessionIdConfig.{name}"),
                    format!("must be > 0, got {v}"),
                ));
            }
        }
        Ok(())
    }

    /// The TTL given (`None` when absent or 0: the default applies).
    pub fn ttl_given(&self) -> Option<f64> {
        self.eviction_ttl_seconds.filter(|s| *s > 0.0)
    }

    /// The request headers the sources read (lower case), for the adapters to copy.
    pub fn headers(&self) -> impl Iterator<Item = String> + '_ {
        self.sources
            .iter()
            .filter_map(|s| s.header.as_deref())
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| h != SESSION_ID_HEADER)
    }

    /// The request's session id: the first source that has one (trimmed, not empty).
    /// Attributes are read from `attributes`.
    pub fn session_of<'r>(
        &self,
        request: &'r InferenceRequest,
        attributes: &RequestAttributes,
    ) -> Option<&'r str> {
        if self.sources.is_empty() {
            return request
                .session_key
                .as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty());
        }
        self.sources.iter().find_map(|source| {
            let value = match (&source.header, &source.attribute) {
                (Some(header), _) if !header.is_empty() => {
                    if header.trim().eq_ignore_ascii_case(SESSION_ID_HEADER) {
                        request.session_key.as_deref()
                    } else {
                        request.header(header.trim())
                    }
                }
                (_, Some(attribute)) => {
                    let key = AttributeKey::new(
                        attribute.as_str(),
                        source.producer.as_deref().unwrap_or_default(),
                    );
                    attributes.value(&key, request)
                }
                _ => None,
            };
            value.map(str::trim).filter(|v| !v.is_empty())
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use shepherd_scheduler_core::request::Prompt;

    fn config(json: serde_json::Value) -> SessionIdConfig {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn sources_are_tried_in_order() {
        let mut r = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
        r.headers.push(("x-user".into(), "alice".into()));
        let none = RequestAttributes::default();
        let c = config(
            serde_json::json!({"sources": [{"header": "x-session-id"}, {"header": "X-User"}]}),
        );
        assert_eq!(c.session_of(&r, &none), Some("alice"));
        r.session_key = Some("s1".into());
        assert_eq!(c.session_of(&r, &none), Some("s1"));
        let attribute_only =
            config(serde_json::json!({"sources": [{"attribute": "agent-identity"}]}));
        assert_eq!(attribute_only.session_of(&r, &none), None);
        assert_eq!(SessionIdConfig::default().session_of(&r, &none), Some("s1"));
    }

    #[test]
    fn attribute_sources_read_the_configs_producers() {
        use crate::attributes::agent_identity::AgentIdentity;
        use crate::attributes::session_id::{SessionIdParameters, SessionIdProducer};
        use std::sync::Arc;

        let attributes = RequestAttributes::default();
        attributes
            .register(AgentIdentity::key(), Arc::new(AgentIdentity::new(&[])))
            .unwrap();
        let p = SessionIdParameters {
            header_name: "x-conversation".into(),
            ..Default::default()
        };
        attributes
            .register(
                SessionIdProducer::key("sessions"),
                Arc::new(SessionIdProducer::new(&p).unwrap()),
            )
            .unwrap();
        let mut r = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
        r.headers
            .push(("x-session-affinity".into(), "agent-1".into()));
        let c = config(serde_json::json!({"sources": [
            {"header": "x-session-id"},
            {"attribute": "SessionIDDataKey", "producer": "sessions"},
            {"attribute": "agent-identity"}
        ]}));
        assert_eq!(c.session_of(&r, &attributes), Some("agent-1"));
        r.headers.push(("x-conversation".into(), "conv-9".into()));
        assert_eq!(c.session_of(&r, &attributes), Some("conv-9"));
        r.session_key = Some("s1".into());
        assert_eq!(c.session_of(&r, &attributes), Some("s1"));
    }

    // Upstream's factory-validation table (session_affinity_test.go).
    #[test]
    fn upstream_validation_cases() {
        for ok in [
            serde_json::json!({"sources": [{"attribute": "agent-identity"}]}),
            serde_json::json!({"sources": [{"header": "x-session-id"}, {"attribute": "agent-identity"}]}),
            serde_json::json!({"sources": []}),
            serde_json::json!({"evictionTtlSeconds": 0}),
        ] {
            assert!(config(ok.clone()).check().is_ok(), "{ok}");
        }
        for bad in [
            serde_json::json!({"sources": [{"header": "h", "attribute": "a"}]}),
            serde_json::json!({"evictionTtlSeconds": -1}),
            serde_json::json!({"evictionSweepSeconds": -1}),
        ] {
            assert!(config(bad.clone()).check().is_err(), "{bad}");
        }
    }

    #[test]
    fn malformed_sources_are_errors() {
        assert!(
            config(serde_json::json!({"sources": [{}]}))
                .check()
                .is_err()
        );
        assert!(
            config(serde_json::json!({"sources": [{"header": "a", "attribute": "b"}]}))
                .check()
                .is_err()
        );
        assert!(serde_json::from_value::<SessionIdConfig>(serde_json::json!({"ttl": 1})).is_err());
    }
}
