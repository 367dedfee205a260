//! Why a tokenizer did not load, and why a request could not be tokenized.

use std::path::PathBuf;

use thiserror::Error;

/// Why a `token-producer`'s tokenizer could not be loaded (a config error: the plugin is not
/// built).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TokenizerLoadError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `tokenizer.json` did not load.
    #[error("{} is not a tokenizer this build can load: {source}", path.display())]
    Tokenizer {
        /// The file.
        path: PathBuf,
        /// The `tokenizers` error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A JSON file (`tokenizer_config.json`, `chat_template.json`) is not valid.
    #[error("{} is not valid: {reason}", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The chat template does not compile, or fails on a one-message conversation.
    #[error("the chat template of {} cannot be used: {source}", path.display())]
    Template {
        /// Where the template came from.
        path: PathBuf,
        /// The template engine's error.
        #[source]
        source: minijinja::Error,
    },
    /// `modelName` names a model with no local files.
    #[error(
        "no local tokenizer for model `{model}`: Shepherd never downloads from a model hub. \
         Set `tokenizerPath` to the model's tokenizer.json (or to a directory holding \
         tokenizer.json and tokenizer_config.json), or put the model in the local Hugging \
         Face cache (looked in: {looked})"
    )]
    NotFound {
        /// The model asked for.
        model: String,
        /// The places looked in.
        looked: String,
    },
    /// A local model directory or cache entry that holds no (or no single) tokenizer.
    #[error("{}: {reason}", path.display())]
    Layout {
        /// The directory.
        path: PathBuf,
        /// What is missing or ambiguous.
        reason: String,
    },
}

/// Why one request could not be tokenized as the model server will tokenize it.
///
/// Never a panic: the caller decides what to do without real token ids (a precise prefix
/// match scores the request as unknown, a token counter estimates).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TokenizeError {
    /// The request uses something this tokenizer does not reproduce (tools, media parts, an
    /// API other than completions and chat completions).
    #[error("the server's prompt for this request cannot be reproduced: {0}")]
    Unsupported(&'static str),
    /// A chat completions request without its messages ([`InferenceRequest::chat`] is `None`:
    /// it was not built by the parser).
    ///
    /// [`InferenceRequest::chat`]: shepherd_scheduler_core::request::InferenceRequest::chat
    #[error("a chat request without its messages")]
    MissingMessages,
    /// The tokenizer has no chat template.
    #[error("the tokenizer has no chat template (set `chatTemplatePath`)")]
    NoChatTemplate,
    /// The chat template failed on this conversation (its `raise_exception`, a type error).
    #[error("the chat template failed: {0}")]
    Render(String),
    /// The tokenizer failed on the text.
    #[error("tokenization failed: {0}")]
    Encode(String),
    /// The `vllm` backend has no render for this request (the call failed or timed out, or
    /// nobody made it).
    #[error("the model server did not render this request")]
    NotRendered,
}
