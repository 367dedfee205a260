//! OpenTelemetry tracing through the real `shepherd-gateway` binary in front of simulated
//! vLLM servers: an OTLP receiver built on the official protobuf definitions gets one trace
//! per request with the span tree `gateway.request` → `llm_d.epp.flow_control`,
//! `llm_d.epp.scoring` → `llm_d.epp.profile` → `llm_d.epp.scorer.<type>`, and
//! `gateway.upstream`; the trace id is the client's `traceparent`'s, and the model server
//! receives the upstream span's `traceparent`. The console exporter prints span lines.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{MODEL, dead_addr, sims};
use shepherd_sim::serve::{self, ADDRESS_HEADER, ServeConfig, TRACEPARENT_ECHO_HEADER};
use shepherd_test_util::otlp::{ReceivedSpan, Receiver};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A policy with three scorers, the adaptive controller and flow control that never holds
/// a request (so its span is there, and short).
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

struct Gateway {
    _child: Child,
    url: String,
    _dir: tempfile::TempDir,
    stdout: tokio::sync::mpsc::UnboundedReceiver<String>,
}

/// `shepherd-gateway` with `env` on free loopback ports; its stdout lines after the
/// listening line go to `stdout`.
async fn start(endpoints: &[std::net::SocketAddr], env: &[(&str, String)]) -> Gateway {
    let list: Vec<String> = endpoints.iter().map(|a| format!("\"{a}\"")).collect();
    start_with(&list, POLICY, env).await
}

/// [`start`] with endpoint entries (YAML flow items) and a policy of its own.
async fn start_with(endpoints: &[String], policy: &str, env: &[(&str, String)]) -> Gateway {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shepherd.yaml");
    std::fs::write(
        &config,
        format!(
            "endpoints: [{}]\nserver: {{httpPort: 0, metricsPort: 0}}\nscraping: {{intervalMs: 20}}\n{policy}",
            endpoints.join(", ")
        ),
    )
    .unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_shepherd-gateway"));
    command
        .arg("--config")
        .arg(&config)
        .args(["--shutdown-timeout", "2"])
        .env("SHEPHERD_LOG", "warn")
        .env_remove("OTEL_TRACES_EXPORTER")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (url, admin) = tokio::time::timeout(Duration::from_secs(30), async {
        let mut url = None;
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(found) = line.strip_prefix("shepherd-gateway: listening on ") {
                url = Some(found.to_owned());
            }
            if let Some(admin) = line.strip_prefix("shepherd-gateway: admin endpoints on ") {
                return (url.expect("listening first"), admin.to_owned());
            }
        }
        panic!("shepherd-gateway exited before listening");
    })
    .await
    .expect("shepherd-gateway did not start");
    // Ready: every endpoint scraped once (a loaded machine can take a while).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while reqwest::get(format!("{admin}/readyz"))
        .await
        .map_or(true, |r| r.status() != 200)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gateway never became ready"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (tx, stdout) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tx.send(line);
        }
    });
    Gateway {
        _child: child,
        url,
        _dir: dir,
        stdout,
    }
}

/// A completion with `traceparent`; the server's address and the `traceparent` it received.
async fn complete(url: &str, traceparent: Option<&str>, prompt: &str) -> (String, Option<String>) {
    let http = reqwest::Client::new();
    let mut request = http
        .post(format!("{url}/v1/completions"))
        .json(&serde_json::json!({"model": MODEL, "prompt": prompt, "max_tokens": 3}));
    if let Some(parent) = traceparent {
        request = request.header("traceparent", parent);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let address = response.headers()[ADDRESS_HEADER]
        .to_str()
        .unwrap()
        .to_owned();
    let received = response
        .headers()
        .get(TRACEPARENT_ECHO_HEADER)
        .map(|v| v.to_str().unwrap().to_owned());
    response.bytes().await.unwrap();
    (address, received)
}

fn one<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name} in {spans:#?}");
    found[0]
}

/// Checks one request's trace: the tree, the attributes, and what the server received.
fn check_trace(
    spans: &[ReceivedSpan],
    client_parent: &str,
    served_by: &str,
    received: Option<&str>,
) {
    let request = one(spans, "gateway.request");
    assert_eq!(
        request.parent_span_id, client_parent,
        "child of the client's span"
    );
    assert_eq!(request.kind, 2, "SERVER");
    assert_eq!(request.service, "shepherd-gateway");
    assert_eq!(request.attribute("gen_ai.request.model"), Some(MODEL));
    assert_eq!(request.attribute("llm_d.epp.endpoint"), Some(served_by));
    assert_eq!(request.attribute("http.response.status_code"), Some("200"));
    assert_eq!(request.attribute("gen_ai.usage.output_tokens"), Some("3"));

    let flow = one(spans, "llm_d.epp.flow_control");
    assert_eq!(flow.parent_span_id, request.span_id);
    assert_eq!(
        flow.attribute("llm_d.epp.flow_control.outcome"),
        Some("dispatched")
    );

    let scoring = one(spans, "llm_d.epp.scoring");
    assert_eq!(scoring.parent_span_id, request.span_id);
    assert_eq!(scoring.attribute("llm_d.epp.endpoint"), Some(served_by));
    assert!(scoring.attribute("llm_d.epp.cached_tokens").is_some());
    assert!(scoring.attribute("llm_d.epp.prompt_tokens").is_some());
    assert_eq!(scoring.attribute("llm_d.epp.adaptive.mode"), Some("steady"));
    assert_eq!(
        scoring.attribute("llm_d.epp.pd.disaggregation_used"),
        Some("false")
    );
    assert_eq!(
        scoring.attribute("llm_d.epp.encode.disaggregation_used"),
        Some("false")
    );

    let profile = one(spans, "llm_d.epp.profile");
    assert_eq!(profile.parent_span_id, scoring.span_id);
    assert_eq!(profile.attribute("llm_d.epp.profile.name"), Some("default"));
    let mut scorers: Vec<&str> = spans
        .iter()
        .filter(|s| s.name.starts_with("llm_d.epp.scorer."))
        .inspect(|s| {
            assert_eq!(s.parent_span_id, profile.span_id, "{s:?}");
            assert!(s.attribute("llm_d.scorer.score.max").is_some());
        })
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

    let upstream = one(spans, "gateway.upstream");
    assert_eq!(upstream.parent_span_id, request.span_id);
    assert_eq!(upstream.kind, 3, "CLIENT");
    assert_eq!(upstream.attribute("server.address"), Some(served_by));
    // The model server got the upstream span as its parent, in the same trace.
    let expected = format!("00-{}-{}-01", upstream.trace_id, upstream.span_id);
    assert_eq!(received, Some(expected.as_str()));
    assert_eq!(spans.len(), 4 + scorers.len() + 1, "{spans:#?}");
}

async fn traces_reach_the_receiver(protocol: &str) {
    let pool = sims(2, 20.0).await;
    let receiver = Receiver::start().await;
    let endpoint = if protocol == "grpc" {
        receiver.grpc_url()
    } else {
        receiver.http_url()
    };
    let gateway = start(
        pool.addrs(),
        &[
            ("OTEL_TRACES_EXPORTER", "otlp".into()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.into()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            // Upstream's default sampler: the caller's decision when it sends one.
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio".into()),
            ("OTEL_TRACES_SAMPLER_ARG", "0".into()),
        ],
    )
    .await;

    let mut traced = Vec::new();
    for i in 0..4u32 {
        let trace_id = format!("{:032x}", 0x5eed_0000_u128 + u128::from(i) * 7919);
        let parent = format!("{:016x}", 0xabc0_u64 + u64::from(i));
        let traceparent = format!("00-{trace_id}-{parent}-01");
        let (served, received) =
            complete(&gateway.url, Some(&traceparent), &format!("hello {i}")).await;
        traced.push((trace_id, parent, served, received));
    }
    // A caller that says "not sampled" is not traced, and its header reaches the server as
    // it was sent.
    let unsampled = "00-11111111111111111111111111111111-2222222222222222-00";
    let (_, received) = complete(&gateway.url, Some(unsampled), "quiet").await;
    assert_eq!(received.as_deref(), Some(unsampled));
    // No traceparent and a 0 ratio: nothing recorded, nothing sent.
    let (_, received) = complete(&gateway.url, None, "quiet too").await;
    assert_eq!(received, None);

    for (trace_id, parent, served, received) in &traced {
        let spans = receiver
            .wait_for(trace_id, "gateway.request", Duration::from_secs(20))
            .await;
        // The request span ends last; its children were exported with or before it.
        check_trace(&spans, parent, served, received.as_deref());
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

#[tokio::test]
async fn otlp_grpc_receives_one_trace_per_request() {
    traces_reach_the_receiver("grpc").await;
}

#[tokio::test]
async fn otlp_http_protobuf_receives_one_trace_per_request() {
    traces_reach_the_receiver("http/protobuf").await;
}

#[tokio::test]
async fn the_console_exporter_prints_span_lines() {
    let pool = sims(1, 20.0).await;
    let mut gateway = start(
        pool.addrs(),
        &[
            ("OTEL_TRACES_EXPORTER", "console".into()),
            ("OTEL_TRACES_SAMPLER", "always_on".into()),
        ],
    )
    .await;
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    complete(
        &gateway.url,
        Some(&format!("00-{trace_id}-00f067aa0ba902b7-01")),
        "hello",
    )
    .await;
    let line = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = gateway.stdout.recv().await {
            if line.contains("\"gateway.request\"") {
                return line;
            }
        }
        panic!("stdout closed");
    })
    .await
    .expect("a gateway.request line on stdout");
    let span: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(span["span"], "gateway.request");
    assert_eq!(span["trace_id"], trace_id);
    assert_eq!(span["parent_span_id"], "00f067aa0ba902b7");
    assert_eq!(span["kind"], "server");
    assert_eq!(span["attributes"]["gen_ai.request.model"], MODEL);
}

#[tokio::test]
async fn a_bad_sampler_stops_the_gateway_with_the_variable_named() {
    let output = Command::new(env!("CARGO_BIN_EXE_shepherd-gateway"))
        .args(["--config", "/nonexistent.yaml"])
        .env("OTEL_TRACES_EXPORTER", "otlp")
        .env("OTEL_TRACES_SAMPLER", "sometimes")
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OTEL_TRACES_SAMPLER"), "{stderr}");
}

#[tokio::test]
async fn a_disaggregated_request_has_a_span_per_stage() {
    let mut config = ServeConfig::ephemeral(2);
    config.speed = 20.0;
    config.roles = vec!["prefill".into(), "decode".into()];
    let pool = serve::spawn(config).await.unwrap();
    let (prefill, decode) = (pool.addrs()[0], pool.addrs()[1]);
    let receiver = Receiver::start().await;
    let endpoints = [
        format!("{{address: \"{prefill}\", labels: {{llm-d.ai/role: prefill}}}}"),
        format!("{{address: \"{decode}\", labels: {{llm-d.ai/role: decode}}}}"),
    ];
    let gateway = start_with(
        &endpoints,
        include_str!("../../../examples/disagg/policy.yaml"),
        &[
            ("OTEL_TRACES_EXPORTER", "otlp".into()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.grpc_url()),
            ("OTEL_TRACES_SAMPLER", "always_on".into()),
        ],
    )
    .await;
    let trace_id = "5ca1ab1e000000000000000000000001";
    let traceparent = format!("00-{trace_id}-00000000000000a1-01");
    // About 2,000 uncached tokens: over the decider's 512.
    let (served, received) = complete(
        &gateway.url,
        Some(&traceparent),
        &"long document ".repeat(600),
    )
    .await;
    assert_eq!(served, decode.to_string());
    let spans = receiver
        .wait_for(trace_id, "gateway.request", Duration::from_secs(20))
        .await;
    let scoring = one(&spans, "llm_d.epp.scoring");
    assert_eq!(
        scoring.attribute("llm_d.epp.pd.disaggregation_used"),
        Some("true")
    );
    assert_eq!(
        scoring.attribute("llm_d.epp.pd.prefill_pod_address"),
        Some(prefill.to_string().as_str())
    );
    assert_eq!(
        scoring.attribute("llm_d.epp.endpoint"),
        Some(decode.to_string().as_str())
    );
    let mut stages: Vec<(&str, &str)> = spans
        .iter()
        .filter(|s| s.name == "llm_d.epp.profile")
        .inspect(|s| assert_eq!(s.parent_span_id, scoring.span_id))
        .map(|s| {
            (
                s.attribute("llm_d.epp.profile.name").unwrap(),
                s.attribute("llm_d.epp.endpoint").unwrap(),
            )
        })
        .collect();
    stages.sort_unstable();
    assert_eq!(
        stages,
        [
            ("decode", decode.to_string().as_str()),
            ("prefill", prefill.to_string().as_str())
        ]
    );
    // Each stage ran its own prefix scorer.
    assert_eq!(
        spans
            .iter()
            .filter(|s| s.name == "llm_d.epp.scorer.prefix_cache")
            .count(),
        2
    );
    let upstream = one(&spans, "gateway.upstream");
    assert_eq!(
        received,
        Some(format!("00-{trace_id}-{}-01", upstream.span_id))
    );
}

#[tokio::test]
async fn a_log_line_written_during_a_request_becomes_an_event_of_its_span() {
    let pool = sims(1, 20.0).await;
    let dead = dead_addr().await;
    let receiver = Receiver::start().await;
    // The dead server stays a candidate (its metrics never arrive), picked at random.
    let policy = "plugins:\n  - type: random-picker\nschedulingProfiles:\n  - name: default\n    \
                  plugins: [{pluginRef: random-picker}]\nscheduler:\n  avoidStaleEndpoints: false\n";
    let endpoints = [format!("\"{dead}\""), format!("\"{}\"", pool.addrs()[0])];
    let gateway = start_with(
        &endpoints,
        policy,
        &[
            ("OTEL_TRACES_EXPORTER", "otlp".into()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.grpc_url()),
            ("OTEL_TRACES_SAMPLER", "always_on".into()),
        ],
    )
    .await;
    // Until a request's primary is the dead server: it moves to the fallback, and the
    // gateway's warning (the first of its period) lands in that request's span.
    for i in 0..40u32 {
        let trace_id = format!("{:032x}", 0xdead_0000_u128 + u128::from(i));
        let traceparent = format!("00-{trace_id}-00000000000000b2-01");
        complete(&gateway.url, Some(&traceparent), &format!("event {i}")).await;
        let spans = receiver
            .wait_for(&trace_id, "gateway.request", Duration::from_secs(20))
            .await;
        let attempts = spans
            .iter()
            .filter(|s| s.name == "gateway.upstream")
            .count();
        if attempts < 2 {
            continue;
        }
        let first = spans
            .iter()
            .find(|s| {
                s.name == "gateway.upstream" && s.attribute("llm_d.gateway.attempt") == Some("1")
            })
            .unwrap();
        assert_eq!(first.attribute("error.type"), Some("connection_failed"));
        assert_eq!(first.status_code, 2, "error status");
        let request = one(&spans, "gateway.request");
        assert!(
            request
                .events
                .iter()
                .any(|e| e.contains("model server failed before answering")),
            "{request:#?}"
        );
        return;
    }
    panic!("no request went to the dead server first");
}
