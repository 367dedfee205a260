//! The gateway in front of simulated vLLM servers: routing, SSE passthrough, usage, fallbacks,
//! disconnects, affinity, the model list, explain and the admin routes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::{MODEL, SERVER_HEADER, Setup, completion, dead_addr, sims};
use serde_json::{Value, json};
use shepherd_scheduler_core::completion::Outcome;
use tokio::time::Instant;

/// The SSE events of a body: every `data:` payload, in order.
fn sse_events(body: &str) -> Vec<&str> {
    body.split("\n\n")
        .filter_map(|event| event.trim().strip_prefix("data:"))
        .map(str::trim)
        .collect()
}

#[tokio::test]
async fn requests_are_routed_to_the_pool_and_answered_as_the_server_answered() {
    let pool = sims(2, 50.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied()).start().await;

    let response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-request-id", "req-route-1")
        .json(&completion("Hello there", 4, false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-request-id"], "req-route-1");
    let server: usize = response.headers()[SERVER_HEADER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["object"], "text_completion");
    assert_eq!(body["choices"][0]["text"], " tok tok tok tok");
    let ended = gateway.recorder.wait_for("req-route-1").await;
    assert_eq!(ended.endpoint, pool.addrs()[server].to_string());
    assert_eq!(ended.outcome, Outcome::Success);
    assert!(ended.first_token && !ended.used_fallback);

    let chat = gateway
        .post(
            "/v1/chat/completions",
            &json!({"model": MODEL, "max_tokens": 3,
                    "messages": [{"role": "user", "content": "Hi"}]}),
        )
        .await;
    assert_eq!(chat.status(), 200);
    assert!(chat.headers()["x-request-id"].to_str().unwrap().len() > 8);
    let body: Value = chat.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["usage"]["completion_tokens"], 3);
    gateway.wait_idle().await;
}

#[tokio::test]
async fn sse_is_passed_through_event_by_event_without_buffering() {
    // Slow servers: each decode step takes tens of milliseconds of wall time.
    let pool = sims(1, 0.25).await;
    let gateway = Setup::new(pool.addrs().iter().copied()).start().await;

    let sent = Instant::now();
    let mut response = gateway
        .post("/v1/completions", &completion("Stream to me", 16, true))
        .await;
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let mut arrivals = Vec::new();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        arrivals.push(sent.elapsed());
        body.extend_from_slice(&chunk);
    }
    let first = arrivals[0];
    let last = *arrivals.last().unwrap();
    assert!(
        arrivals.len() >= 8,
        "the events came in {} chunks: buffered",
        arrivals.len()
    );
    assert!(
        last - first >= Duration::from_millis(150),
        "first chunk at {first:?}, last at {last:?}: the first was held back"
    );

    let text = String::from_utf8(body).unwrap();
    let events = sse_events(&text);
    assert_eq!(events.last(), Some(&"[DONE]"), "{text}");
    let mut generated = String::new();
    for event in &events[..events.len() - 1] {
        let chunk: Value = serde_json::from_str(event).unwrap();
        assert_eq!(chunk["object"], "text_completion");
        generated.push_str(chunk["choices"][0]["text"].as_str().unwrap_or(""));
    }
    assert_eq!(generated, " tok".repeat(16));
    gateway.wait_idle().await;
}

#[tokio::test]
async fn usage_reaches_the_completion_hooks_and_the_metrics() {
    let pool = sims(2, 50.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied()).start().await;

    // Non-streaming: usage at the end of the JSON body.
    let response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-request-id", "usage-json")
        .json(&completion("Count my tokens, please", 5, false))
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    let ended = gateway.recorder.wait_for("usage-json").await;
    let usage = ended.usage.expect("usage from the JSON body");
    assert_eq!(usage.completion_tokens, 5);
    assert_eq!(
        usage.prompt_tokens,
        body["usage"]["prompt_tokens"].as_u64().unwrap()
    );

    // Streaming with include_usage: usage in the last event before [DONE].
    let response = gateway
        .http
        .post(gateway.url("/v1/chat/completions"))
        .header("x-request-id", "usage-sse")
        .json(&json!({"model": MODEL, "max_tokens": 7, "stream": true,
                      "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "Stream and count"}]}))
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    let events = sse_events(&text);
    let usage_event: Value = serde_json::from_str(events[events.len() - 2]).unwrap();
    let ended = gateway.recorder.wait_for("usage-sse").await;
    let usage = ended.usage.expect("usage from the final SSE event");
    assert_eq!(usage.completion_tokens, 7);
    assert_eq!(
        usage.prompt_tokens,
        usage_event["usage"]["prompt_tokens"].as_u64().unwrap()
    );
    assert_eq!(
        usage.cached_tokens,
        usage_event["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64()
    );

    // Streaming without include_usage: no usage, still a success.
    let response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-request-id", "usage-none")
        .json(&completion("No usage here", 3, true))
        .send()
        .await
        .unwrap();
    let _ = response.text().await.unwrap();
    let ended = gateway.recorder.wait_for("usage-none").await;
    assert_eq!((ended.outcome, ended.usage), (Outcome::Success, None));

    gateway.wait_idle().await;
    assert_eq!(gateway.server.gateway().stats().completion_tokens(), 12);
    let metrics = gateway.metrics().await;
    assert!(
        metrics.contains("shepherd_gateway_usage_tokens_total{kind=\"completion\"} 12"),
        "{metrics}"
    );
    assert!(
        metrics.contains("shepherd_completions_total{outcome=\"success\"} 3"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_dead_endpoint_costs_a_fallback_not_a_request() {
    let pool = sims(1, 50.0).await;
    let dead = dead_addr().await;
    // No scraping: neither endpoint has metrics, so the dead one is picked as often as the
    // live one, and its requests must move to the fallback.
    let gateway = Setup::new([dead, pool.addrs()[0]])
        .without_scraping()
        .start()
        .await;

    for i in 0..24 {
        let response = gateway
            .http
            .post(gateway.url("/v1/completions"))
            .header("x-request-id", format!("dead-{i}"))
            .json(&completion("Is anyone there?", 2, i % 2 == 0))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "request {i}");
        let _ = response.bytes().await.unwrap();
    }
    gateway.wait_idle().await;
    let ended = gateway.recorder.ended();
    assert_eq!(ended.len(), 24);
    assert!(
        ended.iter().all(|e| e.outcome == Outcome::Success),
        "{ended:?}"
    );
    assert!(
        ended
            .iter()
            .all(|e| e.endpoint == pool.addrs()[0].to_string())
    );
    let moved = ended.iter().filter(|e| e.used_fallback).count();
    assert!(moved > 0, "the dead endpoint was never the primary");
    assert_eq!(
        gateway
            .server
            .gateway()
            .stats()
            .upstream_errors_before_response(),
        moved as u64
    );
}

#[tokio::test]
async fn a_server_stopped_mid_run_loses_no_request_that_had_not_started_streaming() {
    let mut pool = sims(3, 1.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied()).start().await;
    gateway.wait_scraped().await;

    // Twelve non-streaming requests of ~100 decode steps: all in flight when server 0 dies.
    let mut requests = tokio::task::JoinSet::new();
    for i in 0..12 {
        let http = gateway.http.clone();
        let url = gateway.url("/v1/completions");
        requests.spawn(async move {
            let response = http
                .post(url)
                .json(&completion(
                    &format!("Long question number {i}"),
                    100,
                    false,
                ))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let server = response
                .headers()
                .get(SERVER_HEADER)
                .map(|v| v.to_str().unwrap().to_owned());
            let body: Value = response.json().await.unwrap();
            (status, server, body)
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let on_server_0 = gateway.recorder.ended().len();
    assert_eq!(on_server_0, 0, "requests ended before the stop");
    pool.stop(0).await;

    while let Some(joined) = requests.join_next().await {
        let (status, server, body) = joined.unwrap();
        assert_eq!(status, 200, "{body}");
        assert_ne!(server.as_deref(), Some("0"));
        assert_eq!(body["usage"]["completion_tokens"], 100);
    }
    gateway.wait_idle().await;
    let ended = gateway.recorder.ended();
    assert_eq!(ended.len(), 12);
    assert!(ended.iter().all(|e| e.outcome == Outcome::Success));
    assert!(
        ended.iter().any(|e| e.used_fallback),
        "no request was on server 0 when it stopped: {ended:?}"
    );
}

#[tokio::test]
async fn a_client_that_goes_away_releases_its_in_flight_counts() {
    let pool = sims(1, 1.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied()).start().await;

    // Streaming: read the first event, then hang up.
    let mut response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-request-id", "gone-streaming")
        .json(&completion("A long story, please", 2000, true))
        .send()
        .await
        .unwrap();
    let first = response.chunk().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "));
    assert_eq!(gateway.server.runtime().in_flight(), 1);
    drop(response);
    let ended = gateway.recorder.wait_for("gone-streaming").await;
    assert_eq!(ended.outcome, Outcome::Cancelled);
    assert!(ended.first_token);
    gateway.wait_idle().await;

    // Non-streaming: the client gives up while the server is still generating.
    let error = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-request-id", "gone-waiting")
        .timeout(Duration::from_millis(300))
        .json(&completion("Another long story", 2000, false))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error}");
    let ended = gateway.recorder.wait_for("gone-waiting").await;
    assert_eq!(ended.outcome, Outcome::Cancelled);
    gateway.wait_idle().await;
    assert_eq!(gateway.server.gateway().stats().client_disconnects(), 1);
}

#[tokio::test]
async fn a_multi_turn_conversation_stays_on_one_server_while_others_run() {
    let pool = sims(3, 20.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied()).start().await;
    gateway.wait_scraped().await;

    let mut conversations = tokio::task::JoinSet::new();
    for c in 0..6 {
        let http = gateway.http.clone();
        let url = gateway.url("/v1/chat/completions");
        conversations.spawn(async move {
            let system = format!(
                "You are assistant number {c}. {}",
                format!("Conversation {c} has its own long instructions. ").repeat(40)
            );
            let mut messages = vec![json!({"role": "system", "content": system})];
            let mut servers = Vec::new();
            for turn in 0..4 {
                messages.push(json!({"role": "user", "content": format!("Question {turn} of conversation {c}?")}));
                let response = http
                    .post(&url)
                    .json(&json!({"model": MODEL, "max_tokens": 8, "messages": messages}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200);
                servers.push(response.headers()[SERVER_HEADER].to_str().unwrap().to_owned());
                let body: Value = response.json().await.unwrap();
                messages.push(body["choices"][0]["message"].clone());
            }
            (c, servers)
        });
    }
    let mut used = HashSet::new();
    let mut by_conversation = HashMap::new();
    while let Some(joined) = conversations.join_next().await {
        let (c, servers) = joined.unwrap();
        used.insert(servers[0].clone());
        by_conversation.insert(c, servers);
    }
    for (c, servers) in &by_conversation {
        assert!(
            servers.iter().all(|s| *s == servers[0]),
            "conversation {c} moved: {servers:?} (all: {by_conversation:?})"
        );
    }
    assert!(
        used.len() >= 2,
        "every conversation on one server: {by_conversation:?}"
    );
    gateway.wait_idle().await;
}

#[tokio::test]
async fn models_are_aggregated_from_the_pool_and_deduplicated() {
    let pool = sims(3, 50.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied()).start().await;

    let list: Value = gateway
        .http
        .get(gateway.url("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["object"], "list");
    let data = list["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{list}");
    assert_eq!(data[0]["id"], MODEL);

    let one = gateway
        .http
        .get(gateway.url(&format!("/v1/models/{MODEL}")))
        .send()
        .await
        .unwrap();
    assert_eq!(one.status(), 200);
    let one: Value = one.json().await.unwrap();
    assert_eq!(one["id"], MODEL);
    let cached = gateway.server.gateway().models().cached().unwrap();
    assert!(cached.complete);
}

#[tokio::test]
async fn explain_is_off_by_default_and_shows_the_breakdown_when_on() {
    let pool = sims(2, 50.0).await;
    let body =
        json!({"model": MODEL, "messages": [{"role": "user", "content": "Where would I go?"}]});

    let off = Setup::new(pool.addrs().iter().copied()).start().await;
    let response = off.post("/debug/explain/v1/chat/completions", &body).await;
    common::expect_error(response, 404, "not_found").await;

    let on = Setup::new(pool.addrs().iter().copied())
        .yaml("gateway: {explain: true}\n")
        .start()
        .await;
    let response = on.post("/debug/explain/v1/chat/completions", &body).await;
    assert_eq!(response.status(), 200);
    let explained: Value = response.json().await.unwrap();
    assert_eq!(explained["api"], "ChatCompletions");
    assert_eq!(explained["endpoints"].as_array().unwrap().len(), 2);
    let breakdown = &explained["breakdown"];
    assert_eq!(
        breakdown["rows"].as_array().unwrap().len(),
        2,
        "{explained}"
    );
    assert!(!breakdown["scorers"].as_array().unwrap().is_empty());
    // A dry run: nothing in flight, no pick counted, no completion.
    assert_eq!(on.server.runtime().in_flight(), 0);
    assert!(on.recorder.ended().is_empty());
}

#[tokio::test]
async fn the_admin_routes_share_the_gateways_port() {
    let pool = sims(1, 50.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied()).start().await;
    let healthz = gateway
        .http
        .get(gateway.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(healthz.status(), 200);
    gateway.wait_scraped().await;
    let readyz = gateway
        .http
        .get(gateway.url("/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(readyz.status(), 200);
    let metrics = gateway.metrics().await;
    assert!(
        metrics.contains("shepherd_gateway_in_flight_requests 0"),
        "{metrics}"
    );
    assert!(metrics.contains("shepherd_picks_total"), "{metrics}");
    let adaptive: Value = gateway
        .http
        .get(gateway.url("/debug/adaptive"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(adaptive["enabled"], true);

    let hidden = Setup::new(pool.addrs().iter().copied())
        .yaml("gateway: {adminRoutes: false}\n")
        .start()
        .await;
    let response = hidden
        .http
        .get(hidden.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

#[tokio::test]
async fn shutdown_lets_a_streaming_response_finish_and_refuses_new_requests() {
    let pool = sims(1, 1.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied()).start().await;
    let mut response = gateway
        .post("/v1/completions", &completion("Finish me first", 60, true))
        .await;
    let mut body = response.chunk().await.unwrap().unwrap().to_vec();

    let common::TestGateway {
        server, http, url, ..
    } = gateway;
    let stopping = tokio::spawn(server.shutdown(Duration::from_secs(10)));
    while let Some(chunk) = response.chunk().await.unwrap() {
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(body).unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let report = stopping.await.unwrap();
    assert!(report.drained && report.in_flight == 0, "{report:?}");
    let refused = http
        .post(format!("{url}/v1/completions"))
        .json(&completion("Too late", 2, false))
        .send()
        .await;
    assert!(refused.is_err(), "{refused:?}");
}

#[tokio::test]
async fn a_stream_its_server_breaks_off_breaks_off_for_the_client() {
    let mut pool = sims(1, 1.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied()).start().await;
    let mut response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("x-request-id", "broken-stream")
        .json(&completion("Cut me off", 2000, true))
        .send()
        .await
        .unwrap();
    let _ = response.chunk().await.unwrap().unwrap();
    pool.stop(0).await;
    let mut body = Vec::new();
    let ended = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break Ok(()),
            Err(error) => break Err(error),
        }
    };
    assert!(ended.is_err(), "the stream ended cleanly: {body:?}");
    assert!(!String::from_utf8_lossy(&body).contains("[DONE]"));
    let ended = gateway.recorder.wait_for("broken-stream").await;
    assert_eq!(ended.outcome, Outcome::Failed);
    gateway.wait_idle().await;
    let metrics = gateway.metrics().await;
    assert!(
        metrics.contains("shepherd_gateway_upstream_errors_total{stage=\"mid_stream\"} 1"),
        "{metrics}"
    );
}
