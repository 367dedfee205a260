//! `shepherd-sim serve` over real loopback HTTP: two servers started in-process on port 0.
#![cfg(feature = "serve")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use shepherd_sim::serve::{
    self, ADDRESS_HEADER, DEFAULT_MODEL, SERVER_HEADER, ServeConfig, ServeHandle,
};

/// Fast enough that a request takes a few milliseconds of wall time.
const FAST: f64 = 50.0;

async fn pool(servers: usize, speed: f64, tune: impl FnOnce(&mut ServeConfig)) -> ServeHandle {
    let mut config = ServeConfig::ephemeral(servers);
    config.speed = speed;
    tune(&mut config);
    serve::spawn(config).await.expect("servers start")
}

fn url(addr: SocketAddr, path: &str) -> String {
    format!("http://{addr}{path}")
}

async fn post(
    client: &reqwest::Client,
    addr: SocketAddr,
    path: &str,
    body: &Value,
) -> reqwest::Response {
    client
        .post(url(addr, path))
        .json(body)
        .send()
        .await
        .expect("request sent")
}

/// The value of the metric line `name{...} value`.
fn metric(text: &str, name: &str) -> f64 {
    serve::metric_sample(text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

async fn metrics(client: &reqwest::Client, addr: SocketAddr) -> String {
    client
        .get(url(addr, "/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_has_openai_shape_and_server_header() {
    let pool = pool(2, FAST, |_| {}).await;
    let client = reqwest::Client::new();
    for (index, &addr) in pool.addrs().iter().enumerate() {
        let response = post(
            &client,
            addr,
            "/v1/completions",
            &json!({"model": DEFAULT_MODEL, "prompt": "Say hello", "max_tokens": 5}),
        )
        .await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()[SERVER_HEADER],
            index.to_string().as_str()
        );
        assert_eq!(
            response.headers()[ADDRESS_HEADER],
            addr.to_string().as_str()
        );
        let body: Value = response.json().await.unwrap();
        assert!(body["id"].as_str().unwrap().starts_with("cmpl-"));
        assert_eq!(body["object"], "text_completion");
        assert!(body["created"].as_u64().unwrap() > 0);
        assert_eq!(body["model"], DEFAULT_MODEL);
        assert_eq!(body["choices"][0]["text"], " tok".repeat(5));
        assert_eq!(body["choices"][0]["finish_reason"], "length");
        let usage = &body["usage"];
        // "Say hello" is 9 bytes: 3 pseudo tokens of 4 bytes.
        assert_eq!(usage["prompt_tokens"], 3);
        assert_eq!(usage["completion_tokens"], 5);
        assert_eq!(usage["total_tokens"], 8);
        assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completion_has_openai_shape() {
    let pool = pool(1, FAST, |_| {}).await;
    let client = reqwest::Client::new();
    let response = post(
        &client,
        pool.addrs()[0],
        "/v1/chat/completions",
        &json!({"model": DEFAULT_MODEL, "messages": [{"role": "user", "content": "Hi"}]}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    // No max_tokens: the default length, ended as a natural stop.
    assert_eq!(body["choices"][0]["message"]["content"], " tok".repeat(16));
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["usage"]["completion_tokens"], 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_long_prompt_hits_prefix_cache() {
    let pool = pool(2, FAST, |_| {}).await;
    let client = reqwest::Client::new();
    let prompt = "You are a helpful assistant. Answer in one line. ".repeat(40);
    let ask = |addr| {
        let client = client.clone();
        let body = json!({"model": DEFAULT_MODEL, "prompt": prompt, "max_tokens": 2});
        async move {
            let body: Value = post(&client, addr, "/v1/completions", &body)
                .await
                .json()
                .await
                .unwrap();
            body["usage"]["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap()
        }
    };
    let a = pool.addrs()[0];
    assert_eq!(ask(a).await, 0);
    // 1,960 bytes are 490 pseudo tokens: 30 full 16-token blocks before the last token, which
    // is always recomputed.
    assert_eq!(ask(a).await, 480);
    // The other server has its own cache.
    assert_eq!(ask(pool.addrs()[1]).await, 0);
    let text = metrics(&client, a).await;
    assert_eq!(metric(&text, "vllm:prefix_cache_hits_total"), 480.0);
    assert_eq!(metric(&text, "vllm:prefix_cache_queries_total"), 980.0);
}

/// Reads an SSE body into its `data:` payloads.
async fn sse_events(response: reqwest::Response) -> Vec<String> {
    let text = response.text().await.unwrap();
    assert!(text.ends_with("\n\n"), "{text}");
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("{e}"))
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_yields_chunks_then_usage_then_done() {
    let pool = pool(1, FAST, |_| {}).await;
    let client = reqwest::Client::new();
    let response = post(
        &client,
        pool.addrs()[0],
        "/v1/chat/completions",
        &json!({
            "model": DEFAULT_MODEL,
            "messages": [{"role": "user", "content": "Count to four"}],
            "max_tokens": 4,
            "stream": true,
            "stream_options": {"include_usage": true},
        }),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[SERVER_HEADER], "0");
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = sse_events(response).await;
    assert_eq!(events.len(), 4 + 2, "{events:?}");
    assert_eq!(events[5], "[DONE]");
    let chunks: Vec<Value> = events[..5]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    for (i, chunk) in chunks[..4].iter().enumerate() {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["choices"][0]["delta"]["content"], " tok");
        let finish = &chunk["choices"][0]["finish_reason"];
        assert_eq!(i == 3, finish == "length", "{chunk}");
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let usage = &chunks[4];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 4);
    assert!(usage["usage"]["prompt_tokens"].as_u64().unwrap() > 0);

    // Without include_usage: token chunks, then [DONE] (plain completions this time).
    let response = post(
        &client,
        pool.addrs()[0],
        "/v1/completions",
        &json!({"model": DEFAULT_MODEL, "prompt": "x", "max_tokens": 3, "stream": true}),
    )
    .await;
    let events = sse_events(response).await;
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(events[3], "[DONE]");
    let first: Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(first["object"], "text_completion");
    assert_eq!(first["choices"][0]["text"], " tok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_use_vllm_names_and_track_load() {
    // One request at a time in the batch, so the others wait; slow enough to watch.
    let pool = pool(1, 5.0, |c| c.engine.max_num_seqs = 1).await;
    let addr = pool.addrs()[0];
    let client = reqwest::Client::new();
    let idle = metrics(&client, addr).await;
    for name in [
        "# TYPE vllm:num_requests_waiting gauge",
        "# TYPE vllm:num_requests_running gauge",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        "# TYPE vllm:gpu_cache_usage_perc gauge",
        "# TYPE vllm:cache_config_info gauge",
        "# TYPE vllm:prefix_cache_queries_total counter",
        "# TYPE vllm:prefix_cache_hits_total counter",
    ] {
        assert!(idle.contains(name), "missing {name}\n{idle}");
    }
    let info = idle
        .lines()
        .find(|l| l.starts_with("vllm:cache_config_info{"))
        .unwrap();
    assert!(info.contains("block_size=\"16\""), "{info}");
    assert!(info.contains("num_gpu_blocks=\"27793\""), "{info}");
    assert!(
        info.contains(&format!("model_name=\"{DEFAULT_MODEL}\"")),
        "{info}"
    );
    assert_eq!(metric(&idle, "vllm:num_requests_running"), 0.0);

    let requests: Vec<_> = (0..3)
        .map(|i| {
            let client = client.clone();
            let body =
                json!({"model": DEFAULT_MODEL, "prompt": format!("request {i}"), "max_tokens": 40});
            tokio::spawn(
                async move { post(&client, addr, "/v1/completions", &body).await.status() },
            )
        })
        .collect();
    let (mut max_running, mut max_waiting, mut max_kv) = (0.0f64, 0.0f64, 0.0f64);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline && !requests.iter().all(|r| r.is_finished()) {
        let text = metrics(&client, addr).await;
        max_running = max_running.max(metric(&text, "vllm:num_requests_running"));
        max_waiting = max_waiting.max(metric(&text, "vllm:num_requests_waiting"));
        max_kv = max_kv.max(metric(&text, "vllm:kv_cache_usage_perc"));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for r in requests {
        assert_eq!(r.await.unwrap(), 200);
    }
    assert_eq!(max_running, 1.0);
    assert!(max_waiting >= 1.0, "{max_waiting}");
    assert!(max_kv > 0.0);
    let after = metrics(&client, addr).await;
    assert_eq!(metric(&after, "vllm:num_requests_running"), 0.0);
    assert_eq!(metric(&after, "vllm:num_requests_waiting"), 0.0);
    assert_eq!(metric(&after, "vllm:generation_tokens_total"), 120.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_body_is_400() {
    let pool = pool(1, FAST, |_| {}).await;
    let client = reqwest::Client::new();
    let addr = pool.addrs()[0];
    for body in [
        "{\"model\": ",
        "[1, 2]",
        "{\"prompt\": \"no model\"}",
        &format!("{{\"model\": \"{DEFAULT_MODEL}\", \"prompt\": 7}}"),
        &format!("{{\"model\": \"{DEFAULT_MODEL}\", \"prompt\": \"x\", \"max_tokens\": 0}}"),
    ] {
        let response = client
            .post(url(addr, "/v1/completions"))
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{body}");
        assert_eq!(response.headers()[SERVER_HEADER], "0");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], 400, "{error}");
        assert!(
            error["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_model_is_404() {
    let pool = pool(1, FAST, |_| {}).await;
    let client = reqwest::Client::new();
    let addr = pool.addrs()[0];
    let response = post(
        &client,
        addr,
        "/v1/chat/completions",
        &json!({"model": "no-such-model", "messages": [{"role": "user", "content": "Hi"}]}),
    )
    .await;
    assert_eq!(response.status(), 404);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["type"], "NotFoundError");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-model")
    );

    let models: Value = client
        .get(url(addr, "/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], DEFAULT_MODEL);
    let health = client.get(url(addr, "/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.headers()[SERVER_HEADER], "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_server_refuses_connections_while_the_other_serves() {
    let mut pool = pool(2, FAST, |_| {}).await;
    let client = reqwest::Client::new();
    let (dead, alive) = (pool.addrs()[0], pool.addrs()[1]);
    // A pooled keep-alive connection to the server that will die.
    assert_eq!(
        client
            .get(url(dead, "/health"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );

    assert!(pool.stop(0).await);
    assert!(!pool.is_running(0) && pool.is_running(1));
    assert!(!pool.stop(0).await);
    let refused = tokio::net::TcpStream::connect(dead).await.unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    assert!(client.get(url(dead, "/health")).send().await.is_err());
    let response = post(
        &client,
        alive,
        "/v1/completions",
        &json!({"model": DEFAULT_MODEL, "prompt": "still here?", "max_tokens": 2}),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[SERVER_HEADER], "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_aborts_request() {
    let pool = pool(1, 1.0, |_| {}).await;
    let addr = pool.addrs()[0];
    let client = reqwest::Client::new();
    let mut response = post(
        &client,
        addr,
        "/v1/completions",
        &json!({"model": DEFAULT_MODEL, "prompt": "a long story", "max_tokens": 4000, "stream": true}),
    )
    .await;
    // The first token arrived: the request is running (it would take ~25 s to finish).
    let first = response.chunk().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "));
    assert_eq!(
        metric(&metrics(&client, addr).await, "vllm:num_requests_running"),
        1.0
    );
    drop(response);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let text = metrics(&client, addr).await;
        if metric(&text, "vllm:num_requests_running") == 0.0 {
            assert_eq!(metric(&text, "vllm:kv_cache_usage_perc"), 0.0);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not aborted:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_server_answers_503() {
    let pool = pool(1, 1.0, |c| c.max_pending = 1).await;
    let addr = pool.addrs()[0];
    let client = reqwest::Client::new();
    let mut long = post(
        &client,
        addr,
        "/v1/completions",
        &json!({"model": DEFAULT_MODEL, "prompt": "hold", "max_tokens": 4000, "stream": true}),
    )
    .await;
    assert!(long.chunk().await.unwrap().is_some());
    let refused = post(
        &client,
        addr,
        "/v1/completions",
        &json!({"model": DEFAULT_MODEL, "prompt": "one more", "max_tokens": 1}),
    )
    .await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()[SERVER_HEADER], "0");
    drop(long);
    // Once the held request is gone, the server takes requests again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let response = post(
            &client,
            addr,
            "/v1/completions",
            &json!({"model": DEFAULT_MODEL, "prompt": "one more", "max_tokens": 1}),
        )
        .await;
        if response.status() == 200 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
