//! Upstream-shaped flow-control configurations (`tests/fixtures/upstream/*.yaml`, each naming
//! its upstream source): the ordering policies, eviction, and the fairness id, loaded as the
//! binaries load them and run through the flow controller.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use shepherd_runtime::TokioClock;
use shepherd_runtime::config::{LoadError, RuntimeConfig};
use shepherd_runtime::flow::{FlowController, FlowRequest};
use shepherd_scheduler_core::config::build_scheduler;
use shepherd_scheduler_core::endpoint::{EndpointMetrics, Pool};
use shepherd_scheduler_core::flow::OrderingPolicy;
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
use shepherd_scorers::attributes::RequestAttributes;
use shepherd_scorers::builtin_registry;

fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/upstream")
        .join(name)
}

fn load(name: &str) -> Result<RuntimeConfig, LoadError> {
    let text = std::fs::read_to_string(fixture_path(name)).unwrap();
    RuntimeConfig::from_yaml_at(&text, &fixture_path(name))
}

fn busy() -> EndpointMetrics {
    EndpointMetrics {
        waiting: 20,
        ..Default::default()
    }
}

/// `edf-ordering-policy` and `slo-deadline-ordering-policy` load by type and by instance name;
/// the flow controller then serves the tightest TTFT objective of the SLO band first.
#[tokio::test(start_paused = true)]
async fn the_deadline_ordering_config_orders_by_ttft_objective() {
    let config = load("deadline-ordering.yaml").unwrap();
    build_scheduler(&config.policy, &builtin_registry(), Arc::new(Pool::new())).unwrap();
    let settings = config.flow_control.clone().expect("flow control is on");
    assert_eq!(settings.default_band.ordering, OrderingPolicy::Edf);
    assert_eq!(
        settings.band_limits(10).ordering,
        OrderingPolicy::SloDeadline
    );

    let pool = Arc::new(Pool::with_clock(Arc::new(TokioClock::new())));
    let endpoint = pool.add("127.0.0.1:8000");
    endpoint.set_metrics(busy());
    let flow = FlowController::new(settings, Arc::clone(&pool));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let driver = tokio::spawn(flow.clone().run_until(async move {
        let _ = stop_rx.await;
    }));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for (label, slo) in [
        ("no-objective", None),
        ("loose", Some(Duration::from_secs(5))),
        ("tight", Some(Duration::from_millis(200))),
    ] {
        let flow = flow.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let permit = flow
                .admit(FlowRequest {
                    priority: 10,
                    bytes: 10,
                    slo_ttft: slo,
                    ..FlowRequest::default()
                })
                .await
                .unwrap();
            tx.send(label).unwrap();
            drop(permit);
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(flow.stats().queued, 3);
    // The pool frees up: the queued requests leave in the band's order.
    endpoint.set_metrics(EndpointMetrics::default());
    let mut order = Vec::new();
    for _ in 0..3 {
        order.push(rx.recv().await.unwrap());
    }
    assert_eq!(order, ["tight", "loose", "no-objective"]);
    stop_tx.send(()).unwrap();
    driver.await.unwrap();
}

fn request(id: &str, headers: &[(&str, &str)]) -> InferenceRequest {
    headers.iter().fold(
        InferenceRequest::new(id, "m", Prompt::Text("hi".into())),
        |r, (name, value)| r.with_header(name, *value),
    )
}

/// A declared `agent-identity` makes each agent session its own flow (upstream's director
/// takes the identity as the fairness id when no fairness header is sent): a second agent's
/// request is served between the first agent's, not after all of them. An explicit fairness
/// id still wins; without a session header the request is in the default flow.
#[tokio::test(start_paused = true)]
async fn agent_identity_is_the_fairness_id_without_a_fairness_header() {
    let config = load("agent-identity-fairness.yaml").unwrap();
    let scheduler =
        build_scheduler(&config.policy, &builtin_registry(), Arc::new(Pool::new())).unwrap();
    let settings = config.flow_control.clone().expect("flow control is on");
    let pool = Arc::new(Pool::with_clock(Arc::new(TokioClock::new())));
    let endpoint = pool.add("127.0.0.1:8000");
    endpoint.set_metrics(busy());
    let flow = FlowController::with_request_attributes(
        settings,
        Arc::clone(&pool),
        RequestAttributes::of(scheduler.resources()),
    );

    let mut fairness = request("t", &[("x-another-agent-id", "mine")]);
    fairness.fairness_id = Some("tenant".into());
    assert_eq!(flow.request_of(&fairness).flow_id, "tenant");
    assert_eq!(flow.request_of(&request("n", &[])).flow_id, "");
    assert_eq!(
        flow.request_of(&request(
            "s",
            &[("session-id", "codex-9"), ("x-my-agent-session", "mine")]
        ))
        .flow_id,
        "mine"
    );

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let driver = tokio::spawn(flow.clone().run_until(async move {
        let _ = stop_rx.await;
    }));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for (label, session) in [
        ("claude-1", "cc-1"),
        ("claude-2", "cc-1"),
        ("claude-3", "cc-1"),
        ("opencode-1", "oc-7"),
    ] {
        let flow = flow.clone();
        let tx = tx.clone();
        let header = if session.starts_with("cc") {
            "x-claude-code-session-id"
        } else {
            "x-session-affinity"
        };
        let r = request(label, &[(header, session)]);
        tokio::spawn(async move {
            let permit = flow.admit(flow.request_of(&r)).await.unwrap();
            tx.send(label).unwrap();
            drop(permit);
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(flow.stats().queued, 4);
    endpoint.set_metrics(EndpointMetrics::default());
    let mut order = Vec::new();
    for _ in 0..4 {
        order.push(rx.recv().await.unwrap());
    }
    assert_eq!(order, ["claude-1", "opencode-1", "claude-2", "claude-3"]);
    stop_tx.send(()).unwrap();
    driver.await.unwrap();
}
