//! Parsing OpenAI-compatible request bodies into [`InferenceRequest`]s.
//!
//! One pass of `serde_json` over the body reads only what the scheduler needs (`model`,
//! `stream`, the output-token limit and the prompt) straight into the prompt buffer; every
//! other field is skipped without being built. The prompt is copied once from the body.
//!
//! # Prompt text
//!
//! The prefix-cache index hashes the prompt's bytes, so the rendering below is deterministic
//! and append-only: two conversations that share their first turns (and tools) share a byte
//! prefix.
//!
//! - `/v1/completions` `prompt` and `/v1/embeddings` `input`: a string as it is; an array of
//!   strings joined with `"\n"` (empty strings skipped); token ids (one array, or an array of
//!   arrays, concatenated) as [`Prompt::Tokens`].
//! - `/v1/chat/completions`: first every entry of `tools` (and legacy `functions`) as
//!   `<|tool|>` (`<|function|>`) + its compact JSON + `"\n"`; then each message in order as
//!   `<|ROLE|>` + content + `"\n"`. Content parts are joined with `"\n"`: text as it is, media
//!   as `<|image|>URL` (`<|audio|>`, `<|video|>`, `<|file|>`), inline data by its xxh3 hash.
//!   A message's other fields (`name`, `tool_calls`, `tool_call_id`, …) follow its content as
//!   `<|KEY|>` + compact JSON, in the body's order; `null` fields are left out.
//! - `/v1/responses`: `tools` as above, then `instructions` as a `<|system|>` turn, then
//!   `input`: a string is one `<|user|>` turn; items render like chat messages (no role means
//!   `user`), and items without role or content (function calls and their outputs) use their
//!   `type` as the tag.
//!
//! So `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}`
//! renders `<|system|>Be brief.\n<|user|>Hi\n`, and a responses body with
//! `"instructions":"Be brief.","input":"Hi"` renders the same text.
//!
//! # Keys given twice
//!
//! The model server reads the body with Python's `json`, where a key given twice in an object
//! keeps its last value, at the place the key first appeared. The parser does the same
//! everywhere (top-level fields, messages and items, content parts, media objects), so
//! `{"type":"text","text":"AAA","text":"BBB"}` renders `BBB`, as the server will, and the
//! prefix hash matches what the server caches. An earlier value is still read, so it must have
//! a valid type.
//!
//! # Errors
//!
//! Checked in this order: body size ([`ParseError::BodyTooLarge`]), path
//! ([`ParseError::UnsupportedPath`]), UTF-8 ([`ParseError::InvalidUtf8`] with the byte offset),
//! JSON syntax ([`ParseError::InvalidJson`] with serde's line and column; nesting deeper than
//! 128 levels is a syntax error too), top-level type ([`ParseError::NotAnObject`]), field types
//! ([`ParseError::InvalidField`] naming the path, e.g. `messages[2].content[0].text`), then
//! `model` ([`ParseError::MissingField`], or invalid when
//! empty) and the prompt ([`ParseError::MissingField`] when absent, [`ParseError::EmptyPrompt`]
//! when it renders to nothing, e.g. `""`, `[]` or no messages).
//!
//! ```
//! use shepherd_scheduler_core::request::{parse_openai_request, ParseLimits, Prompt};
//!
//! let body = br#"{"model":"llama","messages":[{"role":"user","content":[
//!     {"type":"text","text":"What is this?"},
//!     {"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}"#;
//! let req = parse_openai_request("/v1/chat/completions", body, &ParseLimits::default())?;
//! assert_eq!(
//!     req.prompt,
//!     Prompt::Text("<|user|>What is this?\n<|image|>https://example.com/cat.png\n".into())
//! );
//! # Ok::<(), shepherd_scheduler_core::request::ParseError>(())
//! ```

mod anthropic;
mod body;
mod content;
mod generate;
mod grpc;
mod json_text;
mod keys;
mod last_wins;
mod prompt;
mod trail;
mod turns;

use std::collections::HashMap;
use std::sync::Arc;

use serde::de::{DeserializeSeed, IgnoredAny};

use super::{ChatMessages, InferenceRequest, ParseError, Prompt};
use body::{BodyFields, BodySeed};
pub(super) use generate::parse_generate;
pub(super) use grpc::{parse_vertex, parse_vllm_grpc};
use trail::Trail;

/// Which inference API a request body belongs to.
///
/// The first four are OpenAI's; the others come from the parsers of
/// [`ParserSet`](super::ParserSet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiKind {
    /// `/v1/completions`
    Completions,
    /// `/v1/chat/completions`
    ChatCompletions,
    /// `/v1/responses`
    Responses,
    /// `/v1/embeddings`
    Embeddings,
    /// Anthropic's `/v1/messages`.
    Messages,
    /// vLLM's `/inference/v1/generate` (token ids).
    VllmGenerate,
    /// SGLang's `/generate` (token ids).
    SglangGenerate,
    /// A body forwarded without being read (`passthrough-parser`, Anthropic's
    /// `/v1/messages/count_tokens`): no model, no prompt.
    Unparsed,
}

impl ApiKind {
    /// The OpenAI API for a request path (query string ignored), when known.
    pub fn from_path(path: &str) -> Option<ApiKind> {
        let path = path.split('?').next().unwrap_or(path).trim_end_matches('/');
        match path {
            "/v1/completions" => Some(ApiKind::Completions),
            "/v1/chat/completions" => Some(ApiKind::ChatCompletions),
            "/v1/responses" => Some(ApiKind::Responses),
            "/v1/embeddings" => Some(ApiKind::Embeddings),
            _ => None,
        }
    }

    /// The field that holds the prompt in this API's bodies (empty for [`ApiKind::Unparsed`]).
    pub fn prompt_field(self) -> &'static str {
        match self {
            ApiKind::Completions => "prompt",
            ApiKind::ChatCompletions | ApiKind::Messages => "messages",
            ApiKind::Responses | ApiKind::Embeddings => "input",
            ApiKind::VllmGenerate => "token_ids",
            ApiKind::SglangGenerate => "input_ids",
            ApiKind::Unparsed => "",
        }
    }

    /// A short lower-case name (`chat_completions`, `messages`, `vllm_generate`, ...), for
    /// metric labels and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiKind::Completions => "completions",
            ApiKind::ChatCompletions => "chat_completions",
            ApiKind::Responses => "responses",
            ApiKind::Embeddings => "embeddings",
            ApiKind::Messages => "messages",
            ApiKind::VllmGenerate => "vllm_generate",
            ApiKind::SglangGenerate => "sglang_generate",
            ApiKind::Unparsed => "unparsed",
        }
    }
}

/// Options applied while parsing.
///
/// ```
/// use shepherd_scheduler_core::request::{parse_openai_request, ParseLimits};
///
/// let limits = ParseLimits::default().with_lora_adapter("sql-lora", "llama-3-8b");
/// let body = br#"{"model":"sql-lora","prompt":"SELECT"}"#;
/// let req = parse_openai_request("/v1/completions", body, &limits).unwrap();
/// assert_eq!((req.model.as_str(), req.lora.as_deref()), ("llama-3-8b", Some("sql-lora")));
/// ```
#[derive(Debug, Clone)]
pub struct ParseLimits {
    /// Largest accepted body, in bytes (default 16 MiB).
    pub max_body_bytes: usize,
    /// Known LoRA adapters: adapter name → base model (default none). When a body's `model`
    /// names an adapter, the request gets `lora = Some(adapter)` and `model = base`; without
    /// a map (or for other names) `lora` is `None` and `model` is kept.
    pub lora_adapters: Option<Arc<HashMap<String, String>>>,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            max_body_bytes: 16 * 1024 * 1024,
            lora_adapters: None,
        }
    }
}

impl ParseLimits {
    /// Sets the largest accepted body, in bytes.
    pub fn with_max_body_bytes(mut self, max_body_bytes: usize) -> Self {
        self.max_body_bytes = max_body_bytes;
        self
    }

    /// Adds LoRA adapter `adapter`, served on top of `base`.
    pub fn with_lora_adapter(
        mut self,
        adapter: impl Into<String>,
        base: impl Into<String>,
    ) -> Self {
        let map = self.lora_adapters.get_or_insert_with(Default::default);
        Arc::make_mut(map).insert(adapter.into(), base.into());
        self
    }

    /// The base model of `adapter`, when it is a known LoRA adapter.
    pub fn lora_base(&self, adapter: &str) -> Option<&str> {
        self.lora_adapters
            .as_ref()?
            .get(adapter)
            .map(String::as_str)
    }
}

/// Parses an OpenAI-compatible request body for `path`.
///
/// The returned request has an empty id, priority 0 and no headers: the adapter fills those in.
/// The module docs of `request::parse` say how prompts are rendered and which errors come when.
pub fn parse_openai_request(
    path: &str,
    body: &[u8],
    limits: &ParseLimits,
) -> Result<InferenceRequest, ParseError> {
    check_size(body, limits)?;
    let api = ApiKind::from_path(path).ok_or_else(|| ParseError::UnsupportedPath(path.into()))?;
    parse_json_body(api, body, limits)
}

/// Refuses a body over the limit.
pub(super) fn check_size(body: &[u8], limits: &ParseLimits) -> Result<(), ParseError> {
    if body.len() > limits.max_body_bytes {
        return Err(ParseError::BodyTooLarge {
            size: body.len(),
            limit: limits.max_body_bytes,
        });
    }
    Ok(())
}

/// The body as text, when it is UTF-8 and starts like a JSON object.
fn object_text(body: &[u8]) -> Result<&str, ParseError> {
    let text = std::str::from_utf8(body).map_err(|e| ParseError::InvalidUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    if text.trim_start().as_bytes().first() != Some(&b'{') {
        return Err(match serde_json::from_str::<IgnoredAny>(text) {
            Ok(_) => ParseError::NotAnObject,
            Err(e) => ParseError::InvalidJson(e.to_string()),
        });
    }
    Ok(text)
}

/// Maps a serde error to a [`ParseError`], naming the field that failed.
fn field_error(e: &serde_json::Error, trail: &Trail) -> ParseError {
    match e.classify() {
        serde_json::error::Category::Data => ParseError::InvalidField {
            field: trail.render(),
            reason: bounded_message(e.to_string()),
        },
        _ => ParseError::InvalidJson(bounded_message(e.to_string())),
    }
}

/// Parses a body of an OpenAI API or of Anthropic's messages API (already size-checked).
pub(super) fn parse_json_body(
    api: ApiKind,
    body: &[u8],
    limits: &ParseLimits,
) -> Result<InferenceRequest, ParseError> {
    parse_json_with(api, body, limits, true)
}

/// [`parse_json_body`], with `model` optional when `require_model` is false (an absent one is
/// empty): Vertex AI names the model in the request's endpoint, not in the body.
fn parse_json_with(
    api: ApiKind,
    body: &[u8],
    limits: &ParseLimits,
    require_model: bool,
) -> Result<InferenceRequest, ParseError> {
    if matches!(
        api,
        ApiKind::VllmGenerate | ApiKind::SglangGenerate | ApiKind::Unparsed
    ) {
        return Err(ParseError::UnsupportedPath(api.as_str().into()));
    }
    let text = object_text(body)?;
    let mut trail = Trail::default();
    let mut de = serde_json::Deserializer::from_str(text);
    let fields = BodySeed {
        api,
        trail: &mut trail,
    }
    .deserialize(&mut de)
    .and_then(|fields| de.end().map(|()| fields))
    .map_err(|e| field_error(&e, &trail))?;
    build_request(api, fields, body.len(), limits, require_model)
}

fn build_request(
    api: ApiKind,
    mut fields: BodyFields,
    body_size: usize,
    limits: &ParseLimits,
    require_model: bool,
) -> Result<InferenceRequest, ParseError> {
    let model = match fields.model.take() {
        Some(model) => model,
        None if !require_model => String::new(),
        None => return Err(ParseError::MissingField("model")),
    };
    if model.is_empty() && require_model {
        return Err(ParseError::InvalidField {
            field: "model".into(),
            reason: "must not be empty".into(),
        });
    }
    let chat = (api == ApiKind::ChatCompletions).then(|| {
        Arc::new(ChatMessages {
            messages: std::mem::take(&mut fields.chat),
            has_tools: fields.has_tools,
        })
    });
    let prompt = match api {
        ApiKind::Completions | ApiKind::Embeddings => fields
            .prompt
            .ok_or(ParseError::MissingField(api.prompt_field()))?,
        ApiKind::ChatCompletions | ApiKind::Messages => {
            match fields.turn_count {
                None => return Err(ParseError::MissingField("messages")),
                Some(0) => return Err(ParseError::EmptyPrompt),
                Some(_) => {}
            }
            Prompt::Text(concat_text(fields.tools, fields.instructions, fields.turns))
        }
        ApiKind::Responses => {
            if fields.turn_count.is_none() && fields.instructions.is_empty() {
                return Err(ParseError::MissingField("input"));
            }
            if fields.turns.is_empty() && fields.instructions.is_empty() {
                return Err(ParseError::EmptyPrompt);
            }
            Prompt::Text(concat_text(fields.tools, fields.instructions, fields.turns))
        }
        ApiKind::VllmGenerate | ApiKind::SglangGenerate | ApiKind::Unparsed => {
            return Err(ParseError::UnsupportedPath(api.as_str().into()));
        }
    };
    if prompt.is_empty() {
        return Err(ParseError::EmptyPrompt);
    }

    let mut request = new_request(api, model, prompt, limits);
    request.chat = chat;
    request.stream = fields.stream.unwrap_or(false);
    request.max_tokens = fields
        .max_completion_tokens
        .or(fields.max_output_tokens)
        .or(fields.max_tokens);
    request.body_size = body_size;
    Ok(request)
}

/// A request for `model` (split into base model and LoRA adapter by `limits`).
fn new_request(
    api: ApiKind,
    model: String,
    prompt: Prompt,
    limits: &ParseLimits,
) -> InferenceRequest {
    let (model, lora) = match limits.lora_base(&model) {
        Some(base) => (base.to_owned(), Some(model)),
        None => (model, None),
    };
    let mut request = InferenceRequest::new(String::new(), model, prompt);
    request.lora = lora;
    request.api = api;
    request
}

/// Longest error message kept before its position, in bytes.
const MAX_MESSAGE_BYTES: usize = 200;

/// Shortens an error message that quotes a long value from the body (serde quotes a string of
/// the wrong type in full), keeping its `at line L column C` suffix.
fn bounded_message(message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES * 2 {
        return message;
    }
    let (text, position) = match message.rfind(" at line ") {
        Some(at) => message.split_at(at),
        None => (message.as_str(), ""),
    };
    let mut cut = MAX_MESSAGE_BYTES.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…{position}", &text[..cut])
}

/// `head` + `middle` + `tail`, without copying `tail` when the others are empty.
fn concat_text(head: String, middle: String, tail: String) -> String {
    if head.is_empty() && middle.is_empty() {
        return tail;
    }
    let mut text = head;
    text.reserve(middle.len() + tail.len());
    text.push_str(&middle);
    text.push_str(&tail);
    text
}
