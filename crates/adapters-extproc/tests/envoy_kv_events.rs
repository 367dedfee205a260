//! Precise prefix-cache routing through a real Envoy: `shepherd-epp` with a
//! `precise-prefix-cache-producer`, subscribed to the KV-cache events `shepherd-sim serve`
//! publishes over ZeroMQ as vLLM does. A prompt a server reports cached attracts its requests;
//! once that server reports it evicted, the requests go to the server that still holds it; a
//! lost batch is replayed; a restarted server starts from nothing (counted, logged). Skipped
//! without `SHEPHERD_ENVOY` (see `e2e/mod.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e;

use std::time::Duration;

use e2e::{MODEL, Options, Stack, sample, unique_prompt};

const MAIN: &str = "inference";
const PLUGIN: &str = "plugin=\"precise-prefix-cache-producer\"";

const POLICY: &str = "plugins:
- type: precise-prefix-cache-producer
- type: prefix-cache-scorer
  parameters: {prefixMatchInfoProducerName: precise-prefix-cache-producer}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
  - pluginRef: max-score-picker
";

/// Sends `prompt` straight to server `i`, bypassing Envoy and the picker.
async fn direct(stack: &Stack, i: usize, prompt: &str) {
    let response = stack
        .http
        .post(format!("http://{}/v1/completions", stack.server(i)))
        .json(&serde_json::json!({"model": MODEL, "prompt": prompt, "max_tokens": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap();
}

/// Waits until the picker's metric `series` reaches `at_least`; returns the metrics page.
async fn wait_metric(stack: &Stack, series: &str, at_least: f64) -> String {
    for _ in 0..400 {
        let metrics = stack.metrics().await;
        if sample(&metrics, series) >= at_least {
            return metrics;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "{series} never reached {at_least}:\n{}\nepp log:\n{}",
        stack.metrics().await,
        stack.epp.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reported_blocks_route_evictions_reroute_and_losses_are_recovered() {
    let Some(mut stack) = Stack::start(Options {
        servers: 3,
        kv_events: true,
        // 192 blocks of 16 tokens: a few long prompts fill a server.
        num_gpu_blocks: Some(192),
        extra_config: POLICY.into(),
        ..Options::default()
    })
    .await
    else {
        return;
    };
    wait_metric(&stack, "shepherd_kv_events_connected_publishers", 3.0).await;
    let stored = format!("shepherd_kv_events_stored_blocks_total{{{PLUGIN}}}");
    let removed = format!("shepherd_kv_events_removed_blocks_total{{{PLUGIN}}}");

    // Server 0 computes a 2.5 KB system prompt (40 blocks): its events reach the picker and
    // every request sharing the prompt goes there.
    let system = unique_prompt("system prompt", 2560);
    direct(&stack, 0, &system).await;
    wait_metric(&stack, &stored, 40.0).await;
    for i in 0..8 {
        let served = stack.routed(MAIN, &format!("{system} question {i}")).await;
        assert_eq!(served, stack.server(0), "request {i}");
    }

    // Server 1 computes it too; then server 0 needs its whole cache for other prompts and
    // evicts it. Its BlockRemoved events take it off server 0: the requests go to server 1.
    direct(&stack, 1, &system).await;
    let before = sample(&stack.metrics().await, &removed);
    for i in 0..4 {
        direct(&stack, 0, &unique_prompt(&format!("filler {i}"), 4000)).await;
    }
    wait_metric(&stack, &removed, before + 40.0).await;
    for i in 0..8 {
        let served = stack
            .routed(MAIN, &format!("{system} later question {i}"))
            .await;
        assert_eq!(served, stack.server(1), "after the eviction, request {i}");
    }

    // A batch server 2 publishes is lost on the way, but its replay buffer has it: the next
    // batch shows the gap, the picker asks for it, and nothing is dropped.
    assert!(stack.sims.drop_kv_batches(2, 1, true));
    let lost = unique_prompt("lost then replayed", 1024);
    direct(&stack, 2, &lost).await;
    direct(&stack, 2, &unique_prompt("after the loss", 1024)).await;
    wait_metric(
        &stack,
        "shepherd_kv_events_gaps_total{outcome=\"replayed\"}",
        1.0,
    )
    .await;
    let served = stack.routed(MAIN, &format!("{lost} and a question")).await;
    assert_eq!(
        served,
        stack.server(2),
        "the replayed blocks attract their requests"
    );

    // Server 1 restarts with an empty cache: its entries are dropped (counted and logged).
    let entries = format!("shepherd_prefix_index_entries{{{PLUGIN}}}");
    let held_before = sample(&stack.metrics().await, &entries);
    stack.sims.restart(1).await.unwrap();
    let reset = |metrics: &str| {
        let series = |reason: &str| {
            format!("shepherd_kv_events_endpoint_resets_total{{{PLUGIN},reason=\"{reason}\"}}")
        };
        sample(metrics, &series("disconnected")) + sample(metrics, &series("restarted"))
    };
    let mut metrics = stack.metrics().await;
    for _ in 0..400 {
        if reset(&metrics) >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        metrics = stack.metrics().await;
    }
    assert!(
        reset(&metrics) >= 1.0,
        "{metrics}\nepp log:\n{}",
        stack.epp.log()
    );
    // Server 1 held the system prompt (40 blocks) and more: all of it is gone.
    let held_after = sample(&metrics, &entries);
    assert!(
        held_after <= held_before - 40.0,
        "{held_before} -> {held_after}"
    );
    assert!(
        stack
            .epp
            .log()
            .contains("precise prefix-cache entries of the endpoint dropped"),
        "{}",
        stack.epp.log()
    );
}
