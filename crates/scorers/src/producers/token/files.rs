//! Finding a model's tokenizer files on local disk, and reading its chat template and special
//! tokens from them. Nothing is ever downloaded.
//!
//! A model directory (a `save_pretrained` output or a Hugging Face cache snapshot) holds
//! `tokenizer.json`, usually `tokenizer_config.json` (`chat_template`, `bos_token`,
//! `eos_token`, ...), sometimes `special_tokens_map.json`, `chat_template.jinja` or
//! `chat_template.json`. The chat template is the first found of: `chatTemplatePath`,
//! `chat_template.jinja`, `chat_template.json`'s `chat_template`, `tokenizer_config.json`'s
//! `chat_template` (a string, or the template named `default` in a list of named templates).
//!
//! For `modelName` without `tokenizerPath`, Shepherd looks where the Hugging Face libraries
//! keep downloaded models: `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
//! `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`, in
//! `models--ORG--NAME/snapshots/REVISION/`, the revision named by `refs/main` (or the only
//! snapshot there is). A `modelName` that is a local directory is used as it is, as vLLM does.

use std::path::{Path, PathBuf};

use minijinja::Value;

use super::error::TokenizerLoadError;

/// The files a tokenizer is loaded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenizerFiles {
    /// `tokenizer.json`.
    pub tokenizer: PathBuf,
    /// The directory where `tokenizer_config.json` and the other files are looked for.
    pub directory: Option<PathBuf>,
    /// A chat template file that overrides the model's (`chatTemplatePath`): a Jinja file, or
    /// a `.json` file with a `chat_template` string.
    pub chat_template: Option<PathBuf>,
}

impl TokenizerFiles {
    /// The files at `path`: a `tokenizer.json` file (its directory holds the others), or a
    /// directory holding `tokenizer.json`.
    pub fn at(path: &Path) -> Result<Self, TokenizerLoadError> {
        if path.is_dir() {
            let tokenizer = path.join("tokenizer.json");
            if !tokenizer.is_file() {
                return Err(TokenizerLoadError::Layout {
                    path: path.to_owned(),
                    reason: "holds no tokenizer.json".into(),
                });
            }
            return Ok(TokenizerFiles {
                tokenizer,
                directory: Some(path.to_owned()),
                chat_template: None,
            });
        }
        if !path.is_file() {
            return Err(TokenizerLoadError::Read {
                path: path.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
            });
        }
        Ok(TokenizerFiles {
            tokenizer: path.to_owned(),
            directory: path.parent().map(Path::to_owned),
            chat_template: None,
        })
    }

    /// The files of `model` in a local Hugging Face cache under one of `roots` (see
    /// [`hub_cache_roots`]), or in the local directory `model` names.
    pub fn for_model(model: &str, roots: &[PathBuf]) -> Result<Self, TokenizerLoadError> {
        let local = Path::new(model);
        if local.is_dir() {
            return TokenizerFiles::at(local);
        }
        let folder = format!("models--{}", model.replace('/', "--"));
        for root in roots {
            let entry = root.join(&folder);
            if entry.is_dir() {
                return TokenizerFiles::at(&snapshot(&entry)?);
            }
        }
        let looked = roots
            .iter()
            .map(|root| root.join(&folder).display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Err(TokenizerLoadError::NotFound {
            model: model.to_owned(),
            looked: if looked.is_empty() {
                "no cache directory is set".into()
            } else {
                looked
            },
        })
    }

    fn sibling(&self, name: &str) -> Option<PathBuf> {
        let path = self.directory.as_ref()?.join(name);
        path.is_file().then_some(path)
    }

    /// Reads the chat template (with the file it came from) and the special tokens.
    pub(super) fn read_config(&self) -> Result<ModelConfig, TokenizerLoadError> {
        let config = match self.sibling("tokenizer_config.json") {
            Some(path) => Some((read_json(&path)?, path)),
            None => None,
        };
        let special_map = match self.sibling("special_tokens_map.json") {
            Some(path) => Some(read_json(&path)?),
            None => None,
        };
        let mut special_tokens = Vec::new();
        for name in SPECIAL_TOKEN_NAMES {
            let value = [config.as_ref().map(|(c, _)| c), special_map.as_ref()]
                .into_iter()
                .flatten()
                .find_map(|source| special_token(source.get(*name)?));
            if let Some(value) = value {
                special_tokens.push(((*name).to_owned(), value));
            }
        }
        let template = match &self.chat_template {
            Some(path) => Some((read_template_file(path)?, path.clone())),
            None => self.model_template(config.as_ref())?,
        };
        Ok(ModelConfig {
            template,
            special_tokens,
        })
    }

    fn model_template(
        &self,
        config: Option<&(serde_json::Value, PathBuf)>,
    ) -> Result<Option<(String, PathBuf)>, TokenizerLoadError> {
        if let Some(path) = self.sibling("chat_template.jinja") {
            return Ok(Some((read_text(&path)?, path)));
        }
        if let Some(path) = self.sibling("chat_template.json") {
            return Ok(Some((read_template_file(&path)?, path)));
        }
        let Some((config, path)) = config else {
            return Ok(None);
        };
        match config.get("chat_template") {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(template) => Ok(Some((named_template(template, path)?, path.clone()))),
        }
    }
}

/// What a model's configuration gives its chat template.
#[derive(Debug, Clone)]
pub(super) struct ModelConfig {
    /// The template source and the file it came from.
    pub(super) template: Option<(String, PathBuf)>,
    /// The special tokens, as the template sees them.
    pub(super) special_tokens: Vec<(String, Value)>,
}

/// The special tokens transformers passes to chat templates (its `special_tokens_map`).
const SPECIAL_TOKEN_NAMES: &[&str] = &[
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
    "additional_special_tokens",
];

/// A special token's text: a string, an `AddedToken` object's `content`, or a list of them.
fn special_token(value: &serde_json::Value) -> Option<Value> {
    match value {
        serde_json::Value::String(text) => Some(Value::from(text.as_str())),
        serde_json::Value::Object(token) => token
            .get("content")
            .and_then(serde_json::Value::as_str)
            .map(Value::from),
        serde_json::Value::Array(items) => Some(
            items
                .iter()
                .filter_map(special_token)
                .collect::<Vec<_>>()
                .into(),
        ),
        _ => None,
    }
}

/// The `default` template of a `chat_template` value (a string, or a list of named ones).
fn named_template(template: &serde_json::Value, path: &Path) -> Result<String, TokenizerLoadError> {
    let invalid = |reason: &str| TokenizerLoadError::Config {
        path: path.to_owned(),
        reason: reason.into(),
    };
    match template {
        serde_json::Value::String(text) => Ok(text.clone()),
        serde_json::Value::Array(named) => named
            .iter()
            .find(|entry| entry.get("name").and_then(serde_json::Value::as_str) == Some("default"))
            .and_then(|entry| entry.get("template"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| invalid("`chat_template` lists no template named `default`")),
        _ => Err(invalid(
            "`chat_template` must be a string or a list of named templates",
        )),
    }
}

fn read_text(path: &Path) -> Result<String, TokenizerLoadError> {
    std::fs::read_to_string(path).map_err(|source| TokenizerLoadError::Read {
        path: path.to_owned(),
        source,
    })
}

fn read_json(path: &Path) -> Result<serde_json::Value, TokenizerLoadError> {
    let text = read_text(path)?;
    serde_json::from_str(&text).map_err(|e| TokenizerLoadError::Config {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// A template file: Jinja text, or JSON with a `chat_template` (when named `*.json`).
fn read_template_file(path: &Path) -> Result<String, TokenizerLoadError> {
    if path.extension().is_some_and(|ext| ext == "json") {
        let json = read_json(path)?;
        let template = json
            .get("chat_template")
            .ok_or_else(|| TokenizerLoadError::Config {
                path: path.to_owned(),
                reason: "has no `chat_template`".into(),
            })?;
        return named_template(template, path);
    }
    read_text(path)
}

/// The snapshot directory of a cache entry `models--ORG--NAME`.
fn snapshot(entry: &Path) -> Result<PathBuf, TokenizerLoadError> {
    let snapshots = entry.join("snapshots");
    if let Ok(revision) = std::fs::read_to_string(entry.join("refs").join("main")) {
        let path = snapshots.join(revision.trim());
        if path.is_dir() {
            return Ok(path);
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .map_err(|source| TokenizerLoadError::Read {
            path: snapshots.clone(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|dir| dir.path())
        .filter(|path| path.is_dir())
        .collect();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(TokenizerLoadError::Layout {
            path: snapshots,
            reason: "holds no snapshot".into(),
        }),
        n => Err(TokenizerLoadError::Layout {
            path: snapshots,
            reason: format!(
                "holds {n} snapshots and no refs/main: set `tokenizerPath` to the one to use"
            ),
        }),
    }
}

/// Where the Hugging Face libraries keep downloaded models, from the environment (see the
/// module docs), best first.
pub fn hub_cache_roots() -> Vec<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(hub) = var("HF_HUB_CACHE").or_else(|| var("HUGGINGFACE_HUB_CACHE")) {
        return vec![hub];
    }
    if let Some(home) = var("HF_HOME") {
        return vec![home.join("hub")];
    }
    let cache = var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|home| home.join(".cache")));
    cache
        .map(|cache| vec![cache.join("huggingface").join("hub")])
        .unwrap_or_default()
}
