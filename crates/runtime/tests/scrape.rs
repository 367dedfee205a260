//! The scraper against real loopback HTTP: simulated vLLM servers (`shepherd-sim serve`), a
//! server that dies, and servers that answer garbage. Real time, so the figures are modest.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{request, wait_until};
use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::{Runtime, RuntimeHandle, RuntimeOptions};
use shepherd_scheduler_core::prelude::*;
use shepherd_sim::serve::{self, ServeConfig};

const LIMIT: Duration = Duration::from_secs(5);

async fn start(addrs: &[SocketAddr], extra: &str) -> RuntimeHandle {
    let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    let yaml = format!(
        "endpoints: [{}]\nserver: {{metricsPort: 0}}\n{extra}",
        list.join(", ")
    );
    let config = RuntimeConfig::from_yaml(&yaml).unwrap();
    Runtime::start(config, RuntimeOptions::default())
        .await
        .unwrap()
}

fn endpoint(handle: &RuntimeHandle, addr: SocketAddr) -> std::sync::Arc<Endpoint> {
    handle
        .pool()
        .snapshot()
        .get_by_address(&addr.to_string())
        .unwrap()
        .clone()
}

fn fresh(handle: &RuntimeHandle, addr: SocketAddr) -> bool {
    let scheduler = handle.scheduler().load();
    let now = scheduler.clock().now();
    !endpoint(handle, addr)
        .load_metrics()
        .is_stale(now, scheduler.staleness_bound())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scraped_metrics_flow_in_and_a_dead_server_goes_stale_and_is_not_picked() {
    let mut servers = serve::spawn(ServeConfig::ephemeral(2)).await.unwrap();
    let (alive, dead) = (servers.addrs()[0], servers.addrs()[1]);
    let handle = start(servers.addrs(), "").await;
    let admin = handle.admin_addr().unwrap();
    let client = reqwest::Client::new();

    assert!(wait_until(LIMIT, || fresh(&handle, alive) && fresh(&handle, dead)).await);
    assert!(handle.is_ready());
    let ready = client
        .get(format!("http://{admin}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    // Cache geometry came through the mapping (vllm:cache_config_info).
    let metrics = endpoint(&handle, alive).metrics();
    assert_eq!(metrics.block_size, Some(16));
    assert!(metrics.num_gpu_blocks.is_some_and(|n| n > 0), "{metrics:?}");

    handle
        .scheduler()
        .schedule(&request("first"))
        .unwrap()
        .finish(Completion::success(None));
    let text = client
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for family in [
        "shepherd_picks_total{profile=\"default\"} 1",
        "shepherd_schedule_duration_seconds_bucket",
        "shepherd_endpoint_metrics_age_seconds",
        "# TYPE shepherd_scrapes_total counter",
        &format!("shepherd_scrape_errors_total{{endpoint=\"{alive}\",reason=\"connect\"}} 0"),
        "shepherd_scrape_duration_seconds_bucket",
        "shepherd_adaptive_ticks_total{profile=\"default\"}",
        "shepherd_adaptive_weight{profile=\"default\",scorer=\"prefix-cache-scorer\"}",
        "shepherd_config_reloads_total{result=\"applied\"} 0",
    ] {
        assert!(text.contains(family), "/metrics lacks {family}:\n{text}");
    }

    // One server dies: its scrapes fail, its metrics go stale, nothing is sent there.
    servers.stop(1).await;
    assert!(wait_until(LIMIT, || !fresh(&handle, dead)).await);
    assert!(fresh(&handle, alive));
    let stats = handle.scrape_stats().get(&dead.to_string()).unwrap();
    assert!(stats.errors("connect") >= 1, "{:?}", stats.last_error());
    assert!(
        wait_until(LIMIT, || endpoint(&handle, dead).scraped_at().is_none()).await,
        "metrics are forgotten after three failures"
    );
    for i in 0..20 {
        let decision = handle
            .scheduler()
            .schedule(&request(&format!("r{i}")))
            .unwrap();
        assert_eq!(decision.primary().address(), alive.to_string());
        decision.finish(Completion::success(None));
    }
    assert!(handle.is_ready(), "one fresh endpoint is enough");
    assert_eq!(
        handle
            .scrape_stats()
            .get(&alive.to_string())
            .unwrap()
            .total_errors(),
        0
    );

    let report = handle.shutdown(Duration::from_secs(2)).await;
    assert!(report.drained);
    assert!(
        client
            .get(format!("http://{admin}/healthz"))
            .send()
            .await
            .is_err(),
        "the admin port closed"
    );
}

/// A server answering `body` on `/metrics`.
async fn page_server(body: &'static str) -> SocketAddr {
    let app =
        axum::Router::new().route("/metrics", axum::routing::get(move || async move { body }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_pages_are_counted_not_fatal() {
    let servers = serve::spawn(ServeConfig::ephemeral(1)).await.unwrap();
    let good = servers.addrs()[0];
    let garbage = page_server("<html><body>404 page not found</body></html>\n").await;
    let noisy = page_server(
        "vllm:num_requests_waiting{model_name=\"m\"} 3\n\
         this is not a sample\n\
         vllm:num_requests_running{model_name=\"m\"} 5\n\
         vllm:kv_cache_usage_perc{model_name=\"m\"} NaN NaN\n",
    )
    .await;
    let handle = start(&[good, garbage, noisy], "scraping: {intervalMs: 20}\n").await;

    let stats = |addr: SocketAddr| handle.scrape_stats().endpoint(&addr.to_string());
    assert!(wait_until(LIMIT, || stats(garbage).errors("no_signals") >= 3).await);
    assert!(!fresh(&handle, garbage));
    assert!(stats(garbage).bad_lines() >= 3);
    assert!(
        stats(garbage)
            .last_error()
            .unwrap()
            .contains("no usable metrics")
    );

    // The noisy page's good lines are used; its bad ones are counted.
    assert!(wait_until(LIMIT, || fresh(&handle, noisy)).await);
    assert_eq!(endpoint(&handle, noisy).load_metrics().waiting, 3);
    assert_eq!(endpoint(&handle, noisy).load_metrics().running, 5);
    assert!(stats(noisy).bad_lines() >= 2);
    assert_eq!(stats(noisy).total_errors(), 0);

    // The good server is scraped all along.
    let before = stats(good).successes();
    assert!(wait_until(LIMIT, || stats(good).successes() >= before + 3).await);
    assert!(fresh(&handle, good));
    let text = handle.render_metrics();
    assert!(
        text.contains(&format!(
            "shepherd_scrape_errors_total{{endpoint=\"{garbage}\",reason=\"no_signals\"}}"
        )),
        "{text}"
    );
    handle.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_times_out_without_delaying_the_others() {
    let servers = serve::spawn(ServeConfig::ephemeral(1)).await.unwrap();
    let good = servers.addrs()[0];
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(|| async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            "vllm:num_requests_waiting 1\n"
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let slow = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let handle = start(&[good, slow], "scraping: {timeoutMs: 150}\n").await;
    let stats = |addr: SocketAddr| handle.scrape_stats().endpoint(&addr.to_string());
    assert!(wait_until(LIMIT, || stats(slow).errors("timeout") >= 2).await);
    // Meanwhile the good server is scraped every 50 ms, not every 150: about three times as
    // often as the slow one is tried.
    assert!(
        wait_until(LIMIT, || stats(good).successes()
            >= 4.max(2 * stats(slow).scrapes()))
        .await,
        "good {} / slow {}",
        stats(good).successes(),
        stats(slow).scrapes()
    );
    assert!(fresh(&handle, good));
    handle.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_label_picks_its_engine_mapping() {
    let sglang = page_server(
        "sglang:num_queue_reqs{model_name=\"q\"} 4\n\
         sglang:num_running_reqs{model_name=\"q\"} 7\n\
         sglang:token_usage{model_name=\"q\"} 0.25\n\
         sglang:cache_config_info{num_pages=\"9000\",page_size=\"1\"} 1\n",
    )
    .await;
    let yaml = format!(
        "endpoints:\n- address: {sglang}\n  labels: {{llm-d.ai/engine-type: sglang}}\nserver: {{metricsPort: 0}}\n"
    );
    let config = RuntimeConfig::from_yaml(&yaml).unwrap();
    let handle = Runtime::start(config, RuntimeOptions::default())
        .await
        .unwrap();
    assert!(wait_until(LIMIT, || fresh(&handle, sglang)).await);
    let metrics = endpoint(&handle, sglang).metrics();
    assert_eq!((metrics.waiting, metrics.running), (4, 7));
    assert_eq!(metrics.kv_utilization, 0.25);
    assert_eq!(
        (metrics.block_size, metrics.num_gpu_blocks),
        (Some(1), Some(9000))
    );
    handle.shutdown(Duration::from_secs(1)).await;
}
