//! The decode-side routing sidecar: what llm-d's sidecar beside a decode vLLM does with a
//! request whose `x-prefiller-host-port` header names a prefill server (its NIXL v2 protocol,
//! read from llm-d-router at `ebab687`, `pkg/sidecar/proxy/connector_nixlv2.go`).
//!
//! 1. The request goes to the prefill server on the same path, with `kv_transfer_params`
//!    `{"do_remote_decode": true, "do_remote_prefill": false, "remote_engine_id": null,
//!    "remote_block_ids": null, "remote_host": null, "remote_port": null}`, `stream: false`,
//!    no `stream_options`, and its token limits (`max_tokens`, and `max_completion_tokens`
//!    for chat) set to 1.
//! 2. The prefill server's `kv_transfer_params` (where its KV blocks are) go into the original
//!    request, which this server then serves: its engine reads the KV (priced by the
//!    [`KvTransfer`](crate::engine::KvTransfer) model) and decodes.
//!
//! **Fallback** (where upstream's sidecar answers the prefill server's error instead): when
//! the prefill call fails (refused, reset mid-request, timed out after
//! [`KvTransfer::prefill_timeout_s`](crate::engine::KvTransfer::prefill_timeout_s) scaled by
//! the speed, a non-2xx answer, an answer without `kv_transfer_params`), this server serves
//! the request aggregated, says why in [`PREFILL_FALLBACK_HEADER`], logs a line and counts
//! it. A prefill server address that is not loopback is never called.

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::HeaderValue;
use serde_json::{Map, Value, json};

use super::kv_params::FIELD;
use super::{ADDRESS_HEADER, SERVER_HEADER};

/// The request header naming the prefill server, `ip:port` (llm-d's).
pub const PREFILLER_HEADER: &str = "x-prefiller-host-port";
/// Response header of a disaggregated request: the index of the server that prefilled it.
pub const PREFILL_SERVER_HEADER: &str = "x-shepherd-sim-prefill-server";
/// Response header of a disaggregated request: the `ip:port` of the server that prefilled it.
pub const PREFILL_ADDRESS_HEADER: &str = "x-shepherd-sim-prefill-address";
/// Response header of a request whose remote prefill failed: why it was served aggregated.
pub const PREFILL_FALLBACK_HEADER: &str = "x-shepherd-sim-prefill-fallback";

/// A remote prefill that succeeded.
#[derive(Debug)]
pub(crate) struct Prefilled {
    /// The request to decode: the original with the prefill server's `kv_transfer_params`.
    pub(crate) body: Vec<u8>,
    /// The prefill server's [`SERVER_HEADER`] and [`ADDRESS_HEADER`].
    pub(crate) server: Option<HeaderValue>,
    pub(crate) address: Option<HeaderValue>,
}

/// Has the server at `target` prefill `body` (sent to `path`); `Err(reason)` for a fallback.
pub(crate) async fn prefill(
    client: &reqwest::Client,
    path: &str,
    body: &[u8],
    target: &HeaderValue,
    timeout: Option<Duration>,
) -> Result<Prefilled, String> {
    let target = target
        .to_str()
        .ok()
        .and_then(|t| t.trim().parse::<SocketAddr>().ok())
        .ok_or_else(|| format!("`{PREFILLER_HEADER}` is not an ip:port"))?;
    if !target.ip().is_loopback() {
        return Err(format!("prefill server {target} is not a loopback address"));
    }
    let Ok(Value::Object(original)) = serde_json::from_slice::<Value>(body) else {
        return Err("the request body is not a JSON object".to_owned());
    };
    let prefill_body = prefill_request(original.clone(), path);
    let mut request = client
        .post(format!("http://{target}{path}"))
        .header("content-type", "application/json")
        .body(prefill_body.to_string());
    if let Some(t) = timeout {
        request = request.timeout(t);
    }
    let response = request
        .send()
        .await
        .map_err(|e| format!("prefill server {target}: {}", error_chain(&e)))?;
    let status = response.status();
    let server = response.headers().get(SERVER_HEADER).cloned();
    let address = response.headers().get(ADDRESS_HEADER).cloned();
    let answer = response
        .bytes()
        .await
        .map_err(|e| format!("prefill server {target}: {}", error_chain(&e)))?;
    if !status.is_success() {
        return Err(format!("prefill server {target} answered {status}"));
    }
    let params = serde_json::from_slice::<Value>(&answer)
        .ok()
        .and_then(|mut v| v.get_mut(FIELD).map(Value::take))
        .filter(Value::is_object)
        .ok_or_else(|| format!("prefill server {target} answered no `{FIELD}`"))?;
    let mut decode = original;
    decode.insert(FIELD.to_owned(), params);
    Ok(Prefilled {
        body: Value::Object(decode).to_string().into_bytes(),
        server,
        address,
    })
}

/// The prefill leg of `request` sent to `path`.
fn prefill_request(mut request: Map<String, Value>, path: &str) -> Value {
    request.insert(
        FIELD.to_owned(),
        json!({
            "do_remote_decode": true,
            "do_remote_prefill": false,
            "remote_engine_id": null,
            "remote_block_ids": null,
            "remote_host": null,
            "remote_port": null,
        }),
    );
    request.insert("stream".to_owned(), Value::Bool(false));
    request.remove("stream_options");
    request.insert("max_tokens".to_owned(), json!(1));
    if path.ends_with("/chat/completions") {
        request.insert("max_completion_tokens".to_owned(), json!(1));
    }
    Value::Object(request)
}

/// An error and its sources, one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefill_leg_is_one_token_unstreamed_for_a_remote_decode() {
        let original = json!({
            "model": "m", "messages": [], "stream": true,
            "stream_options": {"include_usage": true}, "max_completion_tokens": 300,
        });
        let Value::Object(map) = original else {
            unreachable!()
        };
        let leg = prefill_request(map, "/v1/chat/completions");
        assert_eq!(leg["stream"], false);
        assert!(leg.get("stream_options").is_none());
        assert_eq!(leg["max_tokens"], 1);
        assert_eq!(leg["max_completion_tokens"], 1);
        assert_eq!(leg[FIELD]["do_remote_decode"], true);
        assert_eq!(leg[FIELD]["remote_host"], Value::Null);
    }
}
