//! Mapping real-looking vLLM and SGLang pages to endpoint metrics, sanitizing garbage, and
//! loading the mapping from upstream-style configuration.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use proptest::collection::vec;
use proptest::prelude::*;
use shepherd_runtime::Error;
use shepherd_runtime::mapping::{
    CoreMetricsExtractorParams, EngineMapping, EngineMappings, Extraction, Issue, MetricSpec,
    MetricsDataSourceParams, Reason, Signal, Specs,
};
use shepherd_runtime::prom::{MetricType, parse};
use shepherd_scheduler_core::endpoint::LoraState;

/// vLLM 0.10-style page, one engine, LoRA enabled (about 49 KB).
const VLLM: &str = include_str!("fixtures/vllm.txt");
/// The same server with data parallelism 2: every vLLM series once per `engine`.
const VLLM_DP2: &str = include_str!("fixtures/vllm-dp2.txt");
/// SGLang page.
const SGLANG: &str = include_str!("fixtures/sglang.txt");

fn extract(mapping: &EngineMapping, page: &str) -> Extraction {
    let scrape = parse(page.as_bytes()).unwrap();
    assert_eq!(scrape.errors(), [], "fixture has bad lines");
    mapping.extract(&scrape)
}

fn fixture_lora() -> LoraState {
    LoraState {
        running: vec!["sql-lora".into(), "chat-lora".into()],
        waiting: vec!["summarize-lora".into()],
        max_loras: 4,
    }
}

#[test]
fn vllm_fixture_parses_whole() {
    let scrape = parse(VLLM.as_bytes()).unwrap();
    assert_eq!(scrape.bad_lines(), 0);
    assert!(VLLM.len() > 45_000, "{}", VLLM.len());
    let sample_lines = VLLM.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(scrape.len(), sample_lines);
    assert!(scrape.len() > 350, "{}", scrape.len());
    assert_eq!(scrape.metadata().len(), VLLM.lines().count() - sample_lines);
    assert_eq!(
        scrape.metric_type("vllm:time_to_first_token_seconds"),
        Some(MetricType::Histogram)
    );
    assert_eq!(
        scrape.family_of("vllm:e2e_request_latency_seconds_bucket"),
        Some(("vllm:e2e_request_latency_seconds", MetricType::Histogram))
    );
    let inf_buckets = scrape
        .samples_named("vllm:time_to_first_token_seconds_bucket")
        .filter(|s| s.label("le") == Some("+Inf"))
        .count();
    assert_eq!(inf_buckets, 1);
    assert_eq!(
        scrape
            .samples_named("http_request_size_bytes_count")
            .count(),
        4
    );
    assert_eq!(
        scrape.family_of("http_request_size_bytes_sum"),
        Some(("http_request_size_bytes", MetricType::Summary))
    );
}

#[test]
fn vllm_fixture_maps_to_endpoint_metrics() {
    let out = extract(&EngineMapping::vllm(), VLLM);
    let m = &out.metrics;
    assert_eq!(m.waiting, 3);
    assert_eq!(m.running, 12);
    assert_eq!(m.kv_utilization, 0.4172);
    assert_eq!(m.block_size, Some(16));
    assert_eq!(m.num_gpu_blocks, Some(27_932));
    assert_eq!(m.lora, fixture_lora());
    assert_eq!(out.missing, []);
    assert_eq!(out.issues, []);
}

#[test]
fn vllm_data_parallel_sums_counts_and_takes_the_busiest_cache() {
    let out = extract(&EngineMapping::vllm(), VLLM_DP2);
    let m = &out.metrics;
    assert_eq!((m.waiting, m.running), (3 + 1, 12 + 9));
    assert_eq!(m.kv_utilization, 0.4172);
    assert_eq!((m.block_size, m.num_gpu_blocks), (Some(16), Some(27_932)));
    assert_eq!(m.lora, fixture_lora());
    assert_eq!(out.missing, []);
}

#[test]
fn older_vllm_gpu_cache_usage_is_the_fallback() {
    let older = VLLM.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc");
    let out = extract(&EngineMapping::vllm(), &older);
    assert_eq!(out.metrics.kv_utilization, 0.4172);
    assert_eq!(out.missing, []);
    // When both are served, the newer name wins.
    let both = format!("{VLLM}vllm:gpu_cache_usage_perc{{engine=\"0\"}} 0.99\n");
    assert_eq!(
        extract(&EngineMapping::vllm(), &both)
            .metrics
            .kv_utilization,
        0.4172
    );
}

#[test]
fn crlf_pages_map_the_same() {
    let crlf = VLLM.replace('\n', "\r\n");
    assert_eq!(
        extract(&EngineMapping::vllm(), &crlf),
        extract(&EngineMapping::vllm(), VLLM)
    );
}

#[test]
fn sglang_fixture_maps_to_endpoint_metrics() {
    let out = extract(&EngineMapping::sglang(), SGLANG);
    let m = &out.metrics;
    assert_eq!(m.waiting, 5);
    assert_eq!(m.running, 17);
    assert_eq!(m.kv_utilization, 0.26);
    assert_eq!(m.block_size, Some(1));
    assert_eq!(m.num_gpu_blocks, Some(403_352));
    assert_eq!(m.lora, LoraState::default());
    assert_eq!(out.missing, []);
    assert_eq!(out.issues, []);
}

#[test]
fn the_wrong_preset_reports_everything_missing() {
    let out = extract(&EngineMapping::sglang(), VLLM);
    assert_eq!(out.metrics.waiting, 0);
    assert_eq!(out.metrics.kv_utilization, 0.0);
    assert_eq!(
        out.missing,
        [
            Signal::Waiting,
            Signal::Running,
            Signal::KvUtilization,
            Signal::BlockSize,
            Signal::NumGpuBlocks
        ]
    );
}

const TWO_MODELS: &str = r#"
vllm:num_requests_waiting{model_name="a"} 2
vllm:num_requests_waiting{model_name="b"} 5
vllm:num_requests_running{model_name="a"} 1
vllm:num_requests_running{model_name="b"} 7
vllm:kv_cache_usage_perc{model_name="a"} 0.9
vllm:kv_cache_usage_perc{model_name="b"} 0.2
vllm:cache_config_info{model_name="a",block_size="32",num_gpu_blocks="100"} 1
vllm:cache_config_info{model_name="b",block_size="16",num_gpu_blocks="200"} 1
"#;

#[test]
fn several_models_sum_counts_and_take_the_max_utilization() {
    let out = extract(&EngineMapping::vllm(), TWO_MODELS);
    assert_eq!((out.metrics.waiting, out.metrics.running), (7, 8));
    assert_eq!(out.metrics.kv_utilization, 0.9);
    assert_eq!(out.metrics.block_size, Some(32));
    // LoRA is read by the preset but this page has none.
    assert_eq!(out.missing, [Signal::Lora]);
}

#[test]
fn a_model_filter_reads_one_model() {
    let mapping = EngineMapping {
        model_name: Some("b".into()),
        ..EngineMapping::vllm()
    };
    let out = extract(&mapping, TWO_MODELS);
    assert_eq!((out.metrics.waiting, out.metrics.running), (5, 7));
    assert_eq!(out.metrics.kv_utilization, 0.2);
    assert_eq!(out.metrics.block_size, Some(16));
    assert_eq!(out.metrics.num_gpu_blocks, Some(200));
    let nobody = EngineMapping {
        model_name: Some("c".into()),
        ..EngineMapping::vllm()
    };
    assert_eq!(extract(&nobody, TWO_MODELS).metrics.waiting, 0);
}

fn issue(signal: Signal, reason: Reason, count: u32) -> Issue {
    Issue {
        signal,
        reason,
        count,
    }
}

#[test]
fn garbage_values_are_sanitized_and_counted() {
    let page = r#"
vllm:num_requests_waiting{engine="0"} NaN
vllm:num_requests_waiting{engine="1"} 4
vllm:num_requests_waiting{engine="2"} -3
vllm:num_requests_running{engine="0"} 1e30
vllm:num_requests_running{engine="1"} +Inf
vllm:kv_cache_usage_perc{engine="0"} -0.5
vllm:kv_cache_usage_perc{engine="1"} 0.3
vllm:cache_config_info{block_size="0",num_gpu_blocks="None"} 1
vllm:lora_requests_info{max_lora="lots",running_lora_adapters=" a , ,b,",waiting_lora_adapters=""} 5
vllm:lora_requests_info{max_lora="9",running_lora_adapters="old",waiting_lora_adapters=""} NaN
"#;
    let out = extract(&EngineMapping::vllm(), page);
    let m = &out.metrics;
    assert_eq!(m.waiting, 4);
    assert_eq!(m.running, u32::MAX);
    assert_eq!(m.kv_utilization, 0.3);
    assert_eq!((m.block_size, m.num_gpu_blocks), (None, None));
    assert_eq!(m.lora.running, ["a", "b"]);
    assert_eq!(m.lora.max_loras, 0);
    assert_eq!(out.missing, []);
    assert_eq!(
        out.issues,
        [
            issue(Signal::Waiting, Reason::NaN, 1),
            issue(Signal::Waiting, Reason::Negative, 1),
            issue(Signal::Running, Reason::OutOfRange, 2),
            issue(Signal::KvUtilization, Reason::Negative, 1),
            issue(Signal::Lora, Reason::NaN, 1),
            issue(Signal::Lora, Reason::Unparsable, 1),
            issue(Signal::BlockSize, Reason::OutOfRange, 1),
            issue(Signal::NumGpuBlocks, Reason::Unparsable, 1),
        ]
    );
    assert_eq!(out.issue_count(), 9);
}

#[test]
fn nan_or_excess_utilization_counts_as_full() {
    for value in ["NaN", "1.5", "+Inf"] {
        let page = format!("vllm:kv_cache_usage_perc {value}\n");
        let out = extract(&EngineMapping::vllm(), &page);
        assert_eq!(out.metrics.kv_utilization, 1.0, "{value}");
        assert_eq!(out.issues.len(), 1);
    }
    let out = extract(&EngineMapping::vllm(), "vllm:kv_cache_usage_perc -Inf\n");
    assert_eq!(out.metrics.kv_utilization, 0.0);
}

#[test]
fn geometry_may_come_from_gauges_and_labels_may_be_floats() {
    let mapping = EngineMapping {
        cache_info_spec: Specs::parse(["info"]).unwrap(),
        cache_block_size_spec: Specs::parse(["kv{kind=\"tokens_per\"}"]).unwrap(),
        cache_num_blocks_spec: Specs::parse(["kv{kind=max}"]).unwrap(),
        ..EngineMapping::empty("trt")
    };
    let page = "info{block_size=\"8.0\",num_gpu_blocks=\"1e3\"} 1\nkv{kind=\"tokens_per\"} 32\n";
    let out = extract(&mapping, page);
    assert_eq!(out.metrics.block_size, Some(32));
    assert_eq!(out.metrics.num_gpu_blocks, Some(1000));
    assert_eq!(
        out.missing,
        [],
        "the info label stands in for the missing gauge"
    );
    let out = extract(&mapping, "kv{kind=\"max\"} 4096\n");
    assert_eq!(
        (out.metrics.block_size, out.metrics.num_gpu_blocks),
        (None, Some(4096))
    );
    assert_eq!(out.missing, [Signal::BlockSize]);
    let out = extract(
        &mapping,
        "kv{kind=\"tokens_per\"} 5e9\nkv{kind=\"max\"} 0.2\n",
    );
    assert_eq!(
        (out.metrics.block_size, out.metrics.num_gpu_blocks),
        (None, None)
    );
    assert_eq!(
        out.issues,
        [
            issue(Signal::BlockSize, Reason::OutOfRange, 1),
            issue(Signal::NumGpuBlocks, Reason::OutOfRange, 1)
        ]
    );
}

#[test]
fn the_newest_lora_series_wins() {
    let page = r#"
vllm:lora_requests_info{max_lora="2",running_lora_adapters="first",waiting_lora_adapters=""} 10
vllm:lora_requests_info{max_lora="2",running_lora_adapters="newest",waiting_lora_adapters="w1,w2"} 30
vllm:lora_requests_info{max_lora="2",running_lora_adapters="middle",waiting_lora_adapters=""} 20
"#;
    let lora = extract(&EngineMapping::vllm(), page).metrics.lora;
    assert_eq!(lora.running, ["newest"]);
    assert_eq!(lora.waiting, ["w1", "w2"]);
    assert_eq!(lora.max_loras, 2);
    assert!(lora.has_room());
}

#[test]
fn spec_labels_select_series() {
    let mapping = EngineMapping {
        queued_requests_spec: Specs::parse(["q{status=waiting}"]).unwrap(),
        running_requests_spec: Specs::parse(["q{status=\"running\"}"]).unwrap(),
        ..EngineMapping::empty("custom")
    };
    let page = "q{status=\"waiting\",shard=\"1\"} 2\nq{status=\"waiting\",shard=\"2\"} 3\nq{status=\"running\"} 8\n";
    let out = extract(&mapping, page);
    assert_eq!((out.metrics.waiting, out.metrics.running), (5, 8));
    assert_eq!(out.missing, []);
}

#[test]
fn upstream_extractor_config_loads_from_yaml() {
    let yaml = r#"
engineLabelKey: example.com/engine
defaultEngine: my-engine
engineConfigs:
  - name: my-engine
    queuedRequestsSpec: "custom_queue_size{status=waiting}"
    runningRequestsSpec: custom_running_size
    kvUsageSpec: custom_cache_utilization
    loraSpec: ""
    cacheInfoSpec: custom_cache_info
    cacheBlockSizeLabelName: page
    cacheNumBlocksLabelName: pages
  - name: sglang
    kvUsageSpec: [sglang:token_usage, sglang:old_usage]
    modelName: qwen
"#;
    let params: CoreMetricsExtractorParams = serde_norway::from_str(yaml).unwrap();
    let mappings = params.build().unwrap();
    assert_eq!(mappings.engine_label_key(), "example.com/engine");
    let names: Vec<_> = mappings.engines().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["my-engine", "sglang", "vllm"]);
    let mine = mappings.get(None);
    assert_eq!(mine.name, "my-engine");
    assert_eq!(mine.block_size_label(), "page");
    assert!(mine.lora_spec.is_empty());
    assert_eq!(
        mine.metric_names(),
        [
            "custom_queue_size",
            "custom_running_size",
            "custom_cache_utilization",
            "custom_cache_info"
        ]
    );
    // An entry named like a preset replaces it whole.
    let sglang = mappings.get(Some("sglang"));
    assert!(sglang.queued_requests_spec.is_empty());
    assert_eq!(sglang.kv_usage_spec.as_slice().len(), 2);
    assert_eq!(sglang.model_name.as_deref(), Some("qwen"));
    assert_eq!(mappings.get(Some("vllm")), &EngineMapping::vllm());
    assert_eq!(mappings.get(Some("nope")).name, "my-engine");

    let page =
        "custom_queue_size{status=\"waiting\"} 6\ncustom_cache_info{page=\"64\",pages=\"512\"} 1\n";
    let out = mine.extract(&parse(page.as_bytes()).unwrap());
    assert_eq!(out.metrics.waiting, 6);
    assert_eq!(
        (out.metrics.block_size, out.metrics.num_gpu_blocks),
        (Some(64), Some(512))
    );
}

#[test]
fn default_params_are_upstreams() {
    let mappings = serde_norway::from_str::<CoreMetricsExtractorParams>("{}")
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(mappings, EngineMappings::default());
    assert_eq!(mappings.engine_label_key(), "llm-d.ai/engine-type");
    assert_eq!(mappings.default_mapping(), &EngineMapping::vllm());

    let source: MetricsDataSourceParams = serde_norway::from_str("{}").unwrap();
    assert_eq!(source, MetricsDataSourceParams::default());
    assert_eq!(
        (source.scheme.as_str(), source.path.as_str()),
        ("http", "/metrics")
    );
    assert!(source.insecure_skip_verify);
    let source: MetricsDataSourceParams =
        serde_norway::from_str("scheme: https\npath: /stats\ninsecureSkipVerify: false").unwrap();
    assert!(!source.insecure_skip_verify);
    source.validate().unwrap();
}

#[test]
fn bad_configs_are_errors() {
    let unknown_key = "engineConfigs:\n  - name: x\n    queueSpec: q\n";
    let error = serde_norway::from_str::<CoreMetricsExtractorParams>(unknown_key).unwrap_err();
    assert!(error.to_string().contains("queueSpec"), "{error}");
    assert!(serde_norway::from_str::<CoreMetricsExtractorParams>("engineLabel: x").is_err());
    assert!(serde_norway::from_str::<MetricsDataSourceParams>("port: 9").is_err());
    let bad_spec = "engineConfigs:\n  - name: x\n    kvUsageSpec: \"a{b!=c}\"\n";
    let error = serde_norway::from_str::<CoreMetricsExtractorParams>(bad_spec).unwrap_err();
    assert!(error.to_string().contains("a{b!=c}"), "{error}");

    for (yaml, parameter) in [
        ("engineConfigs: [{name: ''}]", "engineConfigs"),
        ("engineConfigs: [{name: default}]", "engineConfigs"),
        ("engineConfigs: [{name: a}, {name: a}]", "engineConfigs"),
        ("defaultEngine: missing", "defaultEngine"),
    ] {
        let params: CoreMetricsExtractorParams = serde_norway::from_str(yaml).unwrap();
        match params.build() {
            Err(Error::InvalidParameter { parameter: p, .. }) => assert_eq!(p, parameter, "{yaml}"),
            other => panic!("{yaml}: {other:?}"),
        }
    }
    for (scheme, path) in [("ftp", "/metrics"), ("http", "metrics")] {
        let params = MetricsDataSourceParams {
            scheme: scheme.into(),
            path: path.into(),
            insecure_skip_verify: false,
        };
        assert!(params.validate().is_err());
    }
}

#[test]
fn presets_serialize_and_load_back() {
    for preset in [EngineMapping::vllm(), EngineMapping::sglang()] {
        let json = serde_json::to_string(&preset).unwrap();
        let back: EngineMapping = serde_json::from_str(&json).unwrap();
        assert_eq!(back, preset, "{json}");
    }
    let json = serde_json::to_value(EngineMapping::vllm()).unwrap();
    assert_eq!(
        json["kvUsageSpec"],
        serde_json::json!(["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"])
    );
    assert_eq!(json["queuedRequestsSpec"], "vllm:num_requests_waiting");
    assert_eq!(EngineMapping::preset("tgi"), None);
    assert_eq!(
        EngineMapping::sglang().cache_info_spec.as_slice(),
        [MetricSpec::new("sglang:cache_config_info").unwrap()]
    );
}

/// Values worth throwing at the mapping.
fn nasty_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("NaN".to_owned()),
        Just("+Inf".to_owned()),
        Just("-Inf".to_owned()),
        Just("1e308".to_owned()),
        Just("-1e308".to_owned()),
        Just("4294967296".to_owned()),
        any::<f64>().prop_map(|v| format!("{v:?}")),
        (0.0f64..1.0).prop_map(|v| v.to_string()),
        (0u32..100).prop_map(|v| v.to_string()),
    ]
}

fn nasty_line() -> impl Strategy<Value = String> {
    let names = prop::sample::select(vec![
        "vllm:num_requests_waiting",
        "vllm:num_requests_running",
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "vllm:cache_config_info",
        "vllm:lora_requests_info",
        "sglang:num_queue_reqs",
        "sglang:num_running_reqs",
        "sglang:token_usage",
        "sglang:cache_config_info",
    ]);
    let labels = prop::sample::select(vec![
        "model_name",
        "engine",
        "block_size",
        "num_gpu_blocks",
        "page_size",
        "num_pages",
        "max_lora",
        "running_lora_adapters",
        "waiting_lora_adapters",
    ]);
    let label_value = prop_oneof![nasty_value(), "[a-z, ]{0,12}", Just(String::new())];
    (names, vec((labels, label_value), 0..5), nasty_value()).prop_map(|(name, labels, value)| {
        let mut seen = Vec::new();
        let labels: Vec<String> = labels
            .into_iter()
            .filter(|(label, _)| {
                let fresh = !seen.contains(label);
                seen.push(*label);
                fresh
            })
            .map(|(label, value)| format!("{label}=\"{value}\""))
            .collect();
        format!("{name}{{{}}} {value}", labels.join(","))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn mapping_never_yields_nan_or_out_of_range_utilization(
        lines in vec(nasty_line(), 0..40),
        model in prop::option::of(prop::sample::select(vec!["a", "1", ""])),
    ) {
        let page = lines.join("\n");
        let scrape = parse(page.as_bytes()).unwrap();
        for preset in [EngineMapping::vllm(), EngineMapping::sglang()] {
            let mapping = EngineMapping { model_name: model.map(str::to_owned), ..preset };
            let out = mapping.extract(&scrape);
            let kv = out.metrics.kv_utilization;
            prop_assert!((0.0..=1.0).contains(&kv), "{kv}");
            prop_assert_ne!(out.metrics.block_size, Some(0));
            prop_assert_ne!(out.metrics.num_gpu_blocks, Some(0));
            prop_assert!(out.metrics.lora.running.iter().all(|a| !a.is_empty() && a.trim() == a));
            prop_assert!(out.issues.iter().all(|i| i.count > 0));
        }
    }

    #[test]
    fn any_text_maps_without_panicking(text in ".{0,400}") {
        if let Ok(scrape) = parse(text.as_bytes()) {
            let out = EngineMapping::vllm().extract(&scrape);
            prop_assert!((0.0..=1.0).contains(&out.metrics.kv_utilization));
        }
    }
}
