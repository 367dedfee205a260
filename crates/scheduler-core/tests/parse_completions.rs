//! `/v1/completions` and `/v1/embeddings` bodies: every prompt shape, and the common fields.

use shepherd_scheduler_core::request::{
    ApiKind, InferenceRequest, ParseError, ParseLimits, Prompt, parse_openai_request,
};

fn completions(body: &str) -> Result<InferenceRequest, ParseError> {
    parse_openai_request("/v1/completions", body.as_bytes(), &ParseLimits::default())
}

fn embeddings(body: &str) -> Result<InferenceRequest, ParseError> {
    parse_openai_request("/v1/embeddings", body.as_bytes(), &ParseLimits::default())
}

#[test]
fn string_prompt_with_common_fields() {
    let body = r#"{"model":"llama","prompt":"Once upon a time","stream":true,"max_tokens":64,
                   "temperature":0.2,"logit_bias":{"50256":-100}}"#;
    let req = completions(body).unwrap();
    assert_eq!(req.model, "llama");
    assert_eq!(req.api, ApiKind::Completions);
    assert_eq!(req.prompt, Prompt::Text("Once upon a time".into()));
    assert!(req.stream);
    assert_eq!(req.max_tokens, Some(64));
    assert_eq!(req.lora, None);
    assert_eq!(req.body_size, body.len());
    assert_eq!(req.id, "");
    assert_eq!(req.priority, 0);
}

#[test]
fn escapes_are_decoded() {
    let req = completions(r#"{"model":"m","prompt":"a\n\"b\"\u00e9\ud83d\ude00"}"#).unwrap();
    assert_eq!(req.prompt, Prompt::Text("a\n\"b\"é😀".into()));
}

#[test]
fn defaults_when_optional_fields_are_absent_or_null() {
    let req = completions(r#"{"model":"m","prompt":"x","stream":null,"max_tokens":null}"#).unwrap();
    assert!(!req.stream);
    assert_eq!(req.max_tokens, None);
}

#[test]
fn array_of_strings_is_joined_with_newlines_skipping_empty_ones() {
    let req = completions(r#"{"model":"m","prompt":["first","","second"]}"#).unwrap();
    assert_eq!(req.prompt, Prompt::Text("first\nsecond".into()));
}

#[test]
fn token_ids() {
    let req = completions(r#"{"model":"m","prompt":[1, 2, 4294967295]}"#).unwrap();
    assert_eq!(req.prompt, Prompt::Tokens(vec![1, 2, u32::MAX]));
    assert_eq!(req.prompt.estimated_tokens(), 3);
}

#[test]
fn arrays_of_token_ids_are_concatenated() {
    let req = completions(r#"{"model":"m","prompt":[[1,2],[],[3]]}"#).unwrap();
    assert_eq!(req.prompt, Prompt::Tokens(vec![1, 2, 3]));
}

#[test]
fn strings_and_token_ids_cannot_mix() {
    let err = completions(r#"{"model":"m","prompt":["a", 5]}"#).unwrap_err();
    let ParseError::InvalidField { field, reason } = err else {
        panic!("unexpected {err:?}");
    };
    assert_eq!(field, "prompt[1]");
    assert!(reason.contains("cannot also hold token ids"), "{reason}");

    let err = completions(r#"{"model":"m","prompt":[5, [6]]}"#).unwrap_err();
    assert!(matches!(err, ParseError::InvalidField { ref field, .. } if field == "prompt[1]"));
}

#[test]
fn token_ids_must_fit_u32() {
    for (body, path) in [
        (r#"{"model":"m","prompt":[1,-1]}"#, "prompt[1]"),
        (r#"{"model":"m","prompt":[4294967296]}"#, "prompt[0]"),
        (r#"{"model":"m","prompt":[[1],[2,1.5]]}"#, "prompt[1][1]"),
        (r#"{"model":"m","prompt":[[1],[2,-3]]}"#, "prompt[1][1]"),
    ] {
        match completions(body) {
            Err(ParseError::InvalidField { field, .. }) => assert_eq!(field, path, "{body}"),
            other => panic!("{body}: {other:?}"),
        }
    }
}

#[test]
fn the_completion_limit_prefers_the_newest_field() {
    let req = completions(r#"{"model":"m","prompt":"x","max_tokens":5,"max_completion_tokens":7}"#)
        .unwrap();
    assert_eq!(req.max_tokens, Some(7));
}

#[test]
fn fields_of_other_apis_are_ignored() {
    let req = completions(r#"{"model":"m","prompt":"x","messages":5,"input":{}}"#).unwrap();
    assert_eq!(req.prompt, Prompt::Text("x".into()));
}

#[test]
fn lora_adapter_names_resolve_to_their_base_model() {
    let limits = ParseLimits::default().with_lora_adapter("sql-lora", "llama");
    let body = br#"{"model":"sql-lora","prompt":"x"}"#;
    let req = parse_openai_request("/v1/completions", body, &limits).unwrap();
    assert_eq!(req.model, "llama");
    assert_eq!(req.lora.as_deref(), Some("sql-lora"));
    assert_eq!(req.target_model(), "sql-lora");

    let other = br#"{"model":"llama","prompt":"x"}"#;
    let req = parse_openai_request("/v1/completions", other, &limits).unwrap();
    assert_eq!((req.model.as_str(), req.lora.as_deref()), ("llama", None));

    let without_map = parse_openai_request("/v1/completions", body, &ParseLimits::default());
    let req = without_map.unwrap();
    assert_eq!(
        (req.model.as_str(), req.lora.as_deref()),
        ("sql-lora", None)
    );
}

#[test]
fn query_strings_and_trailing_slashes_are_ignored_in_the_path() {
    let body = br#"{"model":"m","prompt":"x"}"#;
    let limits = ParseLimits::default();
    assert!(parse_openai_request("/v1/completions/", body, &limits).is_ok());
    assert!(parse_openai_request("/v1/completions?x=1", body, &limits).is_ok());
}

#[test]
fn embeddings_accept_every_input_shape() {
    let cases = [
        (r#""hello""#, Prompt::Text("hello".into())),
        (r#"["a","b"]"#, Prompt::Text("a\nb".into())),
        ("[7,8]", Prompt::Tokens(vec![7, 8])),
        ("[[7],[8,9]]", Prompt::Tokens(vec![7, 8, 9])),
    ];
    for (input, expected) in cases {
        let req = embeddings(&format!(r#"{{"model":"e5","input":{input}}}"#)).unwrap();
        assert_eq!(req.api, ApiKind::Embeddings);
        assert_eq!(req.prompt, expected, "{input}");
    }
}

#[test]
fn embeddings_without_input_name_the_field() {
    assert_eq!(
        embeddings(r#"{"model":"e5"}"#).unwrap_err(),
        ParseError::MissingField("input")
    );
}
