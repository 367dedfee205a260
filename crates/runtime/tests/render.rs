//! The `token-producer`'s `vllm` backend against `shepherd-sim serve`'s render routes: the
//! model server's token ids reach the pick, a prompt its KV events say it holds goes there,
//! and a render server that is down, silent or flooding costs at most its timeout (or the
//! answer limit) and leaves the request without ids (never a failed pick).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::wait_until;
use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::render::prepare;
use shepherd_runtime::{Runtime, RuntimeHandle, RuntimeOptions};
use shepherd_scheduler_core::prelude::*;
use shepherd_scheduler_core::request::{ParseLimits, parse_openai_request};
use shepherd_scorers::producers::{TokenProducer, token::TokenizeError};
use shepherd_sim::serve::ServeHandle;

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
const WAIT: Duration = Duration::from_secs(10);

/// A runtime over `servers` with a precise prefix producer fed by their events, and a
/// `token-producer` rendering at `render_url`.
async fn start(servers: &ServeHandle, render_url: &str, timeout: &str) -> RuntimeHandle {
    let endpoints = common::kv_event_endpoints(servers);
    let yaml = format!(
        "endpoints:\n{endpoints}scraping: {{intervalMs: 20}}\nplugins:
- type: token-producer
  parameters:
    modelName: {MODEL}
    vllm: {{url: \"{render_url}\", timeout: {timeout}}}
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
    let options = RuntimeOptions {
        serve_admin: false,
        watch_config: false,
        adaptive: false,
        ..RuntimeOptions::default()
    };
    let handle = Runtime::start(RuntimeConfig::from_yaml(&yaml).unwrap(), options)
        .await
        .unwrap();
    let connected = format!("shepherd_kv_events_connected_publishers {}", servers.len());
    assert!(
        wait_until(WAIT, || handle
            .render_metrics()
            .lines()
            .any(|l| l == connected))
        .await,
        "publishers never connected"
    );
    handle
}

fn tokens(handle: &RuntimeHandle) -> std::sync::Arc<TokenProducer> {
    handle
        .shared()
        .resources
        .get::<TokenProducer>("token-producer")
        .unwrap()
}

fn completions_body(prompt: &str) -> Vec<u8> {
    serde_json::to_vec(
        &serde_json::json!({"model": "any-alias", "prompt": prompt, "max_tokens": 2}),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_servers_ids_reach_the_pick_and_route_to_its_cache() {
    let servers = common::kv_event_servers().await;
    let render_url = format!("http://{}", servers.addr(0).unwrap());
    let handle = start(&servers, &render_url, "2s").await;
    // Server 1 caches the prompt (sent to it directly).
    let text = common::block_prompt("render", 4);
    let body = serde_json::json!({"model": MODEL, "prompt": text, "max_tokens": 2});
    let response = reqwest::Client::new()
        .post(format!(
            "http://{}/v1/completions",
            servers.addr(1).unwrap()
        ))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    response.bytes().await.unwrap();

    let body = completions_body(&text);
    let mut request =
        parse_openai_request("/v1/completions", &body, &ParseLimits::default()).unwrap();
    request.id = "render-1".into();
    let scheduler = handle.scheduler().load_full();
    let producer = tokens(&handle);
    assert_eq!(
        producer.prompt_for(&request),
        Err(TokenizeError::NotRendered)
    );

    // The render server (server 0) answers the ids its own events hash: 4 bytes a token.
    let expected: Vec<u32> = text
        .as_bytes()
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let rendered = prepare(&scheduler, &request, &body).await.unwrap();
    assert_eq!(rendered.count(), 1);
    assert_eq!(
        producer.prompt_for(&request).unwrap().into_owned(),
        Prompt::Tokens(expected)
    );
    // The events of server 1 arrive; the pick follows them.
    assert!(
        wait_until(WAIT, || {
            scheduler.schedule(&request).unwrap().primary().address()
                == servers.addr(1).unwrap().to_string()
        })
        .await,
        "the rendered prompt never went to the server holding it"
    );
    drop(rendered);
    assert_eq!(
        producer.render_backend().unwrap().held(),
        0,
        "forgotten after the pick"
    );

    // Chat: rendered by the chat route.
    let chat = serde_json::to_vec(&serde_json::json!({
        "model": MODEL, "messages": [{"role": "user", "content": "hello there"}]
    }))
    .unwrap();
    let mut request =
        parse_openai_request("/v1/chat/completions", &chat, &ParseLimits::default()).unwrap();
    request.id = "render-2".into();
    let rendered = prepare(&scheduler, &request, &chat).await.unwrap();
    assert_eq!(rendered.count(), 1);
    assert!(matches!(
        producer.prompt_for(&request).unwrap().into_owned(),
        Prompt::Tokens(ids) if !ids.is_empty()
    ));

    // Token ids the client gave are never sent.
    let given = InferenceRequest::new("render-3", MODEL, Prompt::Tokens(vec![1, 2, 3]));
    assert!(prepare(&scheduler, &given, b"{}").await.is_none());
    handle.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_or_silent_render_server_costs_its_timeout_and_no_pick() {
    let servers = common::kv_event_servers().await;
    // Silent: accepts, never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let handle = start(&servers, &format!("http://{silent_addr}"), "300ms").await;
    let body = completions_body(&common::block_prompt("silent", 2));
    let mut request =
        parse_openai_request("/v1/completions", &body, &ParseLimits::default()).unwrap();
    request.id = "silent-1".into();
    let scheduler = handle.scheduler().load_full();
    let started = Instant::now();
    let rendered = prepare(&scheduler, &request, &body).await.unwrap();
    let waited = started.elapsed();
    assert_eq!(rendered.count(), 0);
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert!(
        scheduler.schedule(&request).is_ok(),
        "the pick goes on without ids"
    );
    handle.shutdown(Duration::from_secs(5)).await;
    held.abort();

    // Down: nothing listens.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_addr = closed.local_addr().unwrap();
    drop(closed);
    let handle = start(&servers, &format!("http://{closed_addr}"), "2s").await;
    let scheduler = handle.scheduler().load_full();
    let rendered = prepare(&scheduler, &request, &body).await.unwrap();
    assert_eq!(rendered.count(), 0);
    assert!(scheduler.schedule(&request).is_ok());
    handle.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_render_server_answering_without_end_is_cut_at_the_answer_limit() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let servers = common::kv_event_servers().await;
    // Lying: declares a 1 GiB answer and streams bytes without end.
    let liar = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let liar_addr = liar.local_addr().unwrap();
    let flood = tokio::spawn(async move {
        while let Ok((mut socket, _)) = liar.accept().await {
            tokio::spawn(async move {
                let mut head = [0u8; 4096];
                let _ = socket.read(&mut head).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1073741824\r\n\r\n{\"token_ids\":[")
                    .await;
                let chunk = vec![b'7'; 1 << 16];
                while socket.write_all(&chunk).await.is_ok() {}
            });
        }
    });
    let handle = start(&servers, &format!("http://{liar_addr}"), "20s").await;
    let body = completions_body(&common::block_prompt("liar", 2));
    let mut request =
        parse_openai_request("/v1/completions", &body, &ParseLimits::default()).unwrap();
    request.id = "liar-1".into();
    let scheduler = handle.scheduler().load_full();
    let started = Instant::now();
    let rendered = prepare(&scheduler, &request, &body).await.unwrap();
    // Refused once 32 MiB arrived, long before the 20 s timeout; nothing held.
    assert_eq!(rendered.count(), 0);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(tokens(&handle).render_backend().unwrap().held(), 0);
    assert!(scheduler.schedule(&request).is_ok());
    handle.shutdown(Duration::from_secs(5)).await;
    flood.abort();
}
