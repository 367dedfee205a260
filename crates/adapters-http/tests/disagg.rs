//! `shepherd-gateway` in front of a P/D pool (one server labelled `prefill`, one `decode`, on
//! loopback): a long uncached prompt goes to the decode server with the prefill server's
//! `ip:port` in `x-prefiller-host-port`, the header llm-d's decode-side routing sidecar reads;
//! a short one goes there without it; a client cannot name a prefill server itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Setup, echo_upstream};
use serde_json::json;

/// The P/D policy both adapters' end-to-end tests run.
const PD: &str = include_str!("../../../examples/disagg/policy.yaml");

#[tokio::test]
async fn a_long_prompt_reaches_the_decode_server_naming_its_prefill_server() {
    let (prefill, prefill_seen) = echo_upstream().await;
    let (decode, decode_seen) = echo_upstream().await;
    let gateway = Setup::new([prefill, decode])
        .roles(&[Some("prefill"), Some("decode")])
        .yaml(PD)
        .without_scraping()
        .start()
        .await;

    // 8 KB of text: about 2,000 tokens, none cached anywhere.
    let long = json!({"model": "model-a", "prompt": "long document ".repeat(600), "max_tokens": 4});
    let response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-prefiller-host-port", "10.9.9.9:1") // a client's guess, removed
        .json(&long)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    {
        let seen = decode_seen.lock();
        assert_eq!(seen.len(), 1, "the decode server answers");
        assert_eq!(
            seen[0].headers["x-prefiller-host-port"],
            prefill.to_string().as_str()
        );
    }
    assert!(
        prefill_seen.lock().is_empty(),
        "the sidecar, not the gateway, calls the prefill server"
    );

    // A short prompt is served aggregated: no header.
    let short = json!({"model": "model-a", "prompt": "hi", "max_tokens": 4});
    let response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-prefiller-host-port", "10.9.9.9:1")
        .json(&short)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen = decode_seen.lock();
    assert_eq!(seen.len(), 2);
    assert!(seen[1].headers.get("x-prefiller-host-port").is_none());
}
