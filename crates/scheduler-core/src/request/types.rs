use std::fmt;
use std::sync::Arc;

use super::ChatMessages;
use super::parse::ApiKind;

/// A request's prompt, in the form the prefix index hashes.
///
/// Chat conversations are serialized at parse time (roles, contents, tools, in order) into
/// [`Prompt::Text`], so two conversations that share their first messages share a byte prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// Prompt text (completions), or a serialized chat conversation.
    Text(String),
    /// Token ids given by the client.
    Tokens(Vec<u32>),
}

impl Prompt {
    /// The prompt's size in bytes (token ids count 4 bytes each).
    pub fn len_bytes(&self) -> usize {
        match self {
            Prompt::Text(s) => s.len(),
            Prompt::Tokens(t) => t.len().saturating_mul(4),
        }
    }

    /// Whether the prompt is empty.
    pub fn is_empty(&self) -> bool {
        match self {
            Prompt::Text(s) => s.is_empty(),
            Prompt::Tokens(t) => t.is_empty(),
        }
    }

    /// The number of tokens: exact for token ids, else one pseudo token per 4 bytes (rounded up).
    pub fn estimated_tokens(&self) -> usize {
        match self {
            Prompt::Text(s) => s.len().div_ceil(4),
            Prompt::Tokens(t) => t.len(),
        }
    }
}

/// One inference request, as the scheduler sees it.
#[derive(Clone, PartialEq)]
pub struct InferenceRequest {
    /// Request id (from `x-request-id` when present, see [`InferenceRequest::assign_id`]);
    /// empty means "generate one when scheduled".
    pub id: String,
    /// Model name as the client asked for it.
    pub model: String,
    /// LoRA adapter to serve it with, when the model name names an adapter.
    pub lora: Option<String>,
    /// Which API the body came from ([`ApiKind::Unparsed`] when no parser read it).
    pub api: ApiKind,
    /// The prompt.
    pub prompt: Prompt,
    /// A chat completions request's messages, as its chat template will read them (kept by
    /// the parser for `/v1/chat/completions`; `None` otherwise).
    pub chat: Option<Arc<ChatMessages>>,
    /// Whether the client asked for a streamed response.
    pub stream: bool,
    /// Priority: higher is more important; negative means sheddable.
    pub priority: i32,
    /// Fairness id (flow); `None` means the default flow.
    pub fairness_id: Option<String>,
    /// Session key for session affinity, when the client sent one.
    pub session_key: Option<String>,
    /// Requested maximum output tokens, when given.
    pub max_tokens: Option<u32>,
    /// Headers of interest to plugins, lower-cased names.
    pub headers: Vec<(String, String)>,
    /// Size of the request body in bytes.
    pub body_size: usize,
}

impl InferenceRequest {
    /// A request for `model` with a text prompt and defaults everywhere else.
    pub fn new(id: impl Into<String>, model: impl Into<String>, prompt: Prompt) -> Self {
        let body_size = prompt.len_bytes();
        InferenceRequest {
            id: id.into(),
            model: model.into(),
            lora: None,
            api: ApiKind::Completions,
            prompt,
            chat: None,
            stream: false,
            priority: 0,
            fairness_id: None,
            session_key: None,
            max_tokens: None,
            headers: Vec::new(),
            body_size,
        }
    }

    /// The request with header `name: value` added (the name lower-cased, as the adapters
    /// hand headers over).
    ///
    /// ```
    /// use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
    ///
    /// let r = InferenceRequest::new("r", "m", Prompt::Text("hi".into()))
    ///     .with_header("X-Session-Id", "s-1");
    /// assert_eq!(r.header("x-session-id"), Some("s-1"));
    /// ```
    #[must_use]
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// The value of header `name` (case-insensitive), when present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The values of headers `names` (each lowercase; matched in any case), as
    /// [`InferenceRequest::header`] finds each, in one pass over the headers: for a caller
    /// reading several on every pick.
    ///
    /// ```
    /// use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
    ///
    /// let mut r = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
    /// r.headers.push(("X-Slo-Ttft-Ms".into(), "250".into()));
    /// assert_eq!(r.headers_named(["x-slo-ttft-ms", "x-slo-tpot-ms"]), [Some("250"), None]);
    /// ```
    pub fn headers_named<const N: usize>(&self, names: [&str; N]) -> [Option<&str>; N] {
        let mut found = [None; N];
        for (key, value) in &self.headers {
            // The exact bytes first (how HTTP/2 and the adapters hand headers over), then
            // ignoring ASCII case.
            let named = |name: &&str| key == name || key.eq_ignore_ascii_case(name);
            if let Some(i) = names.iter().position(named)
                && found[i].is_none()
            {
                found[i] = Some(value.as_str());
            }
        }
        found
    }

    /// Whether the request carries media (images, audio, video, files): some message of a
    /// chat completions request has a content part that is not text. What
    /// `always-disagg-multimodal-decider` reads; `false` for every other API and for requests
    /// built by hand without [`InferenceRequest::chat`].
    ///
    /// ```
    /// use shepherd_scheduler_core::request::{parse_openai_request, ParseLimits};
    ///
    /// let limits = ParseLimits::default();
    /// let image = br#"{"model":"m","messages":[{"role":"user","content":[
    ///     {"type":"text","text":"What is this?"},
    ///     {"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}"#;
    /// let text = br#"{"model":"m","messages":[{"role":"user","content":"Hi"}]}"#;
    /// assert!(parse_openai_request("/v1/chat/completions", image, &limits).unwrap().has_media());
    /// assert!(!parse_openai_request("/v1/chat/completions", text, &limits).unwrap().has_media());
    /// ```
    pub fn has_media(&self) -> bool {
        self.chat
            .as_deref()
            .is_some_and(|chat| chat.messages.iter().any(|m| m.has_media))
    }

    /// The model or adapter name that endpoints must serve: the LoRA adapter when set.
    pub fn target_model(&self) -> &str {
        self.lora.as_deref().unwrap_or(&self.model)
    }
}

impl fmt::Debug for InferenceRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The prompt can be megabytes: show its size, not its text.
        f.debug_struct("InferenceRequest")
            .field("id", &self.id)
            .field("model", &self.model)
            .field("lora", &self.lora)
            .field("api", &self.api)
            .field("prompt_bytes", &self.prompt.len_bytes())
            .field(
                "chat_messages",
                &self.chat.as_ref().map(|chat| chat.messages.len()),
            )
            .field("stream", &self.stream)
            .field("priority", &self.priority)
            .field("fairness_id", &self.fairness_id)
            .field("session_key", &self.session_key)
            .field("body_size", &self.body_size)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// One pass finds what `header` finds for each name, in any case and with repeats.
        #[test]
        fn headers_named_reads_what_header_finds(
            headers in proptest::collection::vec(
                (
                    prop_oneof![
                        Just("x-a"), Just("X-A"), Just("x-b"), Just("X-b"), Just("x-ab"),
                        Just("content-type"),
                    ],
                    prop_oneof![Just("1"), Just("2"), Just("")],
                ),
                0..6,
            ),
        ) {
            let mut request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
            request.headers = headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
            let [a, b] = request.headers_named(["x-a", "x-b"]);
            prop_assert_eq!(a, request.header("x-a"));
            prop_assert_eq!(b, request.header("x-b"));
        }
    }
}
