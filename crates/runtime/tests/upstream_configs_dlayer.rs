//! Upstream-shaped configurations of the `prefill-first` stage order and of the data-layer
//! and producer types `models-data-source`, `models-data-extractor`,
//! `k8s-notification-source`, `burst-prefix-cache-producer` and `p2p-source-producer`
//! (`tests/fixtures/upstream/*.yaml`, each naming its upstream source): they load as
//! `shepherd-epp --config` loads them, and behave as upstream's picker would, or say at start
//! what Shepherd does instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use shepherd_runtime::config::{LoadError, RuntimeConfig};
use shepherd_scheduler_core::completion::Completion;
use shepherd_scheduler_core::config::{build_scheduler, check_stability};
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::request::{InferenceRequest, parse_openai_request};
use shepherd_scheduler_core::scheduler::Scheduler;
use shepherd_scorers::builtin_registry;

fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/upstream")
        .join(name)
}

fn load(name: &str) -> Result<RuntimeConfig, LoadError> {
    let text = std::fs::read_to_string(fixture_path(name)).unwrap();
    RuntimeConfig::from_yaml_at(&text, &fixture_path(name))
}

fn warnings(config: &RuntimeConfig) -> Vec<String> {
    config.warnings().iter().map(|w| w.to_string()).collect()
}

/// A scheduler over `endpoints` at `127.0.0.1:8000 + i`, each with its labels.
fn rig(config: &RuntimeConfig, endpoints: &[&[(&str, &str)]]) -> Scheduler {
    let pool = Arc::new(Pool::new());
    for (i, labels) in endpoints.iter().enumerate() {
        let ep = pool.add(&format!("127.0.0.1:{}", 8000 + i));
        ep.set_labels(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
    }
    build_scheduler(&config.policy, &builtin_registry(), pool).unwrap()
}

fn completion(id: &str, prompt: &str) -> InferenceRequest {
    let body = serde_json::json!({"model": "m", "prompt": prompt});
    let mut request = parse_openai_request(
        "/v1/completions",
        body.to_string().as_bytes(),
        &Default::default(),
    )
    .unwrap();
    request.id = id.to_string();
    request
}

const ROLE: &str = "llm-d.ai/role";
const HOST: &str = "kubernetes.io/hostname";

#[test]
fn prefill_first_prefills_every_request_and_decodes_on_the_prefill_servers_host() {
    let config = load("pd-topology-prefill-first.yaml").unwrap();
    // The topology types are Alpha upstream: the flag is needed, as there.
    assert!(check_stability(&config.policy, false).is_err());
    assert!(check_stability(&config.policy, true).is_ok());
    let scheduler = rig(
        &config,
        &[
            &[(ROLE, "decode"), (HOST, "node-a")],
            &[(ROLE, "prefill"), (HOST, "node-b")],
            &[(ROLE, "decode"), (HOST, "node-b")],
            &[(ROLE, "decode"), (HOST, "node-c")],
        ],
    );
    for i in 0..8 {
        // Short prompts too: prefill-first asks no decider.
        let d = scheduler
            .schedule(&completion(&format!("r{i}"), "hi"))
            .unwrap();
        assert_eq!(
            d.prefill().map(|p| p.endpoint().address()),
            Some("127.0.0.1:8001"),
            "pick {i}"
        );
        // Only the decode server on the prefill server's host passes the topology filter.
        assert_eq!(d.primary().address(), "127.0.0.1:8002", "pick {i}");
        d.finish(Completion::success(None));
    }
}
