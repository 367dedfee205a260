//! OpenTelemetry tracing through the real `shepherd-epp` binary: an OTLP receiver built on
//! the official protobuf definitions gets one trace per ext_proc stream, the child of the
//! `traceparent` in the request headers, with `llm_d.epp.flow_control`, `llm_d.epp.scoring`,
//! `llm_d.epp.profile` and a `llm_d.epp.scorer.<type>` span per scorer; the routing answer's
//! header mutation sets `traceparent` to the picker's span, in the same trace. Driven by an
//! ext_proc client here, and through a real Envoy to a simulated vLLM server (which echoes
//! the `traceparent` it received) when `SHEPHERD_ENVOY` is set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod e2e;

use std::time::Duration;

use common::{duplex, headers_answer, open_at, post, set_value};
use e2e::{Epp, Options, Stack, shepherd_config};
use shepherd_sim::serve::{ServeConfig, TRACEPARENT_ECHO_HEADER, spawn};
use shepherd_test_util::otlp::{ReceivedSpan, Receiver};

/// Three scorers, the adaptive controller, and flow control that never holds a request.
const POLICY: &str = "\
plugins:
  - type: prefix-cache-scorer
  - type: queue-scorer
  - type: kv-cache-utilization-scorer
  - type: max-score-picker
  - name: roomy
    type: concurrency-detector
    parameters: {maxConcurrency: 10000}
schedulingProfiles:
  - name: default
    plugins:
      - {pluginRef: prefix-cache-scorer, weight: 3}
      - {pluginRef: queue-scorer, weight: 2}
      - {pluginRef: kv-cache-utilization-scorer, weight: 2}
      - {pluginRef: max-score-picker}
adaptive: {}
flowControl:
  saturationDetector: {pluginRef: roomy}
";

fn otel_env(receiver: &Receiver) -> Vec<(String, String)> {
    [
        ("OTEL_TRACES_EXPORTER", "otlp".to_string()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.grpc_url()),
        (
            "OTEL_TRACES_SAMPLER",
            "parentbased_traceidratio".to_string(),
        ),
        ("OTEL_TRACES_SAMPLER_ARG", "0".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn one<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name} in {spans:#?}");
    found[0]
}

/// The picker's span tree for one request; returns the `gateway.request` span.
fn check_tree<'a>(spans: &'a [ReceivedSpan], client_parent: &str) -> &'a ReceivedSpan {
    let request = one(spans, "gateway.request");
    assert_eq!(request.parent_span_id, client_parent);
    assert_eq!(request.kind, 2, "SERVER");
    assert_eq!(request.service, "shepherd-epp");
    assert_eq!(request.attribute("gen_ai.request.model"), Some(e2e::MODEL));
    let endpoint = request.attribute("llm_d.epp.endpoint").expect("the pick");
    let flow = one(spans, "llm_d.epp.flow_control");
    assert_eq!(flow.parent_span_id, request.span_id);
    assert_eq!(
        flow.attribute("llm_d.epp.flow_control.outcome"),
        Some("dispatched")
    );
    let scoring = one(spans, "llm_d.epp.scoring");
    assert_eq!(scoring.parent_span_id, request.span_id);
    assert_eq!(scoring.attribute("llm_d.epp.endpoint"), Some(endpoint));
    assert!(scoring.attribute("llm_d.epp.cached_tokens").is_some());
    assert_eq!(scoring.attribute("llm_d.epp.adaptive.mode"), Some("steady"));
    let profile = one(spans, "llm_d.epp.profile");
    assert_eq!(profile.parent_span_id, scoring.span_id);
    let mut scorers: Vec<&str> = spans
        .iter()
        .filter(|s| s.name.starts_with("llm_d.epp.scorer."))
        .inspect(|s| assert_eq!(s.parent_span_id, profile.span_id))
        .map(|s| s.name.as_str())
        .collect();
    scorers.sort_unstable();
    assert_eq!(
        scorers,
        [
            "llm_d.epp.scorer.kv_cache_utilization",
            "llm_d.epp.scorer.prefix_cache",
            "llm_d.epp.scorer.queue"
        ]
    );
    assert_eq!(spans.len(), 4 + scorers.len(), "{spans:#?}");
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_mutation_hands_the_clients_trace_to_the_model_server() {
    let sims = spawn(ServeConfig::ephemeral(2)).await.unwrap();
    let receiver = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shepherd.yaml");
    let options = Options {
        extra_config: POLICY.to_string(),
        ..Options::default()
    };
    std::fs::write(&config, shepherd_config(sims.addrs(), &options)).unwrap();
    let epp = Epp::start_with_env(&config, &[], true, &otel_env(&receiver)).await;

    let body = serde_json::json!({"model": e2e::MODEL, "prompt": "hello", "max_tokens": 2})
        .to_string()
        .into_bytes();
    let mut traced = Vec::new();
    for i in 0..3u64 {
        let trace_id = format!("{:032x}", 0xe44_0000_u128 + u128::from(i) * 104_729);
        let parent = format!("{:016x}", 0x77_u64 + i);
        let traceparent = format!("00-{trace_id}-{parent}-01");
        let mut stream = open_at(epp.extproc).await;
        stream
            .request_headers(
                &post(
                    "/v1/completions",
                    &[("traceparent", &traceparent), ("tracestate", "vendor=1")],
                ),
                false,
                None,
                duplex(),
            )
            .await;
        stream.request_body(&body, true).await;
        let answer = stream.next().await;
        let common = headers_answer(&answer);
        let handed = set_value(common, "traceparent").expect("a traceparent for the server");
        assert_eq!(set_value(common, "tracestate").as_deref(), Some("vendor=1"));
        stream.close();
        traced.push((trace_id, parent, handed));
    }
    // "Not sampled" from the client: no span, and the header is left as the client sent it.
    let mut stream = open_at(epp.extproc).await;
    stream
        .request_headers(
            &post(
                "/v1/completions",
                &[(
                    "traceparent",
                    "00-11111111111111111111111111111111-2222222222222222-00",
                )],
            ),
            false,
            None,
            duplex(),
        )
        .await;
    stream.request_body(&body, true).await;
    let answer = stream.next().await;
    assert_eq!(set_value(headers_answer(&answer), "traceparent"), None);
    stream.close();

    for (trace_id, parent, handed) in &traced {
        let spans = receiver
            .wait_for(trace_id, "gateway.request", Duration::from_secs(20))
            .await;
        let request = check_tree(&spans, parent);
        // The model server's parent is the picker's request span, in the client's trace.
        assert_eq!(handed, &format!("00-{trace_id}-{}-01", request.span_id));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let mut trace_ids: Vec<String> = receiver.spans().into_iter().map(|s| s.trace_id).collect();
    trace_ids.sort();
    trace_ids.dedup();
    assert_eq!(
        trace_ids.len(),
        traced.len(),
        "one trace per sampled request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_envoy_the_model_server_receives_the_pickers_span() {
    let receiver = Receiver::start().await;
    let options = Options {
        extra_config: POLICY.to_string(),
        epp_env: otel_env(&receiver),
        ..Options::default()
    };
    let Some(stack) = Stack::start(options).await else {
        return;
    };
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let traceparent = format!("00-{trace_id}-00f067aa0ba902b7-01");
    let reply = stack
        .post_with(
            "inference",
            Stack::completion("traced through envoy", 2),
            &[("traceparent", &traceparent)],
        )
        .await;
    stack.assert_routed(&reply);
    let received = reply.headers[TRACEPARENT_ECHO_HEADER]
        .to_str()
        .unwrap()
        .to_owned();
    let spans = receiver
        .wait_for(trace_id, "gateway.request", Duration::from_secs(20))
        .await;
    let request = one(&spans, "gateway.request");
    assert_eq!(request.parent_span_id, "00f067aa0ba902b7");
    assert_eq!(received, format!("00-{trace_id}-{}-01", request.span_id));
    assert_eq!(
        request.attribute("llm_d.epp.endpoint"),
        reply.served.as_deref()
    );
}
