//! `/v1/chat/completions` bodies: messages, content parts, tools, and the prefix property.

use shepherd_scheduler_core::request::{
    ApiKind, InferenceRequest, ParseError, ParseLimits, Prompt, parse_openai_request,
};

fn chat(body: &str) -> Result<InferenceRequest, ParseError> {
    parse_openai_request(
        "/v1/chat/completions",
        body.as_bytes(),
        &ParseLimits::default(),
    )
}

fn text(req: &InferenceRequest) -> &str {
    match &req.prompt {
        Prompt::Text(t) => t,
        Prompt::Tokens(_) => panic!("expected text"),
    }
}

#[test]
fn string_messages_render_in_order() {
    let req = chat(
        r#"{"model":"llama","stream":true,"max_completion_tokens":9,"messages":[
            {"role":"system","content":"Be brief."},
            {"role":"user","content":"Hi"},
            {"role":"assistant","content":"Hello!"},
            {"role":"user","content":"Bye"}]}"#,
    )
    .unwrap();
    assert_eq!(req.api, ApiKind::ChatCompletions);
    assert_eq!(req.model, "llama");
    assert!(req.stream);
    assert_eq!(req.max_tokens, Some(9));
    assert_eq!(
        text(&req),
        "<|system|>Be brief.\n<|user|>Hi\n<|assistant|>Hello!\n<|user|>Bye\n"
    );
}

#[test]
fn content_parts_render_text_and_stable_media_placeholders() {
    let req = chat(
        r#"{"model":"m","messages":[{"role":"user","content":[
            {"type":"text","text":"Look:"},
            {"type":"image_url","image_url":{"url":"https://x.test/a.png","detail":"high"}},
            {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
            {"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},
            {"type":"file","file":{"file_id":"file-123"}},
            {"type":"mystery"}]}]}"#,
    )
    .unwrap();
    let rendered = text(&req);
    let lines: Vec<&str> = rendered.lines().collect();
    assert_eq!(lines[0], "<|user|>Look:");
    assert_eq!(lines[1], "<|image|>https://x.test/a.png");
    assert!(lines[2].starts_with("<|image|>xxh3:"), "{}", lines[2]);
    assert!(
        !rendered.contains("iVBORw0KGgo"),
        "inline data must be hashed"
    );
    assert!(lines[3].starts_with("<|audio|>xxh3:"), "{}", lines[3]);
    assert_eq!(lines[4], "<|file|>file-123");
    assert_eq!(lines[5], "<|mystery|>");

    // The same inline image always gives the same placeholder.
    let again = chat(
        r#"{"model":"m","messages":[{"role":"user","content":[
            {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}"#,
    )
    .unwrap();
    assert_eq!(
        text(&again).trim_start_matches("<|user|>").trim_end(),
        lines[2]
    );
}

#[test]
fn tools_come_first_and_tool_calls_follow_their_message() {
    let req = chat(
        r#"{"messages":[
              {"role":"user","content":"Weather in Paris?"},
              {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
                  "function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]},
              {"role":"tool","tool_call_id":"c1","content":"18C"}],
            "model":"m",
            "tools":[{"type":"function","function":{"name":"weather","parameters":{}}}]}"#,
    )
    .unwrap();
    assert_eq!(
        text(&req),
        concat!(
            r#"<|tool|>{"type":"function","function":{"name":"weather","parameters":{}}}"#,
            "\n<|user|>Weather in Paris?\n",
            r#"<|assistant|><|tool_calls|>[{"id":"c1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]"#,
            "\n",
            r#"<|tool|><|tool_call_id|>"c1"18C"#,
            "\n"
        )
    );
}

#[test]
fn the_role_heads_the_message_whatever_the_key_order() {
    let a = chat(r#"{"model":"m","messages":[{"role":"user","name":"ann","content":"x"}]}"#);
    let b = chat(r#"{"model":"m","messages":[{"name":"ann","content":"x","role":"user"}]}"#);
    assert_eq!(text(&a.unwrap()), "<|user|><|name|>\"ann\"x\n");
    assert_eq!(text(&b.unwrap()), "<|user|><|name|>\"ann\"x\n");
}

#[test]
fn conversations_sharing_their_first_messages_share_a_prefix() {
    let first = r#"{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"Q1"}]}"#;
    let short = chat(&format!(r#"{{"model":"m","messages":[{first}]}}"#)).unwrap();
    let long = chat(&format!(
        r#"{{"model":"m","messages":[{first},{{"role":"assistant","content":"A1"}},{{"role":"user","content":"Q2"}}]}}"#
    ))
    .unwrap();
    assert!(text(&long).starts_with(text(&short)));
    assert!(text(&long).len() > text(&short).len());
}

#[test]
fn legacy_functions_are_part_of_the_prompt() {
    let req = chat(
        r#"{"model":"m","functions":[{"name":"f"}],"messages":[{"role":"user","content":"x"}]}"#,
    )
    .unwrap();
    assert_eq!(text(&req), "<|function|>{\"name\":\"f\"}\n<|user|>x\n");
}

#[test]
fn null_extra_fields_are_left_out() {
    let req = chat(r#"{"model":"m","messages":[{"role":"user","content":"x","name":null}]}"#);
    assert_eq!(text(&req.unwrap()), "<|user|>x\n");
}

#[test]
fn a_message_without_role_is_named() {
    let err = chat(r#"{"model":"m","messages":[{"role":"user","content":"a"},{"content":"b"}]}"#)
        .unwrap_err();
    match err {
        ParseError::InvalidField { field, reason } => {
            assert_eq!(field, "messages[1]");
            assert!(reason.contains("missing field `role`"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn no_messages_is_an_empty_prompt_and_absent_messages_a_missing_field() {
    assert_eq!(
        chat(r#"{"model":"m","messages":[]}"#).unwrap_err(),
        ParseError::EmptyPrompt
    );
    assert_eq!(
        chat(r#"{"model":"m"}"#).unwrap_err(),
        ParseError::MissingField("messages")
    );
}
