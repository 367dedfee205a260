//! Loading runtime config files: the core's schema plus Shepherd's sections.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::net::SocketAddr;

use shepherd_runtime::config::{LoadError, RuntimeConfig};
use shepherd_runtime::{Runtime, RuntimeError, RuntimeOptions};

const GOOD: &str = r#"
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer
- type: queue-scorer
- type: max-score-picker
- type: metrics-data-source
  parameters:
    path: /custom-metrics
- type: core-metrics-extractor
  parameters:
    defaultEngine: sglang
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: max-score-picker
scheduler:
  stalenessMs: 300
dataLayer:
  sources:
  - pluginRef: metrics-data-source
    extractors:
    - pluginRef: core-metrics-extractor
endpoints:
- 127.0.0.1:8000
- address: 127.0.0.1:8001
  labels:
    llm-d.ai/engine-type: vllm
    zone: a
scraping:
  intervalMs: 25
  timeoutMs: 500
  clearAfterFailures: 5
server:
  bindAddress: 127.0.0.1
  metricsPort: 9191
  extprocPort: 9102
"#;

#[tokio::test]
async fn a_good_file_loads_with_every_section() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::write(dir.path(), "shepherd.yaml", GOOD);
    let config = RuntimeConfig::load(&path).await.unwrap();
    assert_eq!(config.path.as_deref(), Some(path.as_path()));
    assert!(!config.policy_is_preset);
    assert!(config.policy.adaptive.is_none());
    assert_eq!(config.policy.scheduler.staleness_ms, 300);
    // The data-layer plugins moved into the scraping settings; the policy keeps the rest.
    let types: Vec<&str> = config
        .policy
        .plugins
        .iter()
        .map(|p| p.plugin_type.as_str())
        .collect();
    assert_eq!(
        types,
        ["prefix-cache-scorer", "queue-scorer", "max-score-picker"]
    );
    assert_eq!(config.scraping.data_source().path, "/custom-metrics");
    assert_eq!(config.scraping.extractor().default_engine, "sglang");
    assert_eq!(config.scraping.interval_ms, 25);
    assert_eq!(config.scraping.timeout_ms, 500);
    assert_eq!(config.scraping.clear_after_failures, 5);
    assert_eq!(config.addresses(), ["127.0.0.1:8000", "127.0.0.1:8001"]);
    assert_eq!(config.endpoints[1].label("zone"), Some("a"));
    assert_eq!(
        config.server.admin_addr(),
        "127.0.0.1:9191".parse::<SocketAddr>().unwrap()
    );
    assert_eq!(config.server.extproc_port, 9102);
    assert_eq!(config.server.health_port, 9003);
    assert_eq!(config.server.http_port, 8080);
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    assert_eq!(RuntimeConfig::load_sync(&path).unwrap(), config);

    let json = config.to_json();
    assert_eq!(json["endpoints"][0]["address"], "127.0.0.1:8000");
    assert_eq!(json["scraping"]["intervalMs"], 25);
    assert_eq!(json["policy"]["schedulingProfiles"][0]["name"], "default");
}

#[tokio::test]
async fn a_missing_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.yaml");
    let error = RuntimeConfig::load(&path).await.unwrap_err();
    assert!(matches!(error, LoadError::NotFound { .. }), "{error:?}");
    assert_eq!(error.path(), Some(path.as_path()));
    let message = error.to_string();
    assert!(
        message.contains("nope.yaml") && message.contains("not found"),
        "{message}"
    );

    let error = Runtime::start(path.as_path(), RuntimeOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(error, RuntimeError::Load(LoadError::NotFound { .. })),
        "{error:?}"
    );
}

#[test]
fn bad_yaml_names_the_file_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::write(
        dir.path(),
        "broken.yaml",
        "endpoints:\n- 127.0.0.1:8000\nscraping:\n  intervalMs: [fast]\n",
    );
    let error = RuntimeConfig::load_sync(&path).unwrap_err();
    assert_eq!(error.line(), Some(4), "{error}");
    let message = error.to_string();
    assert!(message.contains("broken.yaml"), "{message}");
    assert!(message.contains("line 4"), "{message}");
    assert!(message.contains("scraping.intervalMs"), "{message}");

    // A YAML syntax error proper.
    let error = RuntimeConfig::from_yaml("plugins:\n  - type: a\n bad indent: [\n").unwrap_err();
    assert!(error.line().is_some(), "{error}");

    // A bad endpoint names its own line and index.
    let error =
        RuntimeConfig::from_yaml("endpoints:\n- 127.0.0.1:8000\n- localhost:8001\n").unwrap_err();
    assert_eq!(error.line(), Some(3));
    assert!(error.to_string().contains("endpoints[1]"), "{error}");

    // A misspelled field of a Shepherd section.
    let error = RuntimeConfig::from_yaml("server:\n  metricPort: 1\n").unwrap_err();
    assert_eq!(error.line(), Some(2));
    assert!(error.to_string().contains("metricPort"), "{error}");
}

#[test]
fn unknown_sections_are_errors_at_their_line_and_shepherd_sections_are_not() {
    let text = "endpoints: [127.0.0.1:8000]\nscraping: {}\nserver: {}\nfeatureGates: [flowControl]\nscrapping: {intervalMs: 5}\n";
    let error = RuntimeConfig::from_yaml_at(text, std::path::Path::new("epp.yaml")).unwrap_err();
    assert_eq!(error.line(), Some(5), "{error}");
    let message = error.to_string();
    assert!(message.contains("epp.yaml"), "{message}");
    assert!(message.contains("`scrapping`"), "{message}");
    let config =
        RuntimeConfig::from_yaml(&text.replace("scrapping: {intervalMs: 5}\n", "")).unwrap();
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    // An unknown feature gate is refused at its line, as upstream refuses it.
    let error = RuntimeConfig::from_yaml("featureGates:\n- flowControl\n- nope\n").unwrap_err();
    assert_eq!(error.line(), Some(3), "{error}");
}

#[test]
fn without_profiles_the_adaptive_preset_runs() {
    let config = RuntimeConfig::from_yaml("scheduler: {stalenessMs: 400}\n").unwrap();
    assert!(config.policy_is_preset);
    assert_eq!(config.policy.scheduler.staleness_ms, 400);
    let preset = shepherd_adaptive::preset::adaptive_config().unwrap();
    assert_eq!(
        config.policy.scheduling_profiles,
        preset.scheduling_profiles
    );
    assert_eq!(config.policy.adaptive, preset.adaptive);
    assert_eq!(
        RuntimeConfig::from_yaml("").unwrap(),
        RuntimeConfig::default()
    );

    // The file's own adaptive section applies to the preset's profile.
    let config =
        RuntimeConfig::from_yaml("adaptive:\n  hysteresis: {enter: 0.5, exit: 0.2}\n").unwrap();
    assert!(config.policy_is_preset);
    assert_eq!(
        config.policy.adaptive.as_ref().unwrap()["hysteresis"]["enter"],
        0.5
    );

    // Plugins without a profile: upstream's default profile is made of them, not the preset.
    let config = RuntimeConfig::from_yaml("plugins:\n- type: queue-scorer\n").unwrap();
    assert!(!config.policy_is_preset);
    assert!(config.policy.scheduling_profiles.is_empty());
}

#[test]
fn values_are_checked() {
    for (yaml, field) in [
        ("scraping: {intervalMs: 0}", "scraping.intervalMs"),
        ("scraping: {timeoutMs: 0}", "scraping.timeoutMs"),
        (
            "scraping: {metricsDataSource: {scheme: https}}",
            "scraping.metricsDataSource.scheme",
        ),
        (
            "scraping: {metricsDataSource: {path: metrics}}",
            "scraping.metricsDataSource",
        ),
        (
            "scraping: {coreMetricsExtractor: {defaultEngine: trtllm}}",
            "scraping.coreMetricsExtractor",
        ),
        (
            "endpoints: [127.0.0.1:8000, 127.0.0.1:8000]",
            "endpoints[1]",
        ),
        (
            "plugins:\n- type: metrics-data-source\nscraping: {metricsDataSource: {}}",
            "plugins[0]",
        ),
        (
            "adaptive: {hysteresis: {enter: 0.1, exit: 0.5}}",
            "adaptive",
        ),
    ] {
        let error = RuntimeConfig::from_yaml(yaml).unwrap_err();
        assert!(
            error.to_string().contains(field),
            "{yaml}: {error} does not name {field}"
        );
    }
    assert!(matches!(
        RuntimeConfig::from_yaml("apiVersion: v9\n"),
        Err(LoadError::Policy { .. })
    ));
}

#[tokio::test]
async fn a_policy_the_core_refuses_stops_the_start() {
    let config = RuntimeConfig::from_yaml(
        "plugins:\n- type: no-such-scorer\nschedulingProfiles:\n- name: p\n  plugins:\n  - pluginRef: no-such-scorer\nserver: {metricsPort: 0}\n",
    )
    .unwrap();
    let error = Runtime::start(config, common::quiet_options())
        .await
        .unwrap_err();
    assert!(matches!(error, RuntimeError::Policy(_)), "{error:?}");
    assert!(error.to_string().contains("no-such-scorer"), "{error}");
}

#[test]
fn the_documented_example_config_loads_with_the_defaults_it_claims() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shepherd.example.yaml");
    let config = RuntimeConfig::load_sync(&path).unwrap();
    assert!(config.policy_is_preset);
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    let defaults = RuntimeConfig::default();
    assert_eq!(config.scraping.interval_ms, defaults.scraping.interval_ms);
    assert_eq!(config.scraping.timeout_ms, defaults.scraping.timeout_ms);
    assert_eq!(
        config.scraping.clear_after_failures,
        defaults.scraping.clear_after_failures
    );
    assert_eq!(
        config.scraping.data_source(),
        defaults.scraping.data_source()
    );
    assert_eq!(config.server, defaults.server);
    assert_eq!(config.gateway, defaults.gateway);
    assert_eq!(config.policy.scheduler, defaults.policy.scheduler);
    assert_eq!(
        config.policy.scheduling_profiles,
        defaults.policy.scheduling_profiles
    );
    assert_eq!(config.addresses(), ["127.0.0.1:8100", "127.0.0.1:8101"]);
}

#[test]
fn the_gateway_section_is_read_checked_and_never_shows_its_keys() {
    let config = RuntimeConfig::from_yaml(
        "endpoints: [127.0.0.1:8000]\n\
         gateway:\n  maxConcurrentRequests: 8\n  apiKeys: [sk-client]\n  \
         upstreamApiKeys: {\"127.0.0.1:8000\": {env: VLLM_KEY}}\n",
    )
    .unwrap();
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    assert_eq!(config.gateway.max_concurrent_requests, Some(8));
    let shown = config.to_json().to_string();
    assert!(!shown.contains("sk-client"), "{shown}");
    assert!(shown.contains(r#""VLLM_KEY""#), "{shown}");

    let error = RuntimeConfig::from_yaml("gateway:\n  maxConcurrentRequest: 8\n").unwrap_err();
    assert_eq!(error.line(), Some(2), "{error}");
    let error = RuntimeConfig::from_yaml("gateway:\n  connectTimeoutMs: 0\n").unwrap_err();
    assert!(
        error.to_string().contains("gateway.connectTimeoutMs"),
        "{error}"
    );
}

#[test]
fn a_flow_control_section_is_honoured_with_its_detector_plugin() {
    let config = RuntimeConfig::from_yaml(
        r#"
plugins:
- type: concurrency-detector
  parameters: {maxConcurrency: 8}
- type: round-robin-fairness-policy
flowControl:
  defaultRequestTTL: 30s
  saturationDetector: {pluginRef: concurrency-detector}
  priorityBands:
  - {priority: 0, maxRequests: 100, fairnessPolicyRef: round-robin-fairness-policy}
"#,
    )
    .unwrap();
    let flow = config.flow_control.as_ref().expect("flow control on");
    assert_eq!(flow.ttl, Some(std::time::Duration::from_secs(30)));
    assert_eq!(flow.band_limits(0).max_requests, 100);
    assert!(matches!(
        flow.detector,
        shepherd_scheduler_core::flow::Detector::Concurrency(_)
    ));
    // The flow-control plugins are not scheduling plugins, and the section is no warning.
    assert!(config.policy_is_preset);
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
}

#[test]
fn a_bad_flow_control_section_names_the_field() {
    let error = RuntimeConfig::from_yaml(
        "flowControl:\n  priorityBands:\n  - {priority: 0, maxRequest: 3}\n",
    )
    .unwrap_err();
    assert!(error.to_string().contains("maxRequest"), "{error}");
    assert_eq!(error.line(), Some(3));

    let error = RuntimeConfig::from_yaml(
        "flowControl:\n  saturationDetector: {pluginRef: max-score-picker}\n",
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("not a saturation detector"),
        "{error}"
    );

    let error = RuntimeConfig::from_yaml(
        "plugins:\n- type: utilization-detector\n  parameters: {kvCacheUtilThreshold: 2}\nflowControl: {}\n",
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("kvCacheUtilThreshold"),
        "{error}"
    );
}

#[test]
fn without_a_flow_control_section_there_is_no_flow_control() {
    let config = RuntimeConfig::from_yaml("endpoints: [127.0.0.1:8000]\n").unwrap();
    assert!(config.flow_control.is_none());
}

#[test]
fn the_flow_control_guide_config_loads_as_described() {
    let guide = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/flow-control.md");
    let text = std::fs::read_to_string(guide).unwrap();
    let yaml = text
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a yaml block in docs/flow-control.md");
    let config = RuntimeConfig::from_yaml(yaml).unwrap();
    let flow = config.flow_control.clone().expect("flow control on");
    assert_eq!(flow.ttl, Some(std::time::Duration::from_secs(60)));
    assert_eq!(flow.max_requests, Some(20_000));
    assert_eq!(flow.band_limits(1).max_requests, 1000);
    assert_eq!(flow.band_limits(1).max_bytes, 256 << 20);
    assert_eq!(flow.band_limits(0).max_requests, 5000);
    assert_eq!(flow.band_limits(-3).max_requests, 500);
    assert!(matches!(
        flow.detector,
        shepherd_scheduler_core::flow::Detector::Utilization(_)
    ));
    assert!(config.warnings().is_empty());
}

#[test]
fn the_holdback_example_of_the_guide_loads() {
    let guide = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/flow-control.md");
    let text = std::fs::read_to_string(guide).unwrap();
    let yaml = text
        .split("```yaml\n")
        .skip(1)
        .find(|block| block.contains("type: priority-holdback-policy"))
        .and_then(|rest| rest.split("```").next())
        .expect("the holdback example in docs/flow-control.md");
    let config = RuntimeConfig::from_yaml(yaml).unwrap();
    let flow = config.flow_control.clone().expect("flow control on");
    assert_eq!(
        flow.usage_limit,
        shepherd_scheduler_core::flow::UsageLimitPolicy::PriorityHoldback {
            domain: shepherd_scheduler_core::flow::HoldbackDomain::Rank,
            min_ceiling: 0.6,
            max_ceiling: 1.0,
        }
    );
    assert!(config.warnings().is_empty());
}

#[test]
fn the_discovery_section_is_checked_as_upstream_checks_its_flags() {
    use shepherd_runtime::config::{DEFAULT_PUBLISH_INTERVAL_MS, KubernetesConfig};

    let config = RuntimeConfig::from_yaml(
        "discovery:\n  kubernetes:\n    endpointSelector: app=vllm,env=prod\n    endpointTargetPorts: [8000, 8001]\n",
    )
    .unwrap();
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    let kubernetes: &KubernetesConfig = config.discovery.kubernetes.as_ref().unwrap();
    assert_eq!(kubernetes.endpoint_target_ports, [8000, 8001]);
    assert_eq!(kubernetes.publish_interval_ms, DEFAULT_PUBLISH_INTERVAL_MS);

    for (yaml, expected) in [
        (
            "discovery:\n  kubernetes:\n    poolName: p\n    endpointSelector: a=b\n",
            "exactly one",
        ),
        ("discovery:\n  kubernetes: {}\n", "exactly one"),
        (
            "discovery:\n  kubernetes:\n    endpointSelector: a=b\n",
            "endpointTargetPorts",
        ),
        (
            "discovery:\n  kubernetes:\n    endpointSelector: a=b\n    endpointTargetPorts: [1,2,3,4,5,6,7,8,9]\n",
            "1 to 8",
        ),
        (
            "discovery:\n  kubernetes:\n    endpointSelector: 'a b'\n    endpointTargetPorts: [1]\n",
            "endpointSelector",
        ),
        (
            "discovery:\n  kubernetes:\n    poolName: p\n    poolGroup: example.com\n",
            "poolGroup",
        ),
        (
            "discovery:\n  kubernetes:\n    poolName: p\n    backoffInitialMs: 0\n",
            "backoffInitialMs",
        ),
    ] {
        let error = RuntimeConfig::from_yaml(yaml).unwrap_err().to_string();
        assert!(error.contains("discovery.kubernetes"), "{error}");
        assert!(error.contains(expected), "{yaml}: {error}");
    }
    // Unknown keys are refused, with their line.
    let error =
        RuntimeConfig::from_yaml("discovery:\n  kubernetes:\n    poolname: p\n").unwrap_err();
    assert_eq!(error.line(), Some(3), "{error}");
}

#[test]
fn an_upstream_shaped_file_without_scheduling_plugins_gets_upstreams_default_not_the_preset() {
    let text = "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: metrics-data-source\n- type: core-metrics-extractor\ndataLayer:\n  sources:\n  - pluginRef: metrics-data-source\n    extractors:\n    - pluginRef: core-metrics-extractor\n";
    let config = RuntimeConfig::from_yaml(text).unwrap();
    assert!(!config.policy_is_preset);
    let scheduler = shepherd_scheduler_core::config::build_scheduler(
        &config.policy,
        &shepherd_scorers::builtin_registry(),
        std::sync::Arc::new(shepherd_scheduler_core::endpoint::Pool::new()),
    )
    .unwrap();
    let profile = &scheduler.profiles()[0];
    assert_eq!(profile.name(), "default");
    assert!(profile.scorers().is_empty());
    assert_eq!(profile.picker_name(), "max-score-picker");
    // Shepherd's short form of the same file keeps the preset.
    let short = text.replace(
        "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n",
        "",
    );
    assert!(RuntimeConfig::from_yaml(&short).unwrap().policy_is_preset);
}

#[test]
fn plugin_parameters_accepted_and_unused_are_warned_about() {
    let config = RuntimeConfig::from_yaml(
        "plugins:\n- type: precise-prefix-cache-scorer\n  parameters:\n    indexerConfig:\n      prefixStoreConfig: {cacheSize: 500000, blockSize: 256}\n      tokenizersPoolConfig: {modelName: m, workersCount: 8}\n",
    )
    .unwrap();
    let warnings: Vec<String> = config.warnings().iter().map(|w| w.to_string()).collect();
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings[0].contains("deprecated upstream"), "{warnings:?}");
    assert!(warnings[1].contains("`precise-prefix-cache-scorer` (precise-prefix-cache-scorer): `indexerConfig.prefixStoreConfig`"), "{warnings:?}");
}
