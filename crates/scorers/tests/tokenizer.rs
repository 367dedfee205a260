//! The `token-producer`'s real tokenizer against the fixture in `fixtures/tokenizer/` (see its
//! README): chat rendering, token ids equal to Python's, the cache never changing a result,
//! and the errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use serde_json::json;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::request::{
    ApiKind, ChatMessage, ChatMessages, InferenceRequest, ParseLimits, Prompt, parse_openai_request,
};
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::producers::TokenProducer;
use shepherd_scorers::producers::token::{
    self, TokenProducerParameters, TokenizeError, TokenizerFiles,
};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer")
}

fn build(parameters: serde_json::Value) -> Result<Arc<TokenProducer>, PluginError> {
    let shared = SharedState::new(Arc::new(Pool::new()));
    let args = PluginArgs::new("tok", token::TYPE_NAME, &parameters, &shared, 0);
    token::factory(&args)?;
    Ok(shared.resources.get::<TokenProducer>("tok").unwrap())
}

fn cached() -> &'static TokenProducer {
    static PRODUCER: OnceLock<Arc<TokenProducer>> = OnceLock::new();
    PRODUCER.get_or_init(|| build(json!({"tokenizerPath": fixture()})).unwrap())
}

fn uncached() -> &'static TokenProducer {
    static PRODUCER: OnceLock<Arc<TokenProducer>> = OnceLock::new();
    PRODUCER
        .get_or_init(|| build(json!({"tokenizerPath": fixture(), "cacheMaxTokens": 0})).unwrap())
}

fn parse(path: &str, body: &serde_json::Value) -> InferenceRequest {
    parse_openai_request(path, body.to_string().as_bytes(), &ParseLimits::default()).unwrap()
}

fn ids(producer: &TokenProducer, request: &InferenceRequest) -> Result<Vec<u32>, TokenizeError> {
    match producer.prompt_for(request)? {
        Cow::Owned(Prompt::Tokens(ids)) => Ok(ids),
        other => panic!("expected owned token ids, got {other:?}"),
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("shepherd-tokenizer-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn copy_fixture(to: &Path, files: &[&str]) {
    for file in files {
        std::fs::copy(fixture().join(file), to.join(file)).unwrap();
    }
}

#[test]
fn the_fixture_loads_exact_and_caching() {
    let producer = cached();
    assert!(producer.is_exact());
    assert!(producer.has_chat_template());
    assert!(producer.is_caching());
    assert!(!uncached().is_caching());
}

#[test]
fn chat_rendering_matches_a_hand_written_string() {
    let request = parse(
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": [{"type": "text", "text": "  Hi!"}, {"type": "text", "text": "Bye. "}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
                "function": {"name": "f", "arguments": "{\"q\": \"Zürich\", \"n\": 1e20}"}}]},
        ]}),
    );
    let text = cached()
        .render_chat(request.chat.as_deref().unwrap())
        .unwrap();
    assert_eq!(
        text,
        "<|begin_of_text|>\
         <|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>\
         <|start_header_id|>user<|end_header_id|>\n\nHi!\nBye.<|eot_id|>\
         <|start_header_id|>assistant<|end_header_id|>\n\n\
         {\"name\": \"f\", \"parameters\": {\"q\": \"Zürich\", \"n\": 1e+20}}<|eot_id|>\
         <|start_header_id|>assistant<|end_header_id|>\n\n"
    );
}

#[test]
fn ids_equal_pythons_for_the_same_files_and_inputs() {
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("expected.json")).unwrap())
            .unwrap();
    let cases = expected.as_array().unwrap();
    assert!(cases.len() >= 10);
    for round in 0..2 {
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let request = parse(case["path"].as_str().unwrap(), &case["body"]);
            let want: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
            if let Some(rendered) = case["rendered"].as_str() {
                let chat = request.chat.as_deref().unwrap();
                assert_eq!(cached().render_chat(chat).unwrap(), rendered, "{name}");
            }
            for producer in [cached(), uncached()] {
                assert_eq!(
                    ids(producer, &request).unwrap(),
                    want,
                    "{name}, round {round}"
                );
            }
        }
    }
    let stats = cached().cache_stats().unwrap();
    assert!(stats.hits > 0 && stats.tokens > 0, "{stats:?}");
}

#[test]
fn a_longer_conversation_reuses_its_earlier_turns() {
    let producer = build(json!({"tokenizerPath": fixture()})).unwrap();
    let mut messages =
        vec![json!({"role": "system", "content": "You are a careful assistant. ".repeat(50)})];
    let mut previous_misses = 0;
    for turn in 0..5 {
        messages.push(
            json!({"role": "user", "content": format!("Question {turn}: {}", "why? ".repeat(40))}),
        );
        let request = parse(
            "/v1/chat/completions",
            &json!({"model": "m", "messages": messages}),
        );
        let got = ids(&producer, &request).unwrap();
        assert_eq!(got, ids(uncached(), &request).unwrap());
        let stats = producer.cache_stats().unwrap();
        if turn > 0 {
            // Only the new message (and at most the generation prompt) is tokenized again.
            assert!(stats.misses - previous_misses <= 2, "{stats:?}");
        }
        previous_misses = stats.misses;
        messages.push(json!({"role": "assistant", "content": format!("Answer {turn}.")}));
    }
}

#[test]
fn completions_prompts_are_cached_with_their_special_tokens() {
    let producer = build(json!({"tokenizerPath": fixture()})).unwrap();
    let request = parse(
        "/v1/completions",
        &json!({"model": "m", "prompt": "A prompt sent twice.<|eot_id|>With a special token."}),
    );
    let first = ids(&producer, &request).unwrap();
    assert_eq!(first[0], 0, "<|begin_of_text|> first");
    assert_eq!(first, ids(uncached(), &request).unwrap());
    let misses = producer.cache_stats().unwrap().misses;
    assert_eq!(ids(&producer, &request).unwrap(), first);
    let stats = producer.cache_stats().unwrap();
    assert_eq!(stats.misses, misses, "{stats:?}");
    assert!(stats.hits >= 2, "{stats:?}");
}

#[test]
fn concurrent_requests_get_the_same_ids() {
    let producer = build(json!({"tokenizerPath": fixture(), "cacheMaxTokens": 4096})).unwrap();
    let requests: Vec<InferenceRequest> = (0..8)
        .map(|i| {
            parse(
                "/v1/chat/completions",
                &json!({"model": "m", "messages": [
                    {"role": "system", "content": "Shared system prompt. ".repeat(20)},
                    {"role": "user", "content": format!("Question {} {}", i % 3, "text ".repeat(30))}]}),
            )
        })
        .collect();
    let want: Vec<Vec<u32>> = requests
        .iter()
        .map(|r| ids(uncached(), r).unwrap())
        .collect();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..20 {
                    for (request, want) in requests.iter().zip(&want) {
                        assert_eq!(&ids(&producer, request).unwrap(), want);
                    }
                }
            });
        }
    });
    assert!(producer.cache_stats().unwrap().tokens <= 4096);
}

#[test]
fn token_ids_pass_through_and_the_estimate_backend_borrows() {
    let given = InferenceRequest::new("r", "m", Prompt::Tokens(vec![5, 6, 7]));
    assert!(matches!(
        cached().prompt_for(&given).unwrap(),
        Cow::Borrowed(Prompt::Tokens(ids)) if ids == &[5, 6, 7]
    ));
    let estimate = build(serde_json::Value::Null).unwrap();
    let text = parse("/v1/completions", &json!({"model": "m", "prompt": "hello"}));
    assert!(matches!(
        estimate.prompt_for(&text).unwrap(),
        Cow::Borrowed(Prompt::Text(_))
    ));
    assert!(estimate.encode("x", false).is_err());
}

#[test]
fn what_is_not_reproduced_is_a_typed_error() {
    let tools = parse(
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "f"}}]}),
    );
    assert!(matches!(
        cached().prompt_for(&tools),
        Err(TokenizeError::Unsupported(_))
    ));
    let image = parse(
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]}),
    );
    assert!(matches!(
        cached().prompt_for(&image),
        Err(TokenizeError::Unsupported(_))
    ));
    let responses = parse("/v1/responses", &json!({"model": "m", "input": "hi"}));
    assert!(matches!(
        cached().prompt_for(&responses),
        Err(TokenizeError::Unsupported(_))
    ));
    let mut by_hand = InferenceRequest::new("r", "m", Prompt::Text("<|user|>hi\n".into()));
    by_hand.api = ApiKind::ChatCompletions;
    assert_eq!(
        cached().prompt_for(&by_hand),
        Err(TokenizeError::MissingMessages)
    );
    let bad_role = parse(
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [{"role": "narrator", "content": "hi"}]}),
    );
    match cached().prompt_for(&bad_role) {
        Err(TokenizeError::Render(message)) => {
            assert!(message.contains("Unknown role: narrator"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // A failed request counts by estimate.
    assert!(!cached().count(&bad_role).exact);
    assert!(
        cached()
            .count(&parse(
                "/v1/completions",
                &json!({"model": "m", "prompt": "hi"})
            ))
            .exact
    );
}

#[test]
fn missing_files_bad_json_and_bad_templates_fail_at_load() {
    let err = |parameters: serde_json::Value| build(parameters).unwrap_err().to_string();

    let missing = err(json!({"tokenizerPath": "/nonexistent/tokenizer.json"}));
    assert!(
        missing.contains("tokenizerPath") && missing.contains("/nonexistent"),
        "{missing}"
    );

    let empty = scratch("empty");
    let no_tokenizer = err(json!({"tokenizerPath": empty}));
    assert!(no_tokenizer.contains("no tokenizer.json"), "{no_tokenizer}");

    let bad = scratch("bad-json");
    std::fs::write(bad.join("tokenizer.json"), "{ not json").unwrap();
    let bad_tokenizer = err(json!({"tokenizerPath": bad}));
    assert!(bad_tokenizer.contains("tokenizer.json"), "{bad_tokenizer}");

    let bad_config = scratch("bad-config");
    copy_fixture(&bad_config, &["tokenizer.json"]);
    std::fs::write(bad_config.join("tokenizer_config.json"), "[1,").unwrap();
    let config_error = err(json!({"tokenizerPath": bad_config}));
    assert!(
        config_error.contains("tokenizer_config.json"),
        "{config_error}"
    );

    let broken = scratch("broken-template");
    std::fs::write(
        broken.join("t.jinja"),
        "{% for m in messages %}{{ m.content }}",
    )
    .unwrap();
    let template_error =
        err(json!({"tokenizerPath": fixture(), "chatTemplatePath": broken.join("t.jinja")}));
    assert!(
        template_error.contains("chatTemplatePath") && template_error.contains("t.jinja"),
        "{template_error}"
    );

    std::fs::write(
        broken.join("raises.jinja"),
        "{{ raise_exception('no chat here') }}",
    )
    .unwrap();
    let raises =
        err(json!({"tokenizerPath": fixture(), "chatTemplatePath": broken.join("raises.jinja")}));
    assert!(raises.contains("no chat here"), "{raises}");

    let missing_template =
        err(json!({"tokenizerPath": fixture(), "chatTemplatePath": broken.join("none.jinja")}));
    assert!(
        missing_template.contains("none.jinja"),
        "{missing_template}"
    );
}

#[test]
fn a_template_override_and_a_model_without_template() {
    let dir = scratch("override");
    std::fs::write(
        dir.join("plain.jinja"),
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
    )
    .unwrap();
    let producer =
        build(json!({"tokenizerPath": fixture(), "chatTemplatePath": dir.join("plain.jinja")}))
            .unwrap();
    let chat = ChatMessages {
        messages: vec![ChatMessage {
            role: "user".into(),
            content: "hi".into(),
            ..ChatMessage::default()
        }],
        has_tools: false,
    };
    assert_eq!(producer.render_chat(&chat).unwrap(), "user: hi\n");

    // tokenizer.json alone: completions work, chat has no template.
    let bare = scratch("bare");
    copy_fixture(&bare, &["tokenizer.json"]);
    let producer = build(json!({"tokenizerPath": bare.join("tokenizer.json")})).unwrap();
    assert!(!producer.has_chat_template());
    let chat = parse(
        "/v1/chat/completions",
        &json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(
        producer.prompt_for(&chat),
        Err(TokenizeError::NoChatTemplate)
    );
    let text = parse("/v1/completions", &json!({"model": "m", "prompt": "hi"}));
    assert_eq!(
        ids(&producer, &text).unwrap(),
        ids(cached(), &text).unwrap()
    );
}

#[test]
fn model_names_are_found_in_a_local_hub_cache_only() {
    let root = scratch("hub");
    let entry = root.join("models--shepherd--tiny");
    let snapshot = entry.join("snapshots").join("0123abc");
    std::fs::create_dir_all(&snapshot).unwrap();
    copy_fixture(&snapshot, &["tokenizer.json", "tokenizer_config.json"]);
    let roots = vec![root.clone()];
    let found = TokenizerFiles::for_model("shepherd/tiny", &roots).unwrap();
    assert_eq!(found.tokenizer, snapshot.join("tokenizer.json"));

    // Two snapshots: refs/main decides; without it, an error.
    std::fs::create_dir_all(entry.join("snapshots").join("fffffff")).unwrap();
    assert!(TokenizerFiles::for_model("shepherd/tiny", &roots).is_err());
    std::fs::create_dir_all(entry.join("refs")).unwrap();
    std::fs::write(entry.join("refs").join("main"), "0123abc\n").unwrap();
    assert_eq!(
        TokenizerFiles::for_model("shepherd/tiny", &roots)
            .unwrap()
            .tokenizer,
        snapshot.join("tokenizer.json")
    );

    let parameters: TokenProducerParameters =
        serde_json::from_value(json!({"modelName": "shepherd/tiny"})).unwrap();
    assert!(parameters.producer_in("tok", &roots).unwrap().is_exact());
    let missing: TokenProducerParameters =
        serde_json::from_value(json!({"modelName": "meta-llama/Llama-3.1-8B-Instruct"})).unwrap();
    // Not on disk: never downloaded; rendered by the model server, as upstream does with
    // `modelName` alone, and a warning says so.
    let rendered = missing.producer_in("tok", &roots).unwrap();
    assert_eq!(
        rendered.render_backend().unwrap().model(),
        "meta-llama/Llama-3.1-8B-Instruct"
    );
    let warning = &missing.warnings_in(&roots)[0];
    assert!(
        warning.contains("no local tokenizer") && warning.contains("tokenizerPath"),
        "{warning}"
    );

    // A local directory as the model name, as vLLM allows.
    let local: TokenProducerParameters =
        serde_json::from_value(json!({"modelName": fixture()})).unwrap();
    assert!(local.producer_in("tok", &[]).unwrap().has_chat_template());
}

/// Text built from pieces that stress the cut: special tokens, whitespace runs, digits,
/// apostrophes, non-ASCII, and near-misses of special tokens.
fn text_strategy() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("<|eot_id|>".to_owned()),
        Just("<|begin_of_text|>".to_owned()),
        Just("<|start_header_id|>".to_owned()),
        Just("<|end_header_id|>".to_owned()),
        Just("<|eot_id".to_owned()),
        Just("<|".to_owned()),
        Just("\n\n".to_owned()),
        Just("   ".to_owned()),
        Just("'s".to_owned()),
        Just("12345".to_owned()),
        Just("é".to_owned()),
        Just("🙂".to_owned()),
        "[a-zA-Z ,.!?\n\t]{0,12}",
        "\\PC{0,6}",
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn the_cache_never_changes_text_ids(text in text_strategy(), add_special in any::<bool>()) {
        let whole = uncached().encode(&text, add_special).unwrap();
        // Twice: a miss, then (for every piece) a hit.
        prop_assert_eq!(&cached().encode(&text, add_special).unwrap(), &whole);
        prop_assert_eq!(&cached().encode(&text, add_special).unwrap(), &whole);
    }

    #[test]
    fn the_cache_never_changes_chat_ids(
        turns in proptest::collection::vec(
            (prop_oneof![Just("system"), Just("user"), Just("assistant")], text_strategy()),
            1..6,
        ),
    ) {
        let messages: Vec<_> = turns
            .iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect();
        let request = parse("/v1/chat/completions", &json!({"model": "m", "messages": messages}));
        let whole = ids(uncached(), &request).unwrap();
        prop_assert_eq!(&ids(cached(), &request).unwrap(), &whole);
        prop_assert_eq!(&ids(cached(), &request).unwrap(), &whole);
    }
}
