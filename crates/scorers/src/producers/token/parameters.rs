//! The `token-producer` parameters, and the backend they choose.

use std::path::PathBuf;

use serde::Deserialize;
use shepherd_scheduler_core::config::PluginError;

use super::content_format::ContentFormatOption;
use super::error::TokenizerLoadError;
use super::files::{TokenizerFiles, hub_cache_roots};
use super::producer::TokenProducer;

/// Tokens the segment cache holds by default (8 MiB of ids).
pub const DEFAULT_CACHE_MAX_TOKENS: usize = 1 << 21;

/// The `token-producer` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct TokenProducerParameters {
    /// The estimate backend's multimodal tuning (not used).
    pub estimate: Option<serde_json::Value>,
    /// The model whose tokenizer to use: looked up in the local Hugging Face cache (or a
    /// local directory) when `tokenizerPath` is not set.
    pub model_name: Option<String>,
    /// A `tokenizer.json`, or a directory holding it (and `tokenizer_config.json`).
    pub tokenizer_path: Option<PathBuf>,
    /// A chat template that overrides the model's (Jinja, or JSON with `chat_template`).
    pub chat_template_path: Option<PathBuf>,
    /// How templates get message content (vLLM's `--chat-template-content-format`).
    pub chat_template_content_format: ContentFormatOption,
    /// Most tokens the segment cache holds (0 turns it off).
    pub cache_max_tokens: usize,
    /// The vLLM render backend (not supported).
    pub vllm: Option<serde_json::Value>,
    /// The deprecated tokenizer sidecar (not supported).
    pub uds_tokenizer_config: Option<serde_json::Value>,
}

impl Default for TokenProducerParameters {
    fn default() -> Self {
        TokenProducerParameters {
            estimate: None,
            model_name: None,
            tokenizer_path: None,
            chat_template_path: None,
            chat_template_content_format: ContentFormatOption::Auto,
            cache_max_tokens: DEFAULT_CACHE_MAX_TOKENS,
            vllm: None,
            uds_tokenizer_config: None,
        }
    }
}

impl TokenProducerParameters {
    /// The local files these parameters point at (`None`: the estimate backend), looking up
    /// `modelName` under the cache `roots`.
    pub fn files_in(&self, roots: &[PathBuf]) -> Result<Option<TokenizerFiles>, PluginError> {
        if self.vllm.is_some() {
            return Err(PluginError::invalid(
                "vllm",
                "the vLLM render backend is not supported: it needs an HTTP call on every \
                 request's path; point `tokenizerPath` at the model's tokenizer.json instead",
            ));
        }
        if self.uds_tokenizer_config.is_some() {
            return Err(PluginError::invalid(
                "udsTokenizerConfig",
                "the tokenizer sidecar is not supported: it needs a socket call on every \
                 request's path; point `tokenizerPath` at the model's tokenizer.json instead",
            ));
        }
        let files = match (&self.tokenizer_path, &self.model_name) {
            (Some(path), _) => TokenizerFiles::at(path)
                .map_err(|e| PluginError::invalid("tokenizerPath", e.to_string()))?,
            (None, Some(model)) => TokenizerFiles::for_model(model, roots)
                .map_err(|e| PluginError::invalid("modelName", e.to_string()))?,
            (None, None) => {
                if self.chat_template_path.is_some() {
                    return Err(PluginError::invalid(
                        "chatTemplatePath",
                        "needs a tokenizer: set `tokenizerPath` or `modelName`",
                    ));
                }
                return Ok(None);
            }
        };
        Ok(Some(TokenizerFiles {
            chat_template: self.chat_template_path.clone(),
            ..files
        }))
    }

    /// The producer these parameters describe, named `name`, with `modelName` looked up in
    /// the cache directories of the environment.
    pub fn producer(&self, name: &str) -> Result<TokenProducer, PluginError> {
        self.producer_in(name, &hub_cache_roots())
    }

    /// [`TokenProducerParameters::producer`], looking `modelName` up under `roots`.
    pub fn producer_in(&self, name: &str, roots: &[PathBuf]) -> Result<TokenProducer, PluginError> {
        match self.files_in(roots)? {
            None => Ok(TokenProducer::estimate(name)),
            Some(files) => {
                let parameter = if self.tokenizer_path.is_some() {
                    "tokenizerPath"
                } else {
                    "modelName"
                };
                TokenProducer::load(name, &files, self).map_err(|e| {
                    let parameter = match e {
                        TokenizerLoadError::Template { .. }
                            if self.chat_template_path.is_some() =>
                        {
                            "chatTemplatePath"
                        }
                        _ => parameter,
                    };
                    PluginError::invalid(parameter, e.to_string())
                })
            }
        }
    }
}
