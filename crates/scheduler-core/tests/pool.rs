//! Pool membership, live counters and listeners.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shepherd_scheduler_core::clock::{Clock, ManualClock, Timestamp};
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
    let listener: Arc<dyn MembershipListener> = recorder.clone();
    pool.add_listener(&listener);
    pool.add_listener(&listener);
    assert_eq!(pool.listener_count(), 1, "registering twice has no effect");
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
fn listeners_are_held_weakly() {
    let pool = Pool::new();
    pool.set_members(["a:1", "b:1"]);
    let recorder = Arc::new(Recorder::default());
    let listener: Arc<dyn MembershipListener> = recorder.clone();
    pool.add_listener(&listener);
    drop(listener);
    drop(recorder);
    assert_eq!(pool.listener_count(), 0, "a dropped listener is forgotten");
    pool.set_members(["a:1"]); // nobody to tell, nothing breaks
}

#[test]
fn the_pool_stamps_metrics_with_its_own_clock() {
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(100)));
    let pool = Pool::with_clock(clock.clone());
    let ep = pool.add("a:1");
    assert!(
        ep.load_metrics()
            .is_stale(Timestamp::ZERO, Duration::from_secs(1)),
        "never scraped is stale"
    );
    ep.set_metrics(EndpointMetrics {
        kv_utilization: f64::NAN,
        ..Default::default()
    });
    assert_eq!(ep.scraped_at(), Some(Timestamp::from_millis(100)));
    let m = ep.load_metrics();
    assert!(!m.is_stale(Timestamp::from_millis(300), Duration::from_millis(200)));
    assert!(m.is_stale(Timestamp::from_millis(301), Duration::from_millis(200)));
    assert_eq!(m.kv_utilization_clamped(), 1.0);
    clock.advance(Duration::from_secs(1));
    ep.clear_metrics();
    assert_eq!(ep.scraped_at(), None);
}

use proptest::prelude::*;

proptest! {
    /// The pending prefills' summed age is exactly the sum, over the requests whose prefill is
    /// still pending, of the time since each was sent, whatever the order of starts, first
    /// tokens and ends (and the clock's origin: the counters wrap).
    #[test]
    fn pending_prefill_age_is_the_sum_of_the_pending_requests_ages(
        origin in any::<u64>().prop_map(|v| v >> 1),
        steps in proptest::collection::vec((0u8..4, 0u64..5_000_000, 0usize..8), 1..60),
    ) {
        let clock = Arc::new(ManualClock::at(Timestamp::from_nanos(origin)));
        let pool = Pool::with_clock(clock.clone());
        pool.set_members(["a:1"]);
        let a = Arc::clone(&pool.snapshot().endpoints()[0]);
        // (guard, sent at, prefill pending)
        let mut live = Vec::new();
        for (op, advance, pick) in steps {
            clock.advance(Duration::from_nanos(advance));
            let now = clock.now();
            match op {
                0 => live.push((a.start_request_uncached(100, 40), now, true)),
                1 => live.push((a.start_request_uncached(100, 0), now, false)),
                2 if !live.is_empty() => {
                    let i = pick % live.len();
                    live[i].0.prefill_done();
                    live[i].2 = false;
                }
                _ if !live.is_empty() => {
                    drop(live.swap_remove(pick % live.len()));
                }
                _ => {}
            }
            let want: u64 = live
                .iter()
                .filter(|(_, _, pending)| *pending)
                .map(|(_, at, _)| now.as_nanos() - at.as_nanos())
                .sum();
            prop_assert_eq!(a.pending_prefill_elapsed_nanos(now), want);
        }
        drop(live);
        prop_assert_eq!(a.pending_prefill_elapsed_nanos(clock.now()), 0);
    }
}
