//! `agent-identity`: upstream's request-header plugin that resolves a coding agent's session
//! from the headers the agent sends and publishes it as the request attribute
//! `agent-identity`.
//!
//! The headers are tried in order, the first non-empty one wins: `additionalSessionHeaders`
//! (in the order given), then `x-claude-code-session-id` (Claude Code),
//! `x-session-affinity` (OpenCode), `session-id` and `session_id` (Codex). The adapters copy
//! each of them from the client's request (values of at most 64 bytes).
//!
//! A session-affinity scorer or filter reads the identity with the source
//! `{attribute: agent-identity}`. As upstream's director, flow control takes it as the
//! request's fairness id when no fairness header (`x-llm-d-inference-fairness-id`) is sent
//! (`shepherd_runtime::flow::FlowController::request_of`), so each agent session is its own
//! flow. Alpha upstream: needs `--allow-experimental-plugins`.
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `additionalSessionHeaders` | `[]` | header names checked before the built-in ones |
//!
//! ```
//! use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
//! use shepherd_scorers::attributes::AttributeProducer;
//! use shepherd_scorers::attributes::agent_identity::AgentIdentity;
//!
//! let plugin = AgentIdentity::new(&["X-My-Agent-Session".to_string()]);
//! let mut request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! request.headers.push(("session-id".into(), "codex-1".into()));
//! assert_eq!(plugin.value(&request), Some("codex-1"));
//! request.headers.push(("x-my-agent-session".into(), "mine".into()));
//! assert_eq!(plugin.value(&request), Some("mine"));
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::request::{ConfiguredHeaders, InferenceRequest};

use super::{AttributeKey, AttributeProducer, RequestAttributes, header_value};

/// Registry type name.
pub const TYPE_NAME: &str = "agent-identity";

/// The attribute's data type (published with no producer name, as upstream).
pub const ATTRIBUTE: &str = "agent-identity";

/// The built-in session headers, in upstream's order.
pub const DEFAULT_SESSION_HEADERS: [&str; 4] = [
    "x-claude-code-session-id",
    "x-session-affinity",
    "session-id",
    "session_id",
];

/// `agent-identity` parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct AgentIdentityParameters {
    /// Header names checked before the built-in ones.
    pub additional_session_headers: Vec<String>,
}

/// Resolves the agent's session from its headers (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentIdentity {
    headers: Vec<String>,
}

impl AgentIdentity {
    /// The plugin with `additional` headers before the built-in ones (lower-cased; empty
    /// names dropped).
    pub fn new(additional: &[String]) -> Self {
        let headers = additional
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .chain(DEFAULT_SESSION_HEADERS.iter().map(|h| (*h).to_string()))
            .filter(|h| !h.is_empty())
            .collect();
        AgentIdentity { headers }
    }

    /// The headers tried, in order.
    pub fn headers(&self) -> &[String] {
        &self.headers
    }

    /// The key the identity is published under.
    pub fn key() -> AttributeKey {
        AttributeKey::new(ATTRIBUTE, "")
    }
}

impl AttributeProducer for AgentIdentity {
    fn value<'r>(&self, request: &'r InferenceRequest) -> Option<&'r str> {
        self.headers.iter().find_map(|h| header_value(request, h))
    }
}

/// Builds an `agent-identity` plugin: it registers the attribute and asks the adapters for
/// its headers.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let p: AgentIdentityParameters = args.parse()?;
    let plugin = AgentIdentity::new(&p.additional_session_headers);
    let configured = ConfiguredHeaders::of(args.resources);
    for header in plugin.headers() {
        if !configured.add(header) {
            return Err(PluginError::invalid(
                "additionalSessionHeaders",
                format!("header `{header}`: the config's plugins read too many request headers"),
            ));
        }
    }
    RequestAttributes::of(args.resources)
        .register(AgentIdentity::key(), Arc::new(plugin))
        .map_err(|e| PluginError::Other(e.to_string()))?;
    Ok(PluginInstance::default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use shepherd_scheduler_core::request::Prompt;

    fn request(headers: &[(&str, &str)]) -> InferenceRequest {
        headers.iter().fold(
            InferenceRequest::new("r", "m", Prompt::Text("hi".into())),
            |r, (name, value)| r.with_header(name, *value),
        )
    }

    // Upstream's agent_identity_test.go cases.
    #[test]
    fn built_in_headers_in_priority_order() {
        let p = AgentIdentity::new(&[]);
        assert_eq!(
            p.value(&request(&[("x-claude-code-session-id", "cc-1")])),
            Some("cc-1")
        );
        assert_eq!(
            p.value(&request(&[("x-session-affinity", "oc-1")])),
            Some("oc-1")
        );
        assert_eq!(p.value(&request(&[("session-id", "cx-1")])), Some("cx-1"));
        assert_eq!(p.value(&request(&[("session_id", "cx-0")])), Some("cx-0"));
        // Claude Code's header wins over the others.
        assert_eq!(
            p.value(&request(&[
                ("session-id", "cx-1"),
                ("x-claude-code-session-id", "cc-1"),
                ("x-session-affinity", "oc-1"),
            ])),
            Some("cc-1")
        );
        // Hyphenated Codex form wins over the legacy underscored one.
        assert_eq!(
            p.value(&request(&[("session_id", "old"), ("session-id", "new")])),
            Some("new")
        );
        assert_eq!(p.value(&request(&[("x-other", "v")])), None);
        assert_eq!(p.value(&request(&[("x-session-affinity", "")])), None);
    }

    #[test]
    fn additional_headers_come_first_and_are_lower_cased() {
        let p = AgentIdentity::new(&["X-My-Agent-Session".into(), "x-another-agent-id".into()]);
        assert_eq!(p.headers()[0], "x-my-agent-session");
        assert_eq!(p.headers().len(), 6);
        assert_eq!(
            p.value(&request(&[
                ("x-claude-code-session-id", "cc"),
                ("x-another-agent-id", "another"),
            ])),
            Some("another")
        );
    }

    #[test]
    fn parameters_parse_as_upstream() {
        let p: AgentIdentityParameters = serde_json::from_value(serde_json::json!({
            "additionalSessionHeaders": ["x-my-agent-session", "x-another-agent-id"]
        }))
        .unwrap();
        assert_eq!(p.additional_session_headers.len(), 2);
        for bad in [
            serde_json::json!({"additionalSessionHeaders": "x"}),
            serde_json::json!({"sessionHeaders": ["x"]}),
        ] {
            assert!(serde_json::from_value::<AgentIdentityParameters>(bad).is_err());
        }
    }
}
