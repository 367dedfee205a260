//! Upstream-shaped configurations (`tests/fixtures/upstream/*.yaml`, each saying which
//! upstream file its shape comes from) load with the profiles, plugins, weights and parameters
//! upstream would run; malformed variants fail naming their line and key.
//!
//! Fixtures naming plugin types that are still to come are listed in [`PENDING`] with the
//! error they give today: when those types land, move the fixture to the loading cases.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use shepherd_runtime::config::{LoadError, RuntimeConfig};
use shepherd_scheduler_core::config::{Area, ConfigError, build_scheduler};
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::scheduler::Scheduler;
use shepherd_scorers::builtin_registry;

fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/upstream")
        .join(name)
}

fn text(name: &str) -> String {
    std::fs::read_to_string(fixture_path(name)).unwrap()
}

fn load(name: &str) -> Result<RuntimeConfig, LoadError> {
    RuntimeConfig::from_yaml_at(&text(name), &fixture_path(name))
}

fn build(config: &RuntimeConfig) -> Result<Scheduler, ConfigError> {
    build_scheduler(&config.policy, &builtin_registry(), Arc::new(Pool::new()))
}

/// The default profile's scorers as (name, weight), filters, and picker.
fn profile(
    scheduler: &Scheduler,
    index: usize,
) -> (String, Vec<(String, f64)>, Vec<String>, String) {
    let p = &scheduler.profiles()[index];
    let weights = p.weights().load();
    let scorers = p
        .scorers()
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.to_string(), weights.get(i)))
        .collect();
    let filters = p.filters().iter().map(|f| f.name.to_string()).collect();
    (
        p.name().to_string(),
        scorers,
        filters,
        p.picker_name().to_string(),
    )
}

fn scorers(list: &[(&str, f64)]) -> Vec<(String, f64)> {
    list.iter().map(|(n, w)| (n.to_string(), *w)).collect()
}

/// Where fixtures come from: the llm-d router (today's picker), the inference scheduler and
/// the llm-d guides (whose configs are still in use).
const SOURCES: [&str; 5] = [
    "llm-d router @ ebab68792, ",
    "Gateway API Inference Extension v1.5.0, ",
    "llm-d inference scheduler @ 520af47, ",
    "llm-d P/D disaggregation guide, ",
    "llm-d optimized-baseline guide, ",
];

#[test]
fn every_fixture_names_where_its_shape_comes_from() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        assert!(
            SOURCES
                .iter()
                .any(|source| text.starts_with(&format!("# Shape: {source}"))),
            "{}",
            entry.path().display()
        );
        count += 1;
    }
    assert!(count >= 10, "{count}");
}

#[test]
fn the_helm_charts_default_plugins_load_with_its_weights_and_scraping() {
    let config = load("helm-default-plugins.yaml").unwrap();
    assert!(!config.policy_is_preset);
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    let source = config.scraping.metrics_data_source.as_ref().unwrap();
    assert_eq!(source.scheme, "http");
    assert_eq!(source.path, "/metrics");
    assert!(source.insecure_skip_verify);
    assert!(config.scraping.core_metrics_extractor.is_some());
    let scheduler = build(&config).unwrap();
    assert_eq!(
        profile(&scheduler, 0),
        (
            "default".into(),
            scorers(&[
                ("queue-scorer", 2.0),
                ("kv-cache-utilization-scorer", 2.0),
                ("prefix-cache-scorer", 3.0)
            ]),
            vec![],
            "max-score-picker".into()
        )
    );
}

#[test]
fn upstreams_own_default_config_loads_with_its_data_layer() {
    let config = load("loader-default-config.yaml").unwrap();
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    let layer = config.policy.data_layer.as_ref().unwrap();
    assert_eq!(layer.sources[0].plugin_ref, "metrics-data-source");
    assert_eq!(
        layer.sources[0].extractors[0].plugin_ref,
        "core-metrics-extractor"
    );
    let (_, weights, _, picker) = profile(&build(&config).unwrap(), 0);
    assert_eq!(
        weights,
        scorers(&[
            ("queue-scorer", 2.0),
            ("kv-cache-utilization-scorer", 2.0),
            ("prefix-cache-scorer", 3.0)
        ])
    );
    assert_eq!(picker, "max-score-picker");
}

#[test]
fn the_integration_default_loads_under_the_deprecated_api_version_with_default_weights() {
    let config = load("integration-default-config.yaml").unwrap();
    assert_eq!(
        config.policy.api_version.as_deref(),
        Some("inference.networking.x-k8s.io/v1alpha1")
    );
    assert_eq!(config.policy.parser_refs(), ["openai-parser"]);
    let (_, weights, _, picker) = profile(&build(&config).unwrap(), 0);
    assert_eq!(
        weights,
        scorers(&[
            ("queue-scorer", 1.0),
            ("kv-cache-utilization-scorer", 1.0),
            ("prefix-cache-scorer", 1.0),
            ("lora-affinity-scorer", 1.0)
        ])
    );
    assert_eq!(picker, "max-score-picker");
}

#[test]
fn plugins_without_profiles_get_upstreams_default_profile() {
    let config = load("no-profiles.yaml").unwrap();
    assert!(
        !config.policy_is_preset,
        "plugins are declared: not the preset"
    );
    assert!(config.policy.scheduling_profiles.is_empty());
    let scheduler = build(&config).unwrap();
    assert_eq!(scheduler.profiles().len(), 1);
    assert_eq!(
        profile(&scheduler, 0),
        (
            "default".into(),
            scorers(&[
                ("queue-scorer", 1.0),
                ("kv-cache-utilization-scorer", 1.0),
                ("prefix-cache-scorer", 1.0),
                ("lora-affinity-scorer", 1.0)
            ]),
            vec![],
            "max-score-picker".into()
        )
    );
}

#[test]
fn the_deprecated_parser_and_saturation_detector_are_read_as_upstream_reads_them() {
    let config = load("deprecated-parser-and-detector.yaml").unwrap();
    assert_eq!(config.policy.parser_refs(), ["openai-parser"]);
    let flow = config.flow_control.as_ref().expect("flow control on");
    assert!(matches!(
        flow.detector,
        shepherd_scheduler_core::flow::Detector::Concurrency(_)
    ));
    assert_eq!(flow.ttl, Some(std::time::Duration::from_secs(30)));
    let (_, weights, _, _) = profile(&build(&config).unwrap(), 0);
    assert_eq!(weights, scorers(&[("queue-scorer", 2.0)]));

    // `flowControl=false` turns the section off, as upstream.
    let off = text("deprecated-parser-and-detector.yaml")
        .replace("- flowControl\n", "- flowControl=false\n");
    assert!(
        RuntimeConfig::from_yaml(&off)
            .unwrap()
            .flow_control
            .is_none()
    );
}

#[test]
fn the_optimized_baseline_guide_config_loads_with_its_producer_and_lru_scorer() {
    let config = load("optimized-baseline.yaml").unwrap();
    let scheduler = build(&config).unwrap();
    assert_eq!(
        profile(&scheduler, 0),
        (
            "default".into(),
            scorers(&[
                ("queue-scorer", 2.0),
                ("kv-cache-utilization-scorer", 2.0),
                ("prefix-cache-scorer", 3.0),
                ("no-hit-lru-scorer", 2.0)
            ]),
            vec![],
            "max-score-picker".into()
        )
    );
}

#[test]
fn the_estimate_prefix_cache_config_loads_with_the_load_aware_scorer() {
    let config = load("estimate-prefix-cache.yaml").unwrap();
    let scheduler = build(&config).unwrap();
    assert_eq!(
        profile(&scheduler, 0),
        (
            "default".into(),
            scorers(&[("prefix-cache-scorer", 1.0), ("load-aware-scorer", 1.0)]),
            vec![],
            "max-score-picker".into()
        )
    );
}

#[test]
fn the_sample_epp_config_loads_with_its_decode_filter() {
    let config = load("epp-config.yaml").unwrap();
    let scheduler = build(&config).unwrap();
    assert_eq!(
        profile(&scheduler, 0),
        (
            "default".into(),
            scorers(&[("prefix-cache-scorer", 2.0)]),
            vec!["decode-filter".into()],
            "max-score-picker".into()
        )
    );
}

#[test]
fn the_helm_charts_payload_agnostic_config_loads_with_passthrough_only() {
    let config = load("helm-payload-agnostic.yaml").unwrap();
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    let scheduler = build(&config).unwrap();
    assert_eq!(
        profile(&scheduler, 0),
        (
            "default".into(),
            scorers(&[
                ("active-request-scorer", 1.0),
                ("session-affinity-scorer", 1.0)
            ]),
            vec![],
            "max-score-picker".into()
        )
    );
    // Every path goes through the passthrough parser: no payload is read.
    let parsers = scheduler.parsers();
    assert_eq!(parsers.parsers().count(), 1);
    assert_eq!(parsers.fallback().unwrap().name, "passthrough-parser");
    let request = parsers
        .parse(
            "/v1/chat/completions",
            br#"{"model":"m","messages":[]}"#,
            &Default::default(),
        )
        .unwrap();
    assert!(request.prompt.is_empty() && request.model.is_empty());
}

/// Fixtures that fail today, with the error they give: the area of a type Shepherd does not
/// implement.
/// The parser this one lists in its profile is skipped now, as upstream skips it; what still
/// stops it is the reporter.
const PENDING: &[(&str, &str, Area)] = &[];

#[test]
fn the_older_pickers_gates_load_as_deprecated_no_ops() {
    let config = load("older-gates-default-config.yaml").unwrap();
    let warnings: Vec<String> = config.warnings().iter().map(|w| w.to_string()).collect();
    for gate in ["enableLegacyMetrics", "dataLayer"] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(gate) && w.contains("no effect")),
            "{gate}: {warnings:?}"
        );
    }
    let (_, weights, _, _) = profile(&build(&config).unwrap(), 0);
    assert_eq!(weights.len(), 4);
}

#[test]
fn the_pd_guides_deprecated_handlers_load_as_upstream_runs_them() {
    let config = load("pd-guide-legacy-handlers.yaml").unwrap();
    let scheduler = build(&config).unwrap();
    let d = scheduler
        .disaggregation()
        .expect("pd-profile-handler disaggregates");
    assert_eq!(
        (d.decode_profile(), d.prefill_profile()),
        ("decode", "prefill")
    );
    assert_eq!(
        profile(&scheduler, 1),
        (
            "decode".into(),
            scorers(&[("prefix-cache-scorer", 2.0), ("queue-scorer", 1.0)]),
            vec!["decode-filter".into()],
            "max-score-picker".into()
        )
    );
    let warnings: Vec<String> = config.warnings().iter().map(|w| w.to_string()).collect();
    for deprecated in ["prefill-header-handler", "pd-profile-handler"] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(deprecated) && w.contains("deprecated upstream")),
            "{deprecated}: {warnings:?}"
        );
    }
    // Without its decider declared, pd-profile-handler is refused, as upstream refuses it.
    let text = text("pd-guide-legacy-handlers.yaml").replace(
        "- type: prefix-based-pd-decider\n  parameters:\n    nonCachedTokens: 16\n",
        "",
    );
    let config = RuntimeConfig::from_yaml(&text).unwrap();
    let error = build(&config).unwrap_err().to_string();
    assert!(error.contains("deciders.prefill"), "{error}");
}

#[test]
fn a_disagg_handler_without_a_decider_needs_no_prefill_profile() {
    let config = load("disagg-decode-only.yaml").unwrap();
    let scheduler = build(&config).unwrap();
    let d = scheduler.disaggregation().expect("the handler is in force");
    assert_eq!(d.decode_profile(), "decode");
    assert_eq!(scheduler.profiles().len(), 1);
}

#[test]
fn a_declared_admitter_no_profile_lists_still_runs() {
    let config = load("helm-latency-predictor.yaml").unwrap();
    let scheduler = build(&config).unwrap();
    let admitters: Vec<&str> = scheduler.profiles()[0]
        .admitters()
        .iter()
        .map(|a| &*a.name)
        .collect();
    assert_eq!(admitters, ["latency-slo-admitter"]);
    assert_eq!(
        profile(&scheduler, 0).3,
        "weighted-random-picker",
        "the profile is otherwise as listed"
    );
}

#[test]
fn the_pd_epp_config_loads_with_its_two_profiles_and_decider() {
    let config = load("pd-epp-config.yaml").unwrap();
    let scheduler = build(&config).unwrap();
    let d = scheduler
        .disaggregation()
        .expect("the disagg-profile-handler is in force");
    assert_eq!(
        (d.decode_profile(), d.prefill_profile()),
        ("decode", "prefill")
    );
    assert_eq!(
        profile(&scheduler, 1),
        (
            "decode".into(),
            scorers(&[("prefix-cache-scorer", 2.0), ("queue-scorer", 1.0)]),
            vec!["decode-filter".into()],
            "max-score-picker".into()
        )
    );
}

#[test]
fn fixtures_with_types_not_implemented_yet_fail_naming_the_area() {
    for (name, plugin_type, area) in PENDING {
        let config = load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let Err(error) = build(&config) else {
            panic!("{name} built: move it to the loading cases");
        };
        match &error {
            ConfigError::NotImplemented {
                plugin_type: found,
                area: found_area,
                ..
            } => {
                assert_eq!(found, plugin_type, "{name}: {error}");
                assert_eq!(found_area, area, "{name}: {error}");
            }
            other => panic!("{name}: expected a not-implemented error, got {other}"),
        }
        let message = error.to_string();
        assert!(message.contains("does not implement yet"), "{message}");
        assert!(message.contains(&area.to_string()), "{message}");
    }
}

/// A fixture with one line replaced, and the line and key the error must name.
fn malformed(name: &str, from: &str, to: &str) -> LoadError {
    let original = text(name);
    assert!(original.contains(from), "{name} has no `{from}`");
    let text = original.replacen(from, to, 1);
    RuntimeConfig::from_yaml_at(&text, &fixture_path(name)).unwrap_err()
}

fn line_of(name: &str, needle: &str) -> usize {
    text(name).lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn malformed_variants_name_the_file_line_and_key() {
    let name = "helm-default-plugins.yaml";
    let cases = [
        // An unknown top-level section.
        (
            "schedulingProfiles:",
            "schedulingProfile:",
            "schedulingProfile",
        ),
        // A misspelled key of a plugin entry.
        ("- type: queue-scorer", "- typ: queue-scorer", "typ"),
        // A misspelled key of a profile entry.
        (
            "  - pluginRef: queue-scorer",
            "  - pluginref: queue-scorer",
            "pluginref",
        ),
        // A weight that is not a number.
        ("    weight: 3", "    weight: heavy", "weight"),
        // A misspelled parameter of a data-layer plugin.
        (
            "    insecureSkipVerify: true",
            "    insecureSkipVerfy: true",
            "insecureSkipVerfy",
        ),
    ];
    for (from, to, key) in cases {
        let error = malformed(name, from, to);
        let message = error.to_string();
        assert!(message.contains(name), "{message}");
        assert!(message.contains(key), "{message}");
        if key != "insecureSkipVerfy" {
            assert_eq!(error.line(), Some(line_of(name, from)), "{message}");
        }
    }

    // Cross-section references and feature gates are checked at their line.
    let name = "integration-default-config.yaml";
    let error = malformed(
        name,
        "  - pluginRef: openai-parser",
        "  - pluginRef: openai",
    );
    assert_eq!(
        error.line(),
        Some(line_of(name, "  - pluginRef: openai-parser")),
        "{error}"
    );
    assert!(
        error.to_string().contains("requestHandler.parsers[0]"),
        "{error}"
    );
    let name = "deprecated-parser-and-detector.yaml";
    let error = malformed(name, "- flowControl\n", "- flowKontrol\n");
    assert_eq!(
        error.line(),
        Some(line_of(name, "- flowControl")),
        "{error}"
    );
    assert!(error.to_string().contains("flowKontrol"), "{error}");
    let error = malformed(
        name,
        "  pluginRef: concurrency-detector",
        "  pluginRef: queue-scorer",
    );
    assert!(
        error.to_string().contains("not a flow-control plugin"),
        "{error}"
    );
    assert_eq!(
        error.line(),
        Some(line_of(name, "  pluginRef: concurrency-detector"))
    );
}

#[test]
fn the_precise_configs_load_with_the_vllm_render_backend() {
    use shepherd_scorers::producers::TokenProducer;
    for (name, url, model) in [
        (
            "precise-prefix-split.yaml",
            "http://localhost:8000",
            "hf-repo/model-name",
        ),
        (
            "precise-scorer-sim-kvcache.yaml",
            "http://localhost:8000",
            "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        ),
    ] {
        let config = load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let shared = shepherd_scheduler_core::shared::SharedState::new(Arc::new(Pool::new()));
        shepherd_scheduler_core::config::build_scheduler_in(
            &config.policy,
            &builtin_registry(),
            &shared,
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let tokens = shared
            .resources
            .get::<TokenProducer>("token-producer")
            .unwrap();
        let render = tokens.render_backend().expect("the vllm backend");
        assert_eq!((render.base_url(), render.model()), (url, model), "{name}");
    }
}

#[test]
fn llm_ds_default_sticks_to_the_prefix_until_its_server_saturates() {
    let config = load("optimized-baseline-sticky.yaml").unwrap();
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    let pool = Arc::new(Pool::new());
    pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
    let scheduler =
        build_scheduler(&config.policy, &builtin_registry(), Arc::clone(&pool)).unwrap();
    let prompt = "a long shared system prompt for the sticky test. ".repeat(80);
    let request = |id: &str| {
        shepherd_scheduler_core::request::InferenceRequest::new(
            id,
            "m",
            shepherd_scheduler_core::request::Prompt::Text(prompt.clone()),
        )
    };
    let first = scheduler.schedule(&request("r1")).unwrap();
    let home = first.primary().address().to_string();
    drop(first);
    for i in 0..10 {
        let again = scheduler.schedule(&request(&format!("s{i}"))).unwrap();
        assert_eq!(again.primary().address(), home, "sticky");
    }
    // The home server has more prefill queued than the 18 s TTFT penalty allows at upstream's
    // peak prefill throughput (15928 tokens/s): the filter keeps everyone and the token load
    // sends the request elsewhere.
    let snapshot = pool.snapshot();
    let home_endpoint = snapshot.get_by_address(&home).unwrap();
    let _busy = home_endpoint.start_request_uncached(400_000, 400_000);
    let spilled = scheduler.schedule(&request("spill")).unwrap();
    assert_ne!(spilled.primary().address(), home, "saturated: spilled");
}

#[test]
fn context_length_aware_routes_by_the_endpoints_range_labels() {
    let config = load("context-length-filtering.yaml").unwrap();
    let pool = Arc::new(Pool::new());
    pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
    let snapshot = pool.snapshot();
    for (address, range) in [
        ("10.0.0.1:8000", "0-2048"),
        ("10.0.0.2:8000", "2049-131072"),
    ] {
        let labels = [(
            "llm-d.ai/context-length-range".to_string(),
            range.to_string(),
        )];
        snapshot
            .get_by_address(address)
            .unwrap()
            .set_labels(labels.into_iter().collect());
    }
    // 10.0.0.3 has no label: kept by the filter, scored 0.5.
    let scheduler =
        build_scheduler(&config.policy, &builtin_registry(), Arc::clone(&pool)).unwrap();
    let pick = |bytes: usize| {
        let request = shepherd_scheduler_core::request::InferenceRequest::new(
            "r",
            "m",
            shepherd_scheduler_core::request::Prompt::Text("x".repeat(bytes)),
        );
        scheduler
            .schedule(&request)
            .unwrap()
            .primary()
            .address()
            .to_string()
    };
    assert_eq!(pick(4 * 1000), "10.0.0.1:8000"); // 1,000 tokens
    // 50,000 tokens: only the wide range and the unlabelled endpoint pass the filter, and, as
    // upstream scores them, an unlabelled endpoint (0.5) beats a range that wide (0.47).
    assert_eq!(pick(4 * 50_000), "10.0.0.3:8000");
    // Past every range: the labelled endpoints are filtered out, the unlabelled one serves.
    assert_eq!(pick(4 * 200_000), "10.0.0.3:8000");
    // Without the unlabelled endpoint, the long prompt goes to the long-context server.
    pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
    assert_eq!(pick(4 * 50_000), "10.0.0.2:8000");
}

fn plain_request(id: &str) -> shepherd_scheduler_core::request::InferenceRequest {
    shepherd_scheduler_core::request::InferenceRequest::new(
        id,
        "m",
        shepherd_scheduler_core::request::Prompt::Text("hello".into()),
    )
}

#[test]
fn the_probabilistic_admitter_sheds_sheddable_requests_as_the_pool_saturates() {
    use shepherd_scheduler_core::endpoint::EndpointMetrics;
    use shepherd_scheduler_core::scheduler::ScheduleError;
    let config = load("probabilistic-admitter.yaml").unwrap();
    assert!(config.flow_control.is_some());
    let pool = Arc::new(Pool::new());
    pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
    let scheduler =
        build_scheduler(&config.policy, &builtin_registry(), Arc::clone(&pool)).unwrap();
    let set = |waiting: u32, kv: f64| {
        for e in pool.snapshot().endpoints() {
            e.set_metrics(EndpointMetrics {
                waiting,
                kv_utilization: kv,
                ..Default::default()
            });
        }
    };
    let shed = |priority: i32| {
        (0..400)
            .filter(|i| {
                let mut r = plain_request(&format!("r{i}"));
                r.priority = priority;
                matches!(scheduler.schedule(&r), Err(ScheduleError::Rejected { .. }))
            })
            .count()
    };
    // Idle: saturation 0, nothing shed.
    set(0, 0.0);
    assert_eq!(shed(-1), 0);
    // Saturation 0.2 (one waiting request of 5): upstream's curve sheds ~9.6 %.
    set(1, 0.0);
    let some = shed(-1);
    assert!((15..=65).contains(&some), "{some} of 400");
    assert_eq!(shed(0), 0, "priority >= 0 is always admitted");
    // Saturation 0.5 (KV 0.4 of 0.8): past (1/300)^(1/5), everything sheddable goes.
    set(0, 0.4);
    assert_eq!(shed(-1), 400);
    assert_eq!(shed(1), 0);
}

#[test]
fn the_utilization_filter_drops_endpoints_over_any_cap_and_falls_back_when_all_are() {
    use shepherd_scheduler_core::endpoint::EndpointMetrics;
    let config = load("utilization-filter.yaml").unwrap();
    let pool = Arc::new(Pool::new());
    pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
    let snapshot = pool.snapshot();
    let metrics = [
        (41, 0, 0.1), // over the running cap
        (0, 1, 0.1),  // a non-empty queue
        (10, 0, 0.5), // under every cap
    ];
    for (e, (running, waiting, kv)) in snapshot.endpoints().iter().zip(metrics) {
        e.set_metrics(EndpointMetrics {
            running,
            waiting,
            kv_utilization: kv,
            ..Default::default()
        });
    }
    let scheduler =
        build_scheduler(&config.policy, &builtin_registry(), Arc::clone(&pool)).unwrap();
    for i in 0..20 {
        let pick = scheduler
            .schedule(&plain_request(&format!("r{i}")))
            .unwrap();
        assert_eq!(pick.primary().address().to_string(), "10.0.0.3:8000");
    }
    // Every endpoint over a cap: `fallbackOnEmpty: true` keeps them all.
    snapshot.endpoints()[2].set_metrics(EndpointMetrics {
        kv_utilization: 0.9,
        ..Default::default()
    });
    assert!(scheduler.schedule(&plain_request("all-over")).is_ok());
    // Without the fallback, nothing is left.
    let strict =
        text("utilization-filter.yaml").replace("fallbackOnEmpty: true", "fallbackOnEmpty: false");
    let strict =
        RuntimeConfig::from_yaml_at(&strict, &fixture_path("utilization-filter.yaml")).unwrap();
    let scheduler =
        build_scheduler(&strict.policy, &builtin_registry(), Arc::clone(&pool)).unwrap();
    assert!(scheduler.schedule(&plain_request("none")).is_err());
    // Upstream's checks: a KV-cache cap is a fraction.
    let bad = text("utilization-filter.yaml").replace("maxValue: 0.8", "maxValue: 80");
    let bad = RuntimeConfig::from_yaml_at(&bad, &fixture_path("utilization-filter.yaml")).unwrap();
    let error = build(&bad).unwrap_err().to_string();
    assert!(error.contains("at most 1"), "{error}");
}

#[test]
fn header_label_affinity_prefers_the_endpoints_whose_label_the_request_names() {
    let config = load("header-label-affinity.yaml").unwrap();
    let pool = Arc::new(Pool::new());
    pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
    let snapshot = pool.snapshot();
    for (e, (slice, zone)) in snapshot
        .endpoints()
        .iter()
        .zip([("0", "a"), ("1", "a"), ("1", "b")])
    {
        e.set_labels(
            [
                (
                    "disaggregatedset.x-k8s.io/slice".to_string(),
                    slice.to_string(),
                ),
                ("topology.kubernetes.io/zone".to_string(), zone.to_string()),
            ]
            .into_iter()
            .collect(),
        );
    }
    let scheduler =
        build_scheduler(&config.policy, &builtin_registry(), Arc::clone(&pool)).unwrap();
    assert_eq!(
        profile(&scheduler, 0),
        (
            "decode".into(),
            scorers(&[("slice-affinity", 3.0), ("zone-affinity", 1.0)]),
            vec![],
            "picker".into()
        )
    );
    // Slice 1 in zone b scores 3 + 1; the weighted-random picker draws by score, and the
    // others (3, 1 and 0) share the rest.
    let mut hits = [0usize; 3];
    for i in 0..400 {
        let mut r = plain_request(&format!("r{i}"));
        r.headers.push(("X-Disagg-Slice".into(), "1".into()));
        r.headers.push(("x-preferred-zone".into(), "b".into()));
        let pick = scheduler.schedule(&r).unwrap();
        let at = snapshot
            .endpoints()
            .iter()
            .position(|e| e.address() == pick.primary().address())
            .unwrap();
        hits[at] += 1;
    }
    assert!(hits[2] > hits[1] && hits[1] > hits[0], "{hits:?}");
    assert_eq!(hits[0], 0, "slice 0 in zone a scores 0: {hits:?}");
}

#[test]
fn alpha_types_need_allow_experimental_plugins_as_upstream() {
    use shepherd_scheduler_core::config::check_stability;
    let config = load("header-label-affinity.yaml").unwrap();
    let error = check_stability(&config.policy, false).unwrap_err();
    assert_eq!(
        error.to_string(),
        "plugin 'slice-affinity' (type: 'header-label-affinity-scorer') has Alpha stability \
         level, but command line flag --allow-experimental-plugins is not set"
    );
    assert!(check_stability(&config.policy, true).is_ok());
    // Beta types need no flag.
    let config = load("probabilistic-admitter.yaml").unwrap();
    assert!(check_stability(&config.policy, false).is_ok());
}

#[test]
fn alpha_flow_control_and_data_layer_types_need_the_flag_too() {
    // The runtime takes these out of the scheduling policy; the check still sees them.
    for (fixture, alpha) in [
        ("flow-eviction.yaml", "eviction"),
        (
            "soft-reflective-ceiling.yaml",
            "soft-reflective-ceiling-policy",
        ),
        ("dcgm-gpu-utilization.yaml", "dcgm"),
    ] {
        let config = load(fixture).unwrap();
        let error = config.check_stability(false).unwrap_err().to_string();
        assert!(
            error.contains("has Alpha stability level") && error.contains(alpha),
            "{fixture}: {error}"
        );
        assert!(config.check_stability(true).is_ok(), "{fixture}");
    }
    let config = load("probabilistic-admitter.yaml").unwrap();
    assert!(config.check_stability(false).is_ok());
}

#[test]
fn endpoint_attribute_scorer_reads_the_extractors_custom_metrics() {
    use shepherd_scheduler_core::endpoint::EndpointAttributes;
    use shepherd_scheduler_core::shared::SharedState;
    let config = load("endpoint-attribute-scorer.yaml").unwrap();
    // The extractor's custom metrics: read from a page into attributes.
    let mappings = config
        .scraping
        .core_metrics_extractor
        .clone()
        .unwrap()
        .build()
        .unwrap();
    let mapping = mappings.get(Some("my-custom-engine"));
    let page = "custom_queue_size{status=\"waiting\"} 1\ncustom_cache_utilization 0.25\n\
                custom_queue_depth{tier=\"gold\"} 7\ncustom_queue_depth{tier=\"silver\"} 99\n";
    let scrape = shepherd_runtime::prom::parse(page.as_bytes()).unwrap();
    let extraction = mapping.extract(&scrape);
    assert_eq!(
        extraction.attributes,
        [
            ("custom.queue_depth".to_string(), 7.0),
            ("custom.kv_cache_utilization".to_string(), 0.25)
        ]
    );

    // Scored as upstream: queue depths 0, 5, 10 (adaptive, lower is better: 1, 0.5, 0) plus
    // KV use 0.9, 0.1, 0.5 (fixed [0, 1]: 0.1, 0.9, 0.5): the second endpoint wins (1.4).
    let pool = Arc::new(Pool::new());
    pool.set_members([
        "10.0.0.1:8000",
        "10.0.0.2:8000",
        "10.0.0.3:8000",
        "10.0.0.4:8000",
    ]);
    let shared = SharedState::new(Arc::clone(&pool));
    let table = EndpointAttributes::of(&shared.resources);
    let snapshot = pool.snapshot();
    for (e, (depth, kv)) in snapshot
        .endpoints()
        .iter()
        .zip([(0.0, 0.9), (5.0, 0.1), (10.0, 0.5)])
    {
        table.set(
            e.id(),
            &[
                ("custom.queue_depth".to_string(), depth),
                ("custom.kv_cache_utilization".to_string(), kv),
            ],
        );
    }
    // 10.0.0.4 has no attribute: it scores 0 on both.
    let scheduler = shepherd_scheduler_core::config::build_scheduler_in(
        &config.policy,
        &builtin_registry(),
        &shared,
    )
    .unwrap();
    let decision = scheduler.schedule(&plain_request("r")).unwrap();
    assert_eq!(decision.primary().address().to_string(), "10.0.0.2:8000");
    // 10.0.0.2's queue grows to 20: the range is now 0..20, so depths 0, 20, 10 score 1, 0,
    // 0.5, and with KV 0.1, 0.9, 0.5 the totals are 1.1, 0.9, 1.0: 10.0.0.1 wins.
    table.set(
        snapshot.endpoints()[1].id(),
        &[
            ("custom.queue_depth".to_string(), 20.0),
            ("custom.kv_cache_utilization".to_string(), 0.1),
        ],
    );
    let decision = scheduler.schedule(&plain_request("r2")).unwrap();
    assert_eq!(decision.primary().address().to_string(), "10.0.0.1:8000");
    // Upstream's parameter checks.
    for (from, to, says) in [
        (
            "type: \"linear_lower_is_better\"\n  - type",
            "type: \"best\"\n  - type",
            "algorithm.type",
        ),
        ("min: 0.0", "min: 1.0", "min < max"),
        (
            "attributeKey: \"custom.queue_depth\"\n      algorithm",
            "attributeKey: \"GPUUtilization/dcgm-extractor\"\n      algorithm",
            "producer",
        ),
    ] {
        let bad = text("endpoint-attribute-scorer.yaml").replacen(from, to, 1);
        let bad =
            RuntimeConfig::from_yaml_at(&bad, &fixture_path("endpoint-attribute-scorer.yaml"))
                .unwrap();
        let error = build(&bad).expect_err(says).to_string();
        assert!(error.contains(says), "{says}: {error}");
    }
}

#[test]
fn endpoint_attribute_filter_keeps_endpoints_under_the_threshold() {
    use shepherd_scheduler_core::endpoint::EndpointAttributes;
    use shepherd_scheduler_core::shared::SharedState;
    let config = load("endpoint-attribute-filter.yaml").unwrap();
    let pool = Arc::new(Pool::new());
    pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
    let shared = SharedState::new(Arc::clone(&pool));
    let table = EndpointAttributes::of(&shared.resources);
    let snapshot = pool.snapshot();
    let ids: Vec<_> = snapshot.endpoints().iter().map(|e| e.id()).collect();
    table.set(ids[0], &[("num_requests_running".to_string(), 10.0)]);
    table.set(ids[1], &[("num_requests_running".to_string(), 12.0)]);
    // 10.0.0.3 has no attribute: `onMissing: Pass` keeps it.
    let scheduler = shepherd_scheduler_core::config::build_scheduler_in(
        &config.policy,
        &builtin_registry(),
        &shared,
    )
    .unwrap();
    for i in 0..10 {
        let pick = scheduler
            .schedule(&plain_request(&format!("r{i}")))
            .unwrap();
        assert_eq!(pick.primary().address().to_string(), "10.0.0.3:8000");
    }
    // Every endpoint at 10 or more: `fallbackOnEmpty` keeps them all.
    table.set(ids[2], &[("num_requests_running".to_string(), 30.0)]);
    assert!(scheduler.schedule(&plain_request("all")).is_ok());
    // `onMissing: Fail` and no fallback: an endpoint without the attribute is dropped.
    let strict = text("endpoint-attribute-filter.yaml")
        .replace("onMissing: \"Pass\"", "onMissing: \"Fail\"")
        .replace("fallbackOnEmpty: true", "fallbackOnEmpty: false");
    let strict =
        RuntimeConfig::from_yaml_at(&strict, &fixture_path("endpoint-attribute-filter.yaml"))
            .unwrap();
    let scheduler = shepherd_scheduler_core::config::build_scheduler_in(
        &strict.policy,
        &builtin_registry(),
        &shared,
    )
    .unwrap();
    table.set(ids[0], &[("num_requests_running".to_string(), 3.0)]);
    table.set(ids[2], &[]);
    for i in 0..10 {
        let pick = scheduler
            .schedule(&plain_request(&format!("s{i}")))
            .unwrap();
        assert_eq!(pick.primary().address().to_string(), "10.0.0.1:8000");
    }
}

fn with_headers(
    id: &str,
    headers: &[(&str, &str)],
) -> shepherd_scheduler_core::request::InferenceRequest {
    headers.iter().fold(plain_request(id), |r, (name, value)| {
        r.with_header(name, *value)
    })
}

#[test]
fn the_session_affinity_filter_pins_an_agents_session_through_its_identity() {
    use shepherd_scheduler_core::request::{CONFIGURED_HEADERS, ConfiguredHeaders};
    let config = load("session-affinity-filter.yaml").unwrap();
    let pool = Arc::new(Pool::new());
    pool.set_members([
        "10.0.0.1:8000",
        "10.0.0.2:8000",
        "10.0.0.3:8000",
        "10.0.0.4:8000",
    ]);
    let scheduler =
        build_scheduler(&config.policy, &builtin_registry(), Arc::clone(&pool)).unwrap();
    // The adapters are asked to copy the agent headers.
    let copied = scheduler
        .resources()
        .get::<ConfiguredHeaders>(CONFIGURED_HEADERS)
        .unwrap()
        .names();
    for header in [
        "x-my-agent-session",
        "x-claude-code-session-id",
        "session_id",
    ] {
        assert!(copied.iter().any(|h| h == header), "{header}: {copied:?}");
    }
    // Every turn of one OpenCode session lands on the same server.
    let first = scheduler
        .schedule(&with_headers("t0", &[("x-session-affinity", "oc-1")]))
        .unwrap()
        .primary()
        .address()
        .to_string();
    for i in 1..20 {
        let turn = with_headers(&format!("t{i}"), &[("x-session-affinity", "oc-1")]);
        assert_eq!(
            scheduler.schedule(&turn).unwrap().primary().address(),
            first
        );
    }
    // The x-session-id header comes first: a new session, free to go anywhere, then pinned.
    let mut request = with_headers("s0", &[("x-session-affinity", "oc-1")]);
    request.session_key = Some("conversation-2".into());
    let second = scheduler
        .schedule(&request)
        .unwrap()
        .primary()
        .address()
        .to_string();
    for i in 1..10 {
        request.id = format!("s{i}");
        assert_eq!(
            scheduler.schedule(&request).unwrap().primary().address(),
            second
        );
    }
    // Requests of no session spread (the random picker).
    let spread: std::collections::BTreeSet<String> = (0..40)
        .map(|i| {
            let r = plain_request(&format!("n{i}"));
            scheduler
                .schedule(&r)
                .unwrap()
                .primary()
                .address()
                .to_string()
        })
        .collect();
    assert!(spread.len() > 1, "{spread:?}");
    // Alpha upstream, both of them.
    use shepherd_scheduler_core::config::check_stability;
    let error = check_stability(&config.policy, false)
        .unwrap_err()
        .to_string();
    assert!(error.contains("'agent-identity'"), "{error}");
    // Upstream's checks: a source names exactly one place.
    let bad = text("session-affinity-filter.yaml").replace(
        "- attribute: agent-identity",
        "- {attribute: agent-identity, header: x-a}",
    );
    let bad =
        RuntimeConfig::from_yaml_at(&bad, &fixture_path("session-affinity-filter.yaml")).unwrap();
    let error = build(&bad).unwrap_err().to_string();
    assert!(
        error.contains("exactly one of header or attribute"),
        "{error}"
    );
}

#[test]
fn the_session_id_producer_reads_the_cookie_for_the_session_scorer() {
    let config = load("session-id-producer.yaml").unwrap();
    let pool = Arc::new(Pool::new());
    pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
    let scheduler =
        build_scheduler(&config.policy, &builtin_registry(), Arc::clone(&pool)).unwrap();
    let cookie = [("cookie", "theme=dark; llm-d-session=abc123")];
    let first = scheduler.schedule(&with_headers("c0", &cookie)).unwrap();
    let pinned = first.primary().address().to_string();
    // The first request is still in flight: the queue scorer alone would move the next one.
    for i in 1..6 {
        let d = scheduler
            .schedule(&with_headers(&format!("c{i}"), &cookie))
            .unwrap();
        assert_eq!(d.primary().address(), pinned);
    }
    // Another session goes to a less loaded server.
    let other = scheduler
        .schedule(&with_headers("d0", &[("cookie", "llm-d-session=zzz")]))
        .unwrap();
    assert_ne!(other.primary().address(), pinned);
    // Upstream's check: exactly one of headerName and cookieName.
    let bad = text("session-id-producer.yaml").replace(
        "cookieName: llm-d-session",
        "{cookieName: llm-d-session, headerName: x-s}",
    );
    let bad = RuntimeConfig::from_yaml_at(&bad, &fixture_path("session-id-producer.yaml")).unwrap();
    let error = build(&bad).unwrap_err().to_string();
    assert!(error.contains("not both"), "{error}");
}

#[test]
fn the_data_parallel_sample_loads_as_one_profile_with_a_warning() {
    let config = load("dp-epp-config.yaml").unwrap();
    let scheduler = build(&config).unwrap();
    assert_eq!(scheduler.profiles().len(), 1);
    assert_eq!(
        profile(&scheduler, 0),
        (
            "default".into(),
            scorers(&[("prefix-cache-scorer", 2.0)]),
            vec!["decode-filter".into()],
            "max-score-picker".into()
        )
    );
    let warnings: Vec<String> = config
        .warnings()
        .iter()
        .map(|w| w.message.clone())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("`primaryPort` is not applied")),
        "{warnings:?}"
    );
    // Upstream's checks: the port range, and one profile.
    let bad = text("dp-epp-config.yaml").replace("primaryPort: 8000", "primaryPort: 70000");
    let bad = RuntimeConfig::from_yaml_at(&bad, &fixture_path("dp-epp-config.yaml")).unwrap();
    let error = build(&bad).unwrap_err().to_string();
    assert!(error.contains("between 1 and 65535"), "{error}");
    let two =
        text("dp-epp-config.yaml") + "- name: other\n  plugins:\n  - pluginRef: max-score-picker\n";
    let error = RuntimeConfig::from_yaml_at(&two, &fixture_path("dp-epp-config.yaml"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("runs one scheduling profile"), "{error}");
}

#[test]
fn the_header_profile_handler_runs_the_profile_the_header_names() {
    use shepherd_scheduler_core::request::{CONFIGURED_HEADERS, ConfiguredHeaders};
    let config = load("header-profile-handler.yaml").unwrap();
    let pool = Arc::new(Pool::new());
    pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
    let snapshot = pool.snapshot();
    for (e, role) in snapshot
        .endpoints()
        .iter()
        .zip(["encode", "prefill", "decode"])
    {
        e.set_labels(
            [("llm-d.ai/role".to_string(), role.to_string())]
                .into_iter()
                .collect(),
        );
    }
    let scheduler =
        build_scheduler(&config.policy, &builtin_registry(), Arc::clone(&pool)).unwrap();
    let copied = scheduler
        .resources()
        .get::<ConfiguredHeaders>(CONFIGURED_HEADERS)
        .unwrap()
        .names();
    assert!(copied.iter().any(|h| h == "epp-profile"), "{copied:?}");
    for (stage, address) in [
        ("encode", "10.0.0.1:8000"),
        ("prefill", "10.0.0.2:8000"),
        ("decode", "10.0.0.3:8000"),
    ] {
        let d = scheduler
            .schedule(&with_headers(stage, &[("EPP-Profile", stage)]))
            .unwrap();
        assert_eq!(
            (d.profile(), d.primary().address().to_string().as_str()),
            (stage, address)
        );
    }
    // No header: the default, decode.
    let d = scheduler.schedule(&plain_request("none")).unwrap();
    assert_eq!(d.profile(), "decode");
    // A stage no profile has: refused as a bad request.
    let error = scheduler
        .schedule(&with_headers("bad", &[("epp-profile", "render")]))
        .unwrap_err();
    assert_eq!(error.http_status(), 400, "{error}");
    // A default that is no profile fails header-less requests.
    let other = text("header-profile-handler.yaml").replace(
        "- type: header-profile-handler",
        "- type: header-profile-handler\n  parameters:\n    defaultProfile: render",
    );
    let other =
        RuntimeConfig::from_yaml_at(&other, &fixture_path("header-profile-handler.yaml")).unwrap();
    let scheduler = build_scheduler(&other.policy, &builtin_registry(), Arc::clone(&pool)).unwrap();
    let error = scheduler.schedule(&plain_request("none")).unwrap_err();
    assert!(
        error.to_string().contains("defaultProfile `render`"),
        "{error}"
    );
}

#[test]
fn a_band_naming_global_strict_fairness_serves_its_oldest_request_first() {
    use shepherd_scheduler_core::flow::Fairness;
    let config = load("global-strict-fairness.yaml").unwrap();
    let flow = config.flow_control.as_ref().expect("flow control is on");
    assert_eq!(flow.band_limits(10).fairness, Fairness::GlobalStrict);
    assert_eq!(flow.band_limits(0).fairness, Fairness::RoundRobin);
    // Bands no entry names keep Shepherd's default.
    assert_eq!(flow.band_limits(3).fairness, Fairness::RoundRobin);
    assert!(build(&config).is_ok());
}

/// Upstream's loader test names its policy instances (`customFairness`, `customFCFS`,
/// llm-d router @ ebab68792, `pkg/epp/config/loader/testdata_test.go`): a band's reference
/// resolves through the instance's name to its type.
#[test]
fn a_named_global_strict_instance_is_resolved_by_its_name() {
    use shepherd_scheduler_core::flow::Fairness;
    let text = "apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- name: maxScore
  type: max-score-picker
- name: customFCFS
  type: fcfs-ordering-policy
- name: customFairness
  type: global-strict-fairness-policy
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: maxScore
featureGates:
- flowControl
flowControl:
  priorityBands:
  - priority: 100
    orderingPolicyRef: customFCFS
    fairnessPolicyRef: customFairness
";
    let config = RuntimeConfig::from_yaml(text).unwrap();
    let flow = config.flow_control.as_ref().expect("flow control is on");
    assert_eq!(flow.band_limits(100).fairness, Fairness::GlobalStrict);
    assert!(build(&config).is_ok());
}

/// A chat request with an image part when `image`, with `pool`'s endpoints labelled by
/// `label` = each of `roles`.
fn encode_rig(config: &RuntimeConfig, label: &str, roles: &[&str]) -> Scheduler {
    let pool = Arc::new(Pool::new());
    for (i, role) in roles.iter().enumerate() {
        let ep = pool.add(&format!("127.0.0.1:{}", 8000 + i));
        ep.set_labels(
            [(label.to_string(), role.to_string())]
                .into_iter()
                .collect(),
        );
    }
    build_scheduler(&config.policy, &builtin_registry(), pool).unwrap()
}

fn chat_request(image: bool) -> shepherd_scheduler_core::request::InferenceRequest {
    let mut parts = vec![serde_json::json!({"type": "text", "text": "describe "})];
    if image {
        parts.push(
            serde_json::json!({"type": "image_url", "image_url": {"url": "https://e.x/a.png"}}),
        );
    }
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": parts}]});
    shepherd_scheduler_core::request::parse_openai_request(
        "/v1/chat/completions",
        body.to_string().as_bytes(),
        &Default::default(),
    )
    .unwrap()
}

#[test]
fn upstreams_e_p_d_and_e_pd_configs_encode_media_requests() {
    for (fixture, label, prefill_decider) in [
        ("sim-e-p-d-epp-config.yaml", "llm-d.ai/role", true),
        ("e-pd-encode-decode.yaml", "llm-d.ai/role", false),
        ("epd-custom-labels.yaml", "role", true),
    ] {
        let config = load(fixture).unwrap();
        let scheduler = encode_rig(&config, label, &["encode", "prefill", "decode"]);
        let d = scheduler.disaggregation().expect(fixture);
        assert_eq!(
            (d.decode_profile(), d.encode_profile(), d.encodes()),
            ("decode", "encode", true),
            "{fixture}"
        );
        let image = scheduler.schedule(&chat_request(true)).unwrap();
        assert_eq!(image.primary().address(), "127.0.0.1:8002", "{fixture}");
        let encode = image.encode().map(|e| e.header_value());
        assert_eq!(encode.as_deref(), Some("127.0.0.1:8000"), "{fixture}");
        image.finish(shepherd_scheduler_core::completion::Completion::success(
            None,
        ));
        let text = scheduler.schedule(&chat_request(false)).unwrap();
        assert!(text.encode().is_none(), "{fixture}");
        text.finish(shepherd_scheduler_core::completion::Completion::success(
            None,
        ));
        // The prefill decider is declared (E/P/D) or not (E/PD).
        let names: Vec<&str> = scheduler.profiles().iter().map(|p| p.name()).collect();
        assert_eq!(
            names.contains(&"prefill"),
            prefill_decider,
            "{fixture}: {names:?}"
        );
    }
}

#[test]
fn the_grpc_parser_examples_load_and_read_their_methods() {
    use shepherd_scheduler_core::request::{ApiKind, ParseLimits, ParserKind, Prompt};

    let config = load("vllmgrpc-parser.yaml").unwrap();
    build(&config).unwrap();
    let set = config.policy.parser_set().unwrap();
    assert_eq!(
        set.parsers().map(|p| p.kind).collect::<Vec<_>>(),
        [ParserKind::VllmGrpc]
    );
    // GenerateRequest { text: "Hi" }.
    let frame = [0, 0, 0, 0, 4, 0x1a, 2, b'H', b'i'];
    let req = set
        .parse(
            "/vllm.grpc.engine.VllmEngine/Generate",
            &frame,
            &ParseLimits::default(),
        )
        .unwrap();
    assert_eq!(
        (req.api, req.prompt),
        (ApiKind::Completions, Prompt::Text("Hi".into()))
    );
    // An explicit list gains no fallback: OpenAI paths are refused, as upstream.
    assert!(set.resolve("/v1/completions").is_none());

    let config = load("vertexai-parser.yaml").unwrap();
    build(&config).unwrap();
    let set = config.policy.parser_set().unwrap();
    assert_eq!(
        set.resolve("/google.cloud.aiplatform.v1.PredictionService/ChatCompletions")
            .map(|p| p.name.as_str()),
        Some("vertexai-parser")
    );
}

#[test]
fn the_soft_reflective_ceiling_config_loads_and_gates_lower_bands_by_saturation() {
    use shepherd_scheduler_core::clock::Timestamp;
    use shepherd_scheduler_core::flow::{FlowQueue, UsageLimitPolicy};

    let config = load("soft-reflective-ceiling.yaml").unwrap();
    build(&config).unwrap();
    let flow = config.flow_control.clone().expect("flow control is on");
    assert_eq!(flow.usage_limit, UsageLimitPolicy::SoftReflectiveCeiling);

    // Two levels queued: 10 (rank 0) and 0 (rank 1, reflective ceiling 1 - s).
    let mut queue: FlowQueue<&str> = FlowQueue::new(flow);
    let now = Timestamp::ZERO;
    queue.note_level(10, now);
    queue.note_level(0, now);
    assert!(queue.admits_now(10, 0.9), "rank 0 is never gated below 1");
    assert!(
        queue.admits_now(0, 0.3),
        "under its reflective ceiling (0.7)"
    );
    assert!(
        !queue.admits_now(0, 0.6),
        "past it: it waits for the dispatcher"
    );

    // Parameters are refused, as upstream.
    let bad = text("soft-reflective-ceiling.yaml").replace(
        "- type: soft-reflective-ceiling-policy",
        "- type: soft-reflective-ceiling-policy\n  parameters: {threshold: 0.5}",
    );
    let error = RuntimeConfig::from_yaml_at(&bad, &fixture_path("soft-reflective-ceiling.yaml"))
        .unwrap_err();
    assert!(error.to_string().contains("threshold"), "{error}");
}

#[test]
fn the_request_attribute_reporter_config_loads_with_its_expression() {
    use shepherd_scheduler_core::completion::Usage;

    let config = load("reporter-parser-in-profile.yaml").unwrap();
    let scheduler = build(&config).unwrap();
    let reporters = scheduler.reporters();
    assert_eq!(reporters.len(), 1);
    let reporter = &reporters[0];
    assert_eq!(reporter.plugin(), "total-tokens-cost-reporter");
    assert_eq!(
        (reporter.namespace(), reporter.key()),
        ("envoy.lb", "x-gateway-inference-request-cost")
    );
    let usage = Usage {
        prompt_tokens: 12,
        completion_tokens: 3,
        cached_tokens: None,
    };
    assert_eq!(reporter.report(Some(&usage)), Ok(Some(3)));

    // An expression outside the supported subset is refused at load, naming the subset.
    let bad = text("reporter-parser-in-profile.yaml").replace(
        "usage.completion_tokens\n          condition",
        "usage.completion_tokens.exists(t, t > 0)\n          condition",
    );
    assert_ne!(bad, text("reporter-parser-in-profile.yaml"));
    let config =
        RuntimeConfig::from_yaml_at(&bad, &fixture_path("reporter-parser-in-profile.yaml"))
            .unwrap();
    let error = build(&config).unwrap_err().to_string();
    assert!(error.contains("total-tokens-cost-reporter"), "{error}");
    assert!(error.contains("supported:"), "{error}");
}

#[test]
fn the_program_aware_sample_loads_with_least_attained_service_bands() {
    use shepherd_scheduler_core::flow::Fairness;
    use shepherd_scheduler_core::flow::program_aware::ProgramAwareSettings;

    let config = load("sim-program-aware.yaml").unwrap();
    build(&config).unwrap();
    let flow = config.flow_control.as_ref().expect("flow control is on");
    assert_eq!(flow.band_limits(0).fairness, Fairness::ProgramAware);
    assert_eq!(flow.program_aware, ProgramAwareSettings::default());
    // Charged in tokens at completion, as upstream: no difference left to warn of.
    assert!(
        !config
            .warnings()
            .iter()
            .any(|w| w.message.contains("program-aware-fairness")),
        "{:?}",
        config.warnings()
    );
    // Upstream's README parameters are read; a bad one names its field.
    let tuned = text("sim-program-aware.yaml").replace(
        "- type: program-aware-fairness",
        "- type: program-aware-fairness\n  parameters: {strategy: las, lasWeightService: 0.5, lasHalfLifeSeconds: 30}",
    );
    let config =
        RuntimeConfig::from_yaml_at(&tuned, &fixture_path("sim-program-aware.yaml")).unwrap();
    let settings = &config.flow_control.as_ref().unwrap().program_aware;
    assert_eq!(settings.weight_service, 0.5);
    let bad = text("sim-program-aware.yaml").replace(
        "- type: program-aware-fairness",
        "- type: program-aware-fairness\n  parameters: {evictionSweepSeconds: -1}",
    );
    let error = RuntimeConfig::from_yaml_at(&bad, &fixture_path("sim-program-aware.yaml"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("evictionSweepSeconds"), "{error}");
}
