//! The request parsers Shepherd has, by their upstream plugin type, with the path suffixes
//! each claims.
//!
//! | type | claims (path suffixes) | reads |
//! |---|---|---|
//! | `openai-parser` | `chat/completions`, `completions`, `embeddings`, `responses` (and the `…/render` sub-paths of the first two) | OpenAI bodies ([`parse_openai_request`](super::parse_openai_request)) |
//! | `anthropic-parser` | `messages`, `messages/count_tokens` | Anthropic messages, rendered like chat; `count_tokens` is forwarded unread |
//! | `vllmhttp-parser` | `inference/v1/generate` | vLLM's token ids, `model`, `sampling_params.max_tokens` |
//! | `sglanghttp-parser` | `generate` (parses `/generate` only) | SGLang's `input_ids`, `sampling_params.max_new_tokens` |
//! | `passthrough-parser` | none: the fallback | nothing: no model, no prompt |
//! | `vllmgrpc-parser` | `vllm.grpc.engine.VllmEngine/Generate`, `…/Embed` | vLLM's gRPC messages: text or token ids, `stream`, `max_tokens` (the `parse/grpc.rs` module) |
//! | `vertexai-parser` | `PredictionService/ChatCompletions`, `…/RawPredict`, `…/StreamRawPredict` | the OpenAI body inside Vertex AI's gRPC message |
//!
//! The gRPC parsers' suffixes also match after a `.` (the method's package:
//! `/google.cloud.aiplatform.v1.PredictionService/RawPredict`). Upstream claims them for
//! `h2c` pools only; Shepherd claims them by path, whatever the protocol.
//!
//! ```
//! use shepherd_scheduler_core::request::ParserKind;
//!
//! let kind = ParserKind::from_type("vllmhttp-parser").unwrap();
//! assert_eq!(kind.claims(), ["inference/v1/generate"]);
//! assert!(ParserKind::Passthrough.is_fallback());
//! assert!(ParserKind::from_type("vllmgrpc-parser").is_some());
//! assert!(ParserKind::from_type("triton-parser").is_none()); // not a parser Shepherd has
//! ```

use std::fmt;

use super::parse::{check_size, parse_generate, parse_json_body, parse_vertex, parse_vllm_grpc};
use super::parser_set::path::{matches_suffix, normalize_path};
use super::{ApiKind, InferenceRequest, ParseError, ParseLimits, Prompt};

/// One kind of request parser: the upstream plugin type, the paths it claims, how it reads
/// a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParserKind {
    /// `openai-parser`.
    OpenAi,
    /// `anthropic-parser`.
    Anthropic,
    /// `vllmhttp-parser`.
    VllmHttp,
    /// `sglanghttp-parser`.
    SglangHttp,
    /// `passthrough-parser`.
    Passthrough,
    /// `vllmgrpc-parser`: vLLM's gRPC engine API.
    VllmGrpc,
    /// `vertexai-parser`: Vertex AI's gRPC prediction service.
    VertexAi,
}

/// OpenAI's suffixes with the API each means.
const OPENAI_PATHS: [(&str, ApiKind); 6] = [
    ("chat/completions/render", ApiKind::ChatCompletions),
    ("chat/completions", ApiKind::ChatCompletions),
    ("completions/render", ApiKind::Completions),
    ("completions", ApiKind::Completions),
    ("embeddings", ApiKind::Embeddings),
    ("responses", ApiKind::Responses),
];
const OPENAI_CLAIMS: [&str; 6] = [
    OPENAI_PATHS[0].0,
    OPENAI_PATHS[1].0,
    OPENAI_PATHS[2].0,
    OPENAI_PATHS[3].0,
    OPENAI_PATHS[4].0,
    OPENAI_PATHS[5].0,
];
const COUNT_TOKENS: &str = "messages/count_tokens";
const ANTHROPIC_PATHS: [(&str, ApiKind); 2] = [
    ("messages", ApiKind::Messages),
    (COUNT_TOKENS, ApiKind::Unparsed),
];
const ANTHROPIC_CLAIMS: [&str; 2] = [ANTHROPIC_PATHS[0].0, ANTHROPIC_PATHS[1].0];
const VLLM_PATHS: [(&str, ApiKind); 1] = [("inference/v1/generate", ApiKind::VllmGenerate)];
const VLLM_CLAIMS: [&str; 1] = [VLLM_PATHS[0].0];
const SGLANG_PATHS: [(&str, ApiKind); 1] = [("generate", ApiKind::SglangGenerate)];
const SGLANG_CLAIMS: [&str; 1] = [SGLANG_PATHS[0].0];
const VLLM_GRPC_PATHS: [(&str, ApiKind); 2] = [
    ("vllm.grpc.engine.VllmEngine/Generate", ApiKind::Completions),
    ("vllm.grpc.engine.VllmEngine/Embed", ApiKind::Embeddings),
];
const VLLM_GRPC_CLAIMS: [&str; 2] = [VLLM_GRPC_PATHS[0].0, VLLM_GRPC_PATHS[1].0];
/// Vertex AI's methods; the raw-predict ones carry a body upstream reads as OpenAI responses.
const VERTEX_PATHS: [(&str, ApiKind); 3] = [
    (
        "PredictionService/ChatCompletions",
        ApiKind::ChatCompletions,
    ),
    ("PredictionService/StreamRawPredict", ApiKind::Responses),
    ("PredictionService/RawPredict", ApiKind::Responses),
];
const VERTEX_CLAIMS: [&str; 3] = [VERTEX_PATHS[0].0, VERTEX_PATHS[1].0, VERTEX_PATHS[2].0];

impl ParserKind {
    /// Every kind, in upstream's default order (then SGLang and the gRPC parsers).
    pub const ALL: [ParserKind; 7] = [
        ParserKind::OpenAi,
        ParserKind::Anthropic,
        ParserKind::VllmHttp,
        ParserKind::Passthrough,
        ParserKind::SglangHttp,
        ParserKind::VllmGrpc,
        ParserKind::VertexAi,
    ];

    /// The kind of an upstream parser plugin type, when Shepherd has it.
    pub fn from_type(plugin_type: &str) -> Option<ParserKind> {
        ParserKind::ALL
            .into_iter()
            .find(|kind| kind.type_name() == plugin_type)
    }

    /// The upstream plugin type.
    pub fn type_name(self) -> &'static str {
        match self {
            ParserKind::OpenAi => "openai-parser",
            ParserKind::Anthropic => "anthropic-parser",
            ParserKind::VllmHttp => "vllmhttp-parser",
            ParserKind::SglangHttp => "sglanghttp-parser",
            ParserKind::Passthrough => "passthrough-parser",
            ParserKind::VllmGrpc => "vllmgrpc-parser",
            ParserKind::VertexAi => "vertexai-parser",
        }
    }

    /// The path suffixes this parser claims, without leading or trailing `/`; empty for the
    /// fallback.
    pub fn claims(self) -> &'static [&'static str] {
        match self {
            ParserKind::OpenAi => &OPENAI_CLAIMS,
            ParserKind::Anthropic => &ANTHROPIC_CLAIMS,
            ParserKind::VllmHttp => &VLLM_CLAIMS,
            ParserKind::SglangHttp => &SGLANG_CLAIMS,
            ParserKind::VllmGrpc => &VLLM_GRPC_CLAIMS,
            ParserKind::VertexAi => &VERTEX_CLAIMS,
            ParserKind::Passthrough => &[],
        }
    }

    /// Whether it claims no path, i.e. takes whatever no other parser claims.
    pub fn is_fallback(self) -> bool {
        self.claims().is_empty()
    }

    /// The claimed suffixes, each with the API a path ending in it is read as.
    pub(crate) fn routes(self) -> &'static [(&'static str, ApiKind)] {
        match self {
            ParserKind::OpenAi => &OPENAI_PATHS,
            ParserKind::Anthropic => &ANTHROPIC_PATHS,
            ParserKind::VllmHttp => &VLLM_PATHS,
            ParserKind::SglangHttp => &SGLANG_PATHS,
            ParserKind::VllmGrpc => &VLLM_GRPC_PATHS,
            ParserKind::VertexAi => &VERTEX_PATHS,
            ParserKind::Passthrough => &[],
        }
    }

    /// Whether the parser reads the (normalized) `path` it claims: SGLang's native server
    /// serves `/generate` at its root only, though the parser claims every path ending in
    /// `generate`.
    pub(crate) fn reads_at(self, path: &str) -> bool {
        match self {
            ParserKind::SglangHttp => path.trim_start_matches('/') == SGLANG_CLAIMS[0],
            _ => true,
        }
    }

    /// The API this parser reads at `path`, or `None` when it cannot read that path.
    pub fn api(self, path: &str) -> Option<ApiKind> {
        if self.is_fallback() {
            return Some(ApiKind::Unparsed);
        }
        let path = normalize_path(path);
        let mut best: Option<(usize, ApiKind)> = None;
        for (suffix, api) in self.routes() {
            if matches_suffix(path, suffix) && best.is_none_or(|(len, _)| suffix.len() > len) {
                best = Some((suffix.len(), *api));
            }
        }
        best.filter(|_| self.reads_at(path)).map(|(_, api)| api)
    }

    /// Parses `body` sent to `path` (one this parser was resolved for); a path it cannot read
    /// is [`ParseError::UnsupportedPath`].
    pub fn parse(
        self,
        path: &str,
        body: &[u8],
        limits: &ParseLimits,
    ) -> Result<InferenceRequest, ParseError> {
        check_size(body, limits)?;
        let api = self
            .api(path)
            .ok_or_else(|| ParseError::UnsupportedPath(path.into()))?;
        read_as(self, api, body, limits)
    }
}

/// Reads `body` (already size-checked) as a request of `api`, as parser `kind` does.
pub(crate) fn read_as(
    kind: ParserKind,
    api: ApiKind,
    body: &[u8],
    limits: &ParseLimits,
) -> Result<InferenceRequest, ParseError> {
    match kind {
        ParserKind::VllmGrpc => return parse_vllm_grpc(api, body, limits),
        ParserKind::VertexAi => return parse_vertex(api, body, limits),
        _ => {}
    }
    match api {
        ApiKind::Unparsed => Ok(unparsed(body)),
        ApiKind::VllmGenerate | ApiKind::SglangGenerate => parse_generate(api, body, limits),
        _ => parse_json_body(api, body, limits),
    }
}

impl fmt::Display for ParserKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.type_name())
    }
}

/// A request whose body is not read: no model, no prompt, so payload-based scorers see
/// nothing and load and session signals decide.
fn unparsed(body: &[u8]) -> InferenceRequest {
    let mut request =
        InferenceRequest::new(String::new(), String::new(), Prompt::Text(String::new()));
    request.api = ApiKind::Unparsed;
    request.body_size = body.len();
    request
}
