//! Putting one request together from the messages Envoy sends: the headers first (path, request
//! id, fairness id, priority, session, and the latency objectives `x-slo-ttft-ms` /
//! `x-slo-tpot-ms` handed to plugins), then the body, buffered up to a limit, then the parse
//! by the parser the config's [`ParserSet`] gives for the path (a path none takes is refused
//! with 404 and `x-shepherd-dropped-reason: unsupported_path`; with a fallback parser such as
//! `passthrough-parser` it is routed without payload signals).
//!
//! The limit is enforced as early as possible: a `content-length` over it is refused at the
//! headers, a body that grows over it is refused at the chunk that crosses it — the picker
//! never holds more than `max_body_bytes` of one request.
//!
//! ```
//! use envoy_types::pb::envoy::config::core::v3::{HeaderMap, HeaderValue};
//! use shepherd_adapters_extproc::assembly::RequestAssembly;
//! use shepherd_adapters_extproc::ExtProcOptions;
//! use shepherd_scheduler_core::request::ParserSet;
//!
//! let header = |k: &str, v: &str| HeaderValue { key: k.into(), raw_value: v.as_bytes().to_vec(), ..Default::default() };
//! let headers = HeaderMap { headers: vec![
//!     header(":path", "/v1/completions"),
//!     header("x-request-id", "r-7"),
//!     header("X-SLO-TTFT-MS", " 250 "),
//! ] };
//! let options = ExtProcOptions::default();
//! let mut assembly = RequestAssembly::from_headers(Some(&headers), &options).unwrap();
//! assembly.push_body(br#"{"model":"llama","prompt":"Hi"}"#, &options).unwrap();
//! let (request, body) = assembly.finish(&options, &ParserSet::upstream_default()).unwrap();
//! assert_eq!((request.id.as_str(), request.model.as_str(), body.len()), ("r-7", "llama", 31));
//! assert_eq!(request.header("x-slo-ttft-ms"), Some("250"));
//! assert_eq!(request.header("x-slo-tpot-ms"), None);
//! ```

use envoy_types::pb::envoy::config::core::v3::HeaderMap;
use shepherd_scheduler_core::request::{
    InferenceRequest, MAX_PLUGIN_HEADER_LEN, PLUGIN_HEADERS, ParserSet,
};

use crate::error::Rejection;
use crate::headers::{has_header, header_value};
use crate::options::ExtProcOptions;

/// One request being received. See the [module docs](self).
#[derive(Debug)]
pub struct RequestAssembly {
    path: String,
    request_id: Option<String>,
    fairness_id: Option<String>,
    priority: Option<i32>,
    session: Option<String>,
    /// Headers plugins read (the latency objectives), as sent.
    plugin_headers: Vec<(String, String)>,
    /// Owned routing headers the client sent, to be removed.
    client_owned: Vec<String>,
    body: Vec<u8>,
}

impl RequestAssembly {
    /// Starts a request from its headers. Refuses a `content-length` over the body limit.
    pub fn from_headers(
        headers: Option<&HeaderMap>,
        options: &ExtProcOptions,
    ) -> Result<Self, Rejection> {
        let names = &options.headers;
        let text = |name: &str| {
            header_value(headers, name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let declared = text("content-length").and_then(|v| v.parse::<usize>().ok());
        if let Some(size) = declared
            && size > options.max_body_bytes
        {
            return Err(Rejection::BodyTooLarge {
                size,
                limit: options.max_body_bytes,
            });
        }
        let client_owned = names
            .owned
            .iter()
            .filter(|name| has_header(headers, name))
            .cloned()
            .collect();
        Ok(RequestAssembly {
            path: text(":path").unwrap_or_default(),
            request_id: text(&names.request_id),
            fairness_id: text(&names.fairness_id).or_else(|| text(&names.fairness_id_legacy)),
            priority: text(&names.priority).and_then(|v| v.parse().ok()),
            session: text(&names.session),
            plugin_headers: PLUGIN_HEADERS
                .iter()
                .filter_map(|name| Some(((*name).to_string(), text(name)?)))
                .filter(|(_, v)| v.len() <= MAX_PLUGIN_HEADER_LEN)
                .collect(),
            client_owned,
            // Preallocate what the client announced (already checked against the limit).
            body: Vec::with_capacity(declared.unwrap_or(0)),
        })
    }

    /// The request path (`:path`), query string included.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Body bytes received so far.
    pub fn body_len(&self) -> usize {
        self.body.len()
    }

    /// Routing headers the picker owns that the client sent (to be removed).
    pub fn client_owned_headers(&self) -> &[String] {
        &self.client_owned
    }

    /// Appends a body chunk; refuses one that takes the body over the limit.
    pub fn push_body(&mut self, chunk: &[u8], options: &ExtProcOptions) -> Result<(), Rejection> {
        let size = self.body.len().saturating_add(chunk.len());
        if size > options.max_body_bytes {
            return Err(Rejection::BodyTooLarge {
                size,
                limit: options.max_body_bytes,
            });
        }
        self.body.extend_from_slice(chunk);
        Ok(())
    }

    /// Parses the body with `parsers` into an [`InferenceRequest`] (id, fairness id, priority
    /// and session from the headers) and hands back the body bytes, to be sent on unchanged.
    /// A request without a model (a parser that reads none) skips the known-models check.
    pub fn finish(
        self,
        options: &ExtProcOptions,
        parsers: &ParserSet,
    ) -> Result<(InferenceRequest, Vec<u8>), Rejection> {
        let limits = options.effective_parse_limits();
        let mut request = parsers
            .parse(&self.path, &self.body, &limits)
            .map_err(Rejection::BadBody)?;
        if let Some(models) = &options.known_models
            && !request.model.is_empty()
            && !models.contains(&request.model)
            && !request.lora.as_ref().is_some_and(|l| models.contains(l))
        {
            return Err(Rejection::UnknownModel(request.model));
        }
        request.assign_id(self.request_id.as_deref());
        if let Some(priority) = self.priority {
            request.priority = priority;
        }
        request.fairness_id = self.fairness_id;
        request.session_key = self.session;
        request.headers = self.plugin_headers;
        Ok((request, self.body))
    }
}
