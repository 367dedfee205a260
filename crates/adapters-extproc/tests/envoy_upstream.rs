//! Upstream endpoint-picker configs used as they are, through a real Envoy: `shepherd-epp`
//! started with the llm-d router Helm chart's default plugin config and with the llm-d
//! inference-scheduling guide's config (`examples/upstream/`, each naming its source), the
//! model servers given with `--endpoints`. Routing must be what those configs ask for: prefix
//! affinity, queue and KV-cache scoring with weights 2 : 2 : 3. Skipped without
//! `SHEPHERD_ENVOY` (see `e2e/mod.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e;

use std::path::Path;

use e2e::{Options, Stack};

const MAIN: &str = "inference";

async fn check_routes_as_configured(file: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/upstream")
        .join(file);
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
        // The picker's default answer names fallbacks too (a comma-separated list, as
        // upstream's): the Envoy example that routes with override_host reads it, among the
        // two model servers its cluster lists.
        example: "envoy-fallbacks.yaml",
        servers: 2,
        ..Options::default()
    })
    .await
    else {
        return;
    };
    // The file's policy is in force, not the adaptive preset.
    let metrics = stack.metrics().await;
    assert!(
        !metrics.contains("shepherd_adaptive_ticks_total"),
        "no adaptive controller for a file with its own profile"
    );

    e2e::assert_prefix_sticks_and_unrelated_spread(&stack, MAIN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_helm_charts_default_plugin_config_routes_as_upstream() {
    check_routes_as_configured("helm-default-plugins.yaml").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inference_scheduling_guides_config_routes_as_upstream() {
    check_routes_as_configured("inference-scheduling-guide.yaml").await;
}
