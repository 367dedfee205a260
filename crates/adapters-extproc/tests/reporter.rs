//! `request-attribute-reporter` over gRPC the way Envoy drives the picker: the answer to the
//! response's end carries the reported value as dynamic metadata, as upstream's ext_proc
//! response does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use shepherd_adapters_extproc::ExtProcOptions;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::ProcessingResponse;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use shepherd_adapters_extproc::envoy_types::pb::google::protobuf::value::Kind;
use shepherd_scheduler_core::config::PluginSpec;

const CHAT: &str = "/v1/chat/completions";

/// Upstream's integration config (`test/integration/epp/testdata/request-attribute-reporter-config.yaml`):
/// completion tokens under `envoy.lb` / `x-gateway-inference-request-cost`.
fn add_reporter(config: &mut shepherd_scheduler_core::config::EndpointPickerConfig) {
    config.plugins.push(PluginSpec {
        plugin_type: "request-attribute-reporter".into(),
        name: Some("total-tokens-cost-reporter".into()),
        parameters: serde_json::json!({"attributes": [{
            "key": {"namespace": "envoy.lb", "name": "x-gateway-inference-request-cost"},
            "expression": "usage.completion_tokens\n",
            "condition": "has(usage.completion_tokens)",
        }]}),
    });
}

fn reported_cost(answer: &ProcessingResponse) -> Option<f64> {
    let metadata = answer.dynamic_metadata.as_ref()?;
    let Some(Kind::StructValue(lb)) = &metadata.fields.get("envoy.lb")?.kind else {
        return None;
    };
    match lb.fields.get("x-gateway-inference-request-cost")?.kind {
        Some(Kind::NumberValue(n)) => Some(n),
        _ => None,
    }
}

async fn routed_stream(picker: &Picker, id: &str) -> EnvoyStream {
    let mut stream = picker.open().await;
    let body =
        serde_json::json!({"model": "llama", "messages": [{"role": "user", "content": "hi"}]})
            .to_string();
    stream
        .request_headers(&post(CHAT, &[("x-request-id", id)]), false, None, duplex())
        .await;
    stream
        .request_body_chunked(body.as_bytes(), 16 * 1024)
        .await;
    let _answer = stream.next().await;
    let _echo = stream.streamed_request_body().await;
    stream.response_headers("200", false, None).await;
    let headers = stream.next().await;
    assert!(matches!(
        headers.response,
        Some(Response::ResponseHeaders(_))
    ));
    assert!(reported_cost(&headers).is_none());
    stream
}

#[tokio::test]
async fn the_last_response_chunk_carries_the_reported_value() {
    let picker = Picker::start_configured(2, ExtProcOptions::default(), add_reporter, |s| s).await;
    let mut stream = routed_stream(&picker, "cost-1").await;
    let response = br#"{"id":"c1","choices":[{"message":{"role":"assistant","content":"Hi"}}],"usage":{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3}}"#;
    let (a, b) = response.split_at(40);
    stream.response_body(a, false).await;
    let first = stream.next().await;
    assert!(reported_cost(&first).is_none(), "only the end reports");
    stream.response_body(b, true).await;
    let last = stream.next().await;
    assert!(matches!(last.response, Some(Response::ResponseBody(_))));
    assert_eq!(reported_cost(&last), Some(3.0));
}

#[tokio::test]
async fn a_response_without_usage_reports_nothing() {
    let picker = Picker::start_configured(2, ExtProcOptions::default(), add_reporter, |s| s).await;
    let mut stream = routed_stream(&picker, "cost-2").await;
    stream
        .response_body(br#"{"id":"c2","choices":[]}"#, true)
        .await;
    let last = stream.next().await;
    assert!(last.dynamic_metadata.is_none());
}

#[tokio::test]
async fn without_a_reporter_no_metadata_is_sent() {
    let picker = Picker::start(2, ExtProcOptions::default()).await;
    let mut stream = routed_stream(&picker, "cost-3").await;
    stream
        .response_body(
            br#"{"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
            true,
        )
        .await;
    assert!(stream.next().await.dynamic_metadata.is_none());
}
