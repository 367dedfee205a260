//! Upstream's conformance-test config through a real Envoy: `shepherd-epp` with the Inference
//! Extension's conformance plugins (`crates/runtime/tests/fixtures/upstream/conformance-plugins.yaml`)
//! routes each request to the server its `test-epp-endpoint-selection` header names, and the
//! `destination-endpoint-served-verifier`'s header reaches the client. Envoy's example config
//! forwards the `envoy.lb` namespace to the picker on the response path, but nothing in it
//! writes the served-endpoint report there, so the header carries upstream's failure text for
//! that case (a gateway that reports the served endpoint gets the address instead; the
//! ext_proc-level test `conformance.rs` covers both). Skipped without `SHEPHERD_ENVOY` (see
//! `e2e/mod.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e;

use std::path::Path;

use e2e::{Options, Stack};

const MAIN: &str = "inference";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_config_routes_by_header_through_envoy() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../runtime/tests/fixtures/upstream/conformance-plugins.yaml");
    let Some(stack) = Stack::start(Options {
        config_text: Some(std::fs::read_to_string(path).unwrap()),
        epp_args: [
            "--endpoints",
            "{server 0},{server 1}",
            "--address",
            "127.0.0.1",
            "--port",
            "0",
            "--health-port",
            "0",
            "--metrics-port",
            "0",
        ]
        .map(String::from)
        .to_vec(),
        example: "envoy-fallbacks.yaml",
        servers: 2,
        ..Options::default()
    })
    .await
    else {
        return;
    };
    for round in 0..2 {
        for i in [1, 0] {
            let target = stack.server(i);
            let reply = stack
                .post_with(
                    MAIN,
                    Stack::completion(&format!("conformance {round} {i}"), 2),
                    &[("test-epp-endpoint-selection", target.as_str())],
                )
                .await;
            assert_eq!(reply.status, 200, "{reply:?}");
            assert_eq!(reply.primary(), Some(target.as_str()), "{reply:?}");
            assert_eq!(
                reply
                    .header("x-conformance-test-served-endpoint")
                    .as_deref(),
                Some("fail: missing destination endpoint served metadata"),
                "{reply:?}"
            );
        }
    }
    // No selection header: no endpoint, and Envoy relays the picker's 503.
    let reply = stack
        .post(MAIN, Stack::completion("conformance without a header", 2))
        .await;
    assert_eq!(reply.status, 503, "{reply:?}");
}
