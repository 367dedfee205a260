//! Property tests of the body parser: no input makes it panic, token estimates agree with the
//! prompt, and chat renderings are append-only.

use proptest::prelude::*;
use shepherd_scheduler_core::request::{ParseError, ParseLimits, Prompt, parse_openai_request};

const PATHS: [&str; 5] = [
    "/v1/completions",
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/embeddings",
    "/v1/unknown",
];

/// Arbitrary JSON values, small and nested a few levels.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u32>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("user"),
            Just("text"),
            Just("image_url"),
            Just("data:x")
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        let keys = prop_oneof![
            Just("role".to_string()),
            Just("content".to_string()),
            Just("type".to_string()),
            Just("text".to_string()),
            Just("image_url".to_string()),
            Just("url".to_string()),
            Just("file".to_string()),
            Just("name".to_string()),
            "[a-z_]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(keys, inner, 0..5)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Request-shaped bodies whose fields hold arbitrary values.
fn body_like() -> impl Strategy<Value = String> {
    let field = prop_oneof![
        Just("model"),
        Just("prompt"),
        Just("messages"),
        Just("input"),
        Just("instructions"),
        Just("tools"),
        Just("functions"),
        Just("stream"),
        Just("max_tokens"),
        Just("max_output_tokens"),
        Just("x"),
    ];
    prop::collection::vec((field, json_value()), 0..6).prop_map(|fields| {
        let mut body = String::from("{\"model\":\"m\"");
        for (key, value) in fields {
            body.push_str(&format!(",\"{key}\":{value}"));
        }
        body.push('}');
        body
    })
}

fn check_ok_request(
    result: &Result<shepherd_scheduler_core::request::InferenceRequest, ParseError>,
    body_len: usize,
) {
    if let Ok(req) = result {
        assert!(!req.prompt.is_empty());
        assert!(!req.model.is_empty());
        assert_eq!(req.body_size, body_len);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5EED), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(path in 0usize..PATHS.len(), body in prop::collection::vec(any::<u8>(), 0..256)) {
        let result = parse_openai_request(PATHS[path], &body, &ParseLimits::default());
        check_ok_request(&result, body.len());
        if let Err(e) = result {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn request_shaped_bodies_never_panic(path in 0usize..4, body in body_like()) {
        let result = parse_openai_request(PATHS[path], body.as_bytes(), &ParseLimits::default());
        check_ok_request(&result, body.len());
        // Every cut of a body is an error (or a shorter valid body), never a panic.
        for cut in [body.len() / 3, body.len() / 2, body.len().saturating_sub(1)] {
            if body.is_char_boundary(cut) {
                let _ = parse_openai_request(PATHS[path], &body.as_bytes()[..cut], &ParseLimits::default());
            }
        }
    }

    #[test]
    fn text_prompt_token_estimate_is_a_quarter_of_its_bytes(text in ".{1,200}") {
        let body = serde_json::json!({"model": "m", "prompt": text}).to_string();
        let req = parse_openai_request("/v1/completions", body.as_bytes(), &ParseLimits::default()).unwrap();
        prop_assert_eq!(&req.prompt, &Prompt::Text(text.clone()));
        prop_assert_eq!(req.prompt.len_bytes(), text.len());
        prop_assert_eq!(req.prompt.estimated_tokens(), text.len().div_ceil(4));
        prop_assert!(req.prompt.estimated_tokens() * 4 >= req.prompt.len_bytes());
    }

    #[test]
    fn token_prompt_estimate_is_exact(groups in prop::collection::vec(prop::collection::vec(any::<u32>(), 0..20), 1..5)) {
        let flat: Vec<u32> = groups.iter().flatten().copied().collect();
        prop_assume!(!flat.is_empty());
        for prompt in [serde_json::json!(flat), serde_json::json!(groups)] {
            let body = serde_json::json!({"model": "m", "prompt": prompt}).to_string();
            let req = parse_openai_request("/v1/completions", body.as_bytes(), &ParseLimits::default()).unwrap();
            prop_assert_eq!(&req.prompt, &Prompt::Tokens(flat.clone()));
            prop_assert_eq!(req.prompt.estimated_tokens(), flat.len());
            prop_assert_eq!(req.prompt.len_bytes(), flat.len() * 4);
        }
    }

    #[test]
    fn a_longer_conversation_extends_the_shorter_ones_prompt(
        messages in prop::collection::vec((prop_oneof![Just("system"), Just("user"), Just("assistant")], ".{0,40}", any::<bool>()), 1..8),
        keep in 1usize..8,
    ) {
        let render = |n: usize| {
            let msgs: Vec<serde_json::Value> = messages[..n].iter().map(|(role, text, as_parts)| {
                if *as_parts {
                    serde_json::json!({"role": role, "content": [{"type": "text", "text": text}]})
                } else {
                    serde_json::json!({"role": role, "content": text})
                }
            }).collect();
            let body = serde_json::json!({"model": "m", "messages": msgs, "tools": [{"type": "function"}]}).to_string();
            match parse_openai_request("/v1/chat/completions", body.as_bytes(), &ParseLimits::default()).unwrap().prompt {
                Prompt::Text(t) => t,
                Prompt::Tokens(_) => unreachable!(),
            }
        };
        let keep = keep.min(messages.len());
        let short = render(keep);
        let long = render(messages.len());
        prop_assert!(long.starts_with(&short));
    }
}
