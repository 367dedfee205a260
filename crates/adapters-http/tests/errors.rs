//! Every answer the gateway makes itself, in OpenAI's error shape, and the keys on both
//! sides.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{MODEL, Setup, completion, dead_addr, echo_upstream, expect_error, sims};
use serde_json::json;

#[tokio::test]
async fn bad_bodies_are_400_with_the_field_named() {
    let pool = sims(1, 50.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied()).start().await;

    let response = gateway
        .http
        .post(gateway.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .body("{\"model\": \"x\", \"messages\": [")
        .send()
        .await
        .unwrap();
    expect_error(response, 400, "invalid_json").await;

    let response = gateway
        .post("/v1/chat/completions", &json!({"model": MODEL}))
        .await;
    let body = expect_error(response, 400, "missing_field").await;
    assert_eq!(body["error"]["param"], "messages");
    assert_eq!(body["error"]["type"], "invalid_request_error");

    let response = gateway
        .post(
            "/v1/chat/completions",
            &json!({"model": MODEL, "messages": []}),
        )
        .await;
    expect_error(response, 400, "empty_prompt").await;

    let response = gateway
        .post("/v1/completions", &json!({"model": MODEL, "prompt": 42}))
        .await;
    let body = expect_error(response, 400, "invalid_field").await;
    assert_eq!(body["error"]["param"], "prompt");

    let response = gateway
        .http
        .get(gateway.url("/v1/completions"))
        .send()
        .await
        .unwrap();
    expect_error(response, 405, "method_not_allowed").await;
    // A path no route takes is 404 unless it is a POST (which the default parsers' fallback
    // forwards: tests/parsers.rs).
    let response = gateway
        .http
        .put(gateway.url("/v1/audio/speech"))
        .send()
        .await
        .unwrap();
    expect_error(response, 404, "not_found").await;

    // Nothing reached a server, nothing is in flight.
    assert!(gateway.recorder.ended().is_empty());
    let metrics = gateway.metrics().await;
    assert!(
        metrics.contains("shepherd_gateway_rejections_total{reason=\"bad_request\"} 4"),
        "{metrics}"
    );
}

#[tokio::test]
async fn client_keys_are_checked_and_upstream_keys_sent() {
    let (upstream, seen) = echo_upstream().await;
    let other = echo_upstream().await.0;
    let yaml = format!(
        "gateway:\n  apiKeys: [sk-client-1, sk-client-2]\n  upstreamApiKey: sk-everyone\n  \
         upstreamApiKeys: {{\"{other}\": sk-other-only}}\n"
    );
    let gateway = Setup::new([upstream]).yaml(&yaml).start().await;
    let body = json!({"model": "model-a", "prompt": "hi"});

    let response = gateway.post("/v1/completions", &body).await;
    let answer = expect_error(response, 401, "invalid_api_key").await;
    assert!(!answer.to_string().contains("sk-client"));
    let response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .bearer_auth("sk-wrong")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    expect_error(response, 401, "invalid_api_key").await;
    let response = gateway
        .http
        .get(gateway.url("/v1/models"))
        .send()
        .await
        .unwrap();
    expect_error(response, 401, "invalid_api_key").await;
    assert!(seen.lock().is_empty());

    let response = gateway
        .http
        .post(gateway.url("/v1/completions?trace=1"))
        .bearer_auth("sk-client-2")
        .header("x-request-id", "keyed-1")
        .header("openai-organization", "org-1")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen = seen.lock().clone();
    assert_eq!(seen.len(), 1);
    let request = &seen[0];
    assert_eq!(request.path, "/v1/completions?trace=1");
    assert_eq!(request.headers["authorization"], "Bearer sk-everyone");
    assert_eq!(request.headers["x-request-id"], "keyed-1");
    assert_eq!(request.headers["openai-organization"], "org-1");
    assert_eq!(request.body, body.to_string());
    let metrics = gateway.metrics().await;
    assert!(!metrics.contains("sk-"), "a key leaked into /metrics");
    let config = gateway
        .http
        .get(gateway.url("/debug/config"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !config.contains("sk-"),
        "a key leaked into /debug/config: {config}"
    );
}

#[tokio::test]
async fn without_client_keys_the_clients_authorization_goes_on() {
    let (upstream, seen) = echo_upstream().await;
    let gateway = Setup::new([upstream]).start().await;
    let response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .bearer_auth("sk-for-the-server")
        .json(&json!({"model": "model-a", "prompt": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        seen.lock()[0].headers["authorization"],
        "Bearer sk-for-the-server"
    );
}

#[tokio::test]
async fn an_unknown_model_is_404_once_the_model_list_is_known() {
    let pool = sims(2, 50.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied()).start().await;
    let listed = gateway
        .http
        .get(gateway.url("/v1/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);

    let response = gateway
        .post(
            "/v1/completions",
            &json!({"model": "gpt-5", "prompt": "hi"}),
        )
        .await;
    let body = expect_error(response, 404, "model_not_found").await;
    assert_eq!(body["error"]["param"], "model");
    let response = gateway
        .http
        .get(gateway.url("/v1/models/gpt-5"))
        .send()
        .await
        .unwrap();
    expect_error(response, 404, "model_not_found").await;
    let response = gateway
        .post("/v1/completions", &completion("hi", 2, false))
        .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn bodies_over_the_limit_are_413_declared_or_streamed() {
    let pool = sims(1, 50.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied())
        .yaml("gateway: {maxBodyBytes: 1024}\n")
        .start()
        .await;
    let big = completion(&"x".repeat(2000), 2, false);

    let response = gateway.post("/v1/completions", &big).await;
    let body = expect_error(response, 413, "request_too_large").await;
    assert!(body["error"]["message"].as_str().unwrap().contains("1024"));

    // Without a content-length: refused at the chunk that crosses the limit.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = big
        .to_string()
        .into_bytes()
        .chunks(300)
        .map(|c| Ok(c.to_vec()))
        .collect();
    let response = gateway
        .http
        .post(gateway.url("/v1/completions"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    expect_error(response, 413, "request_too_large").await;

    let response = gateway
        .post("/v1/completions", &completion("small", 2, false))
        .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn over_the_concurrency_cap_is_429_with_retry_after() {
    let pool = sims(1, 1.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied())
        .yaml("gateway: {maxConcurrentRequests: 2, retryAfterSeconds: 3}\n")
        .start()
        .await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut response = gateway
            .post("/v1/completions", &completion("hold the line", 2000, true))
            .await;
        assert_eq!(response.status(), 200);
        let _ = response.chunk().await.unwrap();
        held.push(response);
    }
    let response = gateway
        .post("/v1/completions", &completion("one more", 2, false))
        .await;
    assert_eq!(response.headers()["retry-after"], "3");
    let body = expect_error(response, 429, "rate_limit_exceeded").await;
    assert_eq!(body["error"]["type"], "rate_limit_error");

    drop(held);
    gateway.wait_idle().await;
    let response = gateway
        .post(
            "/v1/completions",
            &completion("now there is room", 2, false),
        )
        .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn no_endpoint_is_503_with_retry_after() {
    let gateway = Setup::new([])
        .yaml("gateway: {retryAfterSeconds: 2}\n")
        .start()
        .await;
    let response = gateway
        .post("/v1/completions", &completion("anyone?", 2, false))
        .await;
    assert_eq!(response.headers()["retry-after"], "2");
    let body = expect_error(response, 503, "no_endpoints").await;
    assert_eq!(body["error"]["type"], "server_error");
    let response = gateway
        .http
        .get(gateway.url("/v1/models"))
        .send()
        .await
        .unwrap();
    expect_error(response, 503, "no_models").await;
}

#[tokio::test]
async fn every_endpoint_refusing_is_502_after_trying_each_once() {
    let dead = [dead_addr().await, dead_addr().await];
    let gateway = Setup::new(dead).without_scraping().start().await;
    let response = gateway
        .post("/v1/completions", &completion("anyone?", 2, false))
        .await;
    expect_error(response, 502, "upstream_unreachable").await;
    assert_eq!(
        gateway
            .server
            .gateway()
            .stats()
            .upstream_errors_before_response(),
        2
    );
    gateway.wait_idle().await;
    let ended = gateway.recorder.ended();
    assert_eq!(ended.len(), 1);
    assert_eq!(
        ended[0].outcome,
        shepherd_scheduler_core::completion::Outcome::Failed
    );
}

#[tokio::test]
async fn upstream_errors_pass_through_and_the_first_byte_timeout_is_504() {
    let (upstream, _seen) = echo_upstream().await;
    let gateway = Setup::new([upstream]).start().await;
    let response = gateway
        .post(
            "/v1/completions",
            &json!({"model": "model-a", "prompt": "fail", "status": 500}),
        )
        .await;
    assert_eq!(response.status(), 500);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["message"], "asked for it");
    gateway.wait_idle().await;
    assert_eq!(
        gateway.recorder.ended()[0].outcome,
        shepherd_scheduler_core::completion::Outcome::Failed
    );

    let pool = sims(1, 1.0).await;
    let gateway = Setup::new(pool.addrs().iter().copied())
        .yaml("gateway: {firstByteTimeoutMs: 100}\n")
        .start()
        .await;
    let response = gateway
        .post("/v1/completions", &completion("slow answer", 500, false))
        .await;
    expect_error(response, 504, "upstream_timeout").await;
    gateway.wait_idle().await;
    // A stream's first byte comes at once, so the timeout does not cut it.
    let mut response = gateway
        .post("/v1/completions", &completion("streamed", 40, true))
        .await;
    assert_eq!(response.status(), 200);
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        body.extend_from_slice(&chunk);
    }
    assert!(
        String::from_utf8(body)
            .unwrap()
            .ends_with("data: [DONE]\n\n")
    );
}
