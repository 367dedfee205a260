//! The runtime's KV-event subscriptions against `shepherd-sim serve` publishing vLLM's events
//! over ZeroMQ: reported blocks attract requests, evicted ones stop, and lost batches, a
//! publisher restart and a cleared cache drop the endpoint's entries (counted), while a lost
//! batch the replay still holds is filled in.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::wait_until;
use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::{Runtime, RuntimeHandle, RuntimeOptions};
use shepherd_scheduler_core::kv_events::{ResetReason, precise_seed};
use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::producers::PreciseKvEvents;
use shepherd_scorers::producers::precise_prefix::feed_name;
use shepherd_sim::serve::ServeHandle;

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
const WAIT: Duration = Duration::from_secs(10);

fn runtime_config(servers: &ServeHandle) -> RuntimeConfig {
    let endpoints = common::kv_event_endpoints(servers);
    let yaml = format!(
        "endpoints:\n{endpoints}scraping: {{intervalMs: 20}}\nplugins:
- type: precise-prefix-cache-producer
- type: prefix-cache-scorer
  parameters: {{prefixMatchInfoProducerName: precise-prefix-cache-producer}}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
  - pluginRef: max-score-picker
"
    );
    RuntimeConfig::from_yaml(&yaml).unwrap()
}

async fn start(servers: &ServeHandle) -> RuntimeHandle {
    let options = RuntimeOptions {
        serve_admin: false,
        watch_config: false,
        adaptive: false,
        ..RuntimeOptions::default()
    };
    let handle = Runtime::start(runtime_config(servers), options)
        .await
        .unwrap();
    let connected = format!("shepherd_kv_events_connected_publishers {}", servers.len());
    assert!(
        wait_until(WAIT, || metric(&handle, &connected)).await,
        "publishers never connected: {}",
        handle.render_metrics()
    );
    handle
}

fn feed(handle: &RuntimeHandle) -> Arc<PreciseKvEvents> {
    handle
        .shared()
        .resources
        .get::<PreciseKvEvents>(&feed_name("precise-prefix-cache-producer"))
        .unwrap()
}

/// Sends `prompt` straight to server `i` (bypassing Shepherd) and waits for the answer.
async fn complete(servers: &ServeHandle, i: usize, prompt: &str) {
    let body = serde_json::json!({"model": MODEL, "prompt": prompt, "max_tokens": 2});
    let response = reqwest::Client::new()
        .post(format!(
            "http://{}/v1/completions",
            servers.addr(i).unwrap()
        ))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.bytes().await.unwrap();
}

/// Leading blocks of `prompt` the precise index holds for server `i`.
fn matched(handle: &RuntimeHandle, servers: &ServeHandle, i: usize, prompt: &str) -> usize {
    let feed = feed(handle);
    let address = servers.addr(i).unwrap().to_string();
    let Some(endpoint) = handle.pool().snapshot().get_by_address(&address).cloned() else {
        return 0;
    };
    let prompt = Prompt::Text(prompt.to_string());
    let index = feed.index.index();
    let mut chain = index.chain(precise_seed(None), &prompt);
    index
        .match_prefix(&mut chain, &prompt)
        .matched_blocks(endpoint.id())
}

fn pick(handle: &RuntimeHandle, prompt: &str) -> String {
    let request = InferenceRequest::new("r", MODEL, Prompt::Text(prompt.to_string()));
    let decision = handle.scheduler().schedule(&request).unwrap();
    decision.primary().address().to_string()
}

fn metric(handle: &RuntimeHandle, line: &str) -> bool {
    handle.render_metrics().lines().any(|l| l == line)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reported_blocks_attract_requests_and_evicted_ones_stop() {
    let servers = common::kv_event_servers().await;
    let handle = start(&servers).await;
    let shared = common::block_prompt("shared system prompt", 24);
    let server1 = servers.addr(1).unwrap().to_string();

    // The server computes the prompt: its BlockStored events reach the index.
    complete(&servers, 1, &shared).await;
    assert!(
        wait_until(WAIT, || matched(&handle, &servers, 1, &shared) == 24).await,
        "stored blocks never arrived: {}",
        handle.render_metrics()
    );
    assert_eq!(matched(&handle, &servers, 0, &shared), 0);
    // Requests sharing it go to server 1, whatever their own tail.
    for i in 0..10 {
        assert_eq!(pick(&handle, &format!("{shared}question {i}")), server1);
    }

    // Server 1 needs its whole cache for other prompts: it evicts the shared one, says so,
    // and the prefix stops attracting requests there.
    for i in 0..4 {
        complete(
            &servers,
            1,
            &common::block_prompt(&format!("other {i}"), 40),
        )
        .await;
    }
    assert!(
        wait_until(WAIT, || matched(&handle, &servers, 1, &shared) < 24).await,
        "evictions never arrived"
    );
    let stats = feed(&handle).index.stats();
    assert!(stats.removed_blocks > 0, "{stats:?}");
    // The index holds what the engine holds, never more than its 96 blocks.
    assert!(
        feed(&handle).index.blocks_of(
            handle
                .pool()
                .snapshot()
                .get_by_address(&server1)
                .unwrap()
                .id()
        ) <= 96
    );
    handle.shutdown(Duration::from_secs(2)).await;
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_batches_are_replayed_or_reset_the_endpoint() {
    let servers = common::kv_event_servers().await;
    let handle = start(&servers).await;
    let a = common::block_prompt("a", 8);
    complete(&servers, 0, &a).await;
    assert!(wait_until(WAIT, || matched(&handle, &servers, 0, &a) == 8).await);

    // One batch is not sent, but the replay buffer has it: the next batch shows the gap and
    // the replay fills it.
    assert!(servers.drop_kv_batches(0, 1, true));
    let b = common::block_prompt("b", 8);
    complete(&servers, 0, &b).await;
    let c = common::block_prompt("c", 8);
    complete(&servers, 0, &c).await;
    assert!(
        wait_until(WAIT, || matched(&handle, &servers, 0, &c) == 8).await,
        "{}",
        handle.render_metrics()
    );
    assert!(
        wait_until(WAIT, || matched(&handle, &servers, 0, &b) == 8).await,
        "the replayed batch is missing"
    );
    assert!(metric(
        &handle,
        "shepherd_kv_events_gaps_total{outcome=\"replayed\"} 1"
    ));
    assert_eq!(matched(&handle, &servers, 0, &a), 8);

    // A batch lost for good: the endpoint's entries are dropped, counted, then rebuilt from
    // new events only.
    assert!(servers.drop_kv_batches(0, 1, false));
    complete(&servers, 0, &common::block_prompt("d", 8)).await;
    let e = common::block_prompt("e", 8);
    complete(&servers, 0, &e).await;
    assert!(
        wait_until(WAIT, || feed(&handle)
            .index
            .stats()
            .resets_for(ResetReason::Gap)
            == 1)
        .await,
        "{}",
        handle.render_metrics()
    );
    assert!(wait_until(WAIT, || matched(&handle, &servers, 0, &e) == 8).await);
    assert_eq!(
        matched(&handle, &servers, 0, &a),
        0,
        "entries from before the loss remain"
    );
    assert!(metric(
        &handle,
        "shepherd_kv_events_gaps_total{outcome=\"lost\"} 1"
    ));
    assert!(metric(
        &handle,
        "shepherd_kv_events_endpoint_resets_total{plugin=\"precise-prefix-cache-producer\",reason=\"gap\"} 1"
    ));
    handle.shutdown(Duration::from_secs(2)).await;
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_or_cleared_server_starts_from_nothing() {
    let mut servers = common::kv_event_servers().await;
    let handle = start(&servers).await;
    let a = common::block_prompt("before the restart", 8);
    complete(&servers, 1, &a).await;
    assert!(wait_until(WAIT, || matched(&handle, &servers, 1, &a) == 8).await);

    // A restarted engine has an empty cache and a sequence starting at 0 again.
    servers.restart(1).await.unwrap();
    let b = common::block_prompt("after the restart", 8);
    complete(&servers, 1, &b).await;
    assert!(
        wait_until(WAIT, || matched(&handle, &servers, 1, &b) == 8).await,
        "{}",
        handle.render_metrics()
    );
    assert_eq!(
        matched(&handle, &servers, 1, &a),
        0,
        "the dead engine's blocks remain"
    );
    let stats = feed(&handle).index.stats();
    assert!(
        stats.resets_for(ResetReason::Disconnected) + stats.resets_for(ResetReason::Restarted) >= 1,
        "{stats:?}"
    );

    // vLLM's /reset_prefix_cache: AllBlocksCleared drops everything of that endpoint.
    let response = reqwest::Client::new()
        .post(format!(
            "http://{}/reset_prefix_cache",
            servers.addr(1).unwrap()
        ))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    assert!(wait_until(WAIT, || matched(&handle, &servers, 1, &b) == 0).await);
    assert_eq!(
        feed(&handle).index.stats().resets_for(ResetReason::Cleared),
        1
    );
    handle.shutdown(Duration::from_secs(2)).await;
    servers.shutdown().await;
}
