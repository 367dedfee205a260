//! Request bodies that arrive as gRPC messages: vLLM's gRPC engine API (`vllmgrpc-parser`) and
//! Vertex AI's prediction service (`vertexai-parser`).
//!
//! A gRPC request body is one length-prefixed message: a compression flag byte (`0`: not
//! compressed; a compressed message is refused, as upstream), a 4-byte big-endian length, then
//! the protobuf message. Bytes after the message are ignored, as upstream.
//!
//! | method (path suffix) | message | read as |
//! |---|---|---|
//! | `vllm.grpc.engine.VllmEngine/Generate` | `GenerateRequest` | [`ApiKind::Completions`]: `text` as [`Prompt::Text`], `tokenized.input_ids` as [`Prompt::Tokens`]; `stream`; `sampling_params.max_tokens` |
//! | `vllm.grpc.engine.VllmEngine/Embed` | `EmbedRequest` | [`ApiKind::Embeddings`]: `tokenized.input_ids` (required) |
//! | `PredictionService/ChatCompletions` | `ChatCompletionsRequest` | its `http_body.data`, an OpenAI chat body (`model` optional: Vertex AI names the model by the endpoint; absent, the request has none) |
//! | `PredictionService/RawPredict`, `…/StreamRawPredict` | `RawPredictRequest`, `StreamRawPredictRequest` | its `http_body.data`, read as an OpenAI responses body (upstream's mapping) |
//!
//! The messages below declare only the fields read here (field numbers from vLLM's
//! `vllm_engine.proto` and Google's `prediction_service.proto` / `httpbody.proto`); protobuf
//! skips the rest. vLLM's messages carry no model name, so a request read from them has an
//! empty model, as a `vllmhttp-parser` body without `model`. Every error is
//! [`ParseError::InvalidGrpc`] (400) or the OpenAI parser's own for a Vertex body; nothing
//! panics on any input (the body is size-checked before, and decoding allocates at most in
//! proportion to it).
//!
//! ```
//! use shepherd_scheduler_core::request::{ApiKind, ParseLimits, ParserKind, Prompt};
//!
//! // GenerateRequest { text: "Hi" } in a gRPC frame: field 3, length 2.
//! let frame = [0, 0, 0, 0, 4, 0x1a, 2, b'H', b'i'];
//! let req = ParserKind::VllmGrpc
//!     .parse("/vllm.grpc.engine.VllmEngine/Generate", &frame, &ParseLimits::default())?;
//! assert_eq!((req.api, req.prompt), (ApiKind::Completions, Prompt::Text("Hi".into())));
//! # Ok::<(), shepherd_scheduler_core::request::ParseError>(())
//! ```

use prost::Message;

use super::{ApiKind, ParseLimits, new_request, parse_json_with};
use crate::request::{InferenceRequest, ParseError, Prompt};

/// Length of a gRPC message prefix: the compression flag and the big-endian length.
const PREFIX_LEN: usize = 5;

/// The message inside a gRPC request body.
pub(in crate::request) fn grpc_message(body: &[u8]) -> Result<&[u8], ParseError> {
    let Some((prefix, rest)) = body.split_first_chunk::<PREFIX_LEN>() else {
        return Err(invalid(format!(
            "a gRPC message needs a {PREFIX_LEN}-byte prefix, got {} bytes",
            body.len()
        )));
    };
    match prefix[0] {
        0 => {}
        1 => return Err(invalid("compressed gRPC messages are not supported".into())),
        flag => return Err(invalid(format!("unknown gRPC compression flag {flag}"))),
    }
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]);
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    rest.get(..len).ok_or_else(|| {
        invalid(format!(
            "the gRPC prefix announces {len} bytes, but {} follow",
            rest.len()
        ))
    })
}

/// Reads a vLLM gRPC `Generate` ([`ApiKind::Completions`]) or `Embed`
/// ([`ApiKind::Embeddings`]) request.
pub(in crate::request) fn parse_vllm_grpc(
    api: ApiKind,
    body: &[u8],
    limits: &ParseLimits,
) -> Result<InferenceRequest, ParseError> {
    let message = grpc_message(body)?;
    let mut request = match api {
        ApiKind::Completions => {
            let generate = GenerateRequest::decode(message)
                .map_err(|e| invalid(format!("not a vLLM GenerateRequest: {e}")))?;
            let prompt = match generate.input {
                Some(GenerateInput::Text(text)) => Prompt::Text(text),
                Some(GenerateInput::Tokenized(tokens)) => Prompt::Tokens(tokens.input_ids),
                None => return Err(ParseError::MissingField("text or tokenized")),
            };
            if prompt.is_empty() {
                return Err(ParseError::EmptyPrompt);
            }
            let mut request = new_request(api, String::new(), prompt, limits);
            request.stream = generate.stream;
            request.max_tokens = generate.sampling_params.and_then(|p| p.max_tokens);
            request
        }
        ApiKind::Embeddings => {
            let embed = EmbedRequest::decode(message)
                .map_err(|e| invalid(format!("not a vLLM EmbedRequest: {e}")))?;
            let tokens = embed
                .tokenized
                .ok_or(ParseError::MissingField("tokenized"))?;
            if tokens.input_ids.is_empty() {
                return Err(ParseError::EmptyPrompt);
            }
            new_request(api, String::new(), Prompt::Tokens(tokens.input_ids), limits)
        }
        other => return Err(ParseError::UnsupportedPath(other.as_str().into())),
    };
    request.body_size = body.len();
    Ok(request)
}

/// Reads a Vertex AI request: the JSON in its `http_body.data`, as an OpenAI body of `api`.
pub(in crate::request) fn parse_vertex(
    api: ApiKind,
    body: &[u8],
    limits: &ParseLimits,
) -> Result<InferenceRequest, ParseError> {
    let message = grpc_message(body)?;
    let envelope = VertexRequest::decode(message)
        .map_err(|e| invalid(format!("not a Vertex AI request message: {e}")))?;
    let http_body = envelope
        .http_body
        .ok_or(ParseError::MissingField("http_body"))?;
    // The model is named by the request's endpoint, so the body may leave it out.
    let mut request = parse_json_with(api, &http_body.data, limits, false)?;
    request.body_size = body.len();
    Ok(request)
}

fn invalid(message: String) -> ParseError {
    ParseError::InvalidGrpc(message)
}

/// vLLM's `GenerateRequest` (the fields read).
#[derive(Clone, PartialEq, Message)]
struct GenerateRequest {
    #[prost(oneof = "GenerateInput", tags = "2, 3")]
    input: Option<GenerateInput>,
    #[prost(message, optional, tag = "4")]
    sampling_params: Option<SamplingParams>,
    #[prost(bool, tag = "5")]
    stream: bool,
}

/// `GenerateRequest.input`.
#[derive(Clone, PartialEq, prost::Oneof)]
enum GenerateInput {
    #[prost(message, tag = "2")]
    Tokenized(TokenizedInput),
    #[prost(string, tag = "3")]
    Text(String),
}

/// vLLM's `TokenizedInput` (the fields read).
#[derive(Clone, PartialEq, Message)]
struct TokenizedInput {
    #[prost(uint32, repeated, tag = "2")]
    input_ids: Vec<u32>,
}

/// vLLM's `SamplingParams` (the fields read).
#[derive(Clone, PartialEq, Message)]
struct SamplingParams {
    #[prost(uint32, optional, tag = "8")]
    max_tokens: Option<u32>,
}

/// vLLM's `EmbedRequest` (the fields read).
#[derive(Clone, PartialEq, Message)]
struct EmbedRequest {
    #[prost(message, optional, tag = "2")]
    tokenized: Option<TokenizedInput>,
}

/// Vertex AI's `ChatCompletionsRequest`, `RawPredictRequest` and `StreamRawPredictRequest`:
/// all three carry the body as `google.api.HttpBody http_body = 2`.
#[derive(Clone, PartialEq, Message)]
struct VertexRequest {
    #[prost(message, optional, tag = "2")]
    http_body: Option<HttpBody>,
}

/// `google.api.HttpBody` (the fields read).
#[derive(Clone, PartialEq, Message)]
struct HttpBody {
    #[prost(bytes = "vec", tag = "2")]
    data: Vec<u8>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn frame(message: &[u8]) -> Vec<u8> {
        let mut body = vec![0];
        body.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
        body.extend_from_slice(message);
        body
    }

    #[test]
    fn frames_are_checked() {
        assert_eq!(grpc_message(&frame(b"abc")).unwrap(), b"abc");
        // Trailing bytes are ignored, as upstream.
        let mut long = frame(b"abc");
        long.push(9);
        assert_eq!(grpc_message(&long).unwrap(), b"abc");
        for bad in [
            &b""[..],
            b"\0\0\0",
            b"\x01\0\0\0\0",
            b"\x07\0\0\0\0",
            b"\0\xff\xff\xff\xffab",
        ] {
            assert!(
                matches!(grpc_message(bad), Err(ParseError::InvalidGrpc(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_tokenized_generate_request_is_read_with_its_limits() {
        let request = GenerateRequest {
            input: Some(GenerateInput::Tokenized(TokenizedInput {
                input_ids: vec![1, 2, 300_000],
            })),
            sampling_params: Some(SamplingParams {
                max_tokens: Some(0),
            }),
            stream: true,
        };
        let body = frame(&request.encode_to_vec());
        let req = parse_vllm_grpc(ApiKind::Completions, &body, &ParseLimits::default()).unwrap();
        assert_eq!(req.prompt, Prompt::Tokens(vec![1, 2, 300_000]));
        // An explicit 0 is kept, distinct from unset.
        assert_eq!((req.stream, req.max_tokens), (true, Some(0)));
        assert_eq!(req.body_size, body.len());
    }

    #[test]
    fn an_embed_request_needs_tokens() {
        let limits = ParseLimits::default();
        let embed = EmbedRequest {
            tokenized: Some(TokenizedInput {
                input_ids: vec![5, 6],
            }),
        };
        let req =
            parse_vllm_grpc(ApiKind::Embeddings, &frame(&embed.encode_to_vec()), &limits).unwrap();
        assert_eq!(
            (req.api, req.prompt),
            (ApiKind::Embeddings, Prompt::Tokens(vec![5, 6]))
        );
        let empty = EmbedRequest { tokenized: None };
        assert_eq!(
            parse_vllm_grpc(ApiKind::Embeddings, &frame(&empty.encode_to_vec()), &limits),
            Err(ParseError::MissingField("tokenized"))
        );
    }

    #[test]
    fn a_generate_request_without_input_is_refused() {
        let body = frame(&GenerateRequest::default().encode_to_vec());
        assert_eq!(
            parse_vllm_grpc(ApiKind::Completions, &body, &ParseLimits::default()),
            Err(ParseError::MissingField("text or tokenized"))
        );
    }

    #[test]
    fn a_vertex_body_is_read_as_openai() {
        let json = br#"{"model":"gemma","messages":[{"role":"user","content":"Hi"}]}"#;
        let envelope = VertexRequest {
            http_body: Some(HttpBody {
                data: json.to_vec(),
            }),
        };
        let body = frame(&envelope.encode_to_vec());
        let req = parse_vertex(ApiKind::ChatCompletions, &body, &ParseLimits::default()).unwrap();
        assert_eq!(req.model, "gemma");
        assert_eq!(req.prompt, Prompt::Text("<|user|>Hi\n".into()));
        let none = frame(&VertexRequest { http_body: None }.encode_to_vec());
        assert_eq!(
            parse_vertex(ApiKind::ChatCompletions, &none, &ParseLimits::default()),
            Err(ParseError::MissingField("http_body"))
        );
    }
}
