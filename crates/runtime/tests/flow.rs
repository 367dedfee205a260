//! The runtime's flow controller on tokio time (paused): admission, waiting, dispatch as
//! saturation drops, priority and fairness, limits, TTL, cancellation, scale from zero,
//! shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use shepherd_runtime::TokioClock;
use shepherd_runtime::flow::{DISPATCH_POLL, FlowController, FlowPermit, FlowRequest};
use shepherd_scheduler_core::endpoint::{EndpointMetrics, Pool};
use shepherd_scheduler_core::flow::{BandLimits, DropReason, FlowSettings};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

fn busy() -> EndpointMetrics {
    EndpointMetrics {
        waiting: 20,
        ..Default::default()
    }
}

fn idle() -> EndpointMetrics {
    EndpointMetrics::default()
}

struct Fixture {
    pool: Arc<Pool>,
    flow: FlowController,
    stop: Option<oneshot::Sender<()>>,
    driver: JoinHandle<()>,
}

impl Fixture {
    /// One endpoint with `metrics`, the default settings (utilization detector: 5 waiting).
    fn new(metrics: Option<EndpointMetrics>, settings: FlowSettings) -> Self {
        let pool = Arc::new(Pool::with_clock(Arc::new(TokioClock::new())));
        if let Some(m) = metrics {
            pool.add("127.0.0.1:8000").set_metrics(m);
        }
        let flow = FlowController::new(settings, Arc::clone(&pool));
        let (tx, rx) = oneshot::channel::<()>();
        let driver = tokio::spawn(flow.clone().run_until(async move {
            let _ = rx.await;
        }));
        Fixture {
            pool,
            flow,
            stop: Some(tx),
            driver,
        }
    }

    /// Keeps the endpoint's metrics fresh with `metrics` (a scrape).
    fn scrape(&self, metrics: EndpointMetrics) {
        for e in self.pool.snapshot().endpoints() {
            e.set_metrics(metrics.clone());
        }
    }

    fn spawn(
        &self,
        priority: i32,
        flow_id: &'static str,
    ) -> JoinHandle<Result<FlowPermit, DropReason>> {
        let flow = self.flow.clone();
        tokio::spawn(async move {
            flow.admit(FlowRequest {
                priority,
                flow_id,
                bytes: 100,
                prompt_tokens: 10,
                ..FlowRequest::default()
            })
            .await
        })
    }

    async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.driver.await.unwrap();
    }
}

/// Lets spawned tasks run without moving paused time much.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_pool_admits_at_once() {
    let f = Fixture::new(Some(idle()), FlowSettings::default());
    let permit = f.flow.admit(FlowRequest::default()).await.unwrap();
    drop(permit);
    let stats = f.flow.stats();
    assert_eq!(
        (stats.admitted_immediately, stats.counters.enqueued),
        (1, 0)
    );
    f.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_saturated_pool_holds_standard_requests_and_sheds_sheddable_ones() {
    let f = Fixture::new(Some(busy()), FlowSettings::default());
    let standard = f.spawn(0, "");
    let sheddable = f.spawn(-1, "");
    settle().await;
    assert_eq!(sheddable.await.unwrap().unwrap_err(), DropReason::Shed);
    assert!(!standard.is_finished());
    assert_eq!(f.flow.stats().queued, 1);

    // Capacity returns at the next scrape: the request leaves within one poll.
    tokio::time::sleep(Duration::from_millis(100)).await;
    f.scrape(idle());
    let released = Instant::now();
    let permit = standard.await.unwrap().unwrap();
    assert!(released.elapsed() <= DISPATCH_POLL);
    drop(permit);
    let stats = f.flow.stats();
    assert_eq!(stats.dropped(DropReason::Shed), 1);
    assert_eq!(stats.counters.dispatched, 1);
    f.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn stale_metrics_count_as_saturated() {
    let f = Fixture::new(Some(idle()), FlowSettings::default());
    // The utilization detector's staleness threshold is 200 ms.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let waiting = f.spawn(0, "");
    settle().await;
    assert!(!waiting.is_finished());
    f.scrape(idle());
    waiting.await.unwrap().unwrap();
    f.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_ttl_expires_exactly() {
    let settings = FlowSettings {
        ttl: Some(Duration::from_millis(1_234)),
        ..FlowSettings::default()
    };
    let f = Fixture::new(Some(busy()), settings);
    // Keep the pool saturated with fresh metrics the whole time.
    let pool = Arc::clone(&f.pool);
    let scraper = tokio::spawn(async move {
        loop {
            for e in pool.snapshot().endpoints() {
                e.set_metrics(busy());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let started = Instant::now();
    let outcome = f.flow.admit(FlowRequest::default()).await;
    assert_eq!(outcome.unwrap_err(), DropReason::TtlExpired);
    assert_eq!(started.elapsed(), Duration::from_millis(1_234));
    assert_eq!(f.flow.stats().dropped(DropReason::TtlExpired), 1);
    scraper.abort();
    f.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_full_band_refuses_with_queue_full() {
    let settings = FlowSettings {
        default_band: BandLimits {
            max_requests: 2,
            max_bytes: u64::MAX,
            ..BandLimits::default()
        },
        ttl: None,
        ..FlowSettings::default()
    };
    let f = Fixture::new(Some(busy()), settings);
    let a = f.spawn(0, "");
    let b = f.spawn(0, "");
    settle().await;
    let c = f.spawn(0, "");
    settle().await;
    assert_eq!(c.await.unwrap().unwrap_err(), DropReason::QueueFull);
    // Another band has its own room.
    let d = f.spawn(1, "");
    settle().await;
    assert!(!d.is_finished());
    assert_eq!(f.flow.stats().queued, 3);
    a.abort();
    b.abort();
    d.abort();
    f.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_client_that_leaves_is_dequeued_without_a_trace() {
    let f = Fixture::new(Some(busy()), FlowSettings::default());
    let waiting = f.spawn(0, "");
    settle().await;
    assert_eq!(f.flow.stats().queued, 1);
    waiting.abort();
    let _ = waiting.await;
    let stats = f.flow.stats();
    assert_eq!(stats.queued, 0);
    assert_eq!(stats.counters.cancelled, 1);
    assert!(DropReason::ALL.iter().all(|&r| stats.dropped(r) == 0));
    f.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn capacity_goes_to_the_highest_band_then_round_robin_across_flows() {
    // One endpoint, queue threshold 5: each admitted-but-unscheduled request counts as one
    // more waiting request, so an idle endpoint takes 5 before the detector says saturated.
    let f = Fixture::new(Some(busy()), FlowSettings::default());
    let mut order = Vec::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for (label, priority, flow_id) in [
        ("low-a1", -1, "a"),
        ("std-a1", 0, "a"),
        ("std-a2", 0, "a"),
        ("std-a3", 0, "a"),
        ("std-b1", 0, "b"),
        ("high-a1", 1, "a"),
    ] {
        let flow = f.flow.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let permit = flow
                .admit(FlowRequest {
                    priority,
                    flow_id,
                    ..FlowRequest::default()
                })
                .await;
            let _ = tx.send((label, permit));
        });
        settle().await;
    }
    // The sheddable one arrived while saturated: shed at once.
    let (label, outcome) = rx.recv().await.unwrap();
    assert_eq!((label, outcome.unwrap_err()), ("low-a1", DropReason::Shed));

    tokio::time::sleep(Duration::from_millis(20)).await;
    f.scrape(idle());
    let mut held = Vec::new();
    for _ in 0..5 {
        let (label, permit) = rx.recv().await.unwrap();
        order.push(label);
        held.push(permit.unwrap());
    }
    assert_eq!(order, ["high-a1", "std-a1", "std-b1", "std-a2", "std-a3"]);
    assert_eq!(f.flow.stats().queued, 0);
    drop(held);
    f.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn pending_permits_hold_back_the_next_dispatch() {
    let f = Fixture::new(Some(busy()), FlowSettings::default());
    let handles: Vec<_> = (0..7).map(|_| f.spawn(0, "")).collect();
    settle().await;
    f.scrape(idle());
    tokio::time::sleep(DISPATCH_POLL).await;
    settle().await;
    // 5 pending on one endpoint with threshold 5: saturated, two still wait.
    assert_eq!(f.flow.stats().queued, 2);
    let mut permits = Vec::new();
    for h in handles.into_iter().take(5) {
        permits.push(h.await.unwrap().unwrap());
    }
    // Scheduling them (dropping the permits) frees room; metrics still say idle.
    permits.clear();
    tokio::time::sleep(DISPATCH_POLL).await;
    settle().await;
    assert_eq!(f.flow.stats().queued, 0);
    assert_eq!(f.flow.stats().counters.dispatched, 7);
    f.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn requests_wait_through_a_scale_from_zero() {
    let f = Fixture::new(None, FlowSettings::default());
    let waiting = f.spawn(0, "");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!waiting.is_finished());
    // An endpoint appears and is scraped once.
    f.pool.add("127.0.0.1:8000").set_metrics(idle());
    let appeared = Instant::now();
    waiting.await.unwrap().unwrap();
    assert!(appeared.elapsed() <= DISPATCH_POLL);
    f.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_answers_every_queued_request() {
    let f = Fixture::new(Some(busy()), FlowSettings::default());
    let waiting: Vec<_> = (0..3).map(|i| f.spawn(i, "")).collect();
    settle().await;
    let flow = f.flow.clone();
    f.shutdown().await;
    for h in waiting {
        assert_eq!(h.await.unwrap().unwrap_err(), DropReason::ShuttingDown);
    }
    assert_eq!(flow.stats().dropped(DropReason::ShuttingDown), 3);
    // After the stop a request that would wait is refused at once.
    let late = flow.admit(FlowRequest::default()).await;
    assert_eq!(late.unwrap_err(), DropReason::ShuttingDown);
}

#[tokio::test(start_paused = true)]
async fn many_clients_none_lost_none_twice() {
    let settings = FlowSettings {
        ttl: Some(Duration::from_millis(400)),
        ..FlowSettings::default()
    };
    let f = Fixture::new(Some(busy()), settings);
    let pool = Arc::clone(&f.pool);
    // Capacity flaps every 30 ms.
    let scraper = tokio::spawn(async move {
        let mut on = false;
        loop {
            for e in pool.snapshot().endpoints() {
                e.set_metrics(if on { idle() } else { busy() });
            }
            on = !on;
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    });
    let mut handles = Vec::new();
    let mut aborted = 0u64;
    for i in 0..400u64 {
        let flows = ["a", "b", "c"];
        let h = f.spawn((i % 3) as i32 - 1, flows[(i % 7 % 3) as usize]);
        if i % 11 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
            if !h.is_finished() {
                h.abort();
                aborted += 1;
                continue;
            }
        }
        handles.push(h);
        tokio::time::sleep(Duration::from_millis((i * 7919) % 5)).await;
    }
    let mut ok = 0u64;
    let mut dropped = 0u64;
    for h in handles {
        match h.await.unwrap() {
            Ok(_permit) => ok += 1,
            Err(_) => dropped += 1,
        }
    }
    scraper.abort();
    let stats = f.flow.stats();
    let c = stats.counters;
    let all_dropped: u64 = DropReason::ALL.iter().map(|&r| stats.dropped(r)).sum();
    assert_eq!(stats.queued, 0);
    // Every admitted request left the queue exactly once.
    assert_eq!(
        c.enqueued,
        c.dispatched + c.cancelled + stats.dropped(DropReason::TtlExpired)
    );
    assert!(c.cancelled <= aborted);
    // What the clients saw matches what the controller counted.
    assert_eq!(ok + dropped + aborted, 400);
    assert_eq!(all_dropped, dropped);
    assert!(ok + c.cancelled <= stats.admitted_immediately + c.dispatched + aborted);
    f.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_cold_start_waits_under_the_no_endpoint_budget() {
    let settings = FlowSettings {
        ttl: Some(Duration::from_millis(200)),
        no_endpoint_ttl: Some(Some(Duration::from_secs(30))),
        ..FlowSettings::default()
    };
    let f = Fixture::new(None, settings);
    let waiting = f.spawn(0, "");
    // Far past the 200 ms default budget: still waiting for an endpoint.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(!waiting.is_finished());
    f.pool.add("127.0.0.1:8000").set_metrics(idle());
    waiting.await.unwrap().unwrap();

    // Without an endpoint for the whole budget: 503 after exactly 30 s.
    let f = Fixture::new(None, f.flow.settings());
    let started = Instant::now();
    let outcome = f.flow.admit(FlowRequest::default()).await;
    assert_eq!(outcome.unwrap_err(), DropReason::TtlExpired);
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    f.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_priority_holdback_policy_keeps_room_for_the_higher_band() {
    use shepherd_scheduler_core::flow::UsageLimitPolicy;
    let settings = FlowSettings {
        usage_limit: UsageLimitPolicy::from_plugin(
            "priority-holdback-policy",
            &serde_json::json!({"minCeiling": 0.5}),
        )
        .unwrap(),
        bands: vec![(0, BandLimits::default()), (-1, BandLimits::default())],
        ..FlowSettings::default()
    };
    // 3 waiting against a threshold of 5: saturation 0.6, above the batch ceiling (0.5).
    let f = Fixture::new(
        Some(EndpointMetrics {
            waiting: 3,
            ..Default::default()
        }),
        settings,
    );
    let batch = f.spawn(-1, "");
    settle().await;
    assert!(!batch.is_finished(), "held back, not shed");
    // A standard request goes through at once, past the held-back batch one.
    let arrived = Instant::now();
    let standard = f.flow.admit(FlowRequest::default()).await.unwrap();
    assert_eq!(arrived.elapsed(), Duration::ZERO);
    drop(standard);
    assert_eq!(f.flow.stats().counters.dispatched, 1);
    assert!(!batch.is_finished());
    // Load drops below the batch ceiling: it goes.
    f.scrape(EndpointMetrics {
        waiting: 1,
        ..Default::default()
    });
    batch.await.unwrap().unwrap();
    assert_eq!(f.flow.stats().dropped(DropReason::Shed), 0);
    f.shutdown().await;
}
