//! Encode disaggregation (E/P/D) through a real Envoy: `shepherd-epp` with the
//! `disagg-profile-handler` and `always-disagg-multimodal-decider` in front of simulated
//! servers labelled `encode`, `encode`, `prefill` and `decode`. A chat request carrying an
//! image is routed to the decode server with both encode servers' `ip:port` in
//! `x-encoder-hosts-ports` on the request Envoy forwards (the header llm-d's decode-side
//! routing sidecar reads; Envoy echoes the forwarded request's value in a test response
//! header); a text request goes there without it, and a client's own value is removed. The
//! simulated servers do not encode: the test checks what the decode side is told. Skipped
//! without `SHEPHERD_ENVOY` (see `e2e/mod.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e;

use e2e::{MODEL, Options, Stack};

const MAIN: &str = "inference";
const ECHOED: &str = "x-test-encoders";

/// The E/P/D policy both adapters' end-to-end tests run.
const EPD: &str = include_str!("../../../examples/disagg/encode-policy.yaml");

/// Sends a chat request (with an image part when `image`, and a client-sent
/// `x-encoder-hosts-ports`) and returns the server that answered and the encode servers the
/// forwarded request named, if any.
async fn send(stack: &Stack, image: bool) -> (String, Option<String>) {
    let mut parts = vec![serde_json::json!({"type": "text", "text": "What is in this picture?"})];
    if image {
        parts.push(serde_json::json!({
            "type": "image_url", "image_url": {"url": "https://example.com/cat.png"}
        }));
    }
    let body = serde_json::json!({
        "model": MODEL, "max_tokens": 4,
        "messages": [{"role": "user", "content": parts}],
    });
    let reply = stack
        .post_to(
            MAIN,
            "/v1/chat/completions",
            body.to_string(),
            &[("x-encoder-hosts-ports", "10.9.9.9:1")],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let named = reply.header(ECHOED);
    (reply.served.unwrap(), named)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_media_request_is_routed_to_the_decode_server_naming_its_encode_servers() {
    let Some(stack) = Stack::start(Options {
        servers: 4,
        roles: vec![Some("encode"), Some("encode"), Some("prefill"), Some("decode")],
        extra_config: EPD.to_string(),
        envoy_edits: vec![(
            "                   key: x-test-picked\n",
            "                   key: x-test-picked\n\
             \x20                   value: \"%DYNAMIC_METADATA(envoy.lb:x-gateway-destination-endpoint)%\"\n\
             \x20               - header:\n\
             \x20                   key: x-test-encoders\n\
             \x20                   value: \"%REQ(x-encoder-hosts-ports)%\"\n\
             \x20               - header:\n\
             \x20                   key: x-test-unused\n",
        )],
        ..Options::default()
    })
    .await
    else {
        return;
    };
    let decode = stack.server(3);
    let mut encoders = vec![stack.server(0), stack.server(1)];
    encoders.sort_unstable();

    let (served, named) = send(&stack, true).await;
    assert_eq!(served, decode, "the decode server answers");
    let named = named.unwrap_or_else(|| panic!("no encoders named\n{}", stack.epp.log()));
    let mut named: Vec<String> = named.split(',').map(str::to_owned).collect();
    named.sort_unstable();
    assert_eq!(
        named, encoders,
        "both encode servers (maxNumOfEndpoints: 2)"
    );

    let (served, named) = send(&stack, false).await;
    assert_eq!(served, decode);
    assert_eq!(
        named, None,
        "a text request is not encoded apart, the client's value removed"
    );
}
