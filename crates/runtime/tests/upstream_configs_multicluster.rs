//! Upstream-shaped configurations of the `multicluster-*` family, the conformance-test plugins
//! and the `disaggregatedset-rollout-screener` (`tests/fixtures/upstream/*.yaml`, each naming
//! its upstream source): they load, and route as upstream's picker would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use shepherd_runtime::config::{LoadError, RuntimeConfig};
use shepherd_runtime::{Runtime, RuntimeOptions};
use shepherd_scheduler_core::completion::Completion;
use shepherd_scheduler_core::config::{build_scheduler, check_stability};
use shepherd_scheduler_core::endpoint::{EndpointAttributes, Pool};
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
use shepherd_scheduler_core::response_headers::ResponseHeader;
use shepherd_scorers::builtin_registry;
use shepherd_scorers::multicluster::{KV_CACHE_UTILIZATION_KEY, QUEUE_SIZE_KEY};

fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/upstream")
        .join(name)
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixture_path(name)).unwrap()
}

fn load(name: &str) -> Result<RuntimeConfig, LoadError> {
    RuntimeConfig::from_yaml_at(&fixture(name), &fixture_path(name))
}

// cmd/epp/runner/multicluster_config_test.go, "full config loads": every plugin resolves.
#[test]
fn the_multicluster_wiring_loads_and_builds() {
    let config = load("multicluster-wiring.yaml").unwrap();
    let file = config.discovery.file.as_ref().unwrap();
    assert!(file.multicluster);
    assert!(config.scraping.metrics_host_from_labels);
    let source = config.scraping.multicluster_data_source.as_ref().unwrap();
    assert_eq!(source.scheme, "https");
    assert_eq!(source.ca_cert_path, "/etc/epp/tls/ca.crt");
    assert!(config.scraping.multicluster_metrics_extractor.is_some());
    // https is not scraped: said at start, never silently.
    let warnings: Vec<String> = config.warnings().iter().map(ToString::to_string).collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("metrics-source") && w.contains("not scraped")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains("resolved")),
        "{warnings:?}"
    );
    // Alpha upstream: refused without the flag, naming the first by name.
    let refused = check_stability(&config.policy, false)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("'discovery'"), "{refused}");
    assert!(check_stability(&config.policy, true).is_ok());
    let pool = Arc::new(Pool::new());
    pool.set_members(["127.0.0.1:8443", "127.0.0.2:8443"]);
    let scheduler = build_scheduler(&config.policy, &builtin_registry(), pool).unwrap();
    let profile = &scheduler.profiles()[0];
    let scorers: Vec<&str> = profile.scorers().iter().map(|s| &*s.name).collect();
    assert_eq!(scorers, ["kv-cache", "queue"]);
    assert_eq!(profile.filters().len(), 1, "the session-affinity filter");
}

// multicluster_config_test.go, "missing metrics extractor fails at load".
#[test]
fn the_metric_scorers_without_the_extractor_are_refused() {
    let text = fixture("multicluster-wiring.yaml")
        .replace(
            "  - type: multicluster-metrics-extractor\n    name: metrics-extractor\n",
            "",
        )
        .replace(
            "      extractors:\n        - pluginRef: metrics-extractor\n",
            "",
        );
    let error = RuntimeConfig::from_yaml(&text).unwrap_err().to_string();
    assert!(error.contains("multicluster-metrics-extractor"), "{error}");
    assert!(error.contains("kv-cache"), "{error}");
}

#[test]
fn bad_multicluster_parameters_are_refused() {
    let text = fixture("multicluster-wiring.yaml");
    for (from, to, says) in [
        (
            "      scheme: https\n",
            "      scheme: ftp\n",
            "unsupported scheme",
        ),
        (
            "      caCertPath: /etc/epp/tls/ca.crt\n",
            "      caCertPath: /c\n      interval: nope\n",
            "interval",
        ),
        ("      scheme: https\n", "      schema: https\n", "schema"),
        (
            "    name: metrics-extractor\n",
            "    name: metrics-extractor\n    parameters: {kvCacheUtilizationMetric: 1_bad}\n",
            "not a valid metric specification",
        ),
        (
            "      path: /etc/epp/clusters.yaml\n",
            "      watch: true\n",
            "watch",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let error = RuntimeConfig::from_yaml(&text.replace(from, to))
            .unwrap_err()
            .to_string();
        assert!(error.contains(says), "{to}: {error}");
    }
}

#[test]
fn the_prefix_affinity_variant_loads_and_reads_its_producer() {
    let config = load("multicluster-prefix-affinity.yaml").unwrap();
    let pool = Arc::new(Pool::new());
    pool.set_members(["127.0.0.1:8443", "127.0.0.2:8443", "127.0.0.3:8443"]);
    let scheduler = build_scheduler(&config.policy, &builtin_registry(), pool).unwrap();
    let prompt = "the same long system prompt of one tenant ".repeat(40);
    let first = scheduler
        .schedule(&InferenceRequest::new(
            "r0",
            "m",
            Prompt::Text(prompt.clone()),
        ))
        .unwrap();
    let home = first.primary().address().to_string();
    first.finish(Completion::success(None));
    for i in 1..5 {
        let d = scheduler
            .schedule(&InferenceRequest::new(
                format!("r{i}"),
                "m",
                Prompt::Text(prompt.clone()),
            ))
            .unwrap();
        assert_eq!(
            d.primary().address(),
            home,
            "a repeated prefix goes back to its cluster"
        );
        d.finish(Completion::success(None));
    }
}

/// A metrics-page double: answers every request with `page` until dropped.
async fn metrics_page(page: &'static str) -> (u16, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
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
    });
    (port, task)
}

// The end-to-end path of extractor/metrics/multicluster_test.go (TestMultiClusterMetricsPipeline)
// through the runtime: clusters from a file (one by hostname), their peers' pool aggregates
// scraped at their metricsAddress/metricsPort labels, the scorers' attributes written, and the
// shorter queue picked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_are_discovered_scraped_and_scored() {
    let (busy_port, _busy) = metrics_page(
        "# TYPE llm_d_epp_average_queue_size gauge\nllm_d_epp_average_queue_size 9\nllm_d_epp_average_kv_cache_utilization 0.8\n",
    )
    .await;
    let (idle_port, _idle) = metrics_page(
        "llm_d_epp_average_queue_size 1\nllm_d_epp_average_kv_cache_utilization 0.2\n",
    )
    .await;
    let dir = std::env::temp_dir().join(format!("shepherd-multicluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let clusters = dir.join("clusters.yaml");
    std::fs::write(
        &clusters,
        format!(
            "endpoints:\n  - name: cluster-a\n    address: \"127.0.0.2\"\n    port: \"18443\"\n    labels: {{metricsAddress: \"127.0.0.1\", metricsPort: \"{busy_port}\"}}\n  - name: cluster-b\n    address: localhost\n    port: \"18444\"\n    labels: {{metricsAddress: \"127.0.0.1\", metricsPort: \"{idle_port}\"}}\n"
        ),
    )
    .unwrap();
    let text = fixture("multicluster-prefix-affinity.yaml")
        .replace("/etc/epp/clusters.yaml", &clusters.display().to_string())
        .replace("interval: 1s", "interval: 50ms");
    let config =
        RuntimeConfig::from_yaml(&format!("{text}\nserver: {{metricsPort: 0}}\n")).unwrap();
    let options = RuntimeOptions {
        allow_experimental_plugins: true,
        ..RuntimeOptions::default()
    };
    let handle = Runtime::start(config, options).await.unwrap();
    let members: Vec<String> = handle
        .pool()
        .snapshot()
        .endpoints()
        .iter()
        .map(|e| e.address().to_string())
        .collect();
    assert_eq!(members.len(), 2, "{members:?}");
    assert!(
        members.contains(&"127.0.0.2:18443".to_string()),
        "{members:?}"
    );
    let b = members
        .iter()
        .find(|m| m.ends_with(":18444"))
        .unwrap()
        .clone();
    assert!(
        b == "127.0.0.1:18444" || b == "[::1]:18444",
        "localhost resolved: {b}"
    );

    let table = EndpointAttributes::of(&handle.shared().resources);
    let value = |address: &str, key: &str| {
        let id = handle.pool().snapshot().get_by_address(address)?.id();
        let column = table.column(key)?;
        table.read(|v| v.get(column, id))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while (value("127.0.0.2:18443", QUEUE_SIZE_KEY).is_none()
        || value(&b, QUEUE_SIZE_KEY).is_none())
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(value("127.0.0.2:18443", QUEUE_SIZE_KEY), Some(9.0));
    assert_eq!(
        value("127.0.0.2:18443", KV_CACHE_UTILIZATION_KEY),
        Some(0.8)
    );
    assert_eq!(value(&b, QUEUE_SIZE_KEY), Some(1.0));
    // The pool averages are the clusters' load metrics too.
    let metrics = handle
        .pool()
        .snapshot()
        .get_by_address("127.0.0.2:18443")
        .unwrap()
        .metrics();
    assert_eq!(metrics.waiting, 9);
    for i in 0..3 {
        let request =
            InferenceRequest::new(format!("q{i}"), "m", Prompt::Text(format!("question {i}")));
        let d = handle.scheduler().schedule(&request).unwrap();
        assert_eq!(
            d.primary().address(),
            b,
            "the cluster with the shorter queue"
        );
        d.finish(Completion::success(None));
    }
    handle.shutdown(Duration::from_secs(5)).await;
    std::fs::remove_dir_all(&dir).unwrap();
}

// conformance/resources/base.yaml: the conformance EPP's config loads; its filter keeps the
// endpoint the header names and its verifier asks for the served-endpoint header.
#[test]
fn the_conformance_config_loads() {
    let config = load("conformance-plugins.yaml").unwrap();
    assert!(
        check_stability(&config.policy, false).is_ok(),
        "Beta upstream"
    );
    let pool = Arc::new(Pool::new());
    pool.set_members(["127.0.0.1:3000", "127.0.0.2:3000"]);
    let scheduler = build_scheduler(&config.policy, &builtin_registry(), pool).unwrap();
    assert_eq!(
        &scheduler.response_headers()[..],
        [ResponseHeader::served_endpoint()]
    );
    let mut request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
    request.headers.push((
        "test-epp-endpoint-selection".into(),
        "127.0.0.2:3000".into(),
    ));
    assert_eq!(
        scheduler.schedule(&request).unwrap().primary().address(),
        "127.0.0.2:3000"
    );
    let bare = InferenceRequest::new("r2", "m", Prompt::Text("hi".into()));
    assert!(scheduler.schedule(&bare).is_err(), "no header: no endpoint");
}

/// A pool of a `DisaggregatedSet` mid-rollout (the README's 2P:10D example at A = 2P + 9D,
/// B = 1P + 1D), one pod per IP.
fn rollout_pool() -> Arc<Pool> {
    let pool = Arc::new(Pool::new());
    let mut n = 0;
    for (revision, role, count) in [
        ("A", "prefill", 2),
        ("A", "decode", 9),
        ("B", "prefill", 1),
        ("B", "decode", 1),
    ] {
        for _ in 0..count {
            n += 1;
            let labels: BTreeMap<String, String> = [
                ("disaggregatedset.x-k8s.io/name", "my-set"),
                ("disaggregatedset.x-k8s.io/revision", revision),
                ("disaggregatedset.x-k8s.io/role", role),
                (
                    "disaggregatedset.x-k8s.io/slice",
                    if n % 2 == 0 { "s0" } else { "s1" },
                ),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            pool.add(&format!("127.0.1.{n}:8000")).set_labels(labels);
        }
    }
    pool
}

// disaggregatedsetrollout/README.md: max-role sends about 90 % to A and 10 % to B; a strict
// revision header pins the revision; every request stays on one revision.
#[test]
fn the_rollout_screener_fixtures_load_and_shape_traffic_by_revision() {
    for name in [
        "rollout-screener.yaml",
        "rollout-screener-slice-affinity.yaml",
    ] {
        let config = load(name).unwrap();
        let refused = check_stability(&config.policy, false)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("rollout-screener"), "{refused}");
        let warnings: Vec<String> = config.warnings().iter().map(ToString::to_string).collect();
        assert!(
            warnings.iter().any(|w| w.contains("pool's members")),
            "{warnings:?}"
        );
        let pool = rollout_pool();
        let scheduler =
            build_scheduler(&config.policy, &builtin_registry(), Arc::clone(&pool)).unwrap();
        let revision_of = |address: &str| {
            pool.snapshot()
                .get_by_address(address)
                .unwrap()
                .labels()
                .get("disaggregatedset.x-k8s.io/revision")
                .cloned()
                .unwrap()
        };
        let mut b = 0;
        let total = 2000;
        for i in 0..total {
            let request = InferenceRequest::new(format!("r{i}"), "m", Prompt::Text("hi".into()));
            let d = scheduler.schedule(&request).unwrap();
            let revisions: Vec<String> = d
                .endpoints()
                .iter()
                .map(|e| revision_of(e.address()))
                .collect();
            assert!(
                revisions.windows(2).all(|w| w[0] == w[1]),
                "one revision per request: {revisions:?}"
            );
            if revisions[0] == "B" {
                b += 1;
            }
            d.finish(Completion::success(None));
        }
        let share = f64::from(b) / f64::from(total);
        assert!((0.07..0.13).contains(&share), "{name}: B got {share}");
        // A strict header pins the revision, whatever the weights.
        for i in 0..20 {
            let mut request =
                InferenceRequest::new(format!("s{i}"), "m", Prompt::Text("hi".into()));
            request
                .headers
                .push(("x-disagg-revision".into(), "B".into()));
            let d = scheduler.schedule(&request).unwrap();
            assert_eq!(revision_of(d.primary().address()), "B");
            d.finish(Completion::success(None));
        }
        // B loses its only prefill pod: incomplete, it gets nothing; a strict header naming
        // it fails closed.
        pool.remove("127.0.1.12:8000");
        for i in 0..50 {
            let request = InferenceRequest::new(format!("t{i}"), "m", Prompt::Text("hi".into()));
            let d = scheduler.schedule(&request).unwrap();
            assert_eq!(revision_of(d.primary().address()), "A");
            d.finish(Completion::success(None));
        }
        let mut request = InferenceRequest::new("u", "m", Prompt::Text("hi".into()));
        request
            .headers
            .push(("x-disagg-revision".into(), "B".into()));
        assert!(scheduler.schedule(&request).is_err());
    }
}
