//! `token-producer` (also its older name `tokenizer`): the request's tokens, for the plugins
//! that read them.
//!
//! Upstream, this producer tokenizes the prompt before scheduling and hands the token ids to
//! other plugins. Shepherd keeps a [`TokenProducer`] in the shared resources under the
//! plugin's name; consumers (the precise prefix producer, token counters) find it there and
//! call [`TokenProducer::prompt_for`] once per request, on their own thread: the pick itself
//! does no I/O.
//!
//! Three backends:
//!
//! - **estimate** (no model named, upstream's default): prompts are left as they are; whoever
//!   hashes text cuts it into pseudo tokens of 4 bytes, and real token ids are used when the
//!   request carries them ([`Prompt::Tokens`]). [`TokenProducer::is_exact`] is `false`.
//! - **tokenizer** (`tokenizerPath`, or `modelName` found on local disk): the model's own
//!   `tokenizer.json`, read with the Hugging Face `tokenizers` library, and its chat template
//!   rendered with minijinja, so the ids are those the vLLM server computes, and the blocks of
//!   its KV-cache events can be matched. Shepherd never downloads from a model hub.
//! - **vllm** (`vllm`, or `modelName` with no local files, as upstream): the model server
//!   renders each prompt (`/v1/completions/render`, `/v1/chat/completions/render`); the
//!   adapters make that call before the pick, within `vllm.timeout`, and the pick reads its
//!   answer ([`RenderBackend`]). A render that fails leaves the request without real ids (the
//!   consumers fall back), as upstream logs and continues. This costs a round trip to the
//!   render server on every request's path, as upstream's does.
//!
//! # What is reproduced from vLLM
//!
//! - `/v1/completions` (and `/v1/embeddings`) text: encoded *with* the special tokens
//!   (vLLM's `add_special_tokens=True` default: Llama 3's `<|begin_of_text|>` first).
//! - `/v1/chat/completions`: the messages kept by the parser
//!   ([`InferenceRequest::chat`](shepherd_scheduler_core::request::InferenceRequest::chat))
//!   become what vLLM's `parse_chat_messages` makes of them (text parts joined with `"\n"`,
//!   or typed parts for templates that loop over content; `name`; assistant `tool_calls`
//!   with their JSON `arguments` parsed and `reasoning`; tool `tool_call_id`), the chat
//!   template is rendered in transformers' Jinja environment (`trim_blocks`,
//!   `lstrip_blocks`, loop controls, its Python-compatible `tojson`, `raise_exception`,
//!   `strftime_now`, Python string methods) with `add_generation_prompt=True`,
//!   `tools=None`, the special tokens (`bos_token`, `eos_token`, ...), and the text is
//!   encoded *without* added special tokens (vLLM's chat default: the template writes BOS).
//! - Token ids given by the client pass through unchanged.
//!
//! # What is not
//!
//! [`TokenProducer::prompt_for`] returns a [`TokenizeError`] (never wrong ids it knows to be
//! wrong) for: requests with `tools` (vLLM passes them through pydantic, adding fields, and
//! version-dependent tool parsers may rewrite them), media content parts (the placeholders
//! and image tokens are the model processor's), the responses and Anthropic messages APIs
//! (vLLM converts those itself), chat requests without kept messages. Not reproduced, so the
//! ids may differ: per-request `chat_template`, `chat_template_kwargs` (such as
//! `enable_thinking`), `continue_final_message`, `add_generation_prompt=false`,
//! `add_special_tokens` overrides, `documents`, `truncate_prompt_tokens`; a completions
//! prompt given as an array of strings (the parser joins them with `"\n"`; vLLM makes one
//! request per string); models with their own renderer in vLLM (Mistral's `tekken`,
//! DeepSeek V3.2, Grok 2, Kimi...) or a custom tokenizer class; `strftime_now` uses UTC where
//! Python uses the server's local time; templates needing Jinja features minijinja lacks
//! (`{% generation %}`) fail when the plugin loads. Transformers' tweaks of a slow-tokenizer
//! config (`add_bos_token` rewriting the post-processor) are not applied: the post-processor
//! in `tokenizer.json` is.
//!
//! # Speed
//!
//! Tokenizing is the costly part (a few MB/s of text; see `benches/benches/tokenize.rs`), so
//! a bounded cache keeps the ids of each piece of text between special tokens, keyed by a
//! 128-bit hash of the piece: the earlier turns of a conversation and shared system prompts
//! are tokenized once. It is exact, not a guess: the tokenizer itself never merges across an
//! added token, and the cache turns itself off for tokenizers where that is not so (checked
//! on loading, see `hf.rs`). `cacheMaxTokens` bounds it (LRU, 8 shards).
//!
//! A consumer that needs only a prompt's beginning asks for it: [`TokenProducer::begin`],
//! [`TokenProducer::extend`] and [`TokenProducer::finish`] tokenize a piece at a time, with
//! the ids of whole tokenization, for tokenizers whose pipeline allows it (`stream.rs`,
//! `prefix_stable.rs`); [`TokenProducer::finish_later`] finishes on a bounded background
//! thread. The precise prefix producer tokenizes a prompt never seen only as far as its first
//! block when no server holds that block (`docs/kv-events.md`).
//!
//! ## Parameters
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `modelName` | — | the model whose tokenizer to use, and the render backend's model. Without `tokenizerPath` or `vllm`, looked up in the local Hugging Face cache (`$HF_HUB_CACHE`, `$HF_HOME/hub`, `~/.cache/huggingface/hub`: `models--ORG--NAME/snapshots/REV`), or used as a local directory; not found: the render backend at `http://localhost:8000`, as upstream (a warning) |
//! | `tokenizerPath` | — | Shepherd: a `tokenizer.json`, or a directory holding it and optionally `tokenizer_config.json`, `special_tokens_map.json`, `chat_template.jinja` |
//! | `chatTemplatePath` | — | Shepherd: a chat template overriding the model's (a Jinja file, or JSON with `chat_template`), as vLLM's `--chat-template` |
//! | `chatTemplateContentFormat` | `auto` | Shepherd: `auto`, `string` or `openai`, as vLLM's `--chat-template-content-format` |
//! | `cacheMaxTokens` | 2097152 | Shepherd: tokens the segment cache holds (0 = no cache) |
//! | `estimate` | — | the estimate backend's multimodal tuning (image and video placeholder counts): accepted and not used, Shepherd estimates text only |
//! | `vllm.url` (also `vllm.http`), `vllm.timeout`, `vllm.mmTimeout` | `http://localhost:8000`, `5s`, `30s` | the render backend (needs `modelName`); plain HTTP, as upstream |
//! | `udsTokenizerConfig` | — | deprecated upstream; accepted with a warning: Shepherd does not speak the sidecar's protocol and uses `modelName`'s local tokenizer, else the estimate |
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::config::build_scheduler_in;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scheduler_core::request::{ParseLimits, parse_openai_request};
//! use shepherd_scorers::builtin_registry;
//! use shepherd_scorers::producers::TokenProducer;
//!
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tokenizer");
//! let yaml = format!("
//! plugins:
//! - type: token-producer
//!   parameters:
//!     modelName: shepherd/tiny-llama3
//!     tokenizerPath: {dir}
//! - type: prefix-cache-scorer
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: prefix-cache-scorer
//! ");
//! let shared = SharedState::new(Arc::new(Pool::new()));
//! let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
//! build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
//! let tokens = shared.resources.get::<TokenProducer>("token-producer").unwrap();
//! assert!(tokens.is_exact());
//!
//! let body = br#"{"model":"m","messages":[{"role":"user","content":"Hi!"}]}"#;
//! let chat = parse_openai_request("/v1/chat/completions", body, &ParseLimits::default())?;
//! assert_eq!(
//!     tokens.render_chat(chat.chat.as_deref().unwrap()).unwrap(),
//!     "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>\
//!      <|start_header_id|>assistant<|end_header_id|>\n\n"
//! );
//! let Prompt::Tokens(ids) = tokens.prompt_for(&chat).unwrap().into_owned() else {
//!     panic!("a real tokenizer gives token ids");
//! };
//! assert_eq!(ids[..2], [0, 2]); // <|begin_of_text|> <|start_header_id|>
//!
//! // A completions prompt gets the tokenizer's BOS; given token ids pass through, borrowed.
//! let body = br#"{"model":"m","prompt":"Hi!"}"#;
//! let text = parse_openai_request("/v1/completions", body, &ParseLimits::default())?;
//! assert!(matches!(tokens.prompt_for(&text).unwrap().as_ref(), Prompt::Tokens(ids) if ids[0] == 0));
//! let given = InferenceRequest::new("r", "m", Prompt::Tokens(vec![7, 8, 9]));
//! assert!(matches!(tokens.prompt_for(&given).unwrap(), std::borrow::Cow::Borrowed(_)));
//!
//! // A model with no local files is never downloaded: as upstream with `modelName` alone,
//! // the model server renders its prompts (at upstream's default URL; a warning says so).
//! let remote = EndpointPickerConfig::from_yaml(&yaml.replace(
//!     &format!("    tokenizerPath: {dir}\n"),
//!     "",
//! ).replace("shepherd/tiny-llama3", "nobody/not-on-this-disk")).unwrap();
//! let shared = SharedState::new(Arc::new(Pool::new()));
//! build_scheduler_in(&remote, &builtin_registry(), &shared).unwrap();
//! let tokens = shared.resources.get::<TokenProducer>("token-producer").unwrap();
//! assert_eq!(tokens.render_backend().unwrap().base_url(), "http://localhost:8000");
//! # Ok::<(), shepherd_scheduler_core::request::ParseError>(())
//! ```

mod cache;
mod content_format;
mod error;
mod files;
mod finish;
mod hf;
mod parameters;
mod prefix_stable;
mod producer;
mod pyjson;
mod render;
mod stream;
mod strftime;
mod template;

use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};

pub use cache::CacheStats;
pub use content_format::ContentFormatOption;
pub use error::{TokenizeError, TokenizerLoadError};
pub use files::{TokenizerFiles, hub_cache_roots};
pub use finish::{FinishStats, MAX_QUEUED_BYTES, MAX_QUEUED_JOBS};
pub use parameters::{
    ChosenBackend, DEFAULT_CACHE_MAX_TOKENS, TokenProducerParameters, VllmRenderConfig,
};
pub use producer::{BegunPrompt, TokenProducer};
pub use render::{
    DEFAULT_RENDER_MM_TIMEOUT, DEFAULT_RENDER_TIMEOUT, DEFAULT_RENDER_URL, MAX_HELD_RENDERS,
    RenderBackend,
};
pub use stream::{MARGIN_WORDS, PartialTokens};

/// Registry type name.
pub const TYPE_NAME: &str = "token-producer";

/// The older, deprecated name upstream still accepts.
pub const LEGACY_TYPE_NAME: &str = "tokenizer";

/// Bytes per pseudo token of the estimate backend (the prefix index uses the same).
pub const BYTES_PER_TOKEN: usize = shepherd_scheduler_core::prefix::BYTES_PER_TOKEN;

/// The request's prompt length in tokens: the token ids' count when the request carries
/// them, else an estimate of one token per 4 bytes of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenCount {
    /// Tokens (or estimated tokens) in the prompt.
    pub tokens: usize,
    /// Whether `tokens` counts real token ids.
    pub exact: bool,
}

impl TokenCount {
    /// The token count of `request`'s prompt (see [`TokenProducer::count`] for a count by the
    /// model's tokenizer).
    pub fn of(request: &InferenceRequest) -> Self {
        TokenCount::of_prompt(&request.prompt)
    }

    /// The token count of `prompt`.
    pub fn of_prompt(prompt: &Prompt) -> Self {
        match prompt {
            Prompt::Tokens(ids) => TokenCount {
                tokens: ids.len(),
                exact: true,
            },
            Prompt::Text(text) => TokenCount {
                tokens: text.len() / BYTES_PER_TOKEN,
                exact: false,
            },
        }
    }
}

/// Builds a `token-producer`: a [`TokenProducer`] kept in the shared resources under the
/// plugin's name (the estimate backend, or the local tokenizer the parameters name).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: TokenProducerParameters = args.parse()?;
    let producer = parameters.producer(args.name)?;
    args.resources.insert(args.name, Arc::new(producer));
    Ok(PluginInstance::default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn counts_ids_or_estimates_four_bytes_per_token() {
        let text = InferenceRequest::new("r", "m", Prompt::Text("abcdefghij".into()));
        assert_eq!(
            TokenCount::of(&text),
            TokenCount {
                tokens: 2,
                exact: false
            }
        );
        let ids = InferenceRequest::new("r", "m", Prompt::Tokens(vec![1, 2, 3]));
        assert_eq!(
            TokenCount::of(&ids),
            TokenCount {
                tokens: 3,
                exact: true
            }
        );
        let estimate = TokenProducer::estimate("t");
        assert_eq!(estimate.count(&text), TokenCount::of(&text));
        assert!(!estimate.is_exact());
    }

    #[test]
    fn each_backend_is_chosen_as_upstream_chooses_it() {
        let shared = shepherd_scheduler_core::shared::SharedState::new(std::sync::Arc::new(
            shepherd_scheduler_core::endpoint::Pool::new(),
        ));
        let build = |json: serde_json::Value| {
            let args = PluginArgs::new("t", TYPE_NAME, &json, &shared, 0);
            factory(&args)
        };
        let producer = || shared.resources.get::<TokenProducer>("t").unwrap();
        assert!(build(serde_json::Value::Null).is_ok());
        assert!(!producer().is_exact());
        assert!(build(serde_json::json!({"estimate": {"image": {"mode": "static"}}})).is_ok());
        // The vLLM render backend, with the router's `url` and the inference scheduler's `http`.
        for key in ["url", "http"] {
            build(serde_json::json!({"modelName": "m", "vllm": {key: "http://x:8000/"}})).unwrap();
            let render = producer();
            let backend = render.render_backend().unwrap();
            assert_eq!(
                (backend.base_url(), backend.model()),
                ("http://x:8000", "m")
            );
            assert!(render.is_exact());
        }
        let no_model = build(serde_json::json!({"vllm": {"url": "http://x:8000"}})).unwrap_err();
        assert!(no_model.to_string().contains("modelName"), "{no_model}");
        // `modelName` alone with nothing on disk: rendered at upstream's default URL.
        let roots: Vec<std::path::PathBuf> = Vec::new();
        let params: TokenProducerParameters =
            serde_json::from_value(serde_json::json!({"modelName": "nobody/nothing"})).unwrap();
        let chosen = params.producer_in("t", &roots).unwrap();
        assert_eq!(
            chosen.render_backend().unwrap().base_url(),
            DEFAULT_RENDER_URL
        );
        assert_eq!(params.warnings_in(&roots).len(), 1);
        // The deprecated sidecar: loads, estimates without a local tokenizer, says so.
        let uds: TokenProducerParameters = serde_json::from_value(
            serde_json::json!({"modelName": "nobody/nothing", "udsTokenizerConfig": {"socketFile": "tokenizer.sock"}}),
        )
        .unwrap();
        assert!(!uds.producer_in("t", &roots).unwrap().is_exact());
        assert!(uds.warnings_in(&roots)[0].contains("udsTokenizerConfig"));
        assert!(build(serde_json::json!({"udsTokenizerConfig": {}})).is_err());
        assert!(build(serde_json::json!({"tokenizerr": 1})).is_err());
        assert!(build(serde_json::json!({"chatTemplatePath": "/x.jinja"})).is_err());
        assert!(build(serde_json::json!({"chatTemplateContentFormat": "weird"})).is_err());
    }

    #[test]
    fn a_render_is_read_by_the_pick_and_its_absence_is_an_error() {
        let producer = TokenProducer::render(
            "t",
            RenderBackend::new("http://x:8000", "m", None, None).unwrap(),
        );
        let request = InferenceRequest::new("r1", "m", Prompt::Text("hello".into()));
        assert_eq!(
            producer.prompt_for(&request),
            Err(TokenizeError::NotRendered)
        );
        producer.render_backend().unwrap().insert("r1", vec![5, 6]);
        assert_eq!(
            producer.prompt_for(&request).unwrap().into_owned(),
            Prompt::Tokens(vec![5, 6])
        );
    }

    #[test]
    fn producers_are_shareable() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<TokenProducer>();
    }
}
