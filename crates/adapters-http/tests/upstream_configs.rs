//! Upstream endpoint-picker configs used as they are: the `shepherd-gateway` binary started
//! with the llm-d router Helm chart's default plugin config and with the llm-d
//! inference-scheduling guide's config (`examples/upstream/`, each naming its source),
//! the model servers given with `--endpoints`, in front of simulated vLLM servers. Routing
//! must be what those configs ask for: prefix affinity, queue and KV-cache scoring with
//! weights 2 : 2 : 3.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use common::{MODEL, SERVER_HEADER};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/upstream")
        .join(name)
}

/// `shepherd-gateway --config FILE --endpoints ...` on free loopback ports.
async fn start(config: &Path, endpoints: &[std::net::SocketAddr]) -> (Child, String) {
    let list: Vec<String> = endpoints.iter().map(ToString::to_string).collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_shepherd-gateway"))
        .arg("--config")
        .arg(config)
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
    (child, url)
}

async fn served_by(http: &reqwest::Client, url: &str, prompt: &str) -> String {
    let response = http
        .post(format!("{url}/v1/completions"))
        .json(&serde_json::json!({"model": MODEL, "prompt": prompt, "max_tokens": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.headers()[SERVER_HEADER]
        .to_str()
        .unwrap()
        .to_owned()
}

async fn check_routes_as_configured(config: &str) {
    let sims = common::sims(3, 50.0).await;
    let (mut child, url) = start(&fixture(config), sims.addrs()).await;
    let http = reqwest::Client::new();

    // The policy in force is the file's: three scorers weighted 2 : 2 : 3.
    let effective: serde_json::Value = http
        .get(format!("{url}/debug/config"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let profile = &effective["policy"]["schedulingProfiles"][0];
    let weights: Vec<(String, f64)> = profile["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pluginRef"].as_str().unwrap().to_owned(),
                p["weight"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        weights,
        [
            ("queue-scorer".to_owned(), 2.0),
            ("kv-cache-utilization-scorer".to_owned(), 2.0),
            ("prefix-cache-scorer".to_owned(), 3.0)
        ],
        "{effective}"
    );
    assert_eq!(effective["policyIsPreset"], false);

    // Ready once the servers have been scraped.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while http
        .get(format!("{url}/readyz"))
        .send()
        .await
        .unwrap()
        .status()
        != 200
    {
        assert!(tokio::time::Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Prefix affinity: requests sharing a long prefix stay on one server.
    let prefix = "You are a careful assistant for the Shepherd project. ".repeat(60);
    let mut sticky = BTreeSet::new();
    for i in 0..10 {
        sticky.insert(served_by(&http, &url, &format!("{prefix} question {i}")).await);
    }
    assert_eq!(sticky.len(), 1, "a shared prefix went to {sticky:?}");

    // Unrelated prompts are spread (ties between idle servers are broken at random).
    let mut spread = BTreeSet::new();
    for i in 0..20 {
        let prompt = format!("{i} unrelated prompt number {i} ").repeat(30);
        spread.insert(served_by(&http, &url, &prompt).await);
    }
    assert!(
        spread.len() >= 2,
        "unrelated prompts all went to {spread:?}"
    );

    child.start_kill().unwrap();
    let _ = child.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_helm_charts_default_plugin_config_routes_as_upstream() {
    check_routes_as_configured("helm-default-plugins.yaml").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inference_scheduling_guides_config_routes_as_upstream() {
    check_routes_as_configured("inference-scheduling-guide.yaml").await;
}

/// `shepherd-gateway --check-config`: both upstream configs pass as they are; a `gateway`
/// section the gateway refuses (a client key whose variable is unset) fails the check as it would fail a start.
#[tokio::test]
async fn check_config_passes_upstream_configs_and_refuses_a_bad_gateway_section() {
    for name in [
        "helm-default-plugins.yaml",
        "inference-scheduling-guide.yaml",
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_shepherd-gateway"))
            .arg("--config")
            .arg(fixture(name))
            .arg("--check-config")
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{name}: {output:?}");
        assert!(stdout.contains("config OK: profiles default"), "{stdout}");
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "endpoints: []\ngateway: {apiKeys: [{env: SHEPHERD_CHECK_UNSET_KEY}]}\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_shepherd-gateway"))
        .arg("--config")
        .arg(&bad)
        .arg("--check-config")
        .env_remove("SHEPHERD_CHECK_UNSET_KEY")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("apiKeys[0]"), "{stderr}");
}
