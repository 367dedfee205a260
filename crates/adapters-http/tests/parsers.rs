//! The gateway proxies the paths its configured parsers take: the default list reads the
//! OpenAI, Anthropic and vLLM paths but forwards nothing unread (its passthrough fallback
//! would expose every POST route of the model servers), a list naming `passthrough-parser`
//! forwards any POST path unread, an explicit list without it only what it claims, and vLLM's
//! token-id requests get prefix affinity.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use common::{Seen, Setup, echo_upstream, expect_error};
use parking_lot::Mutex;
use serde_json::json;

type Echoes = Vec<(SocketAddr, Arc<Mutex<Vec<Seen>>>)>;

async fn echoes(n: usize) -> Echoes {
    let mut all = Vec::new();
    for _ in 0..n {
        all.push(echo_upstream().await);
    }
    all
}

/// The index of the echo server that saw request number `count + 1` (the one just sent).
fn served_by(echoes: &Echoes, seen_before: &mut [usize]) -> usize {
    let now: Vec<usize> = echoes.iter().map(|(_, seen)| seen.lock().len()).collect();
    let served: Vec<usize> = (0..now.len())
        .filter(|&i| now[i] > seen_before[i])
        .collect();
    assert_eq!(served.len(), 1, "{now:?} vs {seen_before:?}");
    seen_before.copy_from_slice(&now);
    served[0]
}

const WITH_PASSTHROUGH: &str = "
plugins:
- {type: openai-parser}
- {type: passthrough-parser}
- {type: queue-scorer}
requestHandler:
  parsers: [{pluginRef: openai-parser}, {pluginRef: passthrough-parser}]
schedulingProfiles:
- name: default
  plugins: [{pluginRef: queue-scorer}]
";

#[tokio::test]
async fn the_default_parsers_read_their_paths_and_forward_nothing_unread() {
    let echoes = echoes(2).await;
    let gateway = Setup::new(echoes.iter().map(|(a, _)| *a))
        .without_scraping()
        .start()
        .await;
    let response = gateway
        .http
        .post(gateway.url("/v1/load_lora_adapter"))
        .body("{}")
        .send()
        .await
        .unwrap();
    expect_error(response, 404, "not_found").await;
    assert!(echoes.iter().all(|(_, seen)| seen.lock().is_empty()));

    // Anthropic's messages API is in the default list.
    let body = json!({"model": "model-a", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(gateway.post("/v1/messages", &body).await.status(), 200);
    let metrics = gateway.metrics().await;
    assert!(
        metrics.contains("shepherd_gateway_requests_total{api=\"messages\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_listed_passthrough_parser_forwards_any_post_path_unread() {
    let echoes = echoes(2).await;
    let gateway = Setup::new(echoes.iter().map(|(a, _)| *a))
        .without_scraping()
        .yaml(WITH_PASSTHROUGH)
        .start()
        .await;
    let response = gateway
        .http
        .post(gateway.url("/custom/endpoint?x=1"))
        .body("not json at all")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen: Vec<String> = echoes
        .iter()
        .flat_map(|(_, seen)| {
            seen.lock()
                .iter()
                .map(|s| format!("{} {}", s.path, s.body))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(seen, ["/custom/endpoint?x=1 not json at all"]);

    // Only POSTs are proxied.
    let response = gateway
        .http
        .get(gateway.url("/custom/endpoint"))
        .send()
        .await
        .unwrap();
    expect_error(response, 404, "not_found").await;
    let metrics = gateway.metrics().await;
    assert!(
        metrics.contains("shepherd_gateway_requests_total{api=\"unparsed\"} 1"),
        "{metrics}"
    );
}

const VLLM_AND_OPENAI: &str = "
plugins:
- {type: vllmhttp-parser}
- {type: openai-parser}
- {type: prefix-cache-scorer}
- {type: max-score-picker}
requestHandler:
  parsers: [{pluginRef: vllmhttp-parser}, {pluginRef: openai-parser}]
schedulingProfiles:
- name: default
  plugins: [{pluginRef: prefix-cache-scorer}, {pluginRef: max-score-picker}]
";

#[tokio::test]
async fn an_explicit_list_refuses_what_it_does_not_claim() {
    let echoes = echoes(1).await;
    let gateway = Setup::new(echoes.iter().map(|(a, _)| *a))
        .without_scraping()
        .yaml(VLLM_AND_OPENAI)
        .start()
        .await;
    let response = gateway.post("/custom/endpoint", &json!({})).await;
    expect_error(response, 404, "not_found").await;
    let body = json!({"model": "model-a", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
    expect_error(gateway.post("/v1/messages", &body).await, 404, "not_found").await;
    // OpenAI paths are still taken.
    let body = json!({"model": "model-a", "prompt": "hi"});
    let response = gateway.post("/v1/completions", &body).await;
    assert_eq!(response.status(), 200);
    assert!(
        echoes[0]
            .1
            .lock()
            .iter()
            .all(|s| s.path == "/v1/completions")
    );
}

fn generate(prefix: u32, suffix: u32) -> serde_json::Value {
    let mut tokens: Vec<u32> = (0..512).map(|i| prefix * 100_000 + i).collect();
    tokens.extend([suffix, suffix + 1]);
    json!({"model": "model-a", "token_ids": tokens, "sampling_params": {"max_tokens": 16}})
}

#[tokio::test]
async fn vllm_token_ids_get_prefix_affinity() {
    let echoes = echoes(4).await;
    let gateway = Setup::new(echoes.iter().map(|(a, _)| *a))
        .without_scraping()
        .yaml(VLLM_AND_OPENAI)
        .start()
        .await;
    let mut counts = vec![0; echoes.len()];
    let mut firsts = std::collections::HashSet::new();
    for prefix in 1..=8 {
        let response = gateway
            .post("/inference/v1/generate", &generate(prefix, 1))
            .await;
        assert_eq!(response.status(), 200);
        let first = served_by(&echoes, &mut counts);
        for suffix in 2..6 {
            let response = gateway
                .post("/inference/v1/generate", &generate(prefix, suffix * 7))
                .await;
            assert_eq!(response.status(), 200);
            assert_eq!(served_by(&echoes, &mut counts), first, "prefix {prefix}");
        }
        firsts.insert(first);
    }
    assert!(firsts.len() > 1, "{firsts:?}");
    // The body went on unchanged.
    let seen = echoes[0].1.lock();
    if let Some(s) = seen.first() {
        assert_eq!(s.path, "/inference/v1/generate");
        let body: serde_json::Value = serde_json::from_str(&s.body).unwrap();
        assert_eq!(body["token_ids"].as_array().unwrap().len(), 514);
    }
}

const GRPC_AND_OPENAI: &str = "
plugins:
- {type: vllmgrpc-parser}
- {type: openai-parser}
- {type: queue-scorer}
requestHandler:
  parsers: [{pluginRef: vllmgrpc-parser}, {pluginRef: openai-parser}]
schedulingProfiles:
- name: default
  plugins: [{pluginRef: queue-scorer}]
";

/// The gateway speaks HTTP/1.1 to the model servers: a gRPC parser's methods are refused
/// (404), not forwarded; the config loads and its other parsers still work.
#[tokio::test]
async fn grpc_methods_are_not_proxied() {
    let echoes = echoes(1).await;
    let gateway = Setup::new(echoes.iter().map(|(a, _)| *a))
        .without_scraping()
        .yaml(GRPC_AND_OPENAI)
        .start()
        .await;
    // GenerateRequest { text: "Hi" } in a gRPC frame.
    let response = gateway
        .http
        .post(gateway.url("/vllm.grpc.engine.VllmEngine/Generate"))
        .header("content-type", "application/grpc")
        .body(vec![0u8, 0, 0, 0, 4, 0x1a, 2, b'H', b'i'])
        .send()
        .await
        .unwrap();
    expect_error(response, 404, "not_found").await;
    assert!(echoes[0].1.lock().is_empty());
    let body = json!({"model": "model-a", "prompt": "hi"});
    assert_eq!(gateway.post("/v1/completions", &body).await.status(), 200);
}
