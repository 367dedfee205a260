//! `session-id-producer`: upstream's producer that reads a request's session id from a
//! header or a cookie and publishes it as the request attribute `SessionIDDataKey` under the
//! producer's name, for session-affinity scorers and filters to read.
//!
//! | parameter | meaning |
//! |---|---|
//! | `headerName` | the header whose value (trimmed) is the session id |
//! | `cookieName` | the cookie, in the `cookie` header, whose value (trimmed) is the session id |
//!
//! Exactly one of the two is set. A session-affinity source reads it as
//! `{attribute: SessionIDDataKey, producer: NAME}` (the producer's name, by default
//! `session-id-producer`). The adapters copy the header (or `cookie`) from the client's
//! request when its value is at most 64 bytes: a longer `cookie` header gives no session.
//!
//! ```
//! use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
//! use shepherd_scorers::attributes::AttributeProducer;
//! use shepherd_scorers::attributes::session_id::{SessionIdParameters, SessionIdProducer};
//!
//! let p: SessionIdParameters =
//!     serde_json::from_value(serde_json::json!({"cookieName": "llm-d-session"})).unwrap();
//! let producer = SessionIdProducer::new(&p).unwrap();
//! let mut request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! request.headers.push(("cookie".into(), "theme=dark; llm-d-session=abc".into()));
//! assert_eq!(producer.value(&request), Some("abc"));
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::request::{ConfiguredHeaders, InferenceRequest};

use super::{AttributeKey, AttributeProducer, RequestAttributes, header_value};

/// Registry type name (also the default producer name of the attribute).
pub const TYPE_NAME: &str = "session-id-producer";

/// The attribute's data type, as upstream names it.
pub const ATTRIBUTE: &str = "SessionIDDataKey";

/// The header cookies arrive in.
pub const COOKIE_HEADER: &str = "cookie";

/// `session-id-producer` parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SessionIdParameters {
    /// The header carrying the session id.
    pub header_name: String,
    /// The cookie carrying the session id.
    pub cookie_name: String,
}

/// Where the session id is read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Header(String),
    Cookie(String),
}

/// Reads the session id (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionIdProducer {
    source: Source,
}

impl SessionIdProducer {
    /// The producer for `p`.
    ///
    /// # Errors
    ///
    /// Upstream's: neither or both of `headerName` and `cookieName` set.
    pub fn new(p: &SessionIdParameters) -> Result<Self, PluginError> {
        let header = p.header_name.trim().to_ascii_lowercase();
        let cookie = p.cookie_name.trim().to_string();
        let source = match (header.is_empty(), cookie.is_empty()) {
            (false, true) => Source::Header(header),
            (true, false) => Source::Cookie(cookie),
            (true, true) => {
                return Err(PluginError::Other(format!(
                    "'{TYPE_NAME}' requires exactly one of headerName or cookieName to be set"
                )));
            }
            (false, false) => {
                return Err(PluginError::Other(format!(
                    "'{TYPE_NAME}' requires exactly one of headerName or cookieName to be set, not both"
                )));
            }
        };
        Ok(SessionIdProducer { source })
    }

    /// The header the producer reads (`cookie` for a cookie).
    pub fn header(&self) -> &str {
        match &self.source {
            Source::Header(h) => h,
            Source::Cookie(_) => COOKIE_HEADER,
        }
    }

    /// The key a producer named `name` publishes under.
    pub fn key(name: &str) -> AttributeKey {
        let producer = if name.is_empty() { TYPE_NAME } else { name };
        AttributeKey::new(ATTRIBUTE, producer)
    }
}

/// The value of cookie `name` in a `cookie` header (`a=1; b=2`), as upstream parses it.
pub fn cookie_value<'h>(header: &'h str, name: &str) -> Option<&'h str> {
    if name.is_empty() {
        return None;
    }
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

impl AttributeProducer for SessionIdProducer {
    fn value<'r>(&self, request: &'r InferenceRequest) -> Option<&'r str> {
        let value = match &self.source {
            Source::Header(h) => header_value(request, h)?,
            Source::Cookie(c) => cookie_value(header_value(request, COOKIE_HEADER)?, c)?,
        };
        Some(value.trim()).filter(|v| !v.is_empty())
    }
}

/// Builds a `session-id-producer`: it registers the attribute under its name and asks the
/// adapters for its header.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let p: SessionIdParameters = args.parse()?;
    let producer = SessionIdProducer::new(&p)?;
    if !ConfiguredHeaders::of(args.resources).add(producer.header()) {
        return Err(PluginError::Other(format!(
            "header `{}`: the config's plugins read too many request headers",
            producer.header()
        )));
    }
    RequestAttributes::of(args.resources)
        .register(SessionIdProducer::key(args.name), Arc::new(producer))
        .map_err(|e| PluginError::Other(e.to_string()))?;
    Ok(PluginInstance::default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use shepherd_scheduler_core::request::Prompt;

    fn producer(json: serde_json::Value) -> Result<SessionIdProducer, PluginError> {
        SessionIdProducer::new(&serde_json::from_value(json).unwrap())
    }

    fn request(headers: &[(&str, &str)]) -> InferenceRequest {
        headers.iter().fold(
            InferenceRequest::new("r", "m", Prompt::Text("hi".into())),
            |r, (name, value)| r.with_header(name, *value),
        )
    }

    // The cases of upstream's producer_test.go.
    #[test]
    fn exactly_one_source() {
        let neither = producer(serde_json::json!({})).unwrap_err();
        assert!(
            neither
                .to_string()
                .contains("exactly one of headerName or cookieName")
        );
        let both = producer(serde_json::json!({"headerName": "x-session-id", "cookieName": "s"}))
            .unwrap_err();
        assert!(both.to_string().contains("not both"));
        assert!(producer(serde_json::json!({"headerName": "  "})).is_err());
        assert!(
            serde_json::from_value::<SessionIdParameters>(serde_json::json!({"header": "x"}))
                .is_err()
        );
    }

    #[test]
    fn header_source_reads_trimmed_value() {
        let p = producer(serde_json::json!({"headerName": "X-Conversation"})).unwrap();
        assert_eq!(p.header(), "x-conversation");
        assert_eq!(
            p.value(&request(&[("x-conversation", "  abc  ")])),
            Some("abc")
        );
        assert_eq!(p.value(&request(&[("x-conversation", "   ")])), None);
        assert_eq!(p.value(&request(&[])), None);
    }

    #[test]
    fn x_session_id_is_the_adapters_session_key() {
        let p = producer(serde_json::json!({"headerName": "x-session-id"})).unwrap();
        let mut r = request(&[]);
        r.session_key = Some("s-1".into());
        assert_eq!(p.value(&r), Some("s-1"));
    }

    #[test]
    fn cookie_source_parses_the_cookie_header() {
        let p = producer(serde_json::json!({"cookieName": "llm-d-session"})).unwrap();
        assert_eq!(p.header(), "cookie");
        assert_eq!(
            p.value(&request(&[("cookie", "llm-d-session=abc123")])),
            Some("abc123")
        );
        assert_eq!(
            p.value(&request(&[("cookie", "a=1; llm-d-session=xyz; b=2")])),
            Some("xyz")
        );
        assert_eq!(p.value(&request(&[("cookie", "a=1; b=2")])), None);
        assert_eq!(p.value(&request(&[("cookie", "llm-d-session")])), None);
        assert_eq!(cookie_value("a=1", ""), None);
    }

    #[test]
    fn key_carries_the_producer_name() {
        assert_eq!(
            SessionIdProducer::key("my-sessions").to_string(),
            "SessionIDDataKey/my-sessions"
        );
        assert_eq!(
            SessionIdProducer::key("").to_string(),
            "SessionIDDataKey/session-id-producer"
        );
    }
}
