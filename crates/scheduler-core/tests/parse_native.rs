#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The non-OpenAI parsers on bodies shaped as their APIs document them: vLLM's and SGLang's
//! generate endpoints, Anthropic's messages, and the passthrough parser.

use shepherd_scheduler_core::request::{
    ApiKind, InferenceRequest, ParseError, ParseLimits, ParserKind, Prompt,
};

fn parse(kind: ParserKind, path: &str, body: &str) -> Result<InferenceRequest, ParseError> {
    kind.parse(path, body.as_bytes(), &ParseLimits::default())
}

fn vllm(body: &str) -> Result<InferenceRequest, ParseError> {
    parse(ParserKind::VllmHttp, "/inference/v1/generate", body)
}

fn sglang(body: &str) -> Result<InferenceRequest, ParseError> {
    parse(ParserKind::SglangHttp, "/generate", body)
}

fn anthropic(body: &str) -> Result<InferenceRequest, ParseError> {
    parse(ParserKind::Anthropic, "/v1/messages", body)
}

fn text(request: &InferenceRequest) -> &str {
    match &request.prompt {
        Prompt::Text(text) => text,
        Prompt::Tokens(_) => panic!("tokens"),
    }
}

#[test]
fn vllm_generate_reads_tokens_model_and_limits() {
    let req = vllm(
        r#"{"model":"llama","token_ids":[151644,872,198,3838],"sampling_params":{"temperature":0.8,"max_tokens":128},"stream":true,"cache_salt":"abc123",
            "features":{"mm_hashes":{"image":["abc123hash"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]}}}"#,
    )
    .unwrap();
    assert_eq!(req.api, ApiKind::VllmGenerate);
    assert_eq!(req.prompt, Prompt::Tokens(vec![151644, 872, 198, 3838]));
    assert_eq!(
        (req.model.as_str(), req.stream, req.max_tokens),
        ("llama", true, Some(128))
    );

    // Only token_ids are required; the model is whatever the body says, if anything.
    let req = vllm(r#"{"token_ids":[1,2,3]}"#).unwrap();
    assert_eq!(
        (req.model.as_str(), req.stream, req.max_tokens),
        ("", false, None)
    );
    let req =
        vllm(r#"{"token_ids":[1],"model":7,"stream":"yes","sampling_params":{"max_tokens":-1}}"#)
            .unwrap();
    assert_eq!(
        (req.model.as_str(), req.stream, req.max_tokens),
        ("", false, None)
    );
    let req = vllm(r#"{"token_ids":[1],"sampling_params":{"max_tokens":64.0}}"#).unwrap();
    assert_eq!(req.max_tokens, Some(64));

    // LoRA adapters resolve as for OpenAI bodies.
    let limits = ParseLimits::default().with_lora_adapter("sql-lora", "llama");
    let req = ParserKind::VllmHttp
        .parse(
            "/inference/v1/generate",
            br#"{"model":"sql-lora","token_ids":[5]}"#,
            &limits,
        )
        .unwrap();
    assert_eq!(
        (req.model.as_str(), req.lora.as_deref()),
        ("llama", Some("sql-lora"))
    );
}

#[test]
fn vllm_generate_errors_name_the_field() {
    assert_eq!(
        vllm(r#"{"sampling_params":{}}"#).unwrap_err(),
        ParseError::MissingField("token_ids")
    );
    assert_eq!(
        vllm(r#"{"token_ids":null}"#).unwrap_err(),
        ParseError::MissingField("token_ids")
    );
    assert_eq!(
        vllm(r#"{"token_ids":[]}"#).unwrap_err(),
        ParseError::EmptyPrompt
    );
    for (body, field) in [
        (r#"{"token_ids":[1,2,-1]}"#, "token_ids[2]"),
        (r#"{"token_ids":[1,2.5]}"#, "token_ids[1]"),
        (r#"{"token_ids":[4294967296]}"#, "token_ids[0]"),
        (r#"{"token_ids":[[1,2]]}"#, "token_ids[0]"),
        (r#"{"token_ids":"hello"}"#, "token_ids"),
    ] {
        match vllm(body).unwrap_err() {
            ParseError::InvalidField { field: found, .. } => assert_eq!(found, field, "{body}"),
            other => panic!("{body}: {other}"),
        }
    }
    assert!(matches!(
        vllm(r#"{"token_ids":[1]"#),
        Err(ParseError::InvalidJson(_))
    ));
    assert_eq!(vllm("[1,2]").unwrap_err(), ParseError::NotAnObject);
    // A repeated key keeps its last value.
    let req = vllm(r#"{"token_ids":[1],"token_ids":[2,3]}"#).unwrap();
    assert_eq!(req.prompt, Prompt::Tokens(vec![2, 3]));
}

#[test]
fn sglang_generate_reads_input_ids() {
    let req = sglang(
        r#"{"input_ids":[1,2,3],"extra_key":"salt-abc","sampling_params":{"max_new_tokens":256,"temperature":0},"stream":true,"text":"ignored"}"#,
    )
    .unwrap();
    assert_eq!(req.api, ApiKind::SglangGenerate);
    assert_eq!(req.prompt, Prompt::Tokens(vec![1, 2, 3]));
    assert_eq!(
        (req.model.as_str(), req.stream, req.max_tokens),
        ("", true, Some(256))
    );

    assert_eq!(
        sglang(r#"{"text":"hello"}"#).unwrap_err(),
        ParseError::MissingField("input_ids")
    );
    assert_eq!(
        sglang(r#"{"input_embeds":[[0.1]]}"#).unwrap_err(),
        ParseError::MissingField("input_ids")
    );
    assert_eq!(
        sglang(r#"{"input_ids":[]}"#).unwrap_err(),
        ParseError::EmptyPrompt
    );
    for (body, field) in [
        (r#"{"input_ids":[[1,2],[3,4]]}"#, "input_ids[0]"),
        (r#"{"input_ids":[1,2],"extra_key":["a","b"]}"#, "extra_key"),
        (r#"{"input_ids":[1,-2]}"#, "input_ids[1]"),
    ] {
        match sglang(body).unwrap_err() {
            ParseError::InvalidField { field: found, .. } => assert_eq!(found, field, "{body}"),
            other => panic!("{body}: {other}"),
        }
    }
    // vLLM's field name is not SGLang's.
    assert_eq!(
        sglang(r#"{"token_ids":[1]}"#).unwrap_err(),
        ParseError::MissingField("input_ids")
    );
}

#[test]
fn anthropic_messages_render_like_chat() {
    let req = anthropic(
        r#"{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"Be brief.","messages":[{"role":"user","content":"Hi"}],"stream":true}"#,
    )
    .unwrap();
    assert_eq!(req.api, ApiKind::Messages);
    assert_eq!(text(&req), "<|system|>Be brief.\n<|user|>Hi\n");
    assert_eq!(
        (req.model.as_str(), req.stream, req.max_tokens),
        ("claude-sonnet-4-5", true, Some(1024))
    );

    // The same conversation in chat completions renders the same text.
    let chat = ParserKind::OpenAi
        .parse(
            "/v1/chat/completions",
            br#"{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}"#,
            &ParseLimits::default(),
        )
        .unwrap();
    assert_eq!(chat.prompt, req.prompt);
}

#[test]
fn anthropic_blocks_tools_and_cache_control() {
    let first = anthropic(
        r#"{"model":"claude","max_tokens":64,
            "tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object"}}],
            "system":[{"type":"text","text":"You are terse.","cache_control":{"type":"ephemeral"}}],
            "messages":[
              {"role":"user","content":[
                 {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
                 {"type":"image","source":{"type":"url","url":"https://example.com/cat.png"}},
                 {"type":"text","text":"What is the weather?","cache_control":{"type":"ephemeral"}}]},
              {"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Paris"}}]},
              {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"Sunny"}]}]}"#,
    )
    .unwrap();
    let rendered = text(&first);
    assert!(rendered.starts_with(r#"<|tool|>{"name":"get_weather","description":"Weather","input_schema":{"type":"object"}}"#), "{rendered}");
    assert!(
        rendered.contains("<|system|>You are terse.\n<|user|><|image|>"),
        "{rendered}"
    );
    assert!(
        !rendered.contains("iVBORw0KGgo"),
        "inline data is hashed: {rendered}"
    );
    assert!(
        rendered.contains("<|image|>https://example.com/cat.png\nWhat is the weather?\n"),
        "{rendered}"
    );
    assert!(
        rendered.contains(
            r#"<|assistant|><|id|>"toolu_01"<|name|>"get_weather"<|input|>{"city":"Paris"}"#
        ),
        "{rendered}"
    );
    assert!(
        rendered.ends_with("<|user|><|tool_use_id|>\"toolu_01\"<|content|>\"Sunny\"\n"),
        "{rendered}"
    );
    assert!(!rendered.contains("ephemeral"), "{rendered}");

    // Moving the cache breakpoint to a later turn keeps the rendered prefix.
    let second = anthropic(
        r#"{"model":"claude","max_tokens":64,"system":"S","messages":[
              {"role":"user","content":[{"type":"text","text":"one"}]},
              {"role":"assistant","content":"two"},
              {"role":"user","content":[{"type":"text","text":"three","cache_control":{"type":"ephemeral"}}]}]}"#,
    )
    .unwrap();
    let earlier = anthropic(
        r#"{"model":"claude","max_tokens":64,"system":"S","messages":[
              {"role":"user","content":[{"type":"text","text":"one","cache_control":{"type":"ephemeral"}}]}]}"#,
    )
    .unwrap();
    assert!(text(&second).starts_with(text(&earlier)));
}

#[test]
fn anthropic_errors() {
    assert_eq!(
        anthropic(r#"{"model":"c","max_tokens":1}"#).unwrap_err(),
        ParseError::MissingField("messages")
    );
    assert_eq!(
        anthropic(r#"{"model":"c","messages":[]}"#).unwrap_err(),
        ParseError::EmptyPrompt
    );
    assert_eq!(
        anthropic(r#"{"messages":[{"role":"user","content":"x"}]}"#).unwrap_err(),
        ParseError::MissingField("model")
    );
    match anthropic(
        r#"{"model":"c","messages":[{"role":"user","content":[{"type":"text","text":5}]}]}"#,
    )
    .unwrap_err()
    {
        ParseError::InvalidField { field, .. } => assert_eq!(field, "messages[0].content[0].text"),
        other => panic!("{other}"),
    }
    match anthropic(r#"{"model":"c","system":7,"messages":[{"role":"user","content":"x"}]}"#)
        .unwrap_err()
    {
        ParseError::InvalidField { field, .. } => assert_eq!(field, "system"),
        other => panic!("{other}"),
    }
    match anthropic(r#"{"model":"c","messages":[{"content":"x"}]}"#).unwrap_err() {
        ParseError::InvalidField { field, .. } => assert_eq!(field, "messages[0]"),
        other => panic!("{other}"),
    }
    // count_tokens is forwarded unread, whatever its body.
    let req = parse(
        ParserKind::Anthropic,
        "/v1/messages/count_tokens",
        "not json",
    )
    .unwrap();
    assert_eq!(req.api, ApiKind::Unparsed);
}

#[test]
fn passthrough_reads_nothing() {
    let body = "\u{0}\u{1}binary or anything";
    let req = parse(ParserKind::Passthrough, "/v1/audio/speech", body).unwrap();
    assert_eq!(req.api, ApiKind::Unparsed);
    assert_eq!((req.model.as_str(), req.lora.as_deref()), ("", None));
    assert!(req.prompt.is_empty());
    assert_eq!(req.body_size, body.len());
    assert!(!req.stream);
}
