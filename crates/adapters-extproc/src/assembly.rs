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
//! The buffer grows with the bytes that arrive, never ahead of them: `content-length` is the
//! client's word, and reserving it would let header-only streams claim memory they never send
//! (10,000 streams announcing 16 MiB would reserve 156 GiB). The announced length only caps
//! the growth (a body that arrives as announced gets no spare room), and every growth is
//! charged first to the picker's [`BodyBudget`] (when the assembly is
//! [charged to one](RequestAssembly::charged_to)); a refused growth is answered 503
//! `body_buffer_full`.
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

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::HeaderMap;
use shepherd_scheduler_core::request::{
    InferenceRequest, MAX_PLUGIN_HEADER_LEN, PLUGIN_HEADERS, ParserSet,
};

use shepherd_runtime::telemetry::{TRACEPARENT, TRACESTATE};

use crate::budget::{BodyBudget, BodyReservation};
use crate::error::Rejection;
use crate::headers::{has_header, header_value};
use crate::options::ExtProcOptions;
use shepherd_runtime::policies::{
    OBJECTIVE_HEADER, OBJECTIVE_HEADER_LEGACY, RequestPolicies, Rewritten,
};

/// One request being received. See the [module docs](self).
#[derive(Debug)]
pub struct RequestAssembly {
    path: String,
    request_id: Option<String>,
    fairness_id: Option<String>,
    priority: Option<i32>,
    session: Option<String>,
    traceparent: Option<String>,
    tracestate: Option<String>,
    /// Headers plugins read (the latency objectives), as sent.
    plugin_headers: Vec<(String, String)>,
    /// Owned routing headers the client sent, to be removed.
    client_owned: Vec<String>,
    /// The announced body length (`content-length`): a ceiling on growth, never a reservation.
    declared: Option<usize>,
    body: Vec<u8>,
    /// The body buffer's capacity, charged to the budget.
    held: BodyReservation,
}

/// Longest `traceparent` / `tracestate` taken from a client (W3C bounds `tracestate` at 32
/// list members; a longer value is ignored, not cut).
const MAX_TRACE_HEADER_LEN: usize = 1024;

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
            traceparent: text(TRACEPARENT).filter(|v| v.len() <= MAX_TRACE_HEADER_LEN),
            tracestate: text(TRACESTATE).filter(|v| v.len() <= MAX_TRACE_HEADER_LEN),
            // The InferenceObjective the request names rides with them (as upstream's
            // name, whichever of the two names the client used).
            plugin_headers: PLUGIN_HEADERS
                .iter()
                .filter_map(|name| Some(((*name).to_string(), text(name)?)))
                .chain(
                    text(OBJECTIVE_HEADER)
                        .or_else(|| text(OBJECTIVE_HEADER_LEGACY))
                        .map(|v| (OBJECTIVE_HEADER.to_string(), v)),
                )
                .filter(|(_, v)| v.len() <= MAX_PLUGIN_HEADER_LEN)
                .collect(),
            client_owned,
            declared,
            // Nothing is reserved until bytes arrive: the client's word is not memory.
            body: Vec::new(),
            held: BodyReservation::unbudgeted(),
        })
    }

    /// Also hands plugins the headers of `configured` the client sent (the names the
    /// config's plugins read, [`ConfiguredHeaders`](shepherd_scheduler_core::request::ConfiguredHeaders)),
    /// trimmed, as the latency objectives are.
    pub fn with_configured_headers(
        mut self,
        headers: Option<&HeaderMap>,
        configured: &[String],
    ) -> Self {
        for name in configured {
            if self.plugin_headers.iter().any(|(n, _)| n == name) {
                continue;
            }
            let value = header_value(headers, name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty() && v.len() <= MAX_PLUGIN_HEADER_LEN);
            if let Some(value) = value {
                self.plugin_headers.push((name.clone(), value));
            }
        }
        self
    }

    /// The client's `traceparent` and `tracestate` (taken: asked once, at the pick).
    pub fn trace_context(&mut self) -> (Option<String>, Option<String>) {
        (self.traceparent.take(), self.tracestate.take())
    }

    /// Charges the body's buffer to `budget` from now on. Call it before the first body byte
    /// arrives (the [`Exchange`](crate::Exchange) does, at the headers); on an assembly that
    /// already holds body bytes it changes nothing.
    pub fn charged_to(mut self, budget: &Arc<BodyBudget>) -> Self {
        if self.body.capacity() == 0 {
            self.held = budget.reservation();
        }
        self
    }

    /// The request path (`:path`), query string included.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Body bytes received so far.
    pub fn body_len(&self) -> usize {
        self.body.len()
    }

    /// Bytes reserved for the body (its buffer's capacity): what has arrived, plus at most as
    /// much again of room to grow, within the announced length and the body limit.
    pub fn reserved_bytes(&self) -> usize {
        self.body.capacity()
    }

    /// Takes the guard of the body's bytes out of the assembly, so that they stay counted while
    /// the body is held after [`RequestAssembly::finish`] (waiting for the pick, then streamed
    /// back). The assembly's own guard then counts nothing.
    pub fn take_reservation(&mut self) -> BodyReservation {
        std::mem::replace(&mut self.held, BodyReservation::unbudgeted())
    }

    /// Routing headers the picker owns that the client sent (to be removed).
    pub fn client_owned_headers(&self) -> &[String] {
        &self.client_owned
    }

    /// Appends a body chunk; refuses one that takes the body over the limit (413), or whose
    /// room the budget cannot give (503).
    pub fn push_body(&mut self, chunk: &[u8], options: &ExtProcOptions) -> Result<(), Rejection> {
        self.check_limit(chunk.len(), options)?;
        self.make_room(chunk.len(), options)?;
        self.body.extend_from_slice(chunk);
        Ok(())
    }

    /// [`RequestAssembly::push_body`] for a chunk the caller owns: the first chunk becomes the
    /// buffer without a copy (a BUFFERED body is one message of up to the body limit).
    pub fn push_body_vec(
        &mut self,
        chunk: Vec<u8>,
        options: &ExtProcOptions,
    ) -> Result<(), Rejection> {
        if self.body.capacity() != 0 {
            return self.push_body(&chunk, options);
        }
        self.check_limit(chunk.len(), options)?;
        self.held.grow_to(chunk.capacity())?;
        self.body = chunk;
        Ok(())
    }

    fn check_limit(&self, extra: usize, options: &ExtProcOptions) -> Result<(), Rejection> {
        let size = self.body.len().saturating_add(extra);
        if size > options.max_body_bytes {
            return Err(Rejection::BodyTooLarge {
                size,
                limit: options.max_body_bytes,
            });
        }
        Ok(())
    }

    /// Makes room for `extra` more bytes: the buffer doubles (to amortize many small chunks),
    /// but never past the body limit, nor past the announced length when the body is still
    /// within it; the growth is charged to the budget before the buffer grows.
    fn make_room(&mut self, extra: usize, options: &ExtProcOptions) -> Result<(), Rejection> {
        let len = self.body.len();
        let need = len.saturating_add(extra);
        if need <= self.body.capacity() {
            return Ok(());
        }
        let mut target = need.max(
            self.body
                .capacity()
                .saturating_mul(2)
                .min(options.max_body_bytes),
        );
        if let Some(declared) = self.declared.filter(|d| *d >= need) {
            target = target.min(declared);
        }
        self.held.grow_to(target)?;
        self.body.reserve_exact(target - len);
        Ok(())
    }

    /// Parses the body with `parsers` into an [`InferenceRequest`] (id, fairness id, priority
    /// and session from the headers); returns it with the body. See [`Self::finish_with`].
    pub fn finish(
        self,
        options: &ExtProcOptions,
        parsers: &ParserSet,
    ) -> Result<(InferenceRequest, Vec<u8>), Rejection> {
        self.finish_with(options, parsers, None)
            .map(|(request, body, _)| (request, body))
    }

    /// As [`Self::finish`], applying the pool's `policies` first: a model rewrite replaces
    /// the body's model (the body returned is the one to forward) before the model is checked
    /// against `knownModels`; without `x-shepherd-priority`, the priority is the named
    /// `InferenceObjective`'s (default 0).
    pub fn finish_with(
        self,
        options: &ExtProcOptions,
        parsers: &ParserSet,
        policies: Option<&RequestPolicies>,
    ) -> Result<(InferenceRequest, Vec<u8>, Option<Rewritten>), Rejection> {
        let limits = options.effective_parse_limits();
        let mut request = parsers
            .parse(&self.path, &self.body, &limits)
            .map_err(Rejection::BadBody)?;
        let mut body = self.body;
        let rewritten = policies.and_then(|p| p.rewrite(&mut request, &body, &limits));
        if let Some(new_body) = rewritten.as_ref().and_then(|r| r.body.as_ref()) {
            body.clear();
            body.extend_from_slice(new_body);
        }
        if let Some(models) = &options.known_models
            && !request.model.is_empty()
            && !models.contains(&request.model)
            && !request.lora.as_ref().is_some_and(|l| models.contains(l))
        {
            return Err(Rejection::UnknownModel(request.model));
        }
        request.assign_id(self.request_id.as_deref());
        match (self.priority, policies) {
            (Some(priority), _) => request.priority = priority,
            (None, Some(policies)) => {
                let objective = self
                    .plugin_headers
                    .iter()
                    .find(|(name, _)| name == OBJECTIVE_HEADER)
                    .map(|(_, value)| value.as_str());
                request.priority = policies.objective_priority(objective);
            }
            (None, None) => {}
        }
        request.fairness_id = self.fairness_id;
        request.session_key = self.session;
        request.headers = self.plugin_headers;
        Ok((request, body, rewritten))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use envoy_types::pb::envoy::config::core::v3::HeaderValue;

    use super::*;

    fn headers(content_length: Option<usize>) -> HeaderMap {
        let header = |k: &str, v: String| HeaderValue {
            key: k.into(),
            raw_value: v.into_bytes(),
            ..Default::default()
        };
        let mut headers = vec![header(":path", "/v1/completions".into())];
        if let Some(n) = content_length {
            headers.push(header("content-length", n.to_string()));
        }
        HeaderMap { headers }
    }

    #[test]
    fn the_headers_the_configs_plugins_read_are_handed_to_them() {
        let options = ExtProcOptions::default();
        let mut map = headers(None);
        for (k, v) in [("x-preferred-zone", " b "), ("x-slo-ttft-ms", "250")] {
            map.headers.push(HeaderValue {
                key: k.into(),
                raw_value: v.as_bytes().to_vec(),
                ..Default::default()
            });
        }
        let configured = ["x-preferred-zone".to_string(), "x-slo-ttft-ms".to_string()];
        let assembly = RequestAssembly::from_headers(Some(&map), &options)
            .unwrap()
            .with_configured_headers(Some(&map), &configured);
        assert_eq!(
            assembly.plugin_headers,
            [
                ("x-slo-ttft-ms".to_string(), "250".to_string()),
                ("x-preferred-zone".to_string(), "b".to_string())
            ]
        );
    }

    #[test]
    fn an_announced_length_reserves_nothing() {
        let options = ExtProcOptions::default();
        let budget = Arc::new(BodyBudget::new(options.max_buffered_bytes));
        let assembly =
            RequestAssembly::from_headers(Some(&headers(Some(options.max_body_bytes))), &options)
                .unwrap()
                .charged_to(&budget);
        assert_eq!(assembly.reserved_bytes(), 0);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn the_buffer_grows_with_what_arrives_capped_by_the_announced_length() {
        let options = ExtProcOptions::default();
        let budget = Arc::new(BodyBudget::new(options.max_buffered_bytes));
        let declared = 100_000;
        let mut assembly = RequestAssembly::from_headers(Some(&headers(Some(declared))), &options)
            .unwrap()
            .charged_to(&budget);
        let chunk = [b'a'; 10_000];
        assembly.push_body(&chunk, &options).unwrap();
        assert_eq!(assembly.reserved_bytes(), 10_000);
        let mut previous = assembly.reserved_bytes();
        for _ in 1..10 {
            assembly.push_body(&chunk, &options).unwrap();
            let reserved = assembly.reserved_bytes();
            // At most doubling, never past what was announced, always what arrived.
            assert!(reserved >= assembly.body_len());
            assert!(reserved <= (2 * previous).max(assembly.body_len()));
            assert!(reserved <= declared);
            assert_eq!(budget.used(), reserved);
            previous = reserved;
        }
        assert_eq!(assembly.reserved_bytes(), declared);
        // A client that sends more than it announced still only gets what it sends.
        assembly.push_body(&chunk, &options).unwrap();
        assert!(assembly.reserved_bytes() <= 2 * declared);
        let held = assembly.take_reservation();
        assert_eq!(held.held(), assembly.reserved_bytes());
        drop(assembly);
        assert_eq!(budget.used(), held.held());
        drop(held);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn without_an_announced_length_growth_stops_at_the_body_limit() {
        let options = ExtProcOptions::default().with_max_body_bytes(50_000);
        let mut assembly = RequestAssembly::from_headers(Some(&headers(None)), &options).unwrap();
        for _ in 0..4 {
            assembly.push_body(&[b'a'; 12_000], &options).unwrap();
        }
        assert_eq!(assembly.body_len(), 48_000);
        assert_eq!(assembly.reserved_bytes(), 48_000);
        // Doubling would give 96,000: the limit caps it.
        assembly.push_body(&[b'a'; 1_000], &options).unwrap();
        assert_eq!(assembly.reserved_bytes(), 50_000);
        let error = assembly.push_body(&[b'a'; 1_001], &options).unwrap_err();
        assert_eq!(error.http_status(), 413);
        assert_eq!(assembly.reserved_bytes(), 50_000);
    }

    #[test]
    fn a_growth_the_budget_refuses_is_503_and_its_bytes_are_given_back() {
        let options = ExtProcOptions::default();
        let budget = Arc::new(BodyBudget::new(1 << 20));
        let mut first = RequestAssembly::from_headers(Some(&headers(None)), &options)
            .unwrap()
            .charged_to(&budget);
        first
            .push_body_vec(vec![b'a'; 800 << 10], &options)
            .unwrap();
        let mut second = RequestAssembly::from_headers(Some(&headers(None)), &options)
            .unwrap()
            .charged_to(&budget);
        second.push_body(&[b'a'; 32 << 10], &options).unwrap();
        let error = second.push_body(&[b'a'; 100 << 10], &options).unwrap_err();
        assert_eq!(
            (error.http_status(), error.reason()),
            (503, "body_buffer_full")
        );
        assert_eq!(budget.refused(), 1);
        drop((first, second));
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn an_owned_first_chunk_becomes_the_buffer() {
        let options = ExtProcOptions::default();
        let budget = Arc::new(BodyBudget::new(options.max_buffered_bytes));
        let mut assembly = RequestAssembly::from_headers(Some(&headers(None)), &options)
            .unwrap()
            .charged_to(&budget);
        let body = br#"{"model":"m","prompt":"hi"}"#.to_vec();
        let capacity = body.capacity();
        assembly.push_body_vec(body, &options).unwrap();
        assert_eq!(budget.used(), capacity);
        let over = vec![0; options.max_body_bytes];
        assert_eq!(
            assembly
                .push_body_vec(over, &options)
                .unwrap_err()
                .http_status(),
            413
        );
    }
}
