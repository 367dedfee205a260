//! vLLM's `kv_transfer_params`: the request field through which a KV connector (NIXL) is told
//! to prefill for a remote decode, or to decode from a remote prefill.
//!
//! - `{"do_remote_decode": true, ...}` on a request: the server prefills it (the sidecar caps
//!   it at one output token) and keeps its KV for a decode server to read; the whole response
//!   carries `kv_transfer_params` with `do_remote_prefill: true` and where the blocks are
//!   (`remote_engine_id`, `remote_block_ids`, `remote_host`, `remote_port`, `tp_size`), as
//!   vLLM's `NixlConnector` answers.
//! - `{"do_remote_prefill": true, ...}` on a request: its prompt's KV is read from the remote
//!   server. The simulated server prices the read with its [`KvTransfer`] model (the prompt
//!   tokens it does not already cache), then decodes with the prompt present
//!   ([`Engine::add_transferred`](crate::engine::Engine::add_transferred)).
//!
//! ```
//! # use shepherd_sim::serve::KvTransferParams;
//! let body = br#"{"kv_transfer_params":{"do_remote_decode":true,"remote_host":null}}"#;
//! let params = KvTransferParams::from_body(body).unwrap().unwrap();
//! assert!(params.do_remote_decode && !params.do_remote_prefill);
//! ```
//!
//! [`KvTransfer`]: crate::engine::KvTransfer

use std::net::SocketAddr;

use serde::Deserialize;
use serde_json::{Value, json};

/// The request field's name.
pub(crate) const FIELD: &str = "kv_transfer_params";

/// What a request's `kv_transfer_params` asks for (other fields are ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct KvTransferParams {
    /// Prefill here for a decode elsewhere.
    #[serde(default, deserialize_with = "null_as_false")]
    pub do_remote_decode: bool,
    /// Decode here from a prefill elsewhere.
    #[serde(default, deserialize_with = "null_as_false")]
    pub do_remote_prefill: bool,
    /// The prefill engine's id (set with `do_remote_prefill`).
    #[serde(default)]
    pub remote_engine_id: Option<String>,
    /// The prefill server's host (set with `do_remote_prefill`).
    #[serde(default)]
    pub remote_host: Option<String>,
}

fn null_as_false<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(d)?.unwrap_or(false))
}

#[derive(Debug, Deserialize)]
struct Carrier {
    #[serde(default)]
    kv_transfer_params: Option<KvTransferParams>,
}

impl KvTransferParams {
    /// The field of a JSON request body: `Ok(None)` without it (or with `null`), `Err` when it
    /// is not an object of the right shape.
    pub fn from_body(body: &[u8]) -> Result<Option<Self>, String> {
        serde_json::from_slice::<Carrier>(body)
            .map(|c| c.kv_transfer_params)
            .map_err(|e| format!("invalid field `{FIELD}`: {e}"))
    }

    /// The parameters a prefill server answers for a request whose `blocks` KV blocks it
    /// holds, as server `index` listening on `addr`: what the decode side passes on to its
    /// engine.
    pub fn prefilled(index: usize, addr: SocketAddr, blocks: u32) -> Value {
        json!({
            "do_remote_prefill": true,
            "do_remote_decode": false,
            "remote_engine_id": engine_id(index, addr),
            "remote_block_ids": (0..blocks).collect::<Vec<_>>(),
            "remote_host": addr.ip().to_string(),
            "remote_port": addr.port(),
            "tp_size": 1,
        })
    }
}

/// The engine id a simulated server reports in `remote_engine_id`.
pub fn engine_id(index: usize, addr: SocketAddr) -> String {
    format!("shepherd-sim-{index}-{addr}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_sidecar_shapes() {
        assert_eq!(KvTransferParams::from_body(br#"{"model":"m"}"#), Ok(None));
        assert_eq!(
            KvTransferParams::from_body(br#"{"kv_transfer_params":null}"#),
            Ok(None)
        );
        let prefill = br#"{"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,
            "remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}}"#;
        let p = KvTransferParams::from_body(prefill).unwrap().unwrap();
        assert!(p.do_remote_decode && !p.do_remote_prefill);
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let answer = json!({ FIELD: KvTransferParams::prefilled(2, addr, 3) });
        let d = KvTransferParams::from_body(answer.to_string().as_bytes())
            .unwrap()
            .unwrap();
        assert!(d.do_remote_prefill && !d.do_remote_decode);
        assert_eq!(d.remote_host.as_deref(), Some("127.0.0.1"));
        assert_eq!(d.remote_engine_id, Some(engine_id(2, addr)));
        assert!(KvTransferParams::from_body(br#"{"kv_transfer_params":3}"#).is_err());
    }
}
