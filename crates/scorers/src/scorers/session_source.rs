//! Where `session-affinity-scorer` reads a request's session, in upstream's parameter shape:
//! a `strategy` and its `sessionIdConfig` (or `encodedEndpointHeaderConfig`).

use serde::Deserialize;
use shepherd_scheduler_core::config::PluginError;
use shepherd_scheduler_core::request::InferenceRequest;

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
    /// A request attribute published by another plugin (none exist in Shepherd: never found).
    #[serde(default)]
    pub attribute: Option<String>,
}

/// `sessionIdConfig`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SessionIdConfig {
    /// Sources in priority order (default: the `x-session-id` header).
    pub sources: Vec<SessionSource>,
    /// Seconds a binding survives unused (default 300 upstream).
    pub eviction_ttl_seconds: Option<f64>,
    /// Accepted, not used: expired bindings are dropped when met, or evicted by capacity.
    pub eviction_sweep_seconds: Option<f64>,
}

impl SessionIdConfig {
    /// Checks that every source names exactly one place and the TTL is positive.
    pub(crate) fn check(&self) -> Result<(), PluginError> {
        for source in &self.sources {
            if source.header.is_some() == source.attribute.is_some() {
                return Err(PluginError::invalid(
                    "sessionIdConfig.sources",
                    "each source sets exactly one of `header` and `attribute`",
                ));
            }
        }
        if let Some(ttl) = self.eviction_ttl_seconds
            && !(ttl.is_finite() && ttl > 0.0)
        {
            return Err(PluginError::invalid(
                "sessionIdConfig.evictionTtlSeconds",
                "must be above 0",
            ));
        }
        Ok(())
    }

    /// The request's session id: the first source that has one.
    pub fn session_of<'r>(&self, request: &'r InferenceRequest) -> Option<&'r str> {
        if self.sources.is_empty() {
            return request.session_key.as_deref();
        }
        self.sources.iter().find_map(|source| {
            let header = source.header.as_deref()?;
            if header.eq_ignore_ascii_case(SESSION_ID_HEADER) {
                request.session_key.as_deref()
            } else {
                request
                    .headers
                    .iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case(header))
                    .map(|(_, value)| value.as_str())
            }
            .filter(|v| !v.is_empty())
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
        let c = config(
            serde_json::json!({"sources": [{"header": "x-session-id"}, {"header": "X-User"}]}),
        );
        assert_eq!(c.session_of(&r), Some("alice"));
        r.session_key = Some("s1".into());
        assert_eq!(c.session_of(&r), Some("s1"));
        let attribute_only =
            config(serde_json::json!({"sources": [{"attribute": "agent-identity"}]}));
        assert_eq!(attribute_only.session_of(&r), None);
        assert_eq!(SessionIdConfig::default().session_of(&r), Some("s1"));
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
        assert!(
            config(serde_json::json!({"evictionTtlSeconds": 0}))
                .check()
                .is_err()
        );
        assert!(serde_json::from_value::<SessionIdConfig>(serde_json::json!({"ttl": 1})).is_err());
    }
}
