//! Upstream-shaped configurations of the data-layer, multimodal and topology types
//! (`tests/fixtures/upstream/*.yaml`, each naming its upstream source): they load, and route
//! as upstream's picker would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use shepherd_runtime::config::{LoadError, RuntimeConfig};
use shepherd_scheduler_core::completion::Completion;
use shepherd_scheduler_core::config::build_scheduler;
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

/// A scheduler over `endpoints`, each an address's last port digit and its labels.
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

fn chat(text: &str, images: &[&str]) -> InferenceRequest {
    let mut parts = vec![serde_json::json!({"type": "text", "text": text})];
    for url in images {
        parts.push(serde_json::json!({"type": "image_url", "image_url": {"url": url}}));
    }
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": parts}]});
    parse_openai_request(
        "/v1/chat/completions",
        body.to_string().as_bytes(),
        &Default::default(),
    )
    .unwrap()
}

/// The score column `scorer` gave each candidate, by address.
fn column(
    decision: &shepherd_scheduler_core::decision::Decision,
    scorer: &str,
) -> Vec<(String, f64)> {
    let b = &decision.breakdown;
    let s = b.scorers().iter().position(|c| &*c.name == scorer).unwrap();
    b.rows()
        .iter()
        .map(|r| (r.address.to_string(), r.scores[s].value))
        .collect()
}

#[test]
fn the_encoder_cache_scorer_follows_the_images_each_server_was_sent() {
    let config = load("mm-embeddings-cache.yaml").unwrap();
    let scheduler = rig(&config, &[&[], &[], &[]]);
    let first = scheduler
        .schedule(&chat("what is this?", &["https://e.x/cat.png"]))
        .unwrap();
    let served = first.primary().address().to_string();
    // Nobody has seen the image yet: every candidate scores 0.
    assert!(
        column(&first, "mm-embeddings-cache-scorer")
            .iter()
            .all(|(_, v)| *v == 0.0)
    );
    first.finish(Completion::success(None));

    // The same image with another one: the server that encoded it holds half the items.
    let second = scheduler
        .schedule(&chat(
            "and these?",
            &["https://e.x/cat.png", "https://e.x/dog.png"],
        ))
        .unwrap();
    for (address, score) in column(&second, "mm-embeddings-cache-scorer") {
        let expected = if address == served { 0.5 } else { 0.0 };
        assert_eq!(score, expected, "{address}");
    }
    assert_eq!(second.primary().address(), served);
    second.finish(Completion::success(None));

    // A text-only request scores 0 everywhere, as upstream.
    let text = scheduler.schedule(&chat("hello", &[])).unwrap();
    assert!(
        column(&text, "mm-embeddings-cache-scorer")
            .iter()
            .all(|(_, v)| *v == 0.0)
    );
    text.finish(Completion::success(None));
}

#[test]
fn the_deploy_files_misspelt_cache_size_is_refused_as_upstream_refuses_it() {
    // deploy/config/epp-mm-embeddings-cache-config.yaml sets `cacheSizeInMB`, a key no
    // upstream version reads: its strict decoder refuses it, and so does Shepherd, naming the
    // right one.
    let text = std::fs::read_to_string(fixture_path("mm-embeddings-cache.yaml"))
        .unwrap()
        .replace("cacheSizeInMBPerServer: 2048", "cacheSizeInMB: 2048");
    let error = match RuntimeConfig::from_yaml(&text) {
        Ok(config) => build_scheduler(&config.policy, &builtin_registry(), Arc::new(Pool::new()))
            .map(|_| ())
            .unwrap_err()
            .to_string(),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("cacheSizeInMB"), "{error}");
    assert!(error.contains("cacheSizeInMBPerServer"), "{error}");
}

const ROLE: &str = "llm-d.ai/role";
const HOST: &str = "kubernetes.io/hostname";
const RACK: &str = "topology.kubernetes.io/rack";

/// A prompt of about 100 estimated tokens: over the decider's 16 uncached tokens.
fn long_prompt() -> InferenceRequest {
    chat(
        &"tell me about the weather in the mountains ".repeat(10),
        &[],
    )
}

#[test]
fn the_pd_topology_sample_prefills_on_the_decode_servers_host() {
    let config = load("pd-topology.yaml").unwrap();
    // The extractor's start-up warning says what Shepherd does instead of spec.hostname.
    let warnings: Vec<String> = config.warnings().iter().map(|w| w.to_string()).collect();
    assert!(
        warnings.iter().any(|w| w.contains("spec.hostname")),
        "{warnings:?}"
    );
    let scheduler = rig(
        &config,
        &[
            &[(ROLE, "decode"), (HOST, "node-a"), (RACK, "r1")],
            &[(ROLE, "prefill"), (HOST, "node-b"), (RACK, "r1")],
            &[(ROLE, "prefill"), (HOST, "node-a"), (RACK, "r1")],
            &[(ROLE, "prefill")],
        ],
    );
    for i in 0..5 {
        let d = scheduler.schedule(&long_prompt()).unwrap();
        assert_eq!(d.primary().address(), "127.0.0.1:8000");
        let prefill = d.prefill().expect("disaggregated");
        // Only the same-host prefill server passes the filter.
        assert_eq!(prefill.endpoint().address(), "127.0.0.1:8002", "pick {i}");
        let b = &prefill.breakdown;
        let s = b
            .scorers()
            .iter()
            .position(|c| &*c.name == "topology-affinity-scorer")
            .unwrap();
        let rows = b.rows();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].scores[s].value, 1.0);
        d.finish(Completion::success(None));
    }
}

#[test]
fn topology_fails_open_and_grades_by_tier_when_no_server_shares_the_host() {
    let config = load("pd-topology.yaml").unwrap();
    // No prefill server on the decode server's host: the filter keeps everyone, and the
    // scorer grades by rack (0.2), zone (0.05) and nothing (0).
    let scheduler = rig(
        &config,
        &[
            &[
                (ROLE, "decode"),
                (HOST, "node-a"),
                (RACK, "r1"),
                ("topology.kubernetes.io/zone", "z1"),
            ],
            &[(ROLE, "prefill"), (HOST, "node-b"), (RACK, "r1")],
            &[
                (ROLE, "prefill"),
                (HOST, "node-c"),
                ("topology.kubernetes.io/zone", "z1"),
            ],
            &[(ROLE, "prefill")],
        ],
    );
    let d = scheduler.schedule(&long_prompt()).unwrap();
    let prefill = d.prefill().expect("disaggregated");
    let b = &prefill.breakdown;
    let s = b
        .scorers()
        .iter()
        .position(|c| &*c.name == "topology-affinity-scorer")
        .unwrap();
    let mut graded: Vec<(String, f64)> = b
        .rows()
        .iter()
        .map(|r| (r.address.to_string(), r.scores[s].value))
        .collect();
    graded.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        graded,
        [
            ("127.0.0.1:8001".to_string(), 0.2),
            ("127.0.0.1:8002".to_string(), 0.05),
            ("127.0.0.1:8003".to_string(), 0.0),
        ]
    );
    assert_eq!(prefill.endpoint().address(), "127.0.0.1:8001");
    d.finish(Completion::success(None));

    // A decode server without topology labels: no peer topology, everyone passes and scores 0.
    let scheduler = rig(
        &config,
        &[
            &[(ROLE, "decode")],
            &[(ROLE, "prefill"), (HOST, "node-b")],
            &[(ROLE, "prefill")],
        ],
    );
    let d = scheduler.schedule(&long_prompt()).unwrap();
    let prefill = d.prefill().expect("disaggregated");
    assert_eq!(prefill.breakdown.rows().len(), 2);
    d.finish(Completion::success(None));
}

#[test]
fn topology_parameters_are_checked_as_upstream_checks_them() {
    let text = std::fs::read_to_string(fixture_path("pd-topology.yaml")).unwrap();
    let bad = text.replace(
        "- type: topology-affinity-filter\n",
        "- type: topology-affinity-filter\n  parameters:\n    minAffinity: nvlink\n",
    );
    let config = RuntimeConfig::from_yaml(&bad).unwrap();
    let error = build_scheduler(&config.policy, &builtin_registry(), Arc::new(Pool::new()))
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("minAffinity") && error.contains("nvlink"),
        "{error}"
    );
}

#[test]
fn the_prepare_data_plugins_gate_loads_as_a_deprecated_no_op() {
    let config = load("prepare-data-plugins-gate.yaml").unwrap();
    let warnings: Vec<String> = config.warnings().iter().map(|w| w.to_string()).collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("prepareDataPlugins") && w.contains("no effect")),
        "{warnings:?}"
    );
    assert!(build_scheduler(&config.policy, &builtin_registry(), Arc::new(Pool::new())).is_ok());
}

/// A DCGM exporter double: answers every request with `page` until dropped.
async fn dcgm_exporter(
    listener: tokio::net::TcpListener,
    page: &'static str,
) -> tokio::task::JoinHandle<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gpu_sample_scrapes_dcgm_into_the_attribute_its_filter_reads() {
    use shepherd_runtime::{Runtime, RuntimeOptions};
    use shepherd_scheduler_core::endpoint::EndpointAttributes;
    use tokio::net::TcpListener;

    // Two endpoints on distinct loopback addresses, each with a DCGM exporter on one port.
    let busy = TcpListener::bind("127.0.0.3:0").await.unwrap();
    let port = busy.local_addr().unwrap().port();
    let Ok(idle) = TcpListener::bind(("127.0.0.2", port)).await else {
        eprintln!("port {port} taken on 127.0.0.2; skipping");
        return;
    };
    let _idle = dcgm_exporter(
        idle,
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 10\nDCGM_FI_DEV_GPU_UTIL{gpu=\"1\"} 30\n",
    )
    .await;
    let busy_task = dcgm_exporter(busy, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 97\n").await;

    let text = std::fs::read_to_string(fixture_path("dcgm-gpu-utilization.yaml"))
        .unwrap()
        .replace("port: 9400", &format!("port: {port}"))
        .replace("interval: \"1s\"", "interval: \"50ms\"");
    // The model servers themselves are not running: only the DCGM pages matter here.
    let yaml =
        format!("{text}\nendpoints: [127.0.0.2:1, 127.0.0.3:1]\nserver: {{metricsPort: 0}}\n");
    let config = RuntimeConfig::from_yaml(&yaml).unwrap();
    let warnings: Vec<String> = config.warnings().iter().map(|w| w.to_string()).collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("dcgm-source") && w.contains("GPUUtilization")),
        "{warnings:?}"
    );
    // dcgm-extractor and the attribute filter and scorer are Alpha upstream.
    let options = RuntimeOptions {
        allow_experimental_plugins: true,
        ..RuntimeOptions::default()
    };
    let handle = Runtime::start(config, options).await.unwrap();
    let table = EndpointAttributes::of(&handle.shared().resources);
    let value = |address: &str| {
        let id = handle.pool().snapshot().get_by_address(address)?.id();
        let column = table.column("GPUUtilization")?;
        table.read(|v| v.get(column, id))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while (value("127.0.0.2:1").is_none() || value("127.0.0.3:1").is_none())
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The busiest GPU of each, over 100.
    assert_eq!(value("127.0.0.2:1"), Some(0.3));
    assert_eq!(value("127.0.0.3:1"), Some(0.97));
    // The sample's filter keeps GPUs at most 90 % busy: every pick goes to the idle one.
    for i in 0..3 {
        let d = handle
            .scheduler()
            .schedule(&chat(&format!("q{i}"), &[]))
            .unwrap();
        assert_eq!(d.primary().address(), "127.0.0.2:1");
        d.finish(Completion::success(None));
    }

    // The exporter goes away: its endpoint's attribute is cleared, not left stale.
    busy_task.abort();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while value("127.0.0.3:1").is_some() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(value("127.0.0.3:1"), None);
    assert_eq!(value("127.0.0.2:1"), Some(0.3));
    handle.shutdown(std::time::Duration::from_secs(5)).await;
}

/// The pool's addresses.
fn members(handle: &shepherd_runtime::RuntimeHandle) -> Vec<String> {
    handle
        .pool()
        .snapshot()
        .endpoints()
        .iter()
        .map(|e| e.address().to_string())
        .collect()
}

async fn wait_for(handle: &shepherd_runtime::RuntimeHandle, expected: &[&str]) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while members(handle) != expected && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    members(handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_discovery_reads_and_follows_the_endpoints_file() {
    use shepherd_runtime::{Runtime, RuntimeOptions};

    let dir = std::env::temp_dir().join(format!("shepherd-file-discovery-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let endpoints = dir.join("endpoints.yaml");
    // The walkthrough's two-endpoint file, on loopback.
    std::fs::write(
        &endpoints,
        "endpoints:\n  - name: vllm-0\n    address: \"127.0.0.1\"\n    port: \"18000\"\n    labels: {llm-d.ai/role: decode}\n  - name: vllm-1\n    address: \"127.0.0.1\"\n    port: \"18001\"\n",
    )
    .unwrap();
    let text = std::fs::read_to_string(fixture_path("file-discovery.yaml"))
        .unwrap()
        .replace("/etc/epp/endpoints.yaml", &endpoints.display().to_string());
    let config =
        RuntimeConfig::from_yaml(&format!("{text}\nserver: {{metricsPort: 0}}\n")).unwrap();
    let file = config.discovery.file.clone().unwrap();
    assert!(file.watch_file);
    let options = RuntimeOptions {
        scrape: false,
        ..RuntimeOptions::default()
    };
    let handle = Runtime::start(config.clone(), options.clone())
        .await
        .unwrap();
    assert_eq!(members(&handle), ["127.0.0.1:18000", "127.0.0.1:18001"]);
    let labels = handle
        .pool()
        .snapshot()
        .get_by_address("127.0.0.1:18000")
        .unwrap()
        .labels();
    assert_eq!(
        labels.get("llm-d.ai/role").map(String::as_str),
        Some("decode")
    );

    // An edit: one endpoint leaves, one arrives, a bad entry is skipped.
    std::fs::write(
        &endpoints,
        "endpoints:\n  - {name: vllm-1, address: \"127.0.0.1\", port: \"18001\"}\n  - {name: vllm-2, address: \"127.0.0.1\", port: \"18002\"}\n  - {name: vllm-3, address: \"example.com\", port: \"18003\"}\n",
    )
    .unwrap();
    assert_eq!(
        wait_for(&handle, &["127.0.0.1:18001", "127.0.0.1:18002"]).await,
        ["127.0.0.1:18001", "127.0.0.1:18002"]
    );
    // A version that does not parse keeps the endpoints in force.
    std::fs::write(&endpoints, "endpoints: [unclosed\n").unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(members(&handle), ["127.0.0.1:18001", "127.0.0.1:18002"]);
    handle.shutdown(std::time::Duration::from_secs(5)).await;

    // As upstream, a file that cannot be read stops the start.
    std::fs::remove_file(&endpoints).unwrap();
    let error = Runtime::start(config, options)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("initial load failed"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn file_discovery_is_checked_as_upstream_checks_it() {
    let text = std::fs::read_to_string(fixture_path("file-discovery.yaml")).unwrap();
    let no_path = text.replace("      path: /etc/epp/endpoints.yaml\n", "");
    let error = RuntimeConfig::from_yaml(&no_path).unwrap_err().to_string();
    assert!(error.contains("'path' parameter is required"), "{error}");
    let unknown = text.replace("watchFile: true", "watch: true");
    let error = RuntimeConfig::from_yaml(&unknown).unwrap_err().to_string();
    assert!(error.contains("watch"), "{error}");
    // Shepherd's own sections cannot give a second source.
    let both = format!("{text}\nendpoints: [127.0.0.1:8000]\n");
    let error = RuntimeConfig::from_yaml(&both).unwrap_err().to_string();
    assert!(error.contains("cannot both"), "{error}");
    // The multi-cluster variant reads the same file, as clusters.
    let multi = text.replace("type: file-discovery", "type: multicluster-file-discovery");
    let config = RuntimeConfig::from_yaml(&multi).unwrap();
    assert!(config.discovery.file.as_ref().unwrap().multicluster);
    assert!(build_scheduler(&config.policy, &builtin_registry(), Arc::new(Pool::new())).is_ok());
}
