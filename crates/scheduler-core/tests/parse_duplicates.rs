//! Keys given twice: the last value wins, at the place the key first appeared, as in the model
//! server (Python's `json`), so the prompt text (and its prefix hash) is what the server sees.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use proptest::prelude::*;
use shepherd_scheduler_core::request::{
    InferenceRequest, ParseError, ParseLimits, Prompt, parse_openai_request,
};

fn parse(path: &str, body: &str) -> Result<InferenceRequest, ParseError> {
    parse_openai_request(path, body.as_bytes(), &ParseLimits::default())
}

fn prompt(path: &str, body: &str) -> String {
    match parse(path, body) {
        Ok(request) => match request.prompt {
            Prompt::Text(text) => text,
            Prompt::Tokens(ids) => format!("{ids:?}"),
        },
        Err(e) => panic!("{body}: {e}"),
    }
}

fn chat(body: &str) -> String {
    prompt("/v1/chat/completions", body)
}

#[test]
fn a_content_part_keeps_its_last_text() {
    assert_eq!(
        chat(
            r#"{"model":"m","messages":[{"role":"user","content":[
                {"type":"text","text":"AAA","text":"BBB"}]}]}"#
        ),
        "<|user|>BBB\n"
    );
    // Other keys keep their place; the repeated key takes the place it first had.
    assert_eq!(
        chat(
            r#"{"model":"m","messages":[{"role":"user","content":[
                {"text":"A","refusal":"R","text":"B"},
                {"type":"text","type":"image_url","image_url":"u1","image_url":{"url":"u2","url":"u3"}}]}]}"#
        ),
        "<|user|>BR\n<|image|>u3\n"
    );
}

#[test]
fn a_media_object_keeps_the_last_reference_per_key() {
    assert_eq!(
        chat(
            r#"{"model":"m","messages":[{"role":"user","content":[
                {"type":"file","file":{"file_id":"f1","url":"x","file_id":"f2"}}]}]}"#
        ),
        "<|user|><|file|>f2 x\n"
    );
}

#[test]
fn a_message_keeps_its_last_role_content_and_name() {
    assert_eq!(
        chat(r#"{"model":"m","messages":[{"role":"user","content":"x","role":"system"}]}"#),
        "<|system|>x\n"
    );
    assert_eq!(
        chat(r#"{"model":"m","messages":[{"role":"user","content":"a","content":"b"}]}"#),
        "<|user|>b\n"
    );
    assert_eq!(
        chat(
            r#"{"model":"m","messages":[{"content":"a","role":"tool","content":[{"type":"text","text":"b"}],"role":"user"}]}"#
        ),
        "<|user|>b\n"
    );
    assert_eq!(
        chat(r#"{"model":"m","messages":[{"role":"user","name":"a","content":"x","name":"b"}]}"#),
        "<|user|><|name|>\"b\"x\n"
    );
    // A last value of null leaves the field out, as a single null does.
    assert_eq!(
        chat(r#"{"model":"m","messages":[{"role":"user","content":"x","name":"a","name":null}]}"#),
        "<|user|>x\n"
    );
}

#[test]
fn top_level_fields_keep_their_last_value() {
    let request = parse(
        "/v1/completions",
        r#"{"model":"a","prompt":"first","model":"b","prompt":["x","y"],"stream":true,"stream":false}"#,
    )
    .unwrap();
    assert_eq!(request.model, "b");
    assert_eq!(request.prompt, Prompt::Text("x\ny".into()));
    assert!(!request.stream);
    assert_eq!(
        chat(
            r#"{"model":"m","tools":[{"a":1}],"messages":[{"role":"user","content":"old"}],
                "functions":[{"f":1}],"tools":[{"b":2}],"messages":[{"role":"user","content":"new"}]}"#
        ),
        "<|tool|>{\"b\":2}\n<|function|>{\"f\":1}\n<|user|>new\n"
    );
    assert_eq!(
        prompt(
            "/v1/responses",
            r#"{"model":"m","instructions":"old","input":"a","instructions":"new","input":"b"}"#
        ),
        "<|system|>new\n<|user|>b\n"
    );
}

#[test]
fn an_earlier_value_must_still_have_a_valid_type() {
    let err = parse(
        "/v1/completions",
        r#"{"model":"m","prompt":5,"prompt":"x"}"#,
    )
    .unwrap_err();
    assert!(
        matches!(&err, ParseError::InvalidField { field, .. } if field == "prompt"),
        "{err:?}"
    );
}

#[test]
fn many_repeats_stay_linear() {
    // 20,000 repeats of one key next to a large field: each repeat must not move that field.
    let big = "x".repeat(200_000);
    let mut part = format!(r#"{{"refusal":"{big}","text":"0""#);
    for i in 1..20_000 {
        part.push_str(&format!(r#","text":"{i}""#));
    }
    part.push('}');
    let body = format!(r#"{{"model":"m","messages":[{{"role":"user","content":[{part}]}}]}}"#);
    let started = std::time::Instant::now();
    let text = chat(&body);
    assert_eq!(text, format!("<|user|>{big}19999\n"));
    assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
}

/// A message as the generator builds it.
#[derive(Debug, Clone)]
struct Message {
    role: String,
    content: Option<Vec<(bool, String)>>,
    name: Option<String>,
}

/// A tiny deterministic generator for where decoys go.
struct Decoys(u64);

impl Decoys {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// How many earlier values a key gets (0 when decoys are off).
    fn count(&mut self, on: bool) -> usize {
        if on { (self.next() % 3) as usize } else { 0 }
    }

    fn string(&mut self) -> String {
        json(&format!("decoy-{}", self.next() % 1000))
    }
}

fn json(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Writes `"key":value`, preceded by `decoys` earlier values of the same type.
fn field(out: &mut Vec<String>, key: &str, earlier: Vec<String>, value: String) {
    for decoy in earlier {
        out.push(format!("{}:{decoy}", json(key)));
    }
    out.push(format!("{}:{value}", json(key)));
}

fn content_json(parts: &Option<Vec<(bool, String)>>, d: &mut Decoys, on: bool) -> String {
    match parts {
        None => "null".into(),
        Some(parts) => {
            let rendered: Vec<String> = parts
                .iter()
                .map(|(is_image, text)| {
                    let mut fields = Vec::new();
                    let kind = if *is_image { "image_url" } else { "text" };
                    let earlier = (0..d.count(on)).map(|_| d.string()).collect();
                    field(&mut fields, "type", earlier, json(kind));
                    let earlier = (0..d.count(on)).map(|_| d.string()).collect();
                    if *is_image {
                        let url = format!("{{\"url\":{}}}", json(text));
                        field(&mut fields, "image_url", earlier, url);
                    } else {
                        field(&mut fields, "text", earlier, json(text));
                    }
                    format!("{{{}}}", fields.join(","))
                })
                .collect();
            format!("[{}]", rendered.join(","))
        }
    }
}

fn chat_body(model: &str, messages: &[Message], decoy_seed: u64, on: bool) -> String {
    let mut d = Decoys(decoy_seed | 1);
    let mut top = Vec::new();
    let earlier = (0..d.count(on)).map(|_| d.string()).collect();
    field(&mut top, "model", earlier, json(model));
    let earlier = (0..d.count(on))
        .map(|_| format!("[{{\"role\":{},\"content\":{}}}]", d.string(), d.string()))
        .collect();
    let rendered: Vec<String> = messages
        .iter()
        .map(|m| {
            let mut fields = Vec::new();
            let earlier = (0..d.count(on)).map(|_| d.string()).collect();
            field(&mut fields, "role", earlier, json(&m.role));
            let earlier = (0..d.count(on))
                .map(|_| {
                    let parts = Some(vec![(d.next().is_multiple_of(2), "decoy".to_string())]);
                    content_json(&parts, &mut d, on)
                })
                .collect();
            let content = content_json(&m.content, &mut d, on);
            field(&mut fields, "content", earlier, content);
            if let Some(name) = &m.name {
                let earlier = (0..d.count(on)).map(|_| d.string()).collect();
                field(&mut fields, "name", earlier, json(name));
            }
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    field(
        &mut top,
        "messages",
        earlier,
        format!("[{}]", rendered.join(",")),
    );
    format!("{{{}}}", top.join(","))
}

fn any_message() -> impl Strategy<Value = Message> {
    (
        "[a-z]{1,8}",
        proptest::option::of(prop::collection::vec((any::<bool>(), "[ -~]{0,12}"), 0..4)),
        proptest::option::of("[a-z]{0,6}"),
    )
        .prop_map(|(role, content, name)| Message {
            role,
            content,
            name,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(0xD0B1E), ..ProptestConfig::default() })]

    #[test]
    fn earlier_values_of_repeated_keys_never_change_the_prompt(
        model in "[a-z]{1,6}",
        messages in prop::collection::vec(any_message(), 1..5),
        decoy_seed in any::<u64>(),
    ) {
        let clean = chat_body(&model, &messages, decoy_seed, false);
        let repeated = chat_body(&model, &messages, decoy_seed, true);
        let limits = ParseLimits::default();
        let a = parse_openai_request("/v1/chat/completions", clean.as_bytes(), &limits);
        let b = parse_openai_request("/v1/chat/completions", repeated.as_bytes(), &limits);
        match (a, b) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(&a.model, &b.model);
                prop_assert_eq!(&a.prompt, &b.prompt, "\n{}\n{}", clean, repeated);
            }
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (a, b) => prop_assert!(false, "{:?} vs {:?}\n{}\n{}", a.map(|r| r.prompt), b.map(|r| r.prompt), clean, repeated),
        }
    }
}
