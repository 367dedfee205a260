//! The flow queue: strict priority, fairness, FCFS, limits, TTL, cancel.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::flow::{
    Arrival, BandLimits, DropReason, Fairness, FlowQueue, FlowSettings, OrderingPolicy,
};

fn settings() -> FlowSettings {
    FlowSettings::default()
}

fn t(ms: u64) -> Timestamp {
    Timestamp::from_millis(ms)
}

fn drain<T>(q: &mut FlowQueue<T>, now: Timestamp) -> Vec<T> {
    std::iter::from_fn(|| q.dispatch_next(now)).collect()
}

#[test]
fn strict_priority_across_bands() {
    let mut q = FlowQueue::new(settings());
    for (i, p) in [-3, 0, 7, -1, 2, 7, 0].into_iter().enumerate() {
        q.enqueue((p, i), p, "", 1, t(0)).unwrap();
    }
    let order: Vec<i32> = drain(&mut q, t(1)).into_iter().map(|(p, _)| p).collect();
    assert_eq!(order, vec![7, 7, 2, 0, 0, -1, -3]);
}

#[test]
fn higher_band_arriving_later_goes_first() {
    let mut q = FlowQueue::new(settings());
    for i in 0..5 {
        q.enqueue(format!("low-{i}"), 0, "", 1, t(0)).unwrap();
    }
    assert_eq!(q.dispatch_next(t(1)).unwrap(), "low-0");
    q.enqueue("high".to_string(), 1, "", 1, t(2)).unwrap();
    assert_eq!(q.dispatch_next(t(3)).unwrap(), "high");
    assert_eq!(q.dispatch_next(t(3)).unwrap(), "low-1");
}

#[test]
fn fcfs_within_a_flow() {
    let mut q = FlowQueue::new(settings());
    for i in 0..100 {
        q.enqueue(i, 0, "only", 1, t(i)).unwrap();
    }
    assert_eq!(drain(&mut q, t(100)), (0..100).collect::<Vec<_>>());
}

#[test]
fn round_robin_across_flows_keeps_fcfs_per_flow() {
    let mut q = FlowQueue::new(settings());
    for i in 0..3 {
        q.enqueue(("a", i), 0, "a", 1, t(0)).unwrap();
    }
    q.enqueue(("b", 0), 0, "b", 1, t(0)).unwrap();
    q.enqueue(("c", 0), 0, "c", 1, t(0)).unwrap();
    assert_eq!(
        drain(&mut q, t(1)),
        vec![("a", 0), ("b", 0), ("c", 0), ("a", 1), ("a", 2)]
    );
}

/// Upstream's `global-strict-fairness-policy` over FCFS ordering: the band's oldest request
/// first, whatever its flow (upstream's global_strict_test.go: the queue whose head is "less"
/// wins), across flows that come and go.
#[test]
fn global_strict_serves_the_bands_arrival_order() {
    use shepherd_scheduler_core::flow::Fairness;
    let mut s = settings();
    s.default_band.fairness = Fairness::GlobalStrict;
    let mut q = FlowQueue::new(s);
    for (i, flow) in ["a", "a", "a", "b", "c", "a", "b"].into_iter().enumerate() {
        q.enqueue((flow, i), 0, flow, 1, t(i as u64)).unwrap();
    }
    assert_eq!(q.dispatch_next(t(10)).unwrap(), ("a", 0));
    assert_eq!(q.dispatch_next(t(10)).unwrap(), ("a", 1));
    q.enqueue(("d", 7), 0, "d", 1, t(11)).unwrap();
    let rest: Vec<usize> = drain(&mut q, t(12)).into_iter().map(|(_, i)| i).collect();
    assert_eq!(rest, vec![2, 3, 4, 5, 6, 7]);
    // Priority still comes first.
    q.enqueue(("low", 0), 0, "x", 1, t(20)).unwrap();
    q.enqueue(("high", 1), 1, "y", 1, t(21)).unwrap();
    assert_eq!(q.dispatch_next(t(22)).unwrap(), ("high", 1));
}

/// Upstream's `program-aware-fairness` (llm-d router @ ebab68792,
/// `pkg/epp/framework/plugins/flowcontrol/fairness/program-aware/`): the program with the
/// least attained service goes first, so a program of many small requests is not held behind
/// one of large ones. As upstream, a program is charged `prompt + 2 × completion` tokens when
/// a request completes (`strategy_las.go` `OnCompleted`), not at dispatch.
#[test]
fn program_aware_fairness_charges_tokens_at_completion() {
    use shepherd_scheduler_core::flow::Fairness;
    let mut s = settings();
    s.default_band.fairness = Fairness::ProgramAware;
    let mut q = FlowQueue::new(s);
    let ledger = std::sync::Arc::clone(q.ledger());
    for item in ["a1", "a2", "a3"] {
        q.enqueue(item, 0, "a", 1000, t(0)).unwrap();
    }
    for item in ["b1", "b2"] {
        q.enqueue(item, 0, "b", 10, t(50)).unwrap();
    }
    // Cold start: equal service, a's head waited longer.
    assert_eq!(q.dispatch_next(t(100)), Some("a1"));
    ledger.expect("a1", "a");
    // a1 is in flight, not complete: a has attained nothing yet, and its head still waited
    // longest (charged at dispatch, a would have lost its turn to b here).
    assert_eq!(q.dispatch_next(t(100)), Some("a2"));
    ledger.expect("a2", "a");
    // a1 completes: 100 prompt + 2 × 450 completion tokens = 1000 for a.
    ledger.complete("a1", Some((100, 450)), t(150));
    assert!((ledger.service("a", t(150)) - 1000.0).abs() < 1e-6);
    assert_eq!(q.dispatch_next(t(200)), Some("b1"));
    ledger.expect("b1", "b");
    ledger.complete("b1", Some((10, 5)), t(210));
    assert_eq!(
        q.dispatch_next(t(220)),
        Some("b2"),
        "b (20) is still behind a (1000)"
    );
    // A completion without usage (a failure, a cancellation) costs nothing.
    ledger.expect("b2", "b");
    ledger.complete("b2", None, t(230));
    assert!((ledger.service("b", t(230)) - 20.0).abs() < 0.01);
    assert_eq!(ledger.expected_len(), 1, "a2 still in flight");
    assert_eq!(q.dispatch_next(t(240)), Some("a3"));
}

/// Two flows with equal demand (random arrivals at the same mean rate, together above the
/// dispatch rate), over a long run: their shares are within 10 % of each other. The band's
/// limit is not reached here: when it is, admission is first come first served (a full band
/// refuses whoever arrives next).
#[test]
fn equal_demand_gets_equal_shares() {
    let mut s = settings();
    s.default_band = BandLimits {
        max_requests: 1_000_000,
        max_bytes: u64::MAX,
        ..BandLimits::default()
    };
    s.max_requests = Some(1_000_000);
    let mut q = FlowQueue::new(s);
    let mut served = [0u64; 2];
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for step in 0..50_000u64 {
        let now = Timestamp::from_micros(step * 100);
        // Each flow offers 0..=3 requests per step (mean 1.5); the pool takes 2.
        for _ in 0..2 {
            let r = next();
            let flow = (r & 1) as usize;
            for _ in 0..((r >> 1) % 4) {
                q.enqueue(flow, 0, ["x", "y"][flow], 10, now).unwrap();
            }
        }
        for _ in 0..2 {
            if let Some(flow) = q.dispatch_next(now) {
                served[flow] += 1;
            }
        }
    }
    let (a, b) = (served[0] as f64, served[1] as f64);
    assert!(a + b > 90_000.0, "served {served:?}");
    assert!((a - b).abs() / a.max(b) < 0.10, "unequal shares {served:?}");
}

/// A heavy flow with a deep backlog cannot starve a light one: each light request is served
/// within one round (here: at most one heavy request before it).
#[test]
fn heavy_flow_cannot_starve_a_light_one() {
    let mut q = FlowQueue::new(settings());
    for i in 0..4_000 {
        q.enqueue(("heavy", i), 0, "heavy", 1, t(0)).unwrap();
    }
    let mut light_waits = Vec::new();
    for round in 0..500u64 {
        q.enqueue(("light", round as i32), 0, "light", 1, t(round))
            .unwrap();
        let mut waited = 0;
        loop {
            let (flow, _) = q.dispatch_next(t(round)).unwrap();
            if flow == "light" {
                break;
            }
            waited += 1;
        }
        light_waits.push(waited);
        // The heavy flow keeps its backlog.
        q.enqueue(("heavy", 0), 0, "heavy", 1, t(round)).unwrap();
    }
    assert!(light_waits.iter().all(|&w| w <= 1), "{light_waits:?}");
}

#[test]
fn band_count_limit_is_respected() {
    let mut s = settings();
    s.bands = vec![(
        0,
        BandLimits {
            max_requests: 3,
            max_bytes: 1_000,
            ..BandLimits::default()
        },
    )];
    let mut q = FlowQueue::new(s);
    for i in 0..3 {
        q.enqueue(i, 0, "", 1, t(0)).unwrap();
    }
    let rejected = q.enqueue(3, 0, "", 1, t(0)).unwrap_err();
    assert_eq!(rejected.item, 3);
    assert_eq!(rejected.reason, DropReason::QueueFull);
    assert_eq!(rejected.reason.http_status(), 429);
    assert_eq!(rejected.reason.as_str(), "queue_full");
    // Other bands are not affected by band 0's limit.
    q.enqueue(4, 1, "", 1, t(0)).unwrap();
    assert_eq!(q.band_len(0), 3);
    assert_eq!(q.counters().dropped(DropReason::QueueFull), 1);
    // Room again after a dispatch.
    q.dispatch_next(t(0)).unwrap();
    q.dispatch_next(t(0)).unwrap();
    q.enqueue(5, 0, "", 1, t(0)).unwrap();
}

#[test]
fn band_byte_limit_is_respected() {
    let mut s = settings();
    s.bands = vec![(
        0,
        BandLimits {
            max_requests: 100,
            max_bytes: 1_000,
            ..BandLimits::default()
        },
    )];
    let mut q = FlowQueue::new(s);
    q.enqueue("a", 0, "", 600, t(0)).unwrap();
    q.enqueue("b", 0, "", 400, t(0)).unwrap(); // exactly at the limit
    assert_eq!(q.band_bytes(0), 1_000);
    assert_eq!(
        q.enqueue("c", 0, "", 1, t(0)).unwrap_err().reason,
        DropReason::QueueFull
    );
    q.enqueue("zero", 0, "", 0, t(0)).unwrap();
    assert_eq!(q.bytes(), 1_000);
}

#[test]
fn global_limits_are_respected() {
    let mut s = settings();
    s.max_requests = Some(4);
    s.max_bytes = Some(50);
    let mut q = FlowQueue::new(s);
    for p in 0..4 {
        q.enqueue(p, p, "", 10, t(0)).unwrap();
    }
    assert_eq!(
        q.enqueue(9, 9, "", 1, t(0)).unwrap_err().reason,
        DropReason::QueueFull
    );
    q.dispatch_next(t(0)).unwrap();
    assert_eq!(
        q.enqueue(9, 9, "", 21, t(0)).unwrap_err().reason,
        DropReason::QueueFull
    );
    q.enqueue(9, 9, "", 20, t(0)).unwrap();
    assert_eq!(q.bytes(), 50);
    assert_eq!(q.len(), 4);
}

#[test]
fn negative_priorities_use_the_negative_default_band() {
    let mut s = settings();
    s.default_negative_band = BandLimits {
        max_requests: 1,
        max_bytes: 10,
        ..BandLimits::default()
    };
    let mut q = FlowQueue::new(s);
    q.enqueue(1, -1, "", 1, t(0)).unwrap();
    assert!(q.enqueue(2, -1, "", 1, t(0)).is_err());
    q.enqueue(3, -2, "", 1, t(0)).unwrap();
    q.enqueue(4, 0, "", 1, t(0)).unwrap();
    q.enqueue(5, 0, "", 1, t(0)).unwrap();
}

#[test]
fn ttl_expiry_is_exact_at_the_boundary() {
    let mut q = FlowQueue::new(settings()); // 60 s
    let start = Timestamp::from_nanos(1_234_567);
    q.enqueue("r", 0, "", 1, start).unwrap();
    let deadline = start.saturating_add(Duration::from_secs(60));
    let just_before = Timestamp::from_nanos(deadline.as_nanos() - 1);
    assert_eq!(q.next_deadline(), Some(deadline));
    assert!(q.expire(just_before).is_empty());
    assert_eq!(q.len(), 1);
    assert_eq!(q.expire(deadline), vec![("r", DropReason::TtlExpired)]);
    assert!(q.is_empty());
    assert_eq!(q.counters().dropped(DropReason::TtlExpired), 1);
    assert_eq!(DropReason::TtlExpired.http_status(), 503);
}

#[test]
fn dispatch_never_returns_an_expired_request() {
    let mut q = FlowQueue::new(settings());
    q.enqueue("old", 0, "", 1, t(0)).unwrap();
    q.enqueue("new", 0, "", 1, t(1)).unwrap();
    let deadline_old = t(0).saturating_add(Duration::from_secs(60));
    // Just before: the old one is still served.
    let mut q2 = FlowQueue::new(settings());
    q2.enqueue("old", 0, "", 1, t(0)).unwrap();
    assert_eq!(
        q2.dispatch_next(Timestamp::from_nanos(deadline_old.as_nanos() - 1)),
        Some("old")
    );
    // At the deadline: skipped, and handed to `expire`.
    assert_eq!(q.dispatch_next(deadline_old), Some("new"));
    assert_eq!(
        q.expire(deadline_old),
        vec![("old", DropReason::TtlExpired)]
    );
    assert_eq!(q.counters().dispatched, 1);
}

#[test]
fn per_request_ttl_and_no_ttl() {
    let mut s = settings();
    s.ttl = None;
    let mut q = FlowQueue::new(s);
    q.enqueue("forever", 0, "", 1, t(0)).unwrap();
    q.enqueue_with_ttl("short", 0, "", 1, t(0), Some(Duration::from_millis(5)))
        .unwrap();
    assert_eq!(q.next_deadline(), Some(t(5)));
    assert_eq!(q.expire(t(5)), vec![("short", DropReason::TtlExpired)]);
    assert!(q.expire(Timestamp::from_nanos(u64::MAX)).is_empty());
    assert_eq!(q.len(), 1);
}

#[test]
fn cancel_removes_without_a_trace() {
    let mut q = FlowQueue::new(settings());
    let a = q.enqueue("a", 0, "f", 10, t(0)).unwrap();
    let b = q.enqueue("b", 0, "f", 20, t(0)).unwrap();
    let c = q.enqueue("c", 0, "g", 30, t(0)).unwrap();
    assert_eq!(q.cancel(b), Some("b"));
    assert_eq!(q.cancel(b), None);
    assert!(!q.contains(b));
    assert!(q.contains(a));
    assert_eq!((q.len(), q.bytes()), (2, 40));
    assert_eq!(q.cancel(c), Some("c"));
    // Flow g is gone, flow f is intact, nothing counted as a drop.
    assert_eq!(drain(&mut q, t(1)), vec!["a"]);
    assert!(q.expire(Timestamp::from_nanos(u64::MAX)).is_empty());
    let counters = q.counters();
    assert_eq!(counters.cancelled, 2);
    assert!(DropReason::ALL.iter().all(|&r| counters.dropped(r) == 0));
    // A ticket is not reused: the slot now holds another request.
    let d = q.enqueue("d", 0, "f", 1, t(2)).unwrap();
    assert_eq!(q.cancel(a), None);
    assert!(q.contains(d));
    assert_eq!(q.len(), 1);
}

#[test]
fn cancelling_the_flow_whose_turn_it_is_passes_the_turn() {
    let mut q = FlowQueue::new(settings());
    q.enqueue("a0", 0, "a", 1, t(0)).unwrap();
    let b0 = q.enqueue("b0", 0, "b", 1, t(0)).unwrap();
    q.enqueue("c0", 0, "c", 1, t(0)).unwrap();
    q.enqueue("a1", 0, "a", 1, t(0)).unwrap();
    assert_eq!(q.dispatch_next(t(1)), Some("a0"));
    q.cancel(b0).unwrap();
    assert_eq!(drain(&mut q, t(1)), vec!["c0", "a1"]);
}

#[test]
fn shedding_only_touches_sheddable_requests_under_saturation() {
    let mut q: FlowQueue<()> = FlowQueue::new(settings());
    assert_eq!(q.admit(-1, false), Ok(()));
    assert_eq!(q.admit(0, true), Ok(()));
    assert_eq!(q.admit(5, true), Ok(()));
    assert_eq!(q.admit(-1, true), Err(DropReason::Shed));
    assert_eq!(DropReason::Shed.http_status(), 429);
    assert_eq!(q.counters().dropped(DropReason::Shed), 1);
}

#[test]
fn memory_is_reused_after_draining() {
    let mut q = FlowQueue::new(settings());
    for round in 0..50u64 {
        for i in 0..200 {
            let flow = format!("tenant-{}", (round * 7 + i) % 97);
            q.enqueue(i, (i % 5) as i32 - 2, &flow, 8, t(round))
                .unwrap();
        }
        assert_eq!(drain(&mut q, t(round)).len(), 200);
        assert!(q.is_empty());
        assert_eq!(q.bytes(), 0);
        assert!(q.next_deadline().is_none());
    }
}

#[test]
fn drain_empties_the_queue_in_dispatch_order_and_counts_the_reason() {
    let mut queue = FlowQueue::new(FlowSettings {
        ttl: Some(Duration::from_secs(1)),
        ..FlowSettings::default()
    });
    let t0 = Timestamp::ZERO;
    queue.enqueue("old", 0, "", 1, t0).unwrap();
    let later = Timestamp::from_millis(900);
    queue.enqueue("low", -1, "", 1, later).unwrap();
    queue.enqueue("high", 2, "", 1, later).unwrap();
    let drained = queue.drain(DropReason::ShuttingDown, Timestamp::from_millis(1_000));
    assert_eq!(
        drained,
        vec![
            ("old", DropReason::TtlExpired),
            ("high", DropReason::ShuttingDown),
            ("low", DropReason::ShuttingDown),
        ]
    );
    assert!(queue.is_empty());
    assert_eq!(queue.bytes(), 0);
    assert_eq!(queue.next_deadline(), None);
    assert_eq!(queue.counters().dropped(DropReason::ShuttingDown), 2);
    assert_eq!(queue.counters().dropped(DropReason::TtlExpired), 1);
}

fn regimes(default_ms: u64, no_endpoint: Option<Option<u64>>) -> FlowQueue<&'static str> {
    FlowQueue::new(FlowSettings {
        ttl: Some(Duration::from_millis(default_ms)),
        no_endpoint_ttl: no_endpoint.map(|o| o.map(Duration::from_millis)),
        ..FlowSettings::default()
    })
}

#[test]
fn without_a_no_endpoint_ttl_the_default_bounds_both_regimes() {
    let mut q = regimes(100, None);
    q.enqueue("a", 0, "", 1, Timestamp::ZERO).unwrap();
    q.set_pool_empty(true, Timestamp::from_millis(50));
    q.set_pool_empty(false, Timestamp::from_millis(80));
    assert_eq!(q.next_deadline(), Some(Timestamp::from_millis(100)));
    assert!(q.expire(Timestamp::from_millis(99)).is_empty());
    assert_eq!(q.expire(Timestamp::from_millis(100)).len(), 1);
}

#[test]
fn an_empty_pool_waits_under_its_own_budget_then_a_fresh_default_one() {
    // A short budget against a saturated pool, a long one for a cold start.
    let mut q = regimes(100, Some(Some(1_000)));
    q.set_pool_empty(true, Timestamp::ZERO);
    q.enqueue("cold", 0, "", 1, Timestamp::from_millis(10))
        .unwrap();
    assert_eq!(q.next_deadline(), Some(Timestamp::from_millis(1_010)));
    assert!(q.expire(Timestamp::from_millis(500)).is_empty());
    // An endpoint appears at 600 ms: a fresh 100 ms budget.
    q.set_pool_empty(false, Timestamp::from_millis(600));
    assert_eq!(q.next_deadline(), Some(Timestamp::from_millis(700)));
    // A request arriving now has the default budget.
    q.enqueue("warm", 0, "", 1, Timestamp::from_millis(650))
        .unwrap();
    let expired = q.expire(Timestamp::from_millis(750));
    assert_eq!(
        expired,
        vec![
            ("cold", DropReason::TtlExpired),
            ("warm", DropReason::TtlExpired)
        ]
    );
}

#[test]
fn a_fresh_budget_never_extends_past_the_longer_of_the_two() {
    let mut q = regimes(100, Some(Some(1_000)));
    q.enqueue("a", 0, "", 1, Timestamp::ZERO).unwrap();
    // The pool empties at 90 ms and refills at 950 ms: a fresh 100 ms would end at 1050, but
    // the whole wait is bounded by 1000 ms.
    q.set_pool_empty(true, Timestamp::from_millis(90));
    assert_eq!(q.next_deadline(), Some(Timestamp::from_millis(1_000)));
    q.set_pool_empty(false, Timestamp::from_millis(950));
    assert_eq!(q.next_deadline(), Some(Timestamp::from_millis(1_000)));
}

#[test]
fn a_zero_no_endpoint_ttl_waits_for_an_endpoint_forever() {
    let mut q = regimes(100, Some(None));
    q.set_pool_empty(true, Timestamp::ZERO);
    q.enqueue("a", 0, "", 1, Timestamp::ZERO).unwrap();
    assert_eq!(q.next_deadline(), None);
    assert!(q.expire(Timestamp::from_millis(3_600_000)).is_empty());
    // Once an endpoint exists the default budget runs from that moment.
    q.set_pool_empty(false, Timestamp::from_millis(3_600_000));
    assert_eq!(q.next_deadline(), Some(Timestamp::from_millis(3_600_100)));
}

fn ordered(ordering: OrderingPolicy, fairness: Fairness) -> FlowSettings {
    let mut s = settings();
    s.default_band = BandLimits {
        ordering,
        fairness,
        ..BandLimits::default()
    };
    s
}

fn arrival(flow_id: &str, ttl: Option<u64>, slo_ms: Option<u64>) -> Arrival<'_> {
    Arrival {
        flow_id,
        bytes: 1,
        ttl: ttl.map(Duration::from_secs),
        slo_ttft: slo_ms.map(Duration::from_millis),
        ..Arrival::default()
    }
}

/// `edf-ordering-policy`: a flow serves the earliest `enqueue + TTL` first; a request
/// without a TTL after every one with; equal deadlines in arrival order. Under FCFS the
/// same arrivals leave in arrival order.
#[test]
fn edf_serves_the_earliest_deadline_of_a_flow_first() {
    let arrivals = [
        ("a", t(0), Some(10)),    // deadline 10 s
        ("none", t(0), None),     // no deadline
        ("b", t(1_000), Some(5)), // 6 s
        ("d", t(2_000), Some(4)), // 6 s, after b
        ("c", t(3_000), Some(1)), // 4 s
    ];
    let run = |ordering| {
        let mut q = FlowQueue::new(ordered(ordering, Fairness::RoundRobin));
        for (name, at, ttl) in arrivals {
            q.enqueue_arrival(name, arrival("", ttl, None), at).unwrap();
        }
        drain(&mut q, t(3_500))
    };
    assert_eq!(run(OrderingPolicy::Edf), ["c", "b", "d", "a", "none"]);
    assert_eq!(run(OrderingPolicy::Fcfs), ["a", "none", "b", "d", "c"]);
}

/// `slo-deadline-ordering-policy`: arrival + the TTFT objective; without one, last, in
/// arrival order. The TTL does not count.
#[test]
fn slo_deadline_serves_the_tightest_objective_first() {
    let mut q = FlowQueue::new(ordered(OrderingPolicy::SloDeadline, Fairness::RoundRobin));
    q.enqueue_arrival("loose", arrival("", Some(1), Some(5_000)), t(0))
        .unwrap();
    q.enqueue_arrival("plain", arrival("", Some(1), None), t(10))
        .unwrap();
    q.enqueue_arrival("tight", arrival("", Some(60), Some(100)), t(20))
        .unwrap();
    q.enqueue_arrival("plain-2", arrival("", None, None), t(30))
        .unwrap();
    q.enqueue_arrival("mid", arrival("", None, Some(1_000)), t(40))
        .unwrap();
    assert_eq!(
        drain(&mut q, t(50)),
        ["tight", "mid", "loose", "plain", "plain-2"]
    );
}

/// Under `global-strict-fairness-policy` the band serves the flow whose head the ordering
/// policy puts first (upstream compares the heads with the ordering's `Less`); cancel and
/// expiry keep a sorted flow intact.
#[test]
fn global_strict_compares_flow_heads_by_deadline() {
    let mut q = FlowQueue::new(ordered(OrderingPolicy::Edf, Fairness::GlobalStrict));
    q.enqueue_arrival("a-late", arrival("a", Some(30), None), t(0))
        .unwrap();
    q.enqueue_arrival("b-soon", arrival("b", Some(2), None), t(100))
        .unwrap();
    let gone = q
        .enqueue_arrival("a-gone", arrival("a", Some(3), None), t(200))
        .unwrap();
    q.enqueue_arrival("a-soon", arrival("a", Some(1), None), t(300))
        .unwrap();
    q.enqueue_arrival("b-mid", arrival("b", Some(20), None), t(400))
        .unwrap();
    assert_eq!(q.cancel(gone), Some("a-gone"));
    assert_eq!(
        drain(&mut q, t(500)),
        ["a-soon", "b-soon", "b-mid", "a-late"]
    );
    // The tightest deadline expires first, the others stay in order.
    for (name, ttl) in [("x", 9), ("y", 1), ("z", 5)] {
        q.enqueue_arrival(name, arrival("a", Some(ttl), None), t(0))
            .unwrap();
    }
    assert_eq!(q.expire(t(1_000)), vec![("y", DropReason::TtlExpired)]);
    assert_eq!(drain(&mut q, t(1_000)), ["z", "x"]);
}
