//! `token-producer` (also its older name `tokenizer`): the request's tokens, for the plugins
//! that read them.
//!
//! Upstream, this producer tokenizes the prompt before scheduling and hands the token ids to
//! other plugins; its default `estimate` backend needs no model: it packs the prompt's bytes
//! into pseudo tokens of 4 bytes. That is what Shepherd always does: the prefix index cuts
//! text into 4-byte pseudo tokens, and uses real token ids when the request carries them
//! ([`Prompt::Tokens`]). So a
//! `token-producer` with the `estimate` backend loads and changes nothing; its product is
//! available to any plugin as [`TokenCount`].
//!
//! ## Parameters
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `estimate` | — | the estimate backend's multimodal tuning (image and video placeholder counts): accepted and not used, Shepherd estimates text only |
//! | `modelName`, `vllm` (`url`, `timeout`, `mmTimeout`), `udsTokenizerConfig` | — | a real tokenizer backend: not yet (the tokenizer issue); a config that sets one is rejected with an error saying so, rather than silently estimating |
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let yaml = "
//! plugins:
//! - type: token-producer
//! - type: approx-prefix-cache-producer
//! - type: prefix-cache-scorer
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: prefix-cache-scorer
//! ";
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000"]);
//! let config = EndpointPickerConfig::from_yaml(yaml).unwrap();
//! assert!(build_scheduler(&config, &builtin_registry(), pool.clone()).is_ok());
//!
//! let real = EndpointPickerConfig::from_yaml(&yaml.replace(
//!     "- type: token-producer\n",
//!     "- type: token-producer\n  parameters:\n    modelName: Qwen/Qwen3-8B\n",
//! )).unwrap();
//! let err = build_scheduler(&real, &builtin_registry(), pool).unwrap_err();
//! assert!(err.to_string().contains("tokenizer"), "{err}");
//! ```

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};

/// Registry type name.
pub const TYPE_NAME: &str = "token-producer";

/// The older, deprecated name upstream still accepts.
pub const LEGACY_TYPE_NAME: &str = "tokenizer";

/// Bytes per pseudo token of the estimate backend (the prefix index uses the same).
pub const BYTES_PER_TOKEN: usize = shepherd_scheduler_core::prefix::BYTES_PER_TOKEN;

/// The `token-producer` parameters (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct TokenProducerParameters {
    /// The estimate backend's multimodal tuning (not used).
    pub estimate: Option<serde_json::Value>,
    /// A model whose tokenizer to use (not supported yet).
    pub model_name: Option<String>,
    /// The vLLM render backend (not supported yet).
    pub vllm: Option<serde_json::Value>,
    /// The deprecated tokenizer sidecar (not supported yet).
    pub uds_tokenizer_config: Option<serde_json::Value>,
}

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
    /// The token count of `request`'s prompt.
    pub fn of(request: &InferenceRequest) -> Self {
        match &request.prompt {
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

/// Builds a `token-producer` with the estimate backend; a real tokenizer backend is an error.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: TokenProducerParameters = args.parse()?;
    let real = [
        ("modelName", parameters.model_name.is_some()),
        ("vllm", parameters.vllm.is_some()),
        (
            "udsTokenizerConfig",
            parameters.uds_tokenizer_config.is_some(),
        ),
    ];
    if let Some((parameter, _)) = real.iter().find(|(_, set)| *set) {
        return Err(PluginError::invalid(
            *parameter,
            "a real tokenizer backend is not supported yet (tokenizer support is planned); \
             remove it to use the estimate backend (4 bytes per token)",
        ));
    }
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
    }

    #[test]
    fn the_estimate_backend_loads_and_real_ones_do_not() {
        let shared = shepherd_scheduler_core::shared::SharedState::new(std::sync::Arc::new(
            shepherd_scheduler_core::endpoint::Pool::new(),
        ));
        let build = |json: serde_json::Value| {
            let args = PluginArgs::new("t", TYPE_NAME, &json, &shared, 0);
            factory(&args)
        };
        assert!(build(serde_json::Value::Null).is_ok());
        assert!(build(serde_json::json!({"estimate": {"image": {"mode": "static"}}})).is_ok());
        assert!(build(serde_json::json!({"vllm": {"url": "http://x:8000"}})).is_err());
        assert!(build(serde_json::json!({"udsTokenizerConfig": {}})).is_err());
        assert!(build(serde_json::json!({"tokenizerr": 1})).is_err());
    }
}
