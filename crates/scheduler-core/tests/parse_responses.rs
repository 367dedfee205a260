//! `/v1/responses` bodies: string input, item arrays, instructions, tools.

use shepherd_scheduler_core::request::{
    ApiKind, InferenceRequest, ParseError, ParseLimits, Prompt, parse_openai_request,
};

fn responses(body: &str) -> Result<InferenceRequest, ParseError> {
    parse_openai_request("/v1/responses", body.as_bytes(), &ParseLimits::default())
}

fn chat(body: &str) -> Result<InferenceRequest, ParseError> {
    parse_openai_request(
        "/v1/chat/completions",
        body.as_bytes(),
        &ParseLimits::default(),
    )
}

#[test]
fn string_input_with_instructions_renders_like_the_same_chat() {
    let req = responses(
        r#"{"model":"m","instructions":"Be brief.","input":"Hi","max_output_tokens":20,"stream":true}"#,
    )
    .unwrap();
    assert_eq!(req.api, ApiKind::Responses);
    assert_eq!(req.max_tokens, Some(20));
    assert!(req.stream);
    let same_chat = chat(
        r#"{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}"#,
    )
    .unwrap();
    assert_eq!(req.prompt, same_chat.prompt);
    assert_eq!(
        req.prompt,
        Prompt::Text("<|system|>Be brief.\n<|user|>Hi\n".into())
    );
}

#[test]
fn item_arrays_with_parts_and_function_calls() {
    let req = responses(
        r#"{"model":"m","tools":[{"type":"function","name":"f"}],"input":[
            {"role":"user","content":[{"type":"input_text","text":"Q"},
                                      {"type":"input_image","image_url":"https://x.test/i.png"}]},
            {"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
            {"type":"function_call_output","call_id":"c1","output":"42"},
            {"type":"message","content":"go on"}]}"#,
    )
    .unwrap();
    assert_eq!(
        req.prompt,
        Prompt::Text(
            concat!(
                "<|tool|>{\"type\":\"function\",\"name\":\"f\"}\n",
                "<|user|>Q\n<|image|>https://x.test/i.png\n",
                "<|function_call|><|call_id|>\"c1\"<|name|>\"f\"<|arguments|>\"{}\"\n",
                "<|function_call_output|><|call_id|>\"c1\"<|output|>\"42\"\n",
                "<|user|>go on\n"
            )
            .into()
        )
    );
}

#[test]
fn instructions_alone_are_a_prompt() {
    let req = responses(r#"{"model":"m","instructions":"Say hi"}"#).unwrap();
    assert_eq!(req.prompt, Prompt::Text("<|system|>Say hi\n".into()));
}

#[test]
fn empty_and_missing_input() {
    assert_eq!(
        responses(r#"{"model":"m","input":[]}"#).unwrap_err(),
        ParseError::EmptyPrompt
    );
    assert_eq!(
        responses(r#"{"model":"m"}"#).unwrap_err(),
        ParseError::MissingField("input")
    );
}

#[test]
fn wrong_item_types_name_the_item() {
    match responses(r#"{"model":"m","input":["a"]}"#).unwrap_err() {
        ParseError::InvalidField { field, reason } => {
            assert_eq!(field, "input[0]");
            assert!(reason.contains("expected an input item object"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    match responses(r#"{"model":"m","instructions":7,"input":"x"}"#).unwrap_err() {
        ParseError::InvalidField { field, .. } => assert_eq!(field, "instructions"),
        other => panic!("{other:?}"),
    }
}
