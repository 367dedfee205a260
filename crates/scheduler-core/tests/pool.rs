//! Pool membership, live counters and listeners.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::endpoint::{EndpointId, EndpointMetrics, MembershipListener, Pool};

#[derive(Default)]
struct Recorder(Mutex<Vec<EndpointId>>);

impl MembershipListener for Recorder {
    fn on_removed(&self, removed: &[EndpointId]) {
        self.0.lock().extend_from_slice(removed);
    }
}

#[test]
fn counters_and_metrics_survive_membership_swaps() {
    let pool = Pool::new();
    pool.set_members(["a:1", "b:1"]);
    let a = Arc::clone(pool.snapshot().get_by_address("a:1").unwrap());
    a.set_metrics(EndpointMetrics {
        waiting: 7,
        scraped_at: Some(Timestamp::ZERO),
        ..Default::default()
    });
    let guard = a.start_request(1000);

    pool.set_members(["a:1", "c:1"]);
    let snap = pool.snapshot();
    let a2 = snap.get_by_address("a:1").unwrap();
    assert!(Arc::ptr_eq(&a, a2), "a staying endpoint keeps its identity");
    assert_eq!(a2.in_flight_requests(), 1);
    assert_eq!(a2.in_flight_prompt_tokens(), 1000);
    assert_eq!(a2.metrics().waiting, 7);
    drop(guard);
    assert_eq!(a2.in_flight_requests(), 0);
    assert_eq!(a2.in_flight_prompt_tokens(), 0);
}

#[test]
fn guard_outliving_membership_still_releases() {
    let pool = Pool::new();
    let ep = pool.add("a:1");
    let guard = ep.start_request(5);
    assert!(pool.remove("a:1"));
    assert!(pool.snapshot().is_empty());
    drop(guard);
    assert_eq!(ep.in_flight_requests(), 0);
}

#[test]
fn listeners_hear_about_removals_and_ids_are_never_reused() {
    let pool = Pool::new();
    let recorder = Arc::new(Recorder::default());
    pool.add_listener(recorder.clone());
    pool.set_members(["a:1", "b:1", "b:1"]);
    assert_eq!(pool.snapshot().len(), 2, "duplicates are ignored");
    let b_id = pool.snapshot().get_by_address("b:1").unwrap().id();
    let removed = pool.set_members(["a:1"]);
    assert_eq!(removed, vec![b_id]);
    assert_eq!(*recorder.0.lock(), vec![b_id]);

    let b_again = pool.add("b:1");
    assert_ne!(b_again.id(), b_id, "a returning address gets a fresh id");
    assert!(!pool.remove("zzz:1"));
}

#[test]
fn snapshot_is_sorted_and_indexed_by_address() {
    let pool = Pool::new();
    pool.set_members(["c:1", "a:1", "b:1"]);
    let snap = pool.snapshot();
    let addrs: Vec<&str> = snap.endpoints().iter().map(|e| e.address()).collect();
    assert_eq!(addrs, ["a:1", "b:1", "c:1"]);
    for e in snap.endpoints() {
        assert_eq!(snap.get_by_address(e.address()).unwrap().id(), e.id());
    }
}

#[test]
fn staleness_and_garbage_metrics() {
    let m = EndpointMetrics::default();
    assert!(
        m.is_stale(Timestamp::ZERO, Duration::from_secs(1)),
        "never scraped is stale"
    );
    let m = EndpointMetrics {
        scraped_at: Some(Timestamp::from_millis(100)),
        kv_utilization: f64::NAN,
        ..Default::default()
    };
    assert!(!m.is_stale(Timestamp::from_millis(300), Duration::from_millis(200)));
    assert!(m.is_stale(Timestamp::from_millis(301), Duration::from_millis(200)));
    assert_eq!(m.kv_utilization_clamped(), 1.0);
}
