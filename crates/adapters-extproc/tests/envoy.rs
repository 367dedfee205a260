//! End-to-end: a real Envoy (from `SHEPHERD_ENVOY`) running the deployment example, in front
//! of `shepherd-epp` and simulated vLLM servers, all on loopback. Each test builds its own
//! stack (Envoy starts in well under a second) so tests that stop parts of it stay apart.
//! Without `SHEPHERD_ENVOY` every test says it is skipped and passes (`SHEPHERD_REQUIRE_E2E=1`
//! turns that into a failure). See `e2e/mod.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use e2e::{
    DESTINATION, Envoy, MODEL, Options, Stack, envoy_binary, envoy_config, sample, tally,
    unique_prompt, workspace,
};
use shepherd_adapters_extproc::{ExtProcOptions, ExtProcService, serve};
use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::{Runtime, RuntimeOptions};
use shepherd_scheduler_core::completion::{
    CompletedRequest, Completion, CompletionHook, Outcome, Usage,
};
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_sim::serve::ServeConfig;
use tokio::time::{Instant, sleep};

const MAIN: &str = "inference";
const SUBSET: &str = "inference-subset";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_land_on_the_endpoint_shepherd_picked() {
    let Some(stack) = Stack::start(Options::default()).await else {
        return;
    };
    let before = stack.metrics().await;
    let mut served = Vec::new();
    for i in 0..24 {
        served.push(
            stack
                .routed(MAIN, &unique_prompt(&format!("land {i}"), 200))
                .await,
        );
    }
    // Every answer came from the server named in the picker's metadata (checked in `routed`),
    // and the picker's own per-endpoint pick counters agree with where requests landed.
    let after = stack.metrics().await;
    for (server, count) in tally(served.iter().map(String::as_str)) {
        let series = format!("shepherd_endpoint_picks_total{{endpoint=\"{server}\"}}");
        let picked = sample(&after, &series) - sample(&before, &series);
        assert_eq!(picked as usize, count, "{server}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_sharing_a_long_prefix_stick_while_unrelated_ones_spread() {
    let Some(stack) = Stack::start(Options::default()).await else {
        return;
    };
    e2e::assert_prefix_sticks_and_unrelated_spread(&stack, MAIN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subset_hint_restricts_the_choice() {
    let Some(stack) = Stack::start(Options::default()).await else {
        return;
    };
    // The `inference-subset` listener's set_metadata filter names server 1 only.
    for i in 0..12 {
        let served = stack
            .routed(SUBSET, &unique_prompt(&format!("subset {i}"), 300))
            .await;
        assert_eq!(served, stack.server(1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_supplied_destination_is_ignored() {
    let Some(stack) = Stack::start(Options::default()).await else {
        return;
    };
    let server0 = stack.server(0);
    for (i, destination) in [server0.as_str(), "127.0.0.1:1", "10.0.0.1:80", "garbage"]
        .into_iter()
        .cycle()
        .take(12)
        .enumerate()
    {
        // Through the subset listener only server 1 may be picked: a request that reached
        // server 0 (or anywhere else) would have followed the client's header.
        let reply = stack
            .post_with(
                SUBSET,
                Stack::completion(&unique_prompt(&format!("spoof {i}"), 100), 2),
                &[(DESTINATION, destination)],
            )
            .await;
        stack.assert_routed(&reply);
        assert_eq!(
            reply.served.unwrap(),
            stack.server(1),
            "header {destination}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_body_gets_400_through_envoy() {
    let Some(stack) = Stack::start(Options::default()).await else {
        return;
    };
    let cases = [
        ("{\"model\":", "invalid_json"),
        ("[1, 2]", "not_an_object"),
        ("{\"model\": \"m\"}", "missing_field"),
    ];
    for (body, reason) in cases {
        let reply = stack.post(MAIN, body).await;
        assert_eq!(reply.status, 400, "{body}: {reply:?}");
        assert_eq!(reply.reason.as_deref(), Some(reason), "{body}");
        assert_eq!(reply.served, None, "no server saw {body}");
        let error: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(error["error"]["code"], 400);
    }
    // The picker still routes after rejections.
    stack.routed(MAIN, "after the bad ones").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_6_mb_body_is_routed() {
    let Some(stack) = Stack::start(Options::default()).await else {
        return;
    };
    let prompt = unique_prompt("big", 6 * 1024 * 1024);
    let body = Stack::completion(&prompt, 2);
    assert!(body.len() > 6_000_000);
    let reply = stack.post(MAIN, body).await;
    // The prompt (about 1.6 million pseudo tokens) is longer than the simulated server's
    // context: it answers 400 itself. Its header proves the 6 MB body went through the picker,
    // Envoy and on to the server the picker named.
    assert_eq!(reply.status, 400, "{reply:?}");
    assert!(reply.reason.is_none(), "not a rejection by the picker");
    assert!(reply.served.is_some(), "a simulated server answered");
    assert_eq!(reply.picked, reply.served);
    assert!(
        reply.body.contains("maximum context length"),
        "{}",
        reply.body
    );
    // And a normal request still goes through.
    stack.routed(MAIN, "small after big").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_streams_through_intact_and_its_usage_is_counted() {
    let Some(stack) = Stack::start(Options {
        speed: 10.0,
        ..Options::default()
    })
    .await
    else {
        return;
    };
    let before = stack.metrics().await;
    let max_tokens = 40;
    let body = serde_json::json!({
        "model": MODEL,
        "prompt": unique_prompt("stream", 500),
        "max_tokens": max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let response = stack
        .http
        .post(format!("{}/v1/completions", stack.url(MAIN)))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let served = response.headers()[e2e::SERVED]
        .to_str()
        .unwrap()
        .to_string();
    // Read the stream as it arrives: at speed 10 the 40 tokens take a while, so several reads
    // are needed (the response is not buffered whole by Envoy or the picker).
    let mut stream = response;
    let mut text = String::new();
    let mut reads = 0;
    while let Some(chunk) = stream.chunk().await.unwrap() {
        reads += 1;
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(reads > 1, "the events arrived in {reads} read(s)");
    let events: Vec<&str> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").expect("an SSE data line"))
        .collect();
    assert_eq!(events.last(), Some(&"[DONE]"));
    let chunks: Vec<serde_json::Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let tokens: usize = chunks
        .iter()
        .filter_map(|c| c["choices"].as_array())
        .flatten()
        .filter(|c| c["text"] == " tok")
        .count();
    assert_eq!(tokens, max_tokens);
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens"], max_tokens);

    // The picker saw the response end: a success (not a cancellation when Envoy reset the
    // stream), its prompt tokens were counted, and the in-flight count went back to zero.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let after = stack.metrics().await;
        let success = sample(&after, "shepherd_completions_total{outcome=\"success\"}")
            - sample(&before, "shepherd_completions_total{outcome=\"success\"}");
        let in_flight = sample(
            &after,
            &format!("shepherd_endpoint_in_flight_requests{{endpoint=\"{served}\"}}"),
        );
        if success >= 1.0 && in_flight == 0.0 {
            let prompt = sample(
                &after,
                "shepherd_picked_prompt_tokens_total{profile=\"default\"}",
            );
            assert!(
                prompt >= usage["prompt_tokens"].as_f64().unwrap(),
                "picked prompt tokens {prompt}"
            );
            assert_eq!(
                sample(&after, "shepherd_completions_total{outcome=\"cancelled\"}"),
                0.0
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "completion not recorded:\n{after}"
        );
        sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_loses_its_traffic_once_its_metrics_go_stale() {
    let Some(mut stack) = Stack::start(Options {
        servers: 2,
        ..Options::default()
    })
    .await
    else {
        return;
    };
    let victim = stack.server(0);
    // Both servers take traffic first.
    let mut seen = BTreeSet::new();
    for i in 0..40 {
        seen.insert(
            stack
                .routed(MAIN, &unique_prompt(&format!("before {i}"), 200))
                .await,
        );
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(seen.len(), 2, "both servers used before the stop");

    assert!(stack.sims.stop(0).await);
    let stopped = Instant::now();
    // Until its last scrape is older than the staleness bound (200 ms) the picker may still
    // choose it; those requests fail at Envoy (connection refused). Wait that out.
    let mut failed_late = 0;
    while stopped.elapsed() < Duration::from_secs(1) {
        let reply = stack
            .post(
                MAIN,
                Stack::completion(
                    &unique_prompt(&format!("during {:?}", stopped.elapsed()), 200),
                    2,
                ),
            )
            .await;
        if reply.status != 200 && stopped.elapsed() > Duration::from_millis(600) {
            failed_late += 1;
        }
        sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(failed_late, 0, "still routed to the stopped server");
    let before = stack.metrics().await;
    for i in 0..30 {
        let reply = stack
            .post(
                MAIN,
                Stack::completion(&unique_prompt(&format!("after {i}"), 200), 2),
            )
            .await;
        stack.assert_routed(&reply);
        assert_ne!(reply.primary(), Some(victim.as_str()));
    }
    let after = stack.metrics().await;
    let series = format!("shepherd_endpoint_picks_total{{endpoint=\"{victim}\"}}");
    assert_eq!(
        sample(&after, &series),
        sample(&before, &series),
        "no pick of the stopped server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_picker_stopped_envoy_fails_requests_instead_of_routing_them() {
    let Some(mut stack) = Stack::start(Options::default()).await else {
        return;
    };
    stack.routed(MAIN, "while the picker runs").await;
    stack.epp.terminate();
    let status = stack.epp.wait_exit(Duration::from_secs(15)).await;
    assert!(status.success(), "graceful exit: {status}");
    for i in 0..5 {
        let reply = stack
            .post(MAIN, Stack::completion(&format!("no picker {i}"), 2))
            .await;
        assert!(reply.status >= 500, "{reply:?}");
        assert_eq!(reply.served, None, "routed without the picker: {reply:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_streaming_request_finish() {
    let Some(stack) = Stack::start(Options {
        speed: 2.0,
        ..Options::default()
    })
    .await
    else {
        return;
    };
    let body = serde_json::json!({
        "model": MODEL, "prompt": "a long answer", "max_tokens": 100, "stream": true,
    });
    let mut response = stack
        .http
        .post(format!("{}/v1/completions", stack.url(MAIN)))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let first = response.chunk().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "));
    // Shutdown begins while the answer streams: the picker stops accepting and waits for it.
    stack.epp.terminate();
    let mut text = String::from_utf8(first.to_vec()).unwrap();
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert_eq!(text.matches("\"text\":\" tok\"").count(), 100);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !stack.epp.log().contains("runtime stopped") {
        assert!(Instant::now() < deadline, "{}", stack.epp.log());
        sleep(Duration::from_millis(20)).await;
    }
    assert!(
        stack.epp.log().contains("drained=true"),
        "{}",
        stack.epp.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_edit_applies_without_a_restart_or_a_dropped_request() {
    let Some(stack) = Stack::start(Options {
        servers: 2,
        ..Options::default()
    })
    .await
    else {
        return;
    };
    let stack = Arc::new(stack);
    let (server0, server1) = (stack.server(0), stack.server(1));
    // Requests flow the whole time, two at once, each one checked.
    let edited = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for worker in 0..2 {
        let stack = Arc::clone(&stack);
        let edited = Arc::clone(&edited);
        load.push(tokio::spawn(async move {
            let mut replies = Vec::new();
            for i in 0..400 {
                let was_edited = edited.load(Ordering::Acquire);
                let reply = stack
                    .post(
                        MAIN,
                        Stack::completion(&unique_prompt(&format!("load {worker} {i}"), 200), 2),
                    )
                    .await;
                replies.push((was_edited, reply));
                if replies.iter().filter(|(e, _)| *e).count() >= 40 {
                    break;
                }
            }
            replies
        }));
    }
    sleep(Duration::from_millis(500)).await;
    // The edit: server 0 leaves the pool. The picker polls the file every 100 ms here.
    let mut endpoints_only_1 = e2e::shepherd_config(&[stack.sims.addrs()[1]], &stack.options);
    endpoints_only_1.push_str("# edited\n");
    stack.write_config(&endpoints_only_1);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let metrics = stack.metrics().await;
        if sample(
            &metrics,
            "shepherd_config_reloads_total{result=\"applied\"}",
        ) >= 1.0
        {
            break;
        }
        assert!(Instant::now() < deadline, "reload not applied:\n{metrics}");
        sleep(Duration::from_millis(20)).await;
    }
    edited.store(true, Ordering::Release);
    let mut replies = Vec::new();
    for task in load {
        replies.extend(task.await.unwrap());
    }
    for (_, reply) in &replies {
        stack.assert_routed(reply);
    }
    let before: Vec<&str> = replies
        .iter()
        .filter(|(e, _)| !e)
        .map(|(_, r)| r.served.as_deref().unwrap())
        .collect();
    let after: Vec<&str> = replies
        .iter()
        .filter(|(e, _)| *e)
        .map(|(_, r)| r.served.as_deref().unwrap())
        .collect();
    assert!(before.len() >= 4 && after.len() >= 40);
    assert!(
        before.contains(&server0.as_str()),
        "server 0 served before the edit"
    );
    assert!(
        after.iter().all(|s| *s == server1),
        "after the edit only server 1: {:?}",
        tally(after)
    );
    // Same process all along.
    assert!(stack.epp.log().matches("shepherd-epp listening").count() == 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoints_flag_overrides_the_config_file() {
    let Some(stack) = Stack::start(Options {
        epp_args: vec!["--endpoints".into(), "{server 2}".into()],
        ..Options::default()
    })
    .await
    else {
        return;
    };
    for i in 0..8 {
        let served = stack
            .routed(MAIN, &unique_prompt(&format!("override {i}"), 200))
            .await;
        assert_eq!(served, stack.server(2));
    }
    assert!(
        stack.epp.log().contains("endpoints=1"),
        "{}",
        stack.epp.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployment_example_is_valid() {
    // The Shepherd config loads as it is.
    let config = shepherd_runtime::config::RuntimeConfig::load_sync(
        workspace().join("examples/deploy/envoy/shepherd.yaml"),
    )
    .unwrap();
    assert_eq!(config.policy.scheduler.max_endpoints, 1);
    assert_eq!(config.endpoints.len(), 4);
    assert_eq!(config.server.extproc_addr().to_string(), "127.0.0.1:9002");
    let Some(envoy) = envoy_binary() else {
        return;
    };
    // Envoy accepts the examples as they are, and as the tests change them.
    let servers: Vec<std::net::SocketAddr> = vec![
        "127.0.0.1:18100".parse().unwrap(),
        "127.0.0.1:18101".parse().unwrap(),
    ];
    let mut configs = Vec::new();
    for example in ["envoy.yaml", "envoy-fallbacks.yaml", "envoy-replicas.yaml"] {
        let path = workspace().join("examples/deploy/envoy").join(example);
        configs.push((example.to_string(), std::fs::read_to_string(path).unwrap()));
        configs.push((
            format!("{example} as tested"),
            envoy_config(example, 9002, &servers[..1], &servers),
        ));
    }
    for (name, text) in configs {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("envoy.yaml");
        std::fs::write(&path, text).unwrap();
        let output = std::process::Command::new(&envoy)
            .args([
                "--mode",
                "validate",
                "--disable-hot-restart",
                "-l",
                "error",
                "-c",
            ])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{name}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallbacks_carry_requests_past_a_stopped_server() {
    let Some(mut stack) = Stack::start(Options {
        servers: 2,
        max_endpoints: 2,
        example: "envoy-fallbacks.yaml",
        ..Options::default()
    })
    .await
    else {
        return;
    };
    let victim = stack.server(0);
    // A prefix that the picker sends to server 0 (prefix affinity keeps it there).
    let mut prefix = None;
    for i in 0..40 {
        let candidate = unique_prompt(&format!("fallback prefix {i}"), 4096);
        let reply = stack
            .post(MAIN, Stack::completion(&format!("{candidate} q"), 2))
            .await;
        stack.assert_routed(&reply);
        assert_eq!(reply.destinations().len(), 2, "primary and fallback");
        if reply.served.as_deref() == Some(victim.as_str()) {
            prefix = Some(candidate);
            break;
        }
    }
    let prefix = prefix.expect("some prompt went to server 0");

    // Server 0 dies. Until its metrics go stale the picker still names it first for this
    // prefix; Envoy's connection fails and the retry goes to the fallback.
    assert!(stack.sims.stop(0).await);
    let mut carried = 0;
    for i in 0..20 {
        let reply = stack
            .post(
                MAIN,
                Stack::completion(&format!("{prefix} question {i}"), 2),
            )
            .await;
        assert_eq!(reply.status, 200, "{reply:?}\n{}", stack.envoy.log());
        let served = reply.served.as_deref().unwrap();
        assert_ne!(served, victim);
        assert!(reply.destinations().contains(&served), "{reply:?}");
        if reply.primary() == Some(victim.as_str()) {
            carried += 1;
        }
    }
    assert!(
        carried >= 1,
        "no request was picked for the stopped server first"
    );
}

/// A completion hook recording the usage of every request that ended.
#[derive(Debug, Default)]
struct UsageRecorder(parking_lot::Mutex<Vec<(Outcome, Option<Usage>, bool)>>);

impl CompletionHook for UsageRecorder {
    fn on_complete(&self, _request: &CompletedRequest<'_>, completion: &Completion) {
        self.0.lock().push((
            completion.outcome,
            completion.usage,
            completion.first_token_at.is_some(),
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_usage_reaches_the_completion_hooks() {
    // The picker runs in this process here (the runtime and the service shepherd-epp wires),
    // with a completion hook of the test's own, behind the same Envoy example.
    let Some(envoy_path) = envoy_binary() else {
        return;
    };
    let mut sim = ServeConfig::ephemeral(2);
    sim.speed = 50.0;
    let sims = shepherd_sim::serve::spawn(sim).await.unwrap();
    let recorder = Arc::new(UsageRecorder::default());
    let mut registry = shepherd_scorers::builtin_registry();
    let hook = Arc::clone(&recorder);
    registry.register("test-usage-recorder", move |_args| {
        Ok(PluginInstance::default().with_completion_hook(hook.clone()))
    });
    let endpoints: Vec<String> = sims.addrs().iter().map(|a| format!("  - {a}\n")).collect();
    let config = RuntimeConfig::from_yaml(&format!(
        "plugins:\n\
         \x20 - type: prefix-cache-scorer\n\
         \x20 - type: queue-scorer\n\
         \x20 - type: max-score-picker\n\
         \x20 - type: test-usage-recorder\n\
         schedulingProfiles:\n\
         \x20 - name: default\n\
         \x20   plugins:\n\
         \x20     - pluginRef: prefix-cache-scorer\n\
         \x20       weight: 3\n\
         \x20     - pluginRef: queue-scorer\n\
         \x20       weight: 2\n\
         \x20     - pluginRef: max-score-picker\n\
         scheduler:\n  maxEndpoints: 1\n\
         endpoints:\n{}\
         server:\n  metricsPort: 0\n",
        endpoints.concat()
    ))
    .unwrap();
    let options = RuntimeOptions {
        registry: Some(registry),
        ..RuntimeOptions::default()
    };
    let handle = Runtime::start(config, options).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let extproc_port = listener.local_addr().unwrap().port();
    let service = ExtProcService::new(Arc::clone(handle.scheduler()), ExtProcOptions::default());
    let signal = handle.shutdown_signal();
    let server = tokio::spawn(async move { serve(listener, service, signal.wait()).await });
    let dir = tempfile::tempdir().unwrap();
    let envoy = Envoy::start(
        &envoy_path,
        dir.path(),
        &envoy_config("envoy.yaml", extproc_port, &sims.addrs()[..1], sims.addrs()),
    )
    .await;

    let body = serde_json::json!({
        "model": MODEL,
        "prompt": unique_prompt("usage", 800),
        "max_tokens": 12,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let text = reqwest::Client::new()
        .post(format!("http://{}/v1/completions", envoy.listeners[MAIN]))
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let usage_line = text
        .split("\n\n")
        .find(|e| e.contains("\"usage\""))
        .and_then(|e| e.strip_prefix("data: "))
        .unwrap();
    let usage: serde_json::Value = serde_json::from_str(usage_line).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let ended = loop {
        if let Some(ended) = recorder.0.lock().first().copied() {
            break ended;
        }
        assert!(Instant::now() < deadline, "the request never ended");
        sleep(Duration::from_millis(10)).await;
    };
    let (outcome, seen, first_token) = ended;
    assert_eq!(outcome, Outcome::Success);
    assert!(first_token, "the first token was seen");
    let seen = seen.expect("usage read from the SSE stream");
    assert_eq!(
        seen.completion_tokens,
        usage["usage"]["completion_tokens"].as_u64().unwrap()
    );
    assert_eq!(
        seen.prompt_tokens,
        usage["usage"]["prompt_tokens"].as_u64().unwrap()
    );
    assert_eq!(seen.completion_tokens, 12);

    drop(envoy);
    let report = handle.shutdown(Duration::from_secs(5)).await;
    assert!(report.drained);
    server.await.unwrap().unwrap();
}
