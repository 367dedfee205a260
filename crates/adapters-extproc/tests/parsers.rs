//! The picker reads each request with the parsers of its config: the default list forwards
//! paths no parser claims, an explicit list refuses them, and vLLM's token-id requests get
//! prefix affinity.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use shepherd_adapters_extproc::ExtProcOptions;

/// Routes a full-duplex request; returns the primary destination.
async fn destination(picker: &Picker, path: &str, body: &[u8]) -> String {
    let mut stream = picker.open().await;
    stream
        .request_headers(&post(path, &[]), false, None, duplex())
        .await;
    stream.request_body(body, true).await;
    let answer = stream.next().await;
    let picked = set_value(headers_answer(&answer), DESTINATION)
        .unwrap_or_else(|| panic!("{path}: not routed: {answer:?}"));
    let streamed: Vec<u8> = stream
        .streamed_request_body()
        .await
        .into_iter()
        .flat_map(|(chunk, _)| chunk)
        .collect();
    assert_eq!(streamed, body, "the body goes on unchanged");
    picked.split(',').next().unwrap().to_string()
}

#[tokio::test]
async fn the_default_parsers_route_an_unknown_path_without_reading_it() {
    let picker = Picker::start(3, ExtProcOptions::default().with_known_models(["llama"])).await;
    // Not JSON, no model: the passthrough fallback routes it on load alone.
    let endpoint = destination(&picker, "/v1/audio/speech", b"\x00\x01RIFF").await;
    assert!(endpoint.starts_with("127.0.0.1:80"), "{endpoint}");
    // An OpenAI path is still read (and its model checked).
    let mut stream = picker.open().await;
    stream
        .request_headers(&post("/v1/completions", &[]), false, None, duplex())
        .await;
    stream
        .request_body(br#"{"model":"gpt-9","prompt":"hi"}"#, true)
        .await;
    let answer = stream.next().await;
    assert_eq!(reason(immediate(&answer)), "unknown_model");
}

#[tokio::test]
async fn a_passthrough_only_picker_routes_any_path() {
    let picker = Picker::start_configured(
        2,
        ExtProcOptions::default(),
        |config| with_parsers(config, &["passthrough-parser"]),
        |s| s,
    )
    .await;
    for path in ["/v1/chat/completions", "/custom/endpoint", "/"] {
        destination(&picker, path, b"{\"not\": \"read\"}").await;
    }
}

#[tokio::test]
async fn an_explicit_list_refuses_what_it_does_not_claim() {
    let picker = Picker::start_configured(
        2,
        ExtProcOptions::default(),
        |config| with_parsers(config, &["vllmhttp-parser"]),
        |s| s,
    )
    .await;
    let mut stream = picker.open().await;
    stream
        .request_headers(&post("/v1/completions", &[]), false, None, duplex())
        .await;
    stream
        .request_body(br#"{"model":"m","prompt":"x"}"#, true)
        .await;
    let answer = stream.next().await;
    assert_eq!(immediate(&answer).status.unwrap().code, 404);
    assert_eq!(reason(immediate(&answer)), "unsupported_path");
}

fn generate(prefix: u32, suffix: u32) -> Vec<u8> {
    let mut tokens: Vec<u32> = (0..512).map(|i| prefix * 100_000 + i).collect();
    tokens.extend([suffix, suffix + 1]);
    serde_json::json!({"model": "llama", "token_ids": tokens, "sampling_params": {"max_tokens": 16}})
        .to_string()
        .into_bytes()
}

#[tokio::test]
async fn vllm_token_ids_get_prefix_affinity() {
    let picker = Picker::start_configured(
        4,
        ExtProcOptions::default(),
        |config| with_parsers(config, &["vllmhttp-parser", "openai-parser"]),
        |s| s,
    )
    .await;
    let mut firsts = std::collections::HashSet::new();
    for prefix in 1..=8 {
        let first = destination(&picker, "/inference/v1/generate", &generate(prefix, 1)).await;
        for suffix in 2..6 {
            let next = destination(
                &picker,
                "/inference/v1/generate",
                &generate(prefix, suffix * 7),
            )
            .await;
            assert_eq!(
                next, first,
                "prefix {prefix}: the same token prefix goes to the same endpoint"
            );
        }
        firsts.insert(first);
    }
    // New prefixes are spread: the affinity above is the prefix's doing.
    assert!(firsts.len() > 1, "{firsts:?}");
}

#[tokio::test]
async fn a_reload_changes_the_parsers_of_the_next_request() {
    let picker = Picker::start(2, ExtProcOptions::default()).await;
    destination(&picker, "/v1/audio/speech", b"x").await;

    let mut config = shepherd_scorers::default_config();
    with_parsers(&mut config, &["openai-parser"]);
    picker
        .scheduler
        .reload(&config, &shepherd_scorers::builtin_registry())
        .unwrap();
    let mut stream = picker.open().await;
    stream
        .request_headers(&post("/v1/audio/speech", &[]), false, None, duplex())
        .await;
    stream.request_body(b"x", true).await;
    let answer = stream.next().await;
    assert_eq!(reason(immediate(&answer)), "unsupported_path");
}
