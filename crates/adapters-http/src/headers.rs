//! Which headers cross the gateway, in each direction.
//!
//! A proxy must not forward *hop-by-hop* headers (RFC 9110 §7.6.1: `Connection`, the headers
//! it names, `Keep-Alive`, `Proxy-*`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`): they
//! describe one connection, and each side of the gateway has its own. Beyond those:
//!
//! - to the model server, `Host` and `Content-Length` are set for the new request, `Expect:
//!   100-continue` is dropped (the gateway has read the whole body already), and
//!   `Accept-Encoding` is dropped (the gateway reads `usage` from the response body, so it
//!   asks for it uncompressed; vLLM does not compress anyway). `Authorization` is replaced by
//!   the server's key when one is configured, dropped when the gateway checks client keys
//!   itself (a client's gateway key is not the server's business), and forwarded otherwise.
//!   `x-request-id` carries the request's id, the client's or a generated one.
//! - to the client, everything else the server sent, plus `x-request-id` when the server did
//!   not echo one.
//!
//! The request headers Shepherd's scheduler reads are those of the ext_proc picker:
//! [`REQUEST_ID`], [`FAIRNESS_ID`], [`PRIORITY`], [`SESSION`], and the latency objectives
//! handed to plugins ([`plugin_headers`]).
//!
//! ```
//! use axum::http::{HeaderMap, HeaderValue};
//! use shepherd_adapters_http::headers::forwardable;
//!
//! let mut headers = HeaderMap::new();
//! headers.insert("connection", HeaderValue::from_static("keep-alive, x-hop"));
//! headers.insert("x-hop", HeaderValue::from_static("1"));
//! headers.insert("content-type", HeaderValue::from_static("application/json"));
//! let kept: Vec<&str> = forwardable(&headers).map(|(name, _)| name.as_str()).collect();
//! assert_eq!(kept, ["content-type"]);
//! ```

use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use shepherd_scheduler_core::disagg::{
    ENCODER_ENDPOINTS_HEADER, KV_CACHE_SOURCE_HEADER, PREFILL_ENDPOINT_HEADER,
};
use shepherd_scheduler_core::request::{MAX_PLUGIN_HEADER_LEN, PLUGIN_HEADERS};

/// The caller's request id.
pub const REQUEST_ID: &str = "x-request-id";
/// The fairness id (flow) of a request.
pub const FAIRNESS_ID: &str = "x-llm-d-inference-fairness-id";
/// The fairness id's older name, read when [`FAIRNESS_ID`] is absent.
pub const FAIRNESS_ID_LEGACY: &str = "x-gateway-inference-fairness-id";
/// The request's priority, an integer (negative = sheddable).
pub const PRIORITY: &str = "x-shepherd-priority";
/// The request's `InferenceObjective` (its priority), taken when trusted.
pub const OBJECTIVE: &str = shepherd_runtime::policies::OBJECTIVE_HEADER;
/// The deprecated alias of [`OBJECTIVE`].
pub const OBJECTIVE_LEGACY: &str = shepherd_runtime::policies::OBJECTIVE_HEADER_LEGACY;
/// The session key for session affinity.
pub const SESSION: &str = "x-session-id";
/// Why flow control dropped a request, on its 429 or 503 answer.
pub const DROPPED_REASON: &str = "x-shepherd-dropped-reason";

/// Whether `name` is hop-by-hop by itself (not counting those a `Connection` header names).
pub fn is_hop_by_hop(name: &HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::PROXY_AUTHENTICATE
        || name == header::PROXY_AUTHORIZATION
        || name == header::TE
        || name == header::TRAILER
        || name == header::TRANSFER_ENCODING
        || name == header::UPGRADE
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
}

/// The headers of `headers` that may cross a proxy: every one but the hop-by-hop headers and
/// those its `Connection` header names.
pub fn forwardable(headers: &HeaderMap) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
    let named = connection_named(headers);
    headers.iter().filter(move |(name, _)| {
        !is_hop_by_hop(name) && !named.iter().any(|n| n.eq_ignore_ascii_case(name.as_str()))
    })
}

/// Names listed in `Connection` headers, besides the usual `close` / `keep-alive`.
fn connection_named(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|n| {
            !n.is_empty()
                && !n.eq_ignore_ascii_case("close")
                && !n.eq_ignore_ascii_case("keep-alive")
        })
        .map(str::to_owned)
        .collect()
}

/// The headers to send a model server: the client's forwardable ones without `Host`,
/// `Content-Length`, `Expect` (the body is already here), `Accept-Encoding`, `Authorization`
/// (the caller sets those it wants), `x-prefiller-host-port`, `x-encoder-hosts-ports` and
/// `x-kv-cache-source-host-port` (only the scheduler names prefill, encode and KV-source
/// servers).
pub fn upstream_request_headers(client: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(client.len());
    for (name, value) in forwardable(client) {
        if name == header::HOST
            || name == header::CONTENT_LENGTH
            || name == header::EXPECT
            || name == header::ACCEPT_ENCODING
            || name == header::AUTHORIZATION
            || name.as_str() == REQUEST_ID
            || name.as_str() == PREFILL_ENDPOINT_HEADER
            || name.as_str() == ENCODER_ENDPOINTS_HEADER
            || name.as_str() == KV_CACHE_SOURCE_HEADER
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// The headers to send the client: the server's forwardable ones.
pub fn client_response_headers(upstream: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(upstream.len() + 1);
    for (name, value) in forwardable(upstream) {
        out.append(name.clone(), value.clone());
    }
    out
}

/// The headers plugins read ([`PLUGIN_HEADERS`]: the latency objectives; and `configured`,
/// the names the config's plugins read) the client sent, trimmed, for
/// [`InferenceRequest::headers`](shepherd_scheduler_core::request::InferenceRequest::headers).
pub fn plugin_headers(headers: &HeaderMap, configured: &[String]) -> Vec<(String, String)> {
    PLUGIN_HEADERS
        .iter()
        .copied()
        .chain(configured.iter().map(String::as_str))
        .filter_map(|name| Some((name.to_string(), text(headers, name)?.to_string())))
        .filter(|(_, v)| v.len() <= MAX_PLUGIN_HEADER_LEN)
        .collect()
}

/// The trimmed, non-empty text of header `name`.
pub fn text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_cannot_name_a_prefill_server() {
        let mut client = HeaderMap::new();
        client.insert(
            "x-prefiller-host-port",
            HeaderValue::from_static("10.9.9.9:1"),
        );
        client.insert("content-type", HeaderValue::from_static("application/json"));
        let sent = upstream_request_headers(&client);
        assert!(sent.get("x-prefiller-host-port").is_none());
        assert!(sent.get("content-type").is_some());
    }

    #[test]
    fn a_client_cannot_name_a_kv_cache_source() {
        let mut client = HeaderMap::new();
        client.insert(
            "x-kv-cache-source-host-port",
            HeaderValue::from_static("10.9.9.9:1"),
        );
        let sent = upstream_request_headers(&client);
        assert!(sent.get("x-kv-cache-source-host-port").is_none());
    }

    #[test]
    fn a_client_cannot_name_encode_servers() {
        let mut client = HeaderMap::new();
        client.insert(
            "x-encoder-hosts-ports",
            HeaderValue::from_static("10.9.9.9:1,10.9.9.9:2"),
        );
        let sent = upstream_request_headers(&client);
        assert!(sent.get("x-encoder-hosts-ports").is_none());
    }

    #[test]
    fn the_latency_objectives_are_handed_to_plugins_trimmed_and_bounded() {
        let mut client = HeaderMap::new();
        client.insert("x-slo-ttft-ms", HeaderValue::from_static(" 250 "));
        client.insert(
            "x-slo-tpot-ms",
            HeaderValue::from_str(&"9".repeat(65)).unwrap(),
        );
        client.insert("x-other", HeaderValue::from_static("1"));
        assert_eq!(
            plugin_headers(&client, &[]),
            [("x-slo-ttft-ms".to_string(), "250".to_string())]
        );
        assert!(plugin_headers(&HeaderMap::new(), &[]).is_empty());
        // A header the config's plugins read (a header-label-affinity-scorer's) is handed too.
        let configured = ["x-other".to_string(), "x-absent".to_string()];
        assert_eq!(
            plugin_headers(&client, &configured),
            [
                ("x-slo-ttft-ms".to_string(), "250".to_string()),
                ("x-other".to_string(), "1".to_string())
            ]
        );
    }

    #[test]
    fn the_request_loses_what_the_gateway_sets_itself() {
        let mut client = HeaderMap::new();
        for (name, value) in [
            ("host", "gateway:8080"),
            ("content-length", "10"),
            ("accept-encoding", "gzip"),
            ("expect", "100-continue"),
            ("authorization", "Bearer sk-client"),
            ("transfer-encoding", "chunked"),
            ("x-request-id", "r1"),
            ("openai-organization", "org"),
            ("content-type", "application/json"),
        ] {
            client.insert(name, HeaderValue::from_static(value));
        }
        let sent = upstream_request_headers(&client);
        let mut names: Vec<&str> = sent.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["content-type", "openai-organization"]);
    }

    #[test]
    fn headers_are_read_trimmed() {
        let mut headers = HeaderMap::new();
        headers.insert(PRIORITY, HeaderValue::from_static(" -1 "));
        headers.insert(SESSION, HeaderValue::from_static(""));
        assert_eq!(text(&headers, PRIORITY), Some("-1"));
        assert_eq!(text(&headers, SESSION), None);
    }
}
