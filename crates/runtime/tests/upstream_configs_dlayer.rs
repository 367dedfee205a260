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

#[test]
fn the_notification_sources_load_and_say_they_watch_nothing() {
    let config = load("k8s-notification-source.yaml").unwrap();
    let warnings = warnings(&config);
    for gvk in ["/v1, Kind=Pod", "apps/v1, Kind=Deployment"] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&format!("{gvk} is not watched"))),
            "{warnings:?}"
        );
    }
    assert!(
        check_stability(&config.policy, false).is_ok(),
        "Stable upstream"
    );
    let scheduler = rig(&config, &[&[], &[]]);
    let d = scheduler.schedule(&completion("r", "hello")).unwrap();
    d.finish(Completion::success(None));
}

#[test]
fn the_notification_sources_are_refused_where_upstream_refuses_them() {
    let text = std::fs::read_to_string(fixture_path("k8s-notification-source.yaml")).unwrap();
    let refused = |text: String, words: &[&str]| {
        let error = RuntimeConfig::from_yaml(&text).unwrap_err().to_string();
        for word in words {
            assert!(error.contains(word), "{error}");
        }
    };
    // The same kind twice.
    refused(
        text.replace("group: apps", "group: \"\"")
            .replace("kind: Deployment", "kind: Pod"),
        &["duplicate notification source GVK /v1, Kind=Pod"],
    );
    // No kind.
    refused(
        text.replace("    kind: Deployment\n", ""),
        &["version and kind are required"],
    );
    // An extractor that is not a notification extractor.
    refused(
        text.replace(
            "  - pluginRef: deployments\n",
            "  - pluginRef: deployments\n    extractors:\n    - pluginRef: topology-extractor\n",
        )
        .replace(
            "- type: queue-scorer\n",
            "- type: queue-scorer\n- type: topology-extractor\n",
        ),
        &["requires a NotificationExtractor", "topology-extractor"],
    );
}

/// A model server double on `listener`: answers every request with the current `page`.
async fn models_server(
    listener: tokio::net::TcpListener,
    page: Arc<parking_lot::Mutex<String>>,
) -> tokio::task::JoinHandle<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let page = page.lock().clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_source_polls_every_endpoints_models_and_keeps_the_last_list() {
    use shepherd_runtime::scrape::models::EndpointModels;
    use shepherd_runtime::{Runtime, RuntimeOptions};
    use std::time::{Duration, Instant};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let page = Arc::new(parking_lot::Mutex::new(
        r#"{"object":"list","data":[{"id":"llama-3-8b","object":"model","owned_by":"vllm"},{"id":"sql-lora","parent":"llama-3-8b"}]}"#
            .to_string(),
    ));
    let server = models_server(listener, Arc::clone(&page)).await;

    let text = std::fs::read_to_string(fixture_path("models-data-source.yaml"))
        .unwrap()
        .replace("interval: \"5s\"", "interval: \"50ms\"");
    let yaml = format!("{text}\nendpoints: [{address}]\nserver: {{metricsPort: 0}}\n");
    let config = RuntimeConfig::from_yaml(&yaml).unwrap();
    let warnings = warnings(&config);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("vllm-models-source") && w.contains("/v1/models is polled")),
        "{warnings:?}"
    );
    let handle = Runtime::start(config, RuntimeOptions::default())
        .await
        .unwrap();
    let table = EndpointModels::of(&handle.shared().resources);
    let ids = |table: &EndpointModels| -> Vec<String> {
        table
            .get(&address)
            .map(|l| l.iter().map(|m| m.id.clone()).collect())
            .unwrap_or_default()
    };
    let wait_for = |want: Vec<&'static str>| {
        let table = Arc::clone(&table);
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            while ids(&table) != want && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            ids(&table)
        }
    };
    assert_eq!(
        wait_for(vec!["llama-3-8b", "sql-lora"]).await,
        ["llama-3-8b", "sql-lora"]
    );
    let list = table.get(&address).unwrap();
    assert_eq!(list[0].owned_by, "vllm");
    assert_eq!(list[1].parent, "llama-3-8b");

    // The server loads another adapter: the next poll has it.
    *page.lock() = r#"{"data":[{"id":"llama-3-8b"},{"id":"sql-lora"},{"id":"chat-lora"}]}"#.into();
    assert_eq!(
        wait_for(vec!["llama-3-8b", "sql-lora", "chat-lora"]).await,
        ["llama-3-8b", "sql-lora", "chat-lora"]
    );

    // The server goes away: the last list is kept, as upstream keeps the attribute.
    server.abort();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ids(&table), ["llama-3-8b", "sql-lora", "chat-lora"]);
    handle.shutdown(Duration::from_secs(5)).await;
}

#[test]
fn the_models_sources_https_form_loads_and_says_it_is_not_polled() {
    // The README's complete example: https, verification on, no CA file named.
    let text = std::fs::read_to_string(fixture_path("models-data-source.yaml"))
        .unwrap()
        .replace("scheme: \"http\"", "scheme: \"https\"")
        .replace("insecureSkipVerify: true", "insecureSkipVerify: false");
    let config = RuntimeConfig::from_yaml(&text).unwrap();
    assert!(
        warnings(&config)
            .iter()
            .any(|w| w.contains("https polling is not built")),
        "{:?}",
        warnings(&config)
    );
    // A CA file that does not exist is refused, as upstream's loader refuses it.
    let missing = text.replace(
        "insecureSkipVerify: false",
        "insecureSkipVerify: false\n    caCertPath: /nonexistent/ca.pem",
    );
    let error = RuntimeConfig::from_yaml(&missing).unwrap_err().to_string();
    assert!(error.contains("caCertPath"), "{error}");
}

#[test]
fn the_p2p_source_readme_loads_with_the_experimental_flag() {
    let config = load("p2p-source-producer.yaml").unwrap();
    // Alpha upstream.
    let refused = check_stability(&config.policy, false)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("p2p-source-producer"), "{refused}");
    assert!(check_stability(&config.policy, true).is_ok());
    let scheduler = rig(&config, &[&[], &[]]);
    // Nothing is cached yet: no source.
    let d = scheduler
        .schedule(&completion("r", &"a long prompt ".repeat(100)))
        .unwrap();
    assert_eq!(d.kv_cache_source(), None);
    d.finish(Completion::success(None));
    // A renamed prefill profile is not needed: said at start.
    let text = std::fs::read_to_string(fixture_path("p2p-source-producer.yaml"))
        .unwrap()
        .replace(
            "prefillProfileName: prefill",
            "prefillProfileName: my-prefill",
        );
    let config = RuntimeConfig::from_yaml(&text).unwrap();
    assert!(
        warnings(&config)
            .iter()
            .any(|w| w.contains("my-prefill") && w.contains("not needed")),
        "{:?}",
        warnings(&config)
    );
}

#[test]
fn the_burst_sample_keeps_a_rollout_groups_samples_together() {
    let config = load("burst-prefix-cache.yaml").unwrap();
    let refused = check_stability(&config.policy, false)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("burst-prefix-cache-producer"), "{refused}");
    // What Shepherd does instead of holding requests for the window: said at start.
    assert!(
        warnings(&config)
            .iter()
            .any(|w| w.contains("burst-prefix-cache-producer") && w.contains("not held")),
        "{:?}",
        warnings(&config)
    );
    let scheduler = rig(&config, &[&[], &[], &[], &[]]);
    // Two rollout groups of eight samples each, all in flight together (no token-producer
    // server is reachable: prompts are hashed as the approximate producer hashes them).
    let mut decisions = Vec::new();
    for group in ["prove that 17 is prime", "sort these numbers: 9 4 7 1"] {
        let prompt = format!("{group}. Think step by step. ").repeat(40);
        let mut servers = std::collections::BTreeSet::new();
        for i in 0..8 {
            let d = scheduler
                .schedule(&completion(&format!("{group}-{i}"), &prompt))
                .unwrap();
            servers.insert(d.primary().address().to_string());
            decisions.push(d);
        }
        assert_eq!(servers.len(), 1, "{group}: {servers:?}");
    }
    for d in decisions {
        d.finish(Completion::success(None));
    }
}
