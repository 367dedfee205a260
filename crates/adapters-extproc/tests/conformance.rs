//! Upstream's conformance-test plugins over gRPC the way Envoy drives the picker: the
//! `header-based-testing-filter` routes to the endpoint the request header names, and the
//! `destination-endpoint-served-verifier` answers the response headers with the endpoint
//! Envoy reports as served. The config is the Inference Extension's conformance ConfigMap
//! (`crates/runtime/tests/fixtures/upstream/conformance-plugins.yaml`). Also the rollout
//! screener's response-header stamping, which uses the same answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use shepherd_adapters_extproc::ExtProcOptions;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::ProcessingResponse;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use shepherd_scheduler_core::config::{EndpointPickerConfig, PluginSpec};

const CHAT: &str = "/v1/chat/completions";
const SERVED: &str = "x-conformance-test-served-endpoint";

fn conformance_config(config: &mut EndpointPickerConfig) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../runtime/tests/fixtures/upstream/conformance-plugins.yaml");
    let fixture = EndpointPickerConfig::from_yaml(&std::fs::read_to_string(path).unwrap()).unwrap();
    // Keep the harness's completion recorder.
    let recorder: Vec<PluginSpec> = config
        .plugins
        .iter()
        .filter(|p| p.plugin_type == "test-completion-recorder")
        .cloned()
        .collect();
    *config = fixture;
    config.plugins.extend(recorder);
}

/// The header mutation a response-headers answer sets for `name`.
fn response_header(answer: &ProcessingResponse, name: &str) -> Option<String> {
    match &answer.response {
        Some(Response::ResponseHeaders(h)) => set_value(h.response.as_ref()?, name),
        other => panic!("expected a response headers answer, got {other:?}"),
    }
}

/// Sends one chat request with `extra` headers; the routing answer.
async fn route(stream: &mut EnvoyStream, extra: &[(&str, &str)]) -> ProcessingResponse {
    let body =
        serde_json::json!({"model": "llama", "messages": [{"role": "user", "content": "hi"}]})
            .to_string();
    stream
        .request_headers(&post(CHAT, extra), false, None, duplex())
        .await;
    stream
        .request_body_chunked(body.as_bytes(), 16 * 1024)
        .await;
    stream.next().await
}

#[tokio::test]
async fn the_conformance_config_routes_by_header_and_reports_the_served_endpoint() {
    let picker =
        Picker::start_configured(3, ExtProcOptions::default(), conformance_config, |s| s).await;

    // The header names the endpoint; the served report comes back as the header.
    let mut stream = picker.open().await;
    let answer = route(
        &mut stream,
        &[("test-epp-endpoint-selection", "127.0.0.1:8002")],
    )
    .await;
    assert_eq!(
        set_value(headers_answer(&answer), "x-gateway-destination-endpoint").as_deref(),
        Some("127.0.0.1:8002")
    );
    let _echo = stream.streamed_request_body().await;
    let served = string_metadata(
        "envoy.lb",
        "x-gateway-destination-endpoint-served",
        "127.0.0.1:8002",
    );
    stream.response_headers("200", false, Some(served)).await;
    let answer = stream.next().await;
    assert_eq!(
        response_header(&answer, SERVED).as_deref(),
        Some("127.0.0.1:8002")
    );

    // No served report: upstream's failure texts.
    let mut stream = picker.open().await;
    let _answer = route(
        &mut stream,
        &[("test-epp-endpoint-selection", "127.0.0.1:8000")],
    )
    .await;
    let _echo = stream.streamed_request_body().await;
    stream.response_headers("200", false, None).await;
    assert_eq!(
        response_header(&stream.next().await, SERVED).as_deref(),
        Some("fail: missing envoy lb metadata")
    );
    let mut stream = picker.open().await;
    let _answer = route(
        &mut stream,
        &[("test-epp-endpoint-selection", "127.0.0.1:8001")],
    )
    .await;
    let _echo = stream.streamed_request_body().await;
    let other = string_metadata("envoy.lb", "some-other-key", "x");
    stream.response_headers("200", false, Some(other)).await;
    assert_eq!(
        response_header(&stream.next().await, SERVED).as_deref(),
        Some("fail: missing destination endpoint served metadata")
    );

    // Without the header the filter keeps nothing: no endpoint, 503.
    let mut stream = picker.open().await;
    let answer = route(&mut stream, &[]).await;
    assert_eq!(immediate(&answer).status.as_ref().unwrap().code, 503);
}

fn rollout_config(config: &mut EndpointPickerConfig) {
    let screener = EndpointPickerConfig::from_yaml(
        r#"
plugins:
- type: disaggregatedset-rollout-screener
  name: rollout-screener
  parameters:
    scope: {labelSelector: "disaggregatedset.x-k8s.io/name=my-set"}
    headerSelectors:
    - {name: revision, headerName: x-disagg-revision, labelKey: disaggregatedset.x-k8s.io/revision, mode: strict}
    - {name: slice, headerName: x-disagg-slice, labelKey: disaggregatedset.x-k8s.io/slice, mode: prefer}
    revisionGating: {mode: disabled}
"#,
    )
    .unwrap();
    config.plugins.extend(screener.plugins);
}

#[tokio::test]
async fn the_rollout_screener_pins_a_strict_revision_and_stamps_the_served_labels() {
    let picker =
        Picker::start_configured(3, ExtProcOptions::default(), rollout_config, |s| s).await;
    for (i, (revision, slice)) in [("rev-a", "s0"), ("rev-b", "s1"), ("rev-b", "s2")]
        .iter()
        .enumerate()
    {
        let labels = [
            ("disaggregatedset.x-k8s.io/name", "my-set"),
            ("disaggregatedset.x-k8s.io/revision", *revision),
            ("disaggregatedset.x-k8s.io/slice", *slice),
        ];
        picker
            .endpoint(&format!("127.0.0.1:{}", 8000 + i))
            .set_labels(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
    }
    for n in 0..6 {
        let mut stream = picker.open().await;
        let id = format!("r{n}");
        let answer = route(
            &mut stream,
            &[("x-disagg-revision", "rev-a"), ("x-request-id", &id)],
        )
        .await;
        let destination =
            set_value(headers_answer(&answer), "x-gateway-destination-endpoint").unwrap();
        assert!(destination.starts_with("127.0.0.1:8000"), "{destination}");
        let _echo = stream.streamed_request_body().await;
        stream.response_headers("200", false, None).await;
        let answer = stream.next().await;
        assert_eq!(
            response_header(&answer, "x-disagg-revision").as_deref(),
            Some("rev-a")
        );
        assert_eq!(
            response_header(&answer, "x-disagg-slice").as_deref(),
            Some("s0")
        );
    }
    // A revision no endpoint has fails closed.
    let mut stream = picker.open().await;
    let answer = route(&mut stream, &[("x-disagg-revision", "rev-z")]).await;
    assert_eq!(immediate(&answer).status.as_ref().unwrap().code, 503);
}
