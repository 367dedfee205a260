//! The gateway with a `flowControl` section: one simulated server that counts as saturated
//! with one request in flight (`concurrency-detector`, `maxConcurrency: 1`), so a long
//! streaming request fills the pool for as long as a test keeps it open.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Setup, TestGateway, completion, expect_error, sims};
use shepherd_runtime::flow::{DropReason, FlowController};
use shepherd_scheduler_core::flow::Detector;

/// One request in flight saturates the pool; queued requests may wait 30 s. The clients are
/// trusted to set their priority and flow (a public gateway takes neither by default).
const FLOW_CONTROL: &str = "\
gateway:
  trustedHeaders: [x-shepherd-priority, x-llm-d-inference-fairness-id, x-gateway-inference-fairness-id]
plugins:
  - name: one-at-a-time
    type: concurrency-detector
    parameters: {maxConcurrency: 1}
flowControl:
  defaultRequestTTL: 30s
  saturationDetector: {pluginRef: one-at-a-time}
";

fn flow(gateway: &TestGateway) -> &FlowController {
    gateway
        .server
        .gateway()
        .flow_control()
        .expect("flow control is on")
}

/// Starts a streaming completion long enough to outlast the test, and waits for its first
/// bytes: from then on it is in flight on the only server, and the pool is saturated.
async fn fill_the_pool(gateway: &TestGateway) -> reqwest::Response {
    let mut response = gateway
        .post("/v1/completions", &completion("Fill the pool", 4000, true))
        .await;
    assert_eq!(response.status(), 200);
    assert!(response.chunk().await.unwrap().is_some());
    assert!(flow(gateway).saturation() >= 1.0);
    response
}

/// Waits (up to 5 s) until `done` holds of the controller's figures.
async fn wait_until(gateway: &TestGateway, what: &str, done: impl Fn(&FlowController) -> bool) {
    for _ in 0..500 {
        if done(flow(gateway)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: {:?}", flow(gateway).stats());
}

#[tokio::test]
async fn a_sheddable_request_under_saturation_is_shed_with_429_and_the_reason() {
    let pool = sims(1, 1.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied())
        .yaml(FLOW_CONTROL)
        .start()
        .await;
    let long = fill_the_pool(&gateway).await;

    let response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-shepherd-priority", "-1")
        .json(&completion("Sheddable", 4, false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-shepherd-dropped-reason"], "shed");
    assert_eq!(response.headers()["retry-after"], "1");
    let body = expect_error(response, 429, "shed").await;
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    let stats = flow(&gateway).stats();
    assert_eq!(stats.dropped(DropReason::Shed), 1);
    assert_eq!((stats.counters.enqueued, stats.queued), (0, 0));
    let metrics = gateway.metrics().await;
    assert!(
        metrics.contains("shepherd_flow_dropped_total{reason=\"shed\"} 1"),
        "{metrics}"
    );
    // The gateway counts it as its own answer, under flow control, not as its concurrency cap.
    assert!(
        metrics.contains("shepherd_gateway_rejections_total{reason=\"flow_control\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("shepherd_gateway_rejections_total{reason=\"rate_limited\"} 0"),
        "{metrics}"
    );

    // With the pool free again, the same request goes through.
    drop(long);
    gateway.wait_idle().await;
    let response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-shepherd-priority", "-1")
        .json(&completion("Sheddable", 4, false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response
            .headers()
            .get("x-shepherd-dropped-reason")
            .is_none()
    );
}

#[tokio::test]
async fn a_queued_request_whose_client_goes_away_leaves_the_queue() {
    let pool = sims(1, 1.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied())
        .yaml(FLOW_CONTROL)
        .start()
        .await;
    let long = fill_the_pool(&gateway).await;

    // A standard request waits behind the long one ...
    let http = gateway.http.clone();
    let url = gateway.url("/v1/completions");
    let waiting = tokio::spawn(async move {
        http.post(url)
            .json(&completion("Waiting", 4, false))
            .send()
            .await
    });
    wait_until(&gateway, "the request was never queued", |f| {
        f.stats().queued == 1
    })
    .await;
    // ... until its client gives up: the connection closes, the request leaves the queue.
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    wait_until(&gateway, "the request stayed queued", |f| {
        let stats = f.stats();
        stats.queued == 0 && stats.counters.cancelled == 1
    })
    .await;
    let stats = flow(&gateway).stats();
    assert_eq!(stats.counters.dispatched, 0);
    assert_eq!(stats.queued_bytes, 0);
    for reason in DropReason::ALL {
        assert_eq!(stats.dropped(reason), 0, "{reason:?}");
    }
    let metrics = gateway.metrics().await;
    assert!(
        metrics.contains("shepherd_flow_cancelled_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("shepherd_flow_queued_requests 0"),
        "{metrics}"
    );

    // Nothing of it is left behind: once the long request ends, the pool is idle and the
    // next request goes straight through.
    drop(long);
    gateway.wait_idle().await;
    assert_eq!(flow(&gateway).saturation(), 0.0);
    let response = gateway
        .post("/v1/completions", &completion("After", 2, false))
        .await;
    assert_eq!(response.status(), 200);
    let stats = flow(&gateway).stats();
    assert_eq!(
        (stats.counters.enqueued, stats.admitted_immediately),
        (1, 2)
    );
}

#[tokio::test]
async fn a_standard_request_waits_for_room_and_then_completes() {
    let pool = sims(1, 1.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied())
        .yaml(FLOW_CONTROL)
        .start()
        .await;
    let long = fill_the_pool(&gateway).await;

    let http = gateway.http.clone();
    let url = gateway.url("/v1/completions");
    let waiting = tokio::spawn(async move {
        let response = http
            .post(url)
            .json(&completion("Waiting", 4, false))
            .send()
            .await
            .unwrap();
        (response.status(), response.text().await.unwrap())
    });
    wait_until(&gateway, "the request was never queued", |f| {
        f.stats().queued == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "the request did not wait");
    drop(long);
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the queued request was never dispatched")
        .unwrap();
    assert_eq!(status, 200, "{body}");
    let stats = flow(&gateway).stats();
    assert_eq!((stats.counters.dispatched, stats.queued), (1, 0));
    gateway.wait_idle().await;
}

#[test]
fn the_documented_flow_control_config_loads() {
    let doc = include_str!("../../../docs/gateway.md");
    let section = &doc[doc.find("**Flow control.**").unwrap()..];
    let start = section.find("```yaml\n").unwrap() + "```yaml\n".len();
    let yaml = &section[start..start + section[start..].find("```").unwrap()];
    let config = shepherd_runtime::config::RuntimeConfig::from_yaml(yaml).unwrap();
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    let settings = config.flow_control.expect("a flowControl section");
    assert_eq!(settings.ttl, Some(Duration::from_secs(30)));
    assert_eq!(settings.band_limits(0).max_requests, 1000);
    assert!(matches!(settings.detector, Detector::Concurrency(_)));
}

#[tokio::test]
async fn a_full_band_answers_429_queue_full() {
    let pool = sims(1, 1.0).await;
    let yaml = format!("{FLOW_CONTROL}  priorityBands: [{{priority: 0, maxRequests: 1}}]\n");
    let gateway = Setup::new(pool.addrs().iter().copied())
        .yaml(&yaml)
        .start()
        .await;
    let long = fill_the_pool(&gateway).await;
    let http = gateway.http.clone();
    let url = gateway.url("/v1/completions");
    let waiting = tokio::spawn(async move {
        http.post(url)
            .json(&completion("Waiting", 4, false))
            .send()
            .await
            .unwrap()
            .status()
    });
    wait_until(&gateway, "the request was never queued", |f| {
        f.stats().queued == 1
    })
    .await;

    let response = gateway
        .post("/v1/completions", &completion("One too many", 4, false))
        .await;
    assert_eq!(
        response.headers()["x-shepherd-dropped-reason"],
        "queue_full"
    );
    assert_eq!(response.headers()["retry-after"], "1");
    let body = expect_error(response, 429, "queue_full").await;
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    assert_eq!(flow(&gateway).stats().dropped(DropReason::QueueFull), 1);

    drop(long);
    assert_eq!(waiting.await.unwrap(), 200);
    gateway.wait_idle().await;
}

#[tokio::test]
async fn with_no_endpoint_a_request_waits_its_ttl_then_gets_503() {
    let yaml = FLOW_CONTROL.replace("defaultRequestTTL: 30s", "defaultRequestTTL: 200ms");
    let gateway = Setup::new([]).yaml(&yaml).start().await;
    let started = tokio::time::Instant::now();
    let response = gateway
        .post("/v1/completions", &completion("Anyone?", 4, false))
        .await;
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    assert_eq!(
        response.headers()["x-shepherd-dropped-reason"],
        "ttl_expired"
    );
    assert_eq!(response.headers()["retry-after"], "1");
    let body = expect_error(response, 503, "ttl_expired").await;
    assert_eq!(body["error"]["type"], "server_error", "{body}");
    let stats = flow(&gateway).stats();
    assert_eq!(
        (stats.dropped(DropReason::TtlExpired), stats.queued),
        (1, 0)
    );
}

/// `enableEviction`: a sheddable request streaming on the only server is evicted when a
/// standard request is blocked behind it; its response is cut short (its status was sent),
/// and the standard request is then served — counted as one `evicted` drop.
#[tokio::test]
async fn eviction_cuts_a_sheddable_stream_short_for_a_blocked_standard_request() {
    let pool = sims(1, 1.0).await;
    let yaml = format!("{FLOW_CONTROL}  enableEviction: true\n");
    let gateway = Setup::new(pool.addrs().iter().copied())
        .yaml(&yaml)
        .start()
        .await;
    let mut batch = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-shepherd-priority", "-1")
        .json(&completion("A long batch job", 4000, true))
        .send()
        .await
        .unwrap();
    assert_eq!(batch.status(), 200);
    assert!(batch.chunk().await.unwrap().is_some());
    assert!(flow(&gateway).saturation() >= 1.0);

    let standard = gateway
        .post("/v1/completions", &completion("Interactive", 4, false))
        .await;
    assert_eq!(
        standard.status(),
        200,
        "served once the batch stream was evicted"
    );
    // The batch stream is broken off: an error, not the orderly end of a 4000-token stream.
    let end = loop {
        match batch.chunk().await {
            Ok(Some(_)) => {}
            other => break other,
        }
    };
    assert!(end.is_err(), "{end:?}");
    assert_eq!(flow(&gateway).stats().dropped(DropReason::Evicted), 1);
}
