//! The `token-producer` parameters, and the backend they choose.

use std::path::PathBuf;

use serde::Deserialize;
use shepherd_scheduler_core::config::PluginError;

use super::content_format::ContentFormatOption;
use super::error::TokenizerLoadError;
use super::files::{TokenizerFiles, hub_cache_roots};
use super::producer::TokenProducer;
use super::render::{DEFAULT_RENDER_URL, RenderBackend};

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
    /// The vLLM render backend.
    pub vllm: Option<VllmRenderConfig>,
    /// The deprecated tokenizer sidecar (accepted; see [`TokenProducerParameters::warnings_in`]).
    pub uds_tokenizer_config: Option<serde_json::Value>,
}

/// `vllm`: where the model server renders prompts (upstream's names; `http` is the inference
/// scheduler's older name of `url`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct VllmRenderConfig {
    /// Base URL of the render server (`http://localhost:8000`).
    #[serde(alias = "http")]
    pub url: Option<String>,
    /// Timeout of a text-only render (Go duration, `5s`).
    pub timeout: Option<String>,
    /// Timeout of a multimodal render (Go duration, `30s`).
    pub mm_timeout: Option<String>,
}

/// The backend a `token-producer`'s parameters choose.
#[derive(Debug)]
pub enum ChosenBackend {
    /// No model: the estimate backend.
    Estimate,
    /// A local tokenizer.
    Local(TokenizerFiles),
    /// The model server renders prompts.
    Render(RenderBackend),
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
    /// The backend these parameters choose, looking `modelName` up under the cache `roots`:
    ///
    /// - `tokenizerPath`: that local tokenizer;
    /// - `vllm`: the model server renders (upstream's `vllm` backend; needs `modelName`);
    /// - `modelName` alone: its local tokenizer when the cache has it, else the render
    ///   backend at upstream's default URL (what `modelName` alone selects upstream), with a
    ///   warning;
    /// - `udsTokenizerConfig` (deprecated upstream; Shepherd does not speak the sidecar's
    ///   protocol): the local tokenizer of `modelName` when the cache has it, else the
    ///   estimate, with a warning;
    /// - nothing: the estimate backend.
    pub fn backend_in(&self, roots: &[PathBuf]) -> Result<ChosenBackend, PluginError> {
        let render = |config: &VllmRenderConfig, model: &str| {
            RenderBackend::new(
                config.url.as_deref().unwrap_or(DEFAULT_RENDER_URL),
                model,
                config.timeout.as_deref(),
                config.mm_timeout.as_deref(),
            )
            .map(ChosenBackend::Render)
            .map_err(|(field, reason)| PluginError::invalid(field, reason))
        };
        if self.vllm.is_some() && self.uds_tokenizer_config.is_some() {
            return Err(PluginError::invalid(
                "vllm",
                "only one of `vllm` and `udsTokenizerConfig` may be set (as upstream)",
            ));
        }
        if let Some(path) = &self.tokenizer_path {
            let files = TokenizerFiles::at(path)
                .map_err(|e| PluginError::invalid("tokenizerPath", e.to_string()))?;
            return Ok(ChosenBackend::Local(self.with_template(files)));
        }
        let model = self.model_name.as_deref().filter(|m| !m.is_empty());
        if let Some(config) = &self.vllm {
            let model = model.ok_or_else(|| {
                PluginError::invalid("modelName", "must be set with `vllm` (as upstream)")
            })?;
            return render(config, model);
        }
        let Some(model) = model else {
            if self.uds_tokenizer_config.is_some() {
                return Err(PluginError::invalid(
                    "modelName",
                    "must be set with `udsTokenizerConfig` (as upstream)",
                ));
            }
            if self.chat_template_path.is_some() {
                return Err(PluginError::invalid(
                    "chatTemplatePath",
                    "needs a tokenizer: set `tokenizerPath` or `modelName`",
                ));
            }
            return Ok(ChosenBackend::Estimate);
        };
        match TokenizerFiles::for_model(model, roots) {
            Ok(files) => Ok(ChosenBackend::Local(self.with_template(files))),
            Err(TokenizerLoadError::NotFound { .. }) if self.uds_tokenizer_config.is_some() => {
                Ok(ChosenBackend::Estimate)
            }
            Err(TokenizerLoadError::NotFound { .. }) => render(&VllmRenderConfig::default(), model),
            Err(e) => Err(PluginError::invalid("modelName", e.to_string())),
        }
    }

    fn with_template(&self, files: TokenizerFiles) -> TokenizerFiles {
        TokenizerFiles {
            chat_template: self.chat_template_path.clone(),
            ..files
        }
    }

    /// What these parameters load without doing what upstream does with them, one line each
    /// (the runtime logs them; `shepherd_scorers::parameter_warnings`).
    pub fn warnings_in(&self, roots: &[PathBuf]) -> Vec<String> {
        let mut warnings = Vec::new();
        let Ok(backend) = self.backend_in(roots) else {
            return warnings; // building the plugin says why
        };
        if self.uds_tokenizer_config.is_some() {
            warnings.push(format!(
                "`udsTokenizerConfig` is deprecated upstream and Shepherd does not speak the \
                 tokenizer sidecar's protocol: {}; migrate to `vllm.url` or `tokenizerPath`",
                match backend {
                    ChosenBackend::Local(_) => "the model's tokenizer from the local cache is used",
                    _ => "no local tokenizer for the model, so token counts are estimated",
                }
            ));
        } else if self.vllm.is_none()
            && self.tokenizer_path.is_none()
            && let ChosenBackend::Render(render) = &backend
        {
            warnings.push(format!(
                "no local tokenizer for model `{}`: prompts are rendered by the model server at \
                 {} before each pick, as upstream does with `modelName` alone (set \
                 `tokenizerPath`, or put the model in the local Hugging Face cache, to \
                 tokenize in process)",
                render.model(),
                render.base_url()
            ));
        }
        warnings
    }

    /// The producer these parameters describe, named `name`, with `modelName` looked up in
    /// the cache directories of the environment.
    pub fn producer(&self, name: &str) -> Result<TokenProducer, PluginError> {
        self.producer_in(name, &hub_cache_roots())
    }

    /// [`TokenProducerParameters::producer`], looking `modelName` up under `roots`.
    pub fn producer_in(&self, name: &str, roots: &[PathBuf]) -> Result<TokenProducer, PluginError> {
        match self.backend_in(roots)? {
            ChosenBackend::Estimate => Ok(TokenProducer::estimate(name)),
            ChosenBackend::Render(render) => Ok(TokenProducer::render(name, render)),
            ChosenBackend::Local(files) => {
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
