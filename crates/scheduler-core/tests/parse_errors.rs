//! Malformed request bodies: each gives a typed error naming what is wrong, never a panic.

use shepherd_scheduler_core::request::{ParseError, ParseLimits, parse_openai_request};

const MIB: usize = 1024 * 1024;

fn parse(path: &str, body: &[u8]) -> Result<(), ParseError> {
    parse_openai_request(path, body, &ParseLimits::default()).map(|_| ())
}

fn completions(body: &str) -> Result<(), ParseError> {
    parse("/v1/completions", body.as_bytes())
}

fn chat(body: &str) -> Result<(), ParseError> {
    parse("/v1/chat/completions", body.as_bytes())
}

fn invalid_field(result: Result<(), ParseError>) -> (String, String) {
    match result {
        Err(ParseError::InvalidField { field, reason }) => (field, reason),
        other => panic!("expected InvalidField, got {other:?}"),
    }
}

#[test]
fn malformed_json_reports_line_and_column() {
    let err = completions("{\n  \"model\": \"m\",\n  \"prompt\": \"x\" oops\n}").unwrap_err();
    let ParseError::InvalidJson(message) = &err else {
        panic!("{err:?}");
    };
    assert!(message.contains("line 3 column"), "{message}");
    assert_eq!(err.http_status(), 400);
    assert!(
        err.to_string()
            .starts_with("request body is not valid JSON")
    );

    for body in [
        "",
        "   ",
        "{",
        r#"{"model":"m","#,
        r#"{"model":"m","prompt":"x"} trailing"#,
    ] {
        assert!(
            matches!(completions(body), Err(ParseError::InvalidJson(_))),
            "{body:?}"
        );
    }
}

#[test]
fn a_body_that_is_not_an_object() {
    for body in ["[1,2]", "\"prompt\"", "42", " null "] {
        assert_eq!(completions(body), Err(ParseError::NotAnObject), "{body}");
    }
    assert!(matches!(
        completions("[1,"),
        Err(ParseError::InvalidJson(_))
    ));
}

#[test]
fn empty_prompts() {
    for prompt in [r#""""#, "[]", r#"["",""]"#, "[[]]", "[[],[]]"] {
        let body = format!(r#"{{"model":"m","prompt":{prompt}}}"#);
        assert_eq!(completions(&body), Err(ParseError::EmptyPrompt), "{prompt}");
    }
    assert_eq!(
        parse("/v1/embeddings", br#"{"model":"m","input":""}"#),
        Err(ParseError::EmptyPrompt)
    );
    assert_eq!(ParseError::EmptyPrompt.http_status(), 400);
}

#[test]
fn a_20_mib_body_is_too_large() {
    let mut body = br#"{"model":"m","prompt":""#.to_vec();
    body.resize(20 * MIB - 2, b'a');
    body.extend_from_slice(b"\"}");
    let err = parse("/v1/completions", &body).unwrap_err();
    assert_eq!(
        err,
        ParseError::BodyTooLarge {
            size: 20 * MIB,
            limit: 16 * MIB
        }
    );
    assert_eq!(err.http_status(), 413);

    // The limit is checked before anything else, even the path.
    assert!(matches!(
        parse("/nope", &body),
        Err(ParseError::BodyTooLarge { .. })
    ));
    // And it is configurable.
    let limits = ParseLimits::default().with_max_body_bytes(21 * MIB);
    assert!(parse_openai_request("/v1/completions", &body, &limits).is_ok());
    let tiny = ParseLimits::default().with_max_body_bytes(10);
    assert!(matches!(
        parse_openai_request("/v1/completions", br#"{"model":"m","prompt":"x"}"#, &tiny),
        Err(ParseError::BodyTooLarge {
            size: 26,
            limit: 10
        })
    ));
}

#[test]
fn a_body_at_the_limit_is_accepted() {
    let mut body = br#"{"model":"m","prompt":""#.to_vec();
    body.resize(16 * MIB - 2, b'a');
    body.extend_from_slice(b"\"}");
    let req = parse_openai_request("/v1/completions", &body, &ParseLimits::default()).unwrap();
    assert_eq!(req.prompt.len_bytes(), 16 * MIB - 2 - 23);
}

#[test]
fn invalid_utf8_reports_where() {
    let mut body = br#"{"model":"m","prompt":"caf"#.to_vec();
    let at = body.len();
    body.extend_from_slice(&[0xC3, 0x28]);
    body.extend_from_slice(b"\"}");
    let err = parse("/v1/completions", &body).unwrap_err();
    assert_eq!(err, ParseError::InvalidUtf8 { valid_up_to: at });
    assert_eq!(err.http_status(), 400);
    assert!(err.to_string().contains(&format!("at byte {at}")));
}

#[test]
fn wrong_field_types_name_the_field_path() {
    let cases = [
        (r#"{"model":5,"prompt":"x"}"#, "model", "expected a string"),
        (r#"{"model":null,"prompt":"x"}"#, "model", "invalid type"),
        (
            r#"{"model":"m","prompt":"x","stream":"yes"}"#,
            "stream",
            "invalid type",
        ),
        (
            r#"{"model":"m","prompt":"x","max_tokens":-1}"#,
            "max_tokens",
            "u32",
        ),
        (
            r#"{"model":"m","prompt":"x","max_tokens":1.5}"#,
            "max_tokens",
            "floating point",
        ),
        (
            r#"{"model":"m","prompt":{}}"#,
            "prompt",
            "expected a string",
        ),
        (r#"{"model":"m","prompt":null}"#, "prompt", "invalid type"),
        (
            r#"{"model":"m","prompt":[[1],["a"]]}"#,
            "prompt[1][0]",
            "invalid type",
        ),
    ];
    for (body, path, reason_part) in cases {
        let (field, reason) = invalid_field(completions(body));
        assert_eq!(field, path, "{body}");
        assert!(reason.contains(reason_part), "{body}: {reason}");
        assert!(reason.contains("line 1 column"), "{reason}");
    }

    let chat_cases = [
        (r#"{"model":"m","messages":"hi"}"#, "messages"),
        (
            r#"{"model":"m","messages":[{"role":"user","content":"a"},5]}"#,
            "messages[1]",
        ),
        (
            r#"{"model":"m","messages":[{"role":7,"content":"a"}]}"#,
            "messages[0].role",
        ),
        (
            r#"{"model":"m","messages":[{"role":"u","content":"a"},{"role":"u","content":"b"},{"role":"u","content":true}]}"#,
            "messages[2].content",
        ),
        (
            r#"{"model":"m","messages":[{"role":"u","content":["a"]}]}"#,
            "messages[0].content[0]",
        ),
        (
            r#"{"model":"m","messages":[{"role":"u","content":[{"type":"text","text":1}]}]}"#,
            "messages[0].content[0].text",
        ),
        (
            r#"{"model":"m","messages":[{"role":"u","content":[{"type":"image_url","image_url":{"url":5}}]}]}"#,
            "messages[0].content[0].image_url.url",
        ),
        (
            r#"{"model":"m","messages":[{"role":"u","content":"a","tool_calls":[1,}]}"#,
            "",
        ),
        (r#"{"model":"m","messages":[],"tools":{"a":1}}"#, "tools"),
    ];
    for (body, path) in chat_cases {
        match chat(body) {
            Err(ParseError::InvalidField { field, .. }) => assert_eq!(field, path, "{body}"),
            // A syntax error inside a field is a JSON error, not a field error.
            Err(ParseError::InvalidJson(_)) if path.is_empty() => {}
            other => panic!("{body}: {other:?}"),
        }
    }
}

#[test]
fn model_is_required_and_non_empty() {
    assert_eq!(
        completions(r#"{"prompt":"x"}"#),
        Err(ParseError::MissingField("model"))
    );
    let (field, reason) = invalid_field(completions(r#"{"model":"","prompt":"x"}"#));
    assert_eq!(
        (field.as_str(), reason.as_str()),
        ("model", "must not be empty")
    );
    assert_eq!(
        completions(r#"{"model":"m"}"#),
        Err(ParseError::MissingField("prompt"))
    );
}

#[test]
fn unknown_paths_are_unsupported() {
    let err = parse("/v1/models", br#"{"model":"m"}"#).unwrap_err();
    assert_eq!(err, ParseError::UnsupportedPath("/v1/models".into()));
    assert_eq!(err.http_status(), 404);
}

#[test]
fn deep_nesting_is_bounded() {
    let depth = 100_000;
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));

    // Where the value is rendered into the prompt, the JSON recursion limit applies.
    let body =
        format!(r#"{{"model":"m","messages":[{{"role":"u","content":"x"}}],"tools":{nested}}}"#);
    match chat(&body) {
        Err(ParseError::InvalidJson(message)) => {
            assert!(message.contains("recursion limit"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let body = format!(
        r#"{{"model":"m","messages":[{{"role":"u","content":"x","tool_calls":{nested}}}]}}"#
    );
    assert!(matches!(chat(&body), Err(ParseError::InvalidJson(_))));

    // Fields the parser skips are skipped without recursion, however deep.
    let body = format!(r#"{{"model":"m","prompt":"x","logit_bias":{nested}}}"#);
    assert!(completions(&body).is_ok());

    // Unbalanced or top-level nesting is an error, not a stack overflow.
    assert!(matches!(
        completions(&"[".repeat(depth)),
        Err(ParseError::InvalidJson(_))
    ));
    assert_eq!(completions(&nested), Err(ParseError::NotAnObject));
    // A wrong type is reported as soon as it is seen, before the rest is read.
    let body = format!(r#"{{"model":"m","prompt":{}"#, "{\"a\":".repeat(depth));
    let (field, _) = invalid_field(completions(&body));
    assert_eq!(field, "prompt");

    // Nesting within the limit is fine.
    let shallow = format!("{}{}", "[".repeat(100), "]".repeat(100));
    let body =
        format!(r#"{{"model":"m","messages":[{{"role":"u","content":"x"}}],"tools":[{shallow}]}}"#);
    let result = chat(&body);
    assert!(result.is_ok(), "{result:?}");
}

#[test]
fn error_messages_do_not_echo_long_values() {
    let long = "é".repeat(100_000);
    let body = format!(r#"{{"model":"m","messages":"{long}"}}"#);
    let (field, reason) = invalid_field(chat(&body));
    assert_eq!(field, "messages");
    assert!(reason.len() < 300, "{} bytes", reason.len());
    assert!(reason.starts_with("invalid type: string"), "{reason}");
    assert!(
        reason.ends_with(&format!("at line 1 column {}", body.len() - 1)),
        "{reason}"
    );
}
