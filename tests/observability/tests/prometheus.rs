//! Shepherd's metrics, dashboard and alerts proven against a real Prometheus.
//!
//! `shepherd-gateway` and `shepherd-epp` run as child processes in front of simulated vLLM
//! servers (`shepherd-sim serve`), exchanging load reports with each other; the gateway has
//! flow control on and trusts the priority and fairness headers. Load goes through both (the
//! picker driven over ext_proc as Envoy drives it, the request then sent to the endpoint it
//! named and its response fed back), in waves while Prometheus scrapes both every second.
//! Then every panel query of `deploy/grafana/shepherd.json`, and every query of llm-d's
//! failure-and-saturation dashboard (`tests/fixtures/llm-d/`) that Shepherd can answer, must
//! return a number. `promtool` checks the alert rules and runs their unit tests.
//!
//! Needs `SHEPHERD_PROMETHEUS` and `SHEPHERD_PROMTOOL` (`scripts/install-prometheus.sh`);
//! skipped without them unless `SHEPHERD_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::{HeaderMap, HeaderValue};
use envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3::processing_mode::BodySendMode;
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request;
use envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    HttpBody, HttpHeaders, ProcessingRequest, ProcessingResponse, ProtocolConfiguration,
};
use futures_util::StreamExt;
use serde_json::Value;
use shepherd_hostile_tests::{Process, backends, config_file, endpoint_lines};
use shepherd_observability_tests::{
    Prometheus, Target, dashboard_queries, has_number, prometheus_binary, promtool,
    promtool_binary, substitute_variables, workspace,
};
use shepherd_sim::serve::DEFAULT_MODEL;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// Queries of llm-d's dashboard that Shepherd does not answer, each with the reason.
const LLM_D_NOT_ANSWERED: [(&str, &str); 3] = [
    (
        "vllm:num_preemptions",
        "a model-server metric (vLLM's own), not the picker's: scrape the model servers for it",
    ),
    (
        "vllm:time_to_first_token_seconds_bucket",
        "a model-server histogram (vLLM's own), not the picker's; shepherd-sim serve does not export it",
    ),
    (
        "vllm:inter_token_latency_seconds_bucket",
        "a model-server histogram (vLLM's own), not the picker's; shepherd-sim serve does not export it",
    ),
];

/// A shared secret for the replica exchange between the two binaries.
const REPLICA_KEY: &str = "observability-test-key-0123456789";

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn alert_rules_pass_promtool_and_every_alert_has_a_unit_test() {
    let Some(promtool_path) =
        promtool_binary("alert_rules_pass_promtool_and_every_alert_has_a_unit_test")
    else {
        return;
    };
    let (ok, output) = promtool(&promtool_path, &["check", "rules", "alerts.yaml"]);
    assert!(ok, "promtool check rules failed:\n{output}");
    let (ok, output) = promtool(&promtool_path, &["test", "rules", "alerts_test.yaml"]);
    assert!(ok, "promtool test rules failed:\n{output}");

    let rules = std::fs::read_to_string(workspace().join("deploy/prometheus/alerts.yaml")).unwrap();
    let tests =
        std::fs::read_to_string(workspace().join("deploy/prometheus/alerts_test.yaml")).unwrap();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 6, "{alerts:?}");
    for alert in alerts {
        // Each alert is tested firing: an expectation with a non-empty `exp_alerts`.
        let fires = tests.split("alertname: ").skip(1).any(|case| {
            case.starts_with(&format!("{alert}\n"))
                && case
                    .lines()
                    .nth(1)
                    .is_some_and(|l| l.trim() == "exp_alerts:")
        });
        assert!(fires, "alert {alert} has no unit test in which it fires");
    }
}

// --- the ext_proc side of a request, as Envoy speaks it ------------------------------------

fn header(key: &str, value: &str) -> HeaderValue {
    HeaderValue {
        key: key.to_owned(),
        value: String::new(),
        raw_value: value.as_bytes().to_vec(),
    }
}

fn message(request: Request) -> ProcessingRequest {
    ProcessingRequest {
        request: Some(request),
        ..Default::default()
    }
}

/// The destination in a routing answer to the request headers.
fn destination(answer: &ProcessingResponse) -> Option<String> {
    let Some(Response::RequestHeaders(headers)) = &answer.response else {
        return None;
    };
    let mutation = headers.response.as_ref()?.header_mutation.as_ref()?;
    mutation
        .set_headers
        .iter()
        .filter_map(|o| o.header.as_ref())
        .find(|h| h.key == "x-gateway-destination-endpoint")
        .map(|h| String::from_utf8_lossy(&h.raw_value).into_owned())
}

/// One request through the picker: headers and body over ext_proc, the routing answer, the
/// request sent to the endpoint it names, its response (headers, then body chunk by chunk)
/// fed back. Returns the HTTP status of the model server's answer, or `None` when the picker
/// answered itself (a rejection).
async fn through_picker(
    client: &ExternalProcessorClient<Channel>,
    http: &reqwest::Client,
    body: Value,
) -> Option<u16> {
    let (tx, rx) = mpsc::channel(64);
    let mut responses = client
        .clone()
        .process(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let mode = BodySendMode::FullDuplexStreamed as i32;
    tx.send(ProcessingRequest {
        request: Some(Request::RequestHeaders(HttpHeaders {
            headers: Some(HeaderMap {
                headers: vec![
                    header(":method", "POST"),
                    header(":path", "/v1/completions"),
                    header(":authority", "picker.test"),
                    header("content-type", "application/json"),
                ],
            }),
            end_of_stream: false,
            ..Default::default()
        })),
        protocol_config: Some(ProtocolConfiguration {
            request_body_mode: mode,
            response_body_mode: mode,
            send_body_without_waiting_for_header_response: false,
        }),
        ..Default::default()
    })
    .await
    .unwrap();
    let bytes = serde_json::to_vec(&body).unwrap();
    tx.send(message(Request::RequestBody(HttpBody {
        body: bytes.clone(),
        end_of_stream: true,
        ..Default::default()
    })))
    .await
    .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), responses.message())
        .await
        .expect("no routing answer within 10 s")
        .expect("the ext_proc stream failed")
        .expect("the ext_proc stream ended without an answer");
    if matches!(first.response, Some(Response::ImmediateResponse(_))) {
        return None;
    }
    let target = destination(&first).expect("not a routing answer");
    let target = target.split(',').next().unwrap().to_owned();
    // Whatever else the picker says (the body streamed back, the echoed response) is read
    // in the background so its channel never fills.
    let reader = tokio::spawn(async move { while let Ok(Some(_)) = responses.message().await {} });

    let response = http
        .post(format!("http://{target}/v1/completions"))
        .header("content-type", "application/json")
        .body(bytes)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    tx.send(message(Request::ResponseHeaders(HttpHeaders {
        headers: Some(HeaderMap {
            headers: vec![header(":status", &status.to_string())],
        }),
        end_of_stream: false,
        ..Default::default()
    })))
    .await
    .unwrap();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.unwrap();
        tx.send(message(Request::ResponseBody(HttpBody {
            body: chunk.to_vec(),
            end_of_stream: false,
            ..Default::default()
        })))
        .await
        .unwrap();
    }
    tx.send(message(Request::ResponseBody(HttpBody {
        body: Vec::new(),
        end_of_stream: true,
        ..Default::default()
    })))
    .await
    .unwrap();
    drop(tx);
    let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
    Some(status)
}

// --- load ----------------------------------------------------------------------------------

/// A prompt sharing a prefix with the others of its group.
fn prompt(group: usize, i: usize) -> String {
    format!(
        "System: you are assistant number {group}. {} Question {i}: what is {i} plus {group}?",
        "Answer briefly and precisely. ".repeat(40)
    )
}

/// One wave of requests through the gateway: streaming chat with usage, plain completions,
/// tenants and priorities (a sheddable one among them), and a few for a model nobody serves.
async fn gateway_wave(http: &reqwest::Client, gateway: SocketAddr, wave: usize) {
    let mut tasks = Vec::new();
    for i in 0..12 {
        let http = http.clone();
        tasks.push(tokio::spawn(async move {
            let (path, body) = if i % 2 == 0 {
                (
                    "/v1/chat/completions",
                    serde_json::json!({
                        "model": DEFAULT_MODEL,
                        "messages": [{"role": "user", "content": prompt(i % 3, wave * 100 + i)}],
                        "max_tokens": 24,
                        "stream": true,
                        "stream_options": {"include_usage": true},
                    }),
                )
            } else {
                (
                    "/v1/completions",
                    serde_json::json!({
                        "model": if i == 5 { "no-such-model" } else { DEFAULT_MODEL },
                        "prompt": prompt(i % 3, wave * 100 + i),
                        "max_tokens": 16,
                    }),
                )
            };
            let priority = if i == 7 { "-1" } else { ["0", "1"][i % 2] };
            let response = http
                .post(format!("http://{gateway}{path}"))
                .header("x-llm-d-inference-fairness-id", format!("tenant-{}", i % 3))
                .header("x-shepherd-priority", priority)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = response.status();
            let _ = response.bytes().await;
            status.as_u16()
        }));
    }
    for t in tasks {
        let _ = t.await.unwrap();
    }
}

/// One wave through the picker: completions for the served model, one for an unknown model
/// (answered by the model server with 404), streaming and not.
async fn picker_wave(
    client: &ExternalProcessorClient<Channel>,
    http: &reqwest::Client,
    wave: usize,
) {
    let mut tasks = Vec::new();
    for i in 0..6 {
        let client = client.clone();
        let http = http.clone();
        tasks.push(tokio::spawn(async move {
            let body = serde_json::json!({
                "model": if i == 3 { "no-such-model" } else { DEFAULT_MODEL },
                "prompt": prompt(i % 2, wave * 100 + i),
                "max_tokens": 12,
                "stream": i % 2 == 0,
                "stream_options": {"include_usage": true},
            });
            through_picker(&client, &http, body).await
        }));
    }
    for t in tasks {
        let _ = t.await.unwrap();
    }
}

// --- the test ------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_returns_data_from_a_real_prometheus() {
    let Some(prometheus_path) =
        prometheus_binary("every_dashboard_query_returns_data_from_a_real_prometheus")
    else {
        return;
    };
    let servers = backends(3).await;
    let (gateway_udp, epp_udp) = (free_udp_port(), free_udp_port());
    let gateway_config = config_file(&format!(
        "endpoints:\n{endpoints}\
         gateway:\n  trustedHeaders: [x-shepherd-priority, x-llm-d-inference-fairness-id]\n\
         metrics:\n  poolName: observability\n\
         replicas:\n  listen: 127.0.0.1:{gateway_udp}\n  peers: [127.0.0.1:{epp_udp}]\n  key: {REPLICA_KEY}\n\
         plugins:\n  - name: in-flight-limit\n    type: concurrency-detector\n    parameters:\n      concurrencyMode: requests\n      maxConcurrency: 4\n\
         flowControl:\n  defaultRequestTTL: 30s\n  saturationDetector:\n    pluginRef: in-flight-limit\n",
        endpoints = endpoint_lines(&servers),
    ));
    let epp_config = config_file(&format!(
        "endpoints:\n{endpoints}\
         metrics:\n  poolName: observability\n\
         replicas:\n  listen: 127.0.0.1:{epp_udp}\n  peers: [127.0.0.1:{gateway_udp}]\n  key: {REPLICA_KEY}\n",
        endpoints = endpoint_lines(&servers),
    ));
    let gateway = Process::gateway(&gateway_config, &[]).await;
    let epp = Process::epp(&epp_config, &["--legacy-metric-names"]).await;

    let prometheus = Prometheus::start(
        &prometheus_path,
        &[
            Target::new("shepherd-gateway", gateway.addr("admin")),
            Target::new("shepherd-epp", epp.addr("admin")),
            // The job name llm-d's dashboard asks for its picker's health.
            Target::new("gaie-optimized-baseline-epp", epp.addr("admin")),
        ],
    )
    .await;

    // Prometheus applies new targets a few seconds after it starts: load only once it has
    // scraped all three, so that every counter grows between samples.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let up = prometheus.query("up == 1").await;
        if up.len() == 3 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "targets not scraped within 60 s: {:?}",
            prometheus.targets().await
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let http = reqwest::Client::new();
    let picker = ExternalProcessorClient::connect(format!("http://{}", epp.addr("extproc")))
        .await
        .unwrap();
    // Waves over several scrapes, so that every counter and histogram grows between samples.
    for wave in 0..10 {
        tokio::join!(
            gateway_wave(&http, gateway.addr("http"), wave),
            picker_wave(&picker, &http, wave),
        );
        tokio::time::sleep(Duration::from_millis(800)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;

    for (job, health, error) in prometheus.targets().await {
        assert_eq!(health, "up", "target {job}: {error}");
    }

    // Shepherd's dashboard: every query returns a number.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("deploy/grafana/shepherd.json")).unwrap(),
    )
    .unwrap();
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 40, "{} queries", queries.len());
    let mut empty = Vec::new();
    for (title, expr) in &queries {
        let expr = substitute_variables(expr, &["job"]);
        let result = prometheus.query(&expr).await;
        if !has_number(&result) {
            empty.push(format!("{title}: {expr} -> {result:?}"));
        }
    }
    assert!(
        empty.is_empty(),
        "{} of {} dashboard queries returned no number:\n{}",
        empty.len(),
        queries.len(),
        empty.join("\n")
    );
    eprintln!(
        "all {} queries of deploy/grafana/shepherd.json returned data",
        queries.len()
    );

    // llm-d's dashboard: every query about the picker returns a number.
    let llm_d: Value = serde_json::from_str(
        &std::fs::read_to_string(
            workspace().join("tests/fixtures/llm-d/llm-d-failure-saturation-dashboard.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut answered = 0;
    let mut empty = Vec::new();
    for (title, expr) in dashboard_queries(&llm_d) {
        if let Some((_, reason)) = LLM_D_NOT_ANSWERED.iter().find(|(m, _)| expr.contains(m)) {
            eprintln!("llm-d panel {title:?} not asserted: {reason}");
            continue;
        }
        let expr = substitute_variables(&expr, &["namespace", "model_name"]);
        let result = prometheus.query(&expr).await;
        if has_number(&result) {
            answered += 1;
        } else {
            empty.push(format!("{title}: {expr} -> {result:?}"));
        }
    }
    assert!(
        empty.is_empty(),
        "llm-d dashboard queries with no data:\n{}",
        empty.join("\n")
    );
    assert!(answered >= 7, "{answered}");

    // The deprecated names, on in the picker only.
    let legacy = prometheus
        .query(r#"sum(inference_objective_request_total{job="shepherd-epp"})"#)
        .await;
    assert!(has_number(&legacy), "{legacy:?}");
    let legacy_gateway = prometheus
        .query(r#"inference_objective_request_total{job="shepherd-gateway"}"#)
        .await;
    assert!(legacy_gateway.is_empty(), "{legacy_gateway:?}");
    prometheus.stop().await;
}
