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
    let flow = FlowController::with_resources(settings, Arc::clone(&pool), scheduler.resources());

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

/// `program-aware-fairness` charges a program `prompt + 2 × completion` tokens of each of its
/// requests when the request completes (upstream's `OnCompleted`), through the ledger every
/// scheduler runs as a completion hook, also for a request that never waited: program `a`,
/// which has been served 1000 tokens, yields to `b` although its queued request is older.
#[tokio::test(start_paused = true)]
async fn program_aware_fairness_charges_tokens_when_requests_complete() {
    use shepherd_scheduler_core::completion::{Completion, Usage};
    use shepherd_scheduler_core::flow::ProgramLedger;
    use shepherd_scheduler_core::shared::SharedState;

    let config = load("sim-program-aware.yaml").unwrap();
    let settings = config.flow_control.clone().expect("flow control is on");
    let pool = Arc::new(Pool::with_clock(Arc::new(TokioClock::new())));
    let endpoint = pool.add("127.0.0.1:8000");
    endpoint.set_metrics(EndpointMetrics::default());
    let shared = SharedState::new(Arc::clone(&pool));
    let ledger = ProgramLedger::install(&shared.resources, settings.program_aware.clone());
    let scheduler = shepherd_scheduler_core::config::build_scheduler_in(
        &config.policy,
        &builtin_registry(),
        &shared,
    )
    .unwrap();
    let flow = FlowController::with_resources(settings, Arc::clone(&pool), &shared.resources);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let driver = tokio::spawn(flow.clone().run_until(async move {
        let _ = stop_rx.await;
    }));

    // a-1 goes straight through, is scheduled and completes with usage.
    let mut first = request("a-1", &[]);
    first.fairness_id = Some("a".into());
    let permit = flow.admit(flow.request_of(&first)).await.unwrap();
    let handle = scheduler.schedule(&first).unwrap().into_handle();
    drop(permit);
    assert_eq!(
        ledger.service("a", pool.clock().now()),
        0.0,
        "not at dispatch"
    );
    handle.finish(Completion::success(Some(Usage {
        prompt_tokens: 100,
        completion_tokens: 450,
        cached_tokens: None,
    })));
    assert!((ledger.service("a", pool.clock().now()) - 1000.0).abs() < 1e-6);

    // Saturated: a-2 queues first, then b-1; when room returns b (0 tokens) goes first.
    endpoint.set_metrics(busy());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for (id, program) in [("a-2", "a"), ("b-1", "b")] {
        let flow = flow.clone();
        let tx = tx.clone();
        let mut r = request(id, &[]);
        r.fairness_id = Some(program.into());
        tokio::spawn(async move {
            let permit = flow.admit(flow.request_of(&r)).await.unwrap();
            tx.send(id).unwrap();
            drop(permit);
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(flow.stats().queued, 2);
    endpoint.set_metrics(EndpointMetrics::default());
    assert_eq!(rx.recv().await.unwrap(), "b-1");
    assert_eq!(rx.recv().await.unwrap(), "a-2");
    stop_tx.send(()).unwrap();
    driver.await.unwrap();
}

/// `enableEviction` with upstream's two eviction types: a band-0 request blocked by
/// saturation gets room by the eviction of the sheddable request in flight (never the
/// priority-0 one), whose client is answered 429 `evicted`; once that stream has ended, the
/// blocked request is dispatched — none is lost.
#[tokio::test(start_paused = true)]
async fn eviction_ends_a_sheddable_request_in_flight_for_a_blocked_higher_band() {
    use shepherd_scheduler_core::flow::DropReason;

    let config = load("flow-eviction.yaml").unwrap();
    let settings = config.flow_control.clone().expect("flow control is on");
    assert!(settings.enable_eviction);
    let pool = Arc::new(Pool::with_clock(Arc::new(TokioClock::new())));
    pool.add("127.0.0.1:8000")
        .set_metrics(EndpointMetrics::default());
    let scheduler =
        build_scheduler(&config.policy, &builtin_registry(), Arc::clone(&pool)).unwrap();
    let flow = FlowController::with_resources(settings, Arc::clone(&pool), scheduler.resources());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let driver = tokio::spawn(flow.clone().run_until(async move {
        let _ = stop_rx.await;
    }));

    // Two in flight (maxConcurrency 2): a sheddable batch request, then a standard one.
    let mut served = Vec::new();
    for (id, priority) in [("batch", -1), ("chat-1", 0)] {
        let mut r = request(id, &[]);
        r.priority = priority;
        let mut permit = flow.admit(flow.request_of(&r)).await.unwrap();
        let lease = permit.take_lease().expect("eviction is on");
        let handle = scheduler.schedule(&r).unwrap().into_handle();
        drop(permit);
        served.push((lease, handle));
    }
    assert!(flow.saturation() >= 1.0);

    // A standard request arrives: it waits, and the batch request is evicted for it.
    let waiting = {
        let flow = flow.clone();
        tokio::spawn(async move {
            let r = request("chat-2", &[]);
            flow.admit(flow.request_of(&r)).await.map(|_| ())
        })
    };
    let (mut chat_1, mut batch) = (served.pop().unwrap(), served.pop().unwrap());
    tokio::time::timeout(Duration::from_secs(1), batch.0.evicted())
        .await
        .expect("the sheddable request is evicted");
    assert!(
        tokio::time::timeout(Duration::from_millis(100), chat_1.0.evicted())
            .await
            .is_err(),
        "priority 0 is never evicted"
    );
    assert_eq!(flow.stats().dropped(DropReason::Evicted), 1);
    assert_eq!(DropReason::Evicted.http_status(), 429);
    assert!(
        !waiting.is_finished(),
        "still no room until the evicted stream ends"
    );

    // The adapter answers the evicted client and ends its response: room for chat-2.
    drop(batch);
    tokio::time::timeout(Duration::from_secs(1), waiting)
        .await
        .expect("the blocked request is dispatched")
        .unwrap()
        .unwrap();
    assert_eq!(flow.stats().queued, 0);
    drop(chat_1);
    stop_tx.send(()).unwrap();
    driver.await.unwrap();
}
