//! The upstream (`llm_d_epp_*`) families: what a request records, the deprecated names, and
//! the label caps under a flood of distinct model names and fairness ids.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use shepherd_runtime::upstream::{FlowOutcome, UpstreamMetrics, UpstreamSettings};
use shepherd_scheduler_core::completion::Usage;
use shepherd_scheduler_core::metrics::render_prometheus;

fn value(text: &str, prefix: &str) -> f64 {
    sample(text, prefix).unwrap().parse().unwrap()
}

fn sample<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
}

#[tokio::test(start_paused = true)]
async fn a_request_fills_every_request_family() {
    let metrics = Arc::new(UpstreamMetrics::new(UpstreamSettings::default()));
    let mut r = metrics.observe("llama", "lora-a", Some("tenant-1"), 2, 2048, true);
    r.flow_enter(2048);
    tokio::time::advance(Duration::from_millis(30)).await;
    r.flow_done(FlowOutcome::Dispatched);
    r.scheduled(Duration::from_micros(300), Some("10.0.0.7:8000"));
    tokio::time::advance(Duration::from_millis(200)).await;
    r.first_byte();
    r.response_bytes(5000);
    tokio::time::advance(Duration::from_millis(900)).await;
    r.finish(Some(&Usage {
        prompt_tokens: 500,
        completion_tokens: 10,
        cached_tokens: Some(256),
    }));
    let text = render_prometheus(&[&*metrics]);
    let labels =
        r#"{model_name="llama",target_model_name="lora-a",fairness_id="tenant-1",priority="2"}"#;
    assert_eq!(
        sample(&text, &format!("llm_d_epp_request_total{labels}")),
        Some("1")
    );
    assert_eq!(
        sample(&text, &format!("llm_d_epp_request_running{labels}")),
        Some("0")
    );
    assert_eq!(
        sample(
            &text,
            &format!("llm_d_epp_request_output_tokens_sum{labels}")
        ),
        Some("10")
    );
    assert_eq!(
        sample(
            &text,
            &format!("llm_d_epp_request_cached_tokens_sum{labels}")
        ),
        Some("256")
    );
    assert_eq!(
        sample(&text, &format!("llm_d_epp_request_size_bytes_sum{labels}")),
        Some("2048")
    );
    assert_eq!(
        sample(&text, &format!("llm_d_epp_response_size_bytes_sum{labels}")),
        Some("5000")
    );
    // TTFT from receipt (the flow wait included): 230 ms; e2e 1.13 s; NTPOT 0.113 s;
    // streaming TPOT (1.13 - 0.23) / 9 = 0.1 s.
    let ttft = r#"llm_d_epp_request_ttft_seconds_sum{model_name="llama",target_model_name="lora-a",fairness_id="tenant-1",priority="2",streaming="true"}"#;
    assert!((value(&text, ttft) - 0.23).abs() < 1e-6);
    assert!(
        (value(
            &text,
            &format!("llm_d_epp_request_duration_seconds_sum{labels}")
        ) - 1.13)
            .abs()
            < 1e-6
    );
    assert!(
        (value(
            &text,
            &format!("llm_d_epp_request_ntpot_seconds_sum{labels}")
        ) - 0.113)
            .abs()
            < 1e-6
    );
    assert!(
        (value(
            &text,
            &format!("llm_d_epp_request_streaming_tpot_seconds_sum{labels}")
        ) - 0.1)
            .abs()
            < 1e-6
    );
    assert!(text.contains(r#"llm_d_epp_request_duration_seconds_bucket{model_name="llama",target_model_name="lora-a",fairness_id="tenant-1",priority="2",le="3600"} 1"#));
    assert!(text.contains(r#"llm_d_epp_scheduler_attempts_total{status="success",target_model_name="lora-a",endpoint_name="10.0.0.7",namespace="",port="8000"} 1"#));
    assert!(text.contains(r#"llm_d_epp_flow_control_requests_total{outcome="Dispatched",priority="2",inference_pool="shepherd"} 1"#));
    assert!(text.contains(r#"llm_d_epp_flow_control_request_queue_duration_seconds_sum{fairness_id="tenant-1",priority="2",outcome="Dispatched",inference_pool="shepherd",model_name="llama",target_model_name="lora-a"}"#));
    // Off by default: no deprecated names.
    assert!(!text.contains("inference_objective_"));
}

#[tokio::test(start_paused = true)]
async fn errors_and_running_requests() {
    let metrics = Arc::new(UpstreamMetrics::new(UpstreamSettings::default()));
    let mut a = metrics.observe("m", "m", None, 0, 10, false);
    a.scheduled(Duration::from_micros(10), Some("10.0.0.1:8000"));
    let running = r#"llm_d_epp_request_running{model_name="m",target_model_name="m",fairness_id="",priority="0"}"#;
    assert_eq!(sample(&render_prometheus(&[&*metrics]), running), Some("1"));
    a.error("503");
    a.error("503"); // once per request
    drop(a);
    let mut b = metrics.observe("m", "m", None, 0, 10, false);
    b.scheduled(Duration::from_micros(10), None);
    b.error("ServiceUnavailable");
    let text = render_prometheus(&[&*metrics]);
    assert_eq!(sample(&text, running), Some("0"));
    assert!(text.contains(r#"llm_d_epp_request_error_total{model_name="m",target_model_name="m",fairness_id="",priority="0",error_code="503"} 1"#));
    assert!(text.contains(r#"error_code="ServiceUnavailable"} 1"#));
    assert!(text.contains(r#"llm_d_epp_scheduler_attempts_total{status="failure",target_model_name="m",endpoint_name="",namespace="",port=""} 1"#));
    assert!(text.contains("llm_d_epp_scheduler_e2e_duration_seconds_count 2"));
}

#[tokio::test(start_paused = true)]
async fn legacy_names_sum_over_the_labels_they_lack() {
    let metrics = Arc::new(UpstreamMetrics::new(UpstreamSettings {
        legacy_names: true,
        ..UpstreamSettings::default()
    }));
    for fairness in ["a", "b", "c"] {
        let mut r = metrics.observe("m", "m", Some(fairness), 1, 100, false);
        r.scheduled(Duration::from_micros(50), Some("10.0.0.1:8000"));
        r.finish(None);
    }
    let text = render_prometheus(&[&*metrics]);
    assert!(text.contains(
        r#"inference_objective_request_total{model_name="m",target_model_name="m",priority="1"} 3"#
    ));
    assert!(text.contains(
        "# HELP inference_objective_request_total [Deprecated: Use llm_d_epp_request_total]"
    ));
    assert!(text.contains(
        r#"inference_objective_request_sizes_count{model_name="m",target_model_name="m"} 3"#
    ));
    assert!(text.contains(r#"inference_extension_scheduler_attempts_total{status="success",target_model_name="m",pod_name="10.0.0.1",namespace="",port="8000"} 3"#));
    assert!(text.contains("inference_extension_scheduler_e2e_duration_seconds_count 3"));
    // The current names are still there, per fairness id.
    assert!(text.contains(r#"llm_d_epp_request_total{model_name="m",target_model_name="m",fairness_id="b",priority="1"} 1"#));
}

#[tokio::test(start_paused = true)]
async fn a_flood_of_models_and_fairness_ids_is_bounded() {
    let metrics = Arc::new(UpstreamMetrics::new(UpstreamSettings {
        max_label_values: 50,
        max_series: 200,
        ..UpstreamSettings::default()
    }));
    metrics.pin_model("configured");
    for i in 0..20_000 {
        let model = format!("model-{i}");
        let fairness = format!("tenant-{i}");
        let mut r = metrics.observe(&model, &model, Some(&fairness), i % 7, 64, false);
        r.error("NotFound");
    }
    let r = metrics.observe("configured", "configured", Some("tenant-0"), 0, 64, false);
    r.finish(None);
    assert_eq!(metrics.model_labels(), 50);
    assert_eq!(metrics.fairness_labels(), 50);
    assert!(metrics.series_count() <= 201, "{}", metrics.series_count());
    let text = render_prometheus(&[&*metrics]);
    let total_series = text
        .lines()
        .filter(|l| l.starts_with("llm_d_epp_request_total{"))
        .count();
    assert!(total_series <= 201, "{total_series} request_total series");
    // Everything is still counted: the overflow series carries the rest.
    let sum: u64 = text
        .lines()
        .filter(|l| l.starts_with("llm_d_epp_request_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, 20_001);
    assert!(text.contains(r#"llm_d_epp_request_total{model_name="other",target_model_name="other",fairness_id="other",priority="0"}"#));
    // A configured model keeps its label whatever the flood.
    assert!(text.contains(r#"model_name="configured""#));
    // The page stays small.
    assert!(text.len() < 400_000, "{} bytes", text.len());
}
