#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The gRPC parsers (`vllmgrpc-parser`, `vertexai-parser`) through a parser set, as the
//! adapters call them: full method paths, frames built by hand, and random bytes.

use proptest::prelude::*;
use shepherd_scheduler_core::request::{
    ApiKind, ParseError, ParseLimits, ParserKind, ParserSet, Prompt,
};

const GENERATE: &str = "/vllm.grpc.engine.VllmEngine/Generate";
const EMBED: &str = "/vllm.grpc.engine.VllmEngine/Embed";
const VERTEX_CHAT: &str = "/google.cloud.aiplatform.v1beta1.PredictionService/ChatCompletions";
const VERTEX_RAW: &str = "/google.cloud.aiplatform.v1.PredictionService/RawPredict";
const VERTEX_STREAM: &str = "/google.cloud.aiplatform.v1.PredictionService/StreamRawPredict";

fn grpc_set() -> ParserSet {
    ParserSet::new([
        ("vllmgrpc-parser", ParserKind::VllmGrpc),
        ("vertexai-parser", ParserKind::VertexAi),
        ("openai-parser", ParserKind::OpenAi),
    ])
}

/// A protobuf length-delimited field.
fn field(tag: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![(tag << 3) | 2];
    let mut len = bytes.len();
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(bytes);
    out
}

fn frame(message: &[u8]) -> Vec<u8> {
    let mut body = vec![0];
    body.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    body.extend_from_slice(message);
    body
}

/// A Vertex AI request: `http_body` (field 2) whose `data` (field 2) is `json`.
fn vertex(json: &str) -> Vec<u8> {
    let mut message = field(1, b"projects/p/locations/l/endpoints/e");
    message.extend(field(2, &field(2, json.as_bytes())));
    frame(&message)
}

#[test]
fn vllm_generate_with_text_is_a_completions_request() {
    let set = grpc_set();
    // request_id = "r1", text = "Hello", stream = true, sampling_params.max_tokens = 16.
    let mut message = field(1, b"r1");
    message.extend(field(3, b"Hello"));
    message.extend(field(4, &[8 << 3, 16]));
    message.extend([5 << 3, 1]);
    let req = set
        .parse(GENERATE, &frame(&message), &ParseLimits::default())
        .unwrap();
    assert_eq!(req.api, ApiKind::Completions);
    assert_eq!(req.prompt, Prompt::Text("Hello".into()));
    assert_eq!((req.stream, req.max_tokens), (true, Some(16)));
    assert_eq!(req.model, "");
}

#[test]
fn vllm_generate_and_embed_with_token_ids() {
    let set = grpc_set();
    // tokenized { original_text: "hi", input_ids: [7, 8, 9] (packed) }
    let mut tokenized = field(1, b"hi");
    tokenized.extend(field(2, &[7, 8, 9]));
    let generate = frame(&field(2, &tokenized));
    let req = set
        .parse(GENERATE, &generate, &ParseLimits::default())
        .unwrap();
    assert_eq!(req.prompt, Prompt::Tokens(vec![7, 8, 9]));
    let embed = frame(&field(2, &tokenized));
    let req = set.parse(EMBED, &embed, &ParseLimits::default()).unwrap();
    assert_eq!(
        (req.api, req.prompt),
        (ApiKind::Embeddings, Prompt::Tokens(vec![7, 8, 9]))
    );
}

#[test]
fn vertex_methods_read_the_inner_openai_body() {
    let set = grpc_set();
    let chat = vertex(r#"{"model":"gemini","messages":[{"role":"user","content":"Hi"}]}"#);
    let req = set
        .parse(VERTEX_CHAT, &chat, &ParseLimits::default())
        .unwrap();
    assert_eq!(
        (req.api, req.model.as_str()),
        (ApiKind::ChatCompletions, "gemini")
    );
    assert_eq!(req.body_size, chat.len());
    let raw = vertex(r#"{"model":"gemini","input":"Hi"}"#);
    for path in [VERTEX_RAW, VERTEX_STREAM] {
        let req = set.parse(path, &raw, &ParseLimits::default()).unwrap();
        assert_eq!(req.api, ApiKind::Responses, "{path}");
        assert_eq!(req.prompt, Prompt::Text("<|user|>Hi\n".into()));
    }
    // Upstream's own examples name no model (the endpoint does).
    let upstream = vertex(r#"{"messages":[{"role":"user","content":"Hello"}],"stream":true}"#);
    let req = set
        .parse(VERTEX_CHAT, &upstream, &ParseLimits::default())
        .unwrap();
    assert_eq!((req.model.as_str(), req.stream), ("", true));
    let upstream = vertex(r#"{"input":"Hello from raw predict"}"#);
    let req = set
        .parse(VERTEX_RAW, &upstream, &ParseLimits::default())
        .unwrap();
    assert_eq!(
        req.prompt,
        Prompt::Text("<|user|>Hello from raw predict\n".into())
    );
    // The inner body's own errors come through.
    let bad = vertex(r#"{"messages":[]}"#);
    assert_eq!(
        set.parse(VERTEX_CHAT, &bad, &ParseLimits::default()),
        Err(ParseError::EmptyPrompt)
    );
}

#[test]
fn bad_frames_are_400_and_oversized_bodies_413() {
    let set = grpc_set();
    let compressed = [1, 0, 0, 0, 0];
    let short = [0, 0, 0, 0, 9, 1, 2];
    for body in [&compressed[..], &short[..], b"{}"] {
        let err = set
            .parse(GENERATE, body, &ParseLimits::default())
            .unwrap_err();
        assert!(matches!(err, ParseError::InvalidGrpc(_)), "{err}");
        assert_eq!(err.http_status(), 400);
    }
    // Not a protobuf message (a length-delimited field running past the end).
    let err = set
        .parse(GENERATE, &frame(&[0x1a, 50, b'x']), &ParseLimits::default())
        .unwrap_err();
    assert_eq!(err.http_status(), 400, "{err}");
    let big = frame(&field(3, &[b'a'; 300]));
    let err = set
        .parse(
            GENERATE,
            &big,
            &ParseLimits::default().with_max_body_bytes(100),
        )
        .unwrap_err();
    assert_eq!(err.http_status(), 413);
}

#[test]
fn the_grpc_parsers_come_from_a_config() {
    let text = r"
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- {name: grpc, type: vllmgrpc-parser}
- {name: vertex, type: vertexai-parser}
requestHandler:
  parsers:
  - pluginRef: grpc
  - pluginRef: vertex
";
    let config = shepherd_scheduler_core::config::EndpointPickerConfig::from_yaml(text).unwrap();
    let set = config.parser_set().unwrap();
    assert_eq!(set.resolve(GENERATE).unwrap().name, "grpc");
    assert_eq!(set.resolve(VERTEX_RAW).unwrap().name, "vertex");
    assert!(set.resolve("/v1/chat/completions").is_none());
}

proptest! {
    /// Random bytes, with or without a valid prefix, never panic and are at worst a 400.
    #[test]
    fn random_bodies_never_panic(
        raw in proptest::collection::vec(any::<u8>(), 0..256),
        framed in any::<bool>(),
        path in proptest::sample::select(vec![GENERATE, EMBED, VERTEX_CHAT, VERTEX_RAW]),
    ) {
        let body = if framed { frame(&raw) } else { raw };
        if let Err(err) = grpc_set().parse(path, &body, &ParseLimits::default()) {
            prop_assert_eq!(err.http_status(), 400);
        }
    }
}
