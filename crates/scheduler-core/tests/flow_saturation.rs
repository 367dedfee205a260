//! Saturation detectors on crafted pools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use shepherd_scheduler_core::clock::{Clock, ManualClock};
use shepherd_scheduler_core::endpoint::{EndpointHealth, EndpointMetrics, Pool};
use shepherd_scheduler_core::flow::{
    ConcurrencyDetector, ConcurrencyMode, Detector, FlowConfigError, Pending, SaturationDetector,
    UtilizationDetector,
};

fn pool() -> (Arc<ManualClock>, Pool) {
    let clock = Arc::new(ManualClock::default());
    let pool = Pool::with_clock(clock.clone());
    (clock, pool)
}

fn metrics(waiting: u32, kv: f64) -> EndpointMetrics {
    EndpointMetrics {
        waiting,
        kv_utilization: kv,
        ..Default::default()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn an_empty_pool_is_saturated() {
    let (clock, pool) = pool();
    let snap = pool.snapshot();
    assert_eq!(
        UtilizationDetector::default().saturation(&snap, clock.now()),
        1.0
    );
    assert_eq!(
        ConcurrencyDetector::default().saturation(&snap, clock.now()),
        1.0
    );
    assert!(UtilizationDetector::default().is_saturated(&snap, clock.now()));
}

#[test]
fn utilization_takes_the_worse_of_queue_and_kv_per_endpoint_and_averages() {
    let (clock, pool) = pool();
    pool.add("a:1").set_metrics(metrics(1, 0.4)); // max(0.2, 0.5) = 0.5
    pool.add("b:1").set_metrics(metrics(4, 0.0)); // max(0.8, 0) = 0.8
    let d = UtilizationDetector::default();
    let level = d.saturation(&pool.snapshot(), clock.now());
    assert!(close(level, 0.65), "{level}");
    assert!(!d.is_saturated(&pool.snapshot(), clock.now()));
}

#[test]
fn utilization_is_saturated_at_one() {
    let (clock, pool) = pool();
    pool.add("a:1").set_metrics(metrics(5, 0.0)); // 5 / 5
    let d = UtilizationDetector::default();
    assert!(close(d.saturation(&pool.snapshot(), clock.now()), 1.0));
    assert!(d.is_saturated(&pool.snapshot(), clock.now()));
    pool.add("b:1").set_metrics(metrics(0, 0.8)); // 0.8 / 0.8
    assert!(d.is_saturated(&pool.snapshot(), clock.now()));
    pool.add("c:1").set_metrics(metrics(0, 0.0));
    assert!(!d.is_saturated(&pool.snapshot(), clock.now()));
}

#[test]
fn stale_or_missing_metrics_count_as_saturated() {
    let (clock, pool) = pool();
    pool.add("fresh:1").set_metrics(metrics(0, 0.0));
    pool.add("never:1");
    let d = UtilizationDetector::default();
    assert!(close(d.saturation(&pool.snapshot(), clock.now()), 0.5));
    // Exactly at the staleness threshold the metrics are still fresh; just after, stale.
    clock.advance(UtilizationDetector::DEFAULT_METRICS_STALENESS_THRESHOLD);
    assert!(close(d.saturation(&pool.snapshot(), clock.now()), 0.5));
    clock.advance(Duration::from_nanos(1));
    assert!(close(d.saturation(&pool.snapshot(), clock.now()), 1.0));
    assert!(d.is_saturated(&pool.snapshot(), clock.now()));
    // Cleared metrics are stale too.
    let e = pool.add("cleared:1");
    e.set_metrics(metrics(0, 0.0));
    e.clear_metrics();
    pool.snapshot()
        .get_by_address("fresh:1")
        .unwrap()
        .set_metrics(metrics(0, 0.0));
    assert!(close(
        d.saturation(&pool.snapshot(), clock.now()),
        2.0 / 3.0
    ));
}

#[test]
fn endpoints_that_take_no_requests_are_left_out() {
    let (clock, pool) = pool();
    pool.add("busy:1").set_metrics(metrics(50, 1.0));
    pool.add("idle:1").set_metrics(metrics(0, 0.0));
    pool.set_health("busy:1", EndpointHealth::Draining);
    let d = UtilizationDetector::default();
    assert!(close(d.saturation(&pool.snapshot(), clock.now()), 0.0));
    pool.set_health("idle:1", EndpointHealth::Draining);
    assert_eq!(d.saturation(&pool.snapshot(), clock.now()), 1.0);
}

#[test]
fn utilization_parameters_use_the_upstream_names() {
    let d = UtilizationDetector::from_parameters(&json!({
        "queueDepthThreshold": 10,
        "kvCacheUtilThreshold": 0.5,
        "metricsStalenessThreshold": "2s",
        "headroom": 0.2,
    }))
    .unwrap();
    assert_eq!(d.headroom(), 0.2);
    let (clock, pool) = pool();
    pool.add("a:1").set_metrics(metrics(5, 0.1));
    clock.advance(Duration::from_secs(1));
    assert!(close(d.saturation(&pool.snapshot(), clock.now()), 0.5));
    assert_eq!(
        UtilizationDetector::from_parameters(&serde_json::Value::Null).unwrap(),
        UtilizationDetector::default()
    );
    let err = UtilizationDetector::from_parameters(&json!({"queueDepth": 3})).unwrap_err();
    assert!(matches!(err, FlowConfigError::Parameters { .. }), "{err}");
    assert!(err.to_string().contains("queueDepth"), "{err}");
    let err =
        UtilizationDetector::from_parameters(&json!({"kvCacheUtilThreshold": 1.5})).unwrap_err();
    assert!(err.to_string().contains("kvCacheUtilThreshold"), "{err}");
    let err = UtilizationDetector::from_parameters(&json!({"queueDepthThreshold": 0})).unwrap_err();
    assert!(err.to_string().contains("queueDepthThreshold"), "{err}");
}

#[test]
fn concurrency_counts_requests_in_flight_against_the_limit() {
    let (clock, pool) = pool();
    let a = pool.add("a:1");
    let b = pool.add("b:1");
    let d = ConcurrencyDetector::new(ConcurrencyMode::Requests, 2, 1000).unwrap();
    let mut guards = vec![
        a.start_request(10),
        a.start_request(10),
        a.start_request(10),
    ];
    assert!(close(d.saturation(&pool.snapshot(), clock.now()), 0.75)); // 3 / (2 * 2)
    guards.push(b.start_request(10));
    assert!(d.is_saturated(&pool.snapshot(), clock.now()));
    guards.clear();
    assert_eq!(d.saturation(&pool.snapshot(), clock.now()), 0.0);
}

#[test]
fn concurrency_tokens_and_hybrid_modes() {
    let (clock, pool) = pool();
    let a = pool.add("a:1");
    let b = pool.add("b:1");
    let _g1 = a.start_request(600);
    let _g2 = b.start_request(100);
    let _g3 = b.start_request(100);
    let tokens = ConcurrencyDetector::new(ConcurrencyMode::Tokens, 100, 1000).unwrap();
    assert!(close(tokens.saturation(&pool.snapshot(), clock.now()), 0.4)); // 800 / 2000
    let hybrid = ConcurrencyDetector::new(ConcurrencyMode::Hybrid, 2, 1000).unwrap();
    // a: max(1/2, 0.6) = 0.6; b: max(2/2, 0.2) = 1.0.
    assert!(close(hybrid.saturation(&pool.snapshot(), clock.now()), 0.8));
}

#[test]
fn concurrency_parameters_use_the_upstream_names() {
    let d = ConcurrencyDetector::from_parameters(&json!({
        "concurrencyMode": "tokens",
        "maxConcurrency": 64,
        "maxTokenConcurrency": 80000,
        "headroom": 0.1,
    }))
    .unwrap();
    assert_eq!(d.mode(), ConcurrencyMode::Tokens);
    assert_eq!(d.headroom(), 0.1);
    let err = ConcurrencyDetector::from_parameters(&json!({"maxConcurrency": 0})).unwrap_err();
    assert!(err.to_string().contains("maxConcurrency"), "{err}");
    assert!(ConcurrencyDetector::from_parameters(&json!({"concurrencyMode": "bytes"})).is_err());
    assert!(ConcurrencyDetector::from_parameters(&json!({"limit": 3})).is_err());
    assert!(matches!(
        Detector::from_plugin("concurrency-detector", &json!({"maxConcurrency": 3})).unwrap(),
        Detector::Concurrency(_)
    ));
    assert!(matches!(
        Detector::from_plugin("queue-scorer", &serde_json::Value::Null),
        Err(FlowConfigError::UnknownDetector(_))
    ));
}

#[test]
fn pending_requests_count_as_load_in_both_detectors() {
    let (clock, pool) = pool();
    pool.add("10.0.0.1:8000").set_metrics(metrics(0, 0.0));
    pool.add("10.0.0.2:8000").set_metrics(metrics(0, 0.0));
    let snapshot = pool.snapshot();
    let now = clock.now();
    let pending = Pending {
        requests: 5,
        prompt_tokens: 500,
    };
    // Utilization: 5 pending over 2 endpoints with threshold 5 → 0.5.
    let utilization = UtilizationDetector::default();
    assert_eq!(utilization.saturation(&snapshot, now), 0.0);
    assert!(close(
        utilization.saturation_with_pending(&snapshot, now, pending),
        0.5
    ));
    // Concurrency (requests): 5 pending against 2 × 2 → 1.25, saturated.
    let concurrency = ConcurrencyDetector::new(ConcurrencyMode::Requests, 2, 1_000).unwrap();
    let level = concurrency.saturation_with_pending(&snapshot, now, pending);
    assert!(close(level, 1.25), "{level}");
    assert!(shepherd_scheduler_core::flow::is_saturated_level(level));
    // Tokens: 500 pending against 2 × 1000 → 0.25.
    let tokens = ConcurrencyDetector::new(ConcurrencyMode::Tokens, 2, 1_000).unwrap();
    assert!(close(
        tokens.saturation_with_pending(&snapshot, now, pending),
        0.25
    ));
}
