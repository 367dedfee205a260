//! The adaptive tick loop in the runtime: a hot endpoint moves the weights, the records show
//! in `/debug/adaptive`, and a reload rebuilds the controller. Paused tokio time.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{get, request};
use shepherd_runtime::RuntimeHandle;
use shepherd_scheduler_core::prelude::*;

const FOUR: &str = "endpoints: [127.0.0.1:8000, 127.0.0.1:8001, 127.0.0.1:8002, 127.0.0.1:8003]\n";
const PRESET_WEIGHTS: [f64; 6] = [3.0, 4.0, 2.0, 2.0, 1.0, 2.0];

/// Feeds the pool a hot node, as the scraper would, every 50 ms for `duration`.
async fn feed_hot_node(handle: &RuntimeHandle, duration: Duration) {
    let step = Duration::from_millis(50);
    let mut fed = Duration::ZERO;
    while fed < duration {
        for (i, endpoint) in handle.pool().snapshot().endpoints().iter().enumerate() {
            let hot = i == 0;
            endpoint.set_metrics(EndpointMetrics {
                running: if hot { 48 } else { 1 },
                waiting: if hot { 20 } else { 0 },
                kv_utilization: if hot { 0.95 } else { 0.05 },
                ..Default::default()
            });
        }
        tokio::time::sleep(step).await;
        fed += step;
    }
}

fn weights(handle: &RuntimeHandle) -> Vec<f64> {
    handle.scheduler().load().profiles()[0]
        .weights()
        .load()
        .as_slice()
        .to_vec()
}

#[tokio::test(start_paused = true)]
async fn ticks_move_the_weights_and_show_in_the_debug_view() {
    let handle = common::start(FOUR, common::quiet_options()).await;
    assert!(handle.config().policy_is_preset);
    assert_eq!(weights(&handle), PRESET_WEIGHTS);

    feed_hot_node(&handle, Duration::from_secs(4)).await;
    let moved = weights(&handle);
    assert_ne!(moved, PRESET_WEIGHTS);
    // Distribution scorers (queue, kv, in-flight, prefill) gained on the affinity scorers
    // (prefix, hot prefix).
    assert!(moved[0] < 3.0 && moved[2] > 2.0, "{moved:?}");

    let (status, body) = get(handle.admin_router(), "/debug/adaptive").await;
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["enabled"], true);
    assert_eq!(json["profile"], "default");
    assert_eq!(json["mode"], "burst");
    let records = json["records"].as_array().unwrap();
    assert!(records.len() >= 10, "{} records", records.len());
    assert!(
        records
            .iter()
            .any(|r| r["mode"] == "burst" && r["previousMode"] == "steady")
    );
    let last = records.last().unwrap();
    let published: Vec<f64> = last["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_f64().unwrap())
        .collect();
    assert_eq!(published, moved);

    let (_, limited) = get(handle.admin_router(), "/debug/adaptive?limit=2").await;
    let limited: serde_json::Value = serde_json::from_str(&limited).unwrap();
    assert_eq!(limited["records"].as_array().unwrap().len(), 2);

    let (status, text) = get(handle.admin_router(), "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        text.contains("shepherd_adaptive_mode{profile=\"default\",mode=\"burst\"} 1"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_loop_survives_a_reload_and_stops_without_an_adaptive_section() {
    let handle = common::start(FOUR, common::quiet_options()).await;
    feed_hot_node(&handle, Duration::from_millis(500)).await;
    let first = handle.adaptive().controller().unwrap();
    assert!(first.latest().is_some());

    // A new policy (another seed): a new controller for the new scheduler, ticked at once.
    let mut next = (*handle.config()).clone();
    next.policy.scheduler.seed = 7;
    assert!(handle.reload(next.clone()).unwrap().policy_changed);
    let second = handle.adaptive().controller().unwrap();
    assert!(!Arc::ptr_eq(&first, &second));
    assert!(Arc::ptr_eq(
        second.profile(),
        &handle.scheduler().load().profiles()[0]
    ));
    feed_hot_node(&handle, Duration::from_secs(4)).await;
    assert!(second.history().len() >= 10);
    assert_ne!(weights(&handle), PRESET_WEIGHTS);

    // A policy without `adaptive:` keeps its configured weights; the view says so.
    next.policy.adaptive = None;
    handle.reload(next).unwrap();
    assert!(handle.adaptive().controller().is_none());
    feed_hot_node(&handle, Duration::from_secs(1)).await;
    assert_eq!(weights(&handle), PRESET_WEIGHTS);
    let (_, body) = get(handle.admin_router(), "/debug/adaptive").await;
    assert!(body.contains("\"enabled\":false"), "{body}");
}

#[tokio::test(start_paused = true)]
async fn readiness_follows_fresh_metrics_and_shutdown() {
    let handle = common::start(FOUR, common::quiet_options()).await;
    let router = handle.admin_router();
    assert_eq!(get(router.clone(), "/healthz").await.0, 200);
    assert_eq!(
        get(router.clone(), "/readyz").await.0,
        503,
        "nothing scraped yet"
    );
    handle.pool().snapshot().endpoints()[2].set_metrics(EndpointMetrics::default());
    assert_eq!(get(router.clone(), "/readyz").await.0, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(router.clone(), "/readyz").await.0, 503, "stale again");

    let (status, body) = get(router.clone(), "/debug/config").await;
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["policyIsPreset"], true);
    assert_eq!(json["endpoints"].as_array().unwrap().len(), 4);

    handle.pool().snapshot().endpoints()[2].set_metrics(EndpointMetrics::default());
    let signal = handle.shutdown_signal();
    let decision = handle.scheduler().schedule(&request("r")).unwrap();
    let shutdown = tokio::spawn(handle.shutdown(Duration::from_secs(5)));
    signal.wait().await;
    assert_eq!(get(router, "/readyz").await.0, 503, "shutting down");
    drop(decision);
    assert!(shutdown.await.unwrap().drained);
}
