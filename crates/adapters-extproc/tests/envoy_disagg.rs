//! Prefill/decode disaggregation through a real Envoy: `shepherd-epp` with the
//! `disagg-profile-handler` in front of two simulated servers labelled `prefill` and `decode`.
//! A long uncached prompt is routed to the decode server with the prefill server's `ip:port`
//! in `x-prefiller-host-port` on the request Envoy forwards (the header llm-d's decode-side
//! routing sidecar reads; Envoy echoes the forwarded request's value in a test response
//! header); a short one goes to the decode server without it; a client's own value is
//! removed. The simulated decode server runs the routing sidecar's protocol: the long prompt
//! is prefilled on the prefill server (its response header and both servers' metrics say so)
//! and decoded on the decode server. Skipped without `SHEPHERD_ENVOY` (see `e2e/mod.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e;

use e2e::{Options, Stack};
use shepherd_sim::serve::PREFILL_ADDRESS_HEADER;

const MAIN: &str = "inference";
const ECHOED: &str = "x-test-prefiller";

/// The P/D policy both adapters' end-to-end tests run.
const PD: &str = include_str!("../../../examples/disagg/policy.yaml");

/// Sends `prompt` through Envoy (with a client-sent `x-prefiller-host-port`) and returns the
/// server that answered and the prefill server the forwarded request named, if any.
async fn send(stack: &Stack, prompt: &str) -> (String, Option<String>) {
    let reply = stack
        .post_with(
            MAIN,
            Stack::completion(prompt, 4),
            &[("x-prefiller-host-port", "10.9.9.9:1")],
        )
        .await;
    assert_eq!(reply.status, 200);
    let named = reply.header(ECHOED);
    (reply.served.unwrap(), named)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_prompt_is_routed_to_the_decode_server_naming_its_prefill_server() {
    let Some(stack) = Stack::start(Options {
        servers: 2,
        roles: vec![Some("prefill"), Some("decode")],
        extra_config: PD.to_string(),
        envoy_edits: vec![(
            "                   key: x-test-picked\n",
            "                   key: x-test-picked\n\
             \x20                   value: \"%DYNAMIC_METADATA(envoy.lb:x-gateway-destination-endpoint)%\"\n\
             \x20               - header:\n\
             \x20                   key: x-test-prefiller\n\
             \x20                   value: \"%REQ(x-prefiller-host-port)%\"\n\
             \x20               - header:\n\
             \x20                   key: x-test-unused\n",
        )],
        ..Options::default()
    })
    .await
    else {
        return;
    };
    let (prefill, decode) = (stack.server(0), stack.server(1));

    let (served, named) = send(&stack, &e2e::unique_prompt("long", 8 << 10)).await;
    assert_eq!(served, decode, "the decode server answers");
    assert_eq!(
        named.as_deref(),
        Some(prefill.as_str()),
        "{}",
        stack.epp.log()
    );

    // The decode server had the prefill server prefill it, then read the KV and decoded.
    let long = stack
        .post_with(
            MAIN,
            Stack::completion(&e2e::unique_prompt("long two", 8 << 10), 4),
            &[],
        )
        .await;
    assert_eq!(long.status, 200);
    assert_eq!(long.served.as_deref(), Some(decode.as_str()));
    assert_eq!(
        long.header(PREFILL_ADDRESS_HEADER).as_deref(),
        Some(prefill.as_str())
    );
    let http = reqwest::Client::new();
    let scrape = |addr: String| {
        let http = http.clone();
        async move {
            let r = http
                .get(format!("http://{addr}/metrics"))
                .send()
                .await
                .unwrap();
            r.text().await.unwrap()
        }
    };
    let prefilled = scrape(prefill.clone()).await;
    assert_eq!(
        e2e::sample(
            &prefilled,
            "shepherd_sim_prefills_for_remote_decode_total{model_name=\"meta-llama/Llama-3.1-8B-Instruct\",engine=\"0\"}"
        ),
        2.0
    );
    let decoded = scrape(decode.clone()).await;
    assert_eq!(
        e2e::sample(
            &decoded,
            "shepherd_sim_remote_prefills_total{model_name=\"meta-llama/Llama-3.1-8B-Instruct\",engine=\"0\"}"
        ),
        2.0
    );

    let (served, named) = send(&stack, "hi").await;
    assert_eq!(served, decode);
    assert_eq!(
        named, None,
        "a short prompt is served aggregated, the client's value removed"
    );
}
