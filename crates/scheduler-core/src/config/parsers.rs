//! `requestHandler.parsers` (or the deprecated `parser`) as the [`ParserSet`] requests go
//! through.
//!
//! Each reference names a plugin of a parser type Shepherd has ([`ParserKind`]); the list is
//! registered by upstream's rules (duplicates of a type and parsers after the fallback are
//! skipped, and reported by [`EndpointPickerConfig::warnings`]); no list means upstream's
//! default set.
//!
//! ```
//! use shepherd_scheduler_core::config::EndpointPickerConfig;
//! use shepherd_scheduler_core::request::{ParserKind, ParserSet};
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - {name: vllm, type: vllmhttp-parser}
//! - {name: openai, type: openai-parser}
//! requestHandler:
//!   parsers: [{pluginRef: vllm}, {pluginRef: openai}]
//! ").unwrap();
//! let set = config.parser_set().unwrap();
//! assert_eq!(set.resolve("/inference/v1/generate").unwrap().name, "vllm");
//! assert!(set.fallback().is_none()); // a given list gains no fallback
//!
//! let empty = EndpointPickerConfig::from_yaml("plugins: []").unwrap();
//! assert_eq!(empty.parser_set().unwrap(), ParserSet::upstream_default());
//! ```

use super::{ConfigError, EndpointPickerConfig, Status, upstream_type};
use crate::request::{ParserKind, ParserSet};

impl EndpointPickerConfig {
    /// The parsers requests go through ([`ParserSet`](crate::request::ParserSet)).
    ///
    /// Fails when a reference names no declared plugin, or a plugin whose type is not a parser
    /// Shepherd has ([`ConfigError::NotImplemented`] for an upstream parser not implemented
    /// yet).
    pub fn parser_set(&self) -> Result<ParserSet, ConfigError> {
        let refs = self.parser_refs();
        if refs.is_empty() {
            return Ok(ParserSet::upstream_default());
        }
        let mut parsers = Vec::with_capacity(refs.len());
        for (i, name) in refs.into_iter().enumerate() {
            let field = || format!("requestHandler.parsers[{i}]");
            let spec = self
                .plugins
                .iter()
                .find(|p| p.name() == name)
                .ok_or_else(|| ConfigError::InvalidSetting {
                    field: field(),
                    reason: format!("`{name}` names no plugin in `plugins`"),
                })?;
            let kind = match ParserKind::from_type(&spec.plugin_type) {
                Some(kind) => kind,
                None => {
                    return Err(match upstream_type(&spec.plugin_type) {
                        Some(t) => match t.status {
                            Status::NotYet(area) => ConfigError::NotImplemented {
                                name: name.to_string(),
                                plugin_type: spec.plugin_type.clone(),
                                area,
                                note: t.note.to_string(),
                            },
                            _ => not_a_parser(field(), name, &spec.plugin_type),
                        },
                        None => not_a_parser(field(), name, &spec.plugin_type),
                    });
                }
            };
            parsers.push((name.to_string(), kind));
        }
        Ok(ParserSet::new(parsers))
    }
}

fn not_a_parser(field: String, name: &str, plugin_type: &str) -> ConfigError {
    ConfigError::InvalidSetting {
        field,
        reason: format!("`{name}` (`{plugin_type}`) is not a request parser Shepherd has"),
    }
}
