//! Graceful shutdown: wait for in-flight requests up to a deadline. Paused tokio time.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::time::Duration;

use common::request;
use shepherd_scheduler_core::prelude::*;

const TWO: &str = "endpoints: [127.0.0.1:8000, 127.0.0.1:8001]\n";

#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_an_in_flight_request_then_returns() {
    let handle = common::start(TWO, common::quiet_options()).await;
    let pool = handle.pool().clone();
    let signal = handle.shutdown_signal();
    let mut response = handle
        .scheduler()
        .schedule(&request("streaming"))
        .unwrap()
        .into_handle();
    assert_eq!(handle.in_flight(), 1);

    let shutdown = tokio::spawn(handle.shutdown(Duration::from_secs(30)));
    signal.wait().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!shutdown.is_finished(), "a request is still streaming");

    response.first_token();
    response.finish(Completion::success(None));
    let report = shutdown.await.unwrap();
    assert!(report.drained);
    assert_eq!(report.in_flight, 0);
    assert!(report.waited >= Duration::from_secs(2) && report.waited < Duration::from_secs(3));
    assert_eq!(pool.snapshot().endpoints()[0].in_flight_requests(), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_gives_up_at_the_deadline() {
    let handle = common::start(TWO, common::quiet_options()).await;
    let stuck = handle.scheduler().schedule(&request("stuck")).unwrap();
    let report = handle.shutdown(Duration::from_millis(500)).await;
    assert!(!report.drained);
    assert_eq!(report.in_flight, 1);
    assert!(
        report.waited >= Duration::from_millis(500) && report.waited < Duration::from_millis(600)
    );
    drop(stuck);
}

#[tokio::test(start_paused = true)]
async fn an_idle_runtime_stops_at_once() {
    let handle = common::start(TWO, common::quiet_options()).await;
    let report = handle.shutdown(Duration::from_secs(10)).await;
    assert!(report.drained);
    assert!(
        report.waited < Duration::from_millis(50),
        "{:?}",
        report.waited
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_also_waits_for_requests_on_an_endpoint_that_left_the_pool() {
    let handle = common::start(TWO, common::quiet_options()).await;
    let response = handle
        .scheduler()
        .schedule(&request("long"))
        .unwrap()
        .into_handle();
    let busy = response.endpoint().address().to_owned();

    // The endpoint leaves the config while its request streams.
    let mut next = (*handle.config()).clone();
    next.endpoints.retain(|e| e.address() != busy);
    assert!(handle.reload(next).unwrap().endpoints_changed);
    assert!(
        common::wait_until(Duration::from_secs(1), || common::members(&handle).len()
            == 1)
        .await
    );
    assert_eq!(handle.in_flight(), 1);

    let shutdown = tokio::spawn(handle.shutdown(Duration::from_secs(30)));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!shutdown.is_finished());
    drop(response);
    let report = shutdown.await.unwrap();
    assert!(report.drained);
    assert!(report.waited < Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn with_flow_control_an_empty_pool_is_ready_and_shutdown_answers_queued_requests() {
    use shepherd_runtime::flow::FlowRequest;
    use shepherd_scheduler_core::flow::DropReason;

    // Without flow control an empty pool is not ready: nothing could serve a request.
    let plain = common::start("endpoints: []\n", common::quiet_options()).await;
    assert!(!plain.is_ready());
    assert!(plain.flow().is_none());
    plain.shutdown(Duration::from_secs(1)).await;

    // With it, requests are held until an endpoint appears: ready.
    let handle = common::start("endpoints: []\nflowControl: {}\n", common::quiet_options()).await;
    assert!(handle.is_ready());
    let (status, _) = common::get(handle.admin_router(), "/readyz").await;
    assert_eq!(status, 200);
    let flow = handle.flow().expect("flow control on").clone();
    let waiting = tokio::spawn({
        let flow = flow.clone();
        async move { flow.admit(FlowRequest::default()).await.map(drop) }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiting.is_finished());
    let metrics = handle.render_metrics();
    assert!(
        metrics.contains("shepherd_flow_queued_requests 1"),
        "{metrics}"
    );
    handle.shutdown(Duration::from_secs(1)).await;
    assert_eq!(waiting.await.unwrap(), Err(DropReason::ShuttingDown));
}
