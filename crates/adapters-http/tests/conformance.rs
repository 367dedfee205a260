//! Upstream's conformance-test plugins through `shepherd-gateway`: the Inference Extension's
//! conformance config (`crates/runtime/tests/fixtures/upstream/conformance-plugins.yaml`)
//! routes each request to the server its `test-epp-endpoint-selection` header names, and the
//! `destination-endpoint-served-verifier` names the server that answered in
//! `x-conformance-test-served-endpoint`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use common::{MODEL, SERVER_HEADER};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_config_routes_by_header_and_names_the_served_endpoint() {
    let sims = common::sims(3, 50.0).await;
    let list: Vec<String> = sims.addrs().iter().map(ToString::to_string).collect();
    let config = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../runtime/tests/fixtures/upstream/conformance-plugins.yaml");
    let mut child = Command::new(env!("CARGO_BIN_EXE_shepherd-gateway"))
        .arg("--config")
        .arg(&config)
        .args(["--endpoints", &list.join(",")])
        .args([
            "--address",
            "127.0.0.1",
            "--port",
            "0",
            "--metrics-port",
            "0",
        ])
        .args(["--shutdown-timeout", "2"])
        .env("SHEPHERD_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("shepherd-gateway: listening on ") {
                return url.to_owned();
            }
        }
        panic!("shepherd-gateway exited before listening");
    })
    .await
    .expect("shepherd-gateway did not start");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let http = reqwest::Client::new();
    for target in &list {
        for _ in 0..2 {
            let response = http
                .post(format!("{url}/v1/completions"))
                .header("test-epp-endpoint-selection", target.as_str())
                .json(&serde_json::json!({"model": MODEL, "prompt": "hi", "max_tokens": 2}))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            let header = |name: &str| response.headers()[name].to_str().unwrap().to_owned();
            assert_eq!(header("x-conformance-test-served-endpoint"), *target);
            assert!(!header(SERVER_HEADER).is_empty());
        }
    }
    // No selection header: the filter keeps nothing, and the gateway answers 503.
    let response = http
        .post(format!("{url}/v1/completions"))
        .json(&serde_json::json!({"model": MODEL, "prompt": "hi", "max_tokens": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    child.kill().await.unwrap();
}
