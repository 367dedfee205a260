//! Checks, right after parsing, of what upstream's loader checks between sections: feature
//! gates are known, `requestHandler.parsers`, `dataLayer` and `saturationDetector` name
//! declared plugins of the right kind, and there is at most one profile handler (a
//! `single-profile-handler` with one profile). Each error names the node and its line.
//!
//! ```
//! use shepherd_scheduler_core::config::EndpointPickerConfig;
//!
//! let Err(error) = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: queue-scorer
//! requestHandler:
//!   parsers:
//!   - pluginRef: openai-parser
//! ") else { panic!() };
//! assert_eq!(error.line(), Some(6));
//! assert!(error.to_string().contains("requestHandler.parsers[0]"), "{error}");
//! ```

use super::{ConfigError, ConfigPath, EndpointPickerConfig, PluginKind, upstream_kind};
use crate::config::kinds::{EXTRACTOR_PRODUCERS, SINGLE_PROFILE_HANDLER};
use crate::config::upstream::Area;
use crate::request::ParserKind;

/// Upstream's deprecated data-parallel handler: one profile, like [`SINGLE_PROFILE_HANDLER`].
const DATA_PARALLEL_PROFILE_HANDLER: &str = "data-parallel-profile-handler";

/// Runs every check on `config`, parsed from `text`.
pub(super) fn check(config: &EndpointPickerConfig, text: &str) -> Result<(), ConfigError> {
    let root = ConfigPath::root;
    if let Err((i, reason)) = config.feature_gates.check() {
        return Err(ConfigError::invalid_at(
            text,
            &root().key("featureGates").index(i),
            reason,
        ));
    }

    let declared = |name: &str| config.plugins.iter().find(|p| p.name() == name);
    let reference = |path: ConfigPath, name: &str, kind: PluginKind| match declared(name) {
        None => Err(ConfigError::invalid_at(
            text,
            &path,
            format!("`{name}` names no plugin in `plugins`"),
        )),
        Some(spec) => match upstream_kind(&spec.plugin_type) {
            _ if kind == PluginKind::DataExtractor
                && EXTRACTOR_PRODUCERS.contains(&spec.plugin_type.as_str()) =>
            {
                Ok(())
            }
            Some(found) if found != kind => Err(ConfigError::invalid_at(
                text,
                &path,
                format!(
                    "`{name}` is a {found} (`{}`), not a {kind}",
                    spec.plugin_type
                ),
            )),
            _ => Ok(()),
        },
    };

    if let Some(handler) = &config.request_handler {
        for (i, parser) in handler.parsers.iter().enumerate() {
            let path = root()
                .key("requestHandler")
                .key("parsers")
                .index(i)
                .key("pluginRef");
            reference(path, &parser.plugin_ref, PluginKind::Parser)?;
        }
    }
    if let Some(parser) = &config.parser {
        reference(
            root().key("parser").key("pluginRef"),
            &parser.plugin_ref,
            PluginKind::Parser,
        )?;
    }
    if let Some(detector) = &config.saturation_detector
        && detector.plugin_ref != "utilization-detector"
    {
        let path = root().key("saturationDetector").key("pluginRef");
        reference(path, &detector.plugin_ref, PluginKind::FlowControl)?;
    }

    if let Some(layer) = &config.data_layer {
        if let Some(field) = layer.unimplemented_fields().first() {
            return Err(ConfigError::invalid_at(
                text,
                &root().key("dataLayer").key(*field),
                format!(
                    "not implemented by Shepherd yet (area: {})",
                    Area::DataLayer
                ),
            ));
        }
        if let Some(discovery) = &layer.discovery {
            let path = root().key("dataLayer").key("discovery").key("pluginRef");
            reference(path, &discovery.plugin_ref, PluginKind::Discovery)?;
        }
        for (i, source) in layer.sources.iter().enumerate() {
            let at = root().key("dataLayer").key("sources").index(i);
            reference(
                at.clone().key("pluginRef"),
                &source.plugin_ref,
                PluginKind::DataSource,
            )?;
            for (j, extractor) in source.extractors.iter().enumerate() {
                let path = at.clone().key("extractors").index(j).key("pluginRef");
                reference(path, &extractor.plugin_ref, PluginKind::DataExtractor)?;
            }
        }
    }

    for (i, plugin) in config.plugins.iter().enumerate() {
        // `single-profile-handler` ignores parameters upstream (a warning here).
        let takes_none = ParserKind::from_type(&plugin.plugin_type).is_some();
        let empty = match &plugin.parameters {
            serde_json::Value::Null => true,
            serde_json::Value::Object(map) => map.is_empty(),
            _ => false,
        };
        if takes_none && !empty {
            return Err(ConfigError::invalid_at(
                text,
                &root().key("plugins").index(i).key("parameters"),
                format!("`{}` takes no parameters", plugin.plugin_type),
            ));
        }
    }

    let handlers: Vec<usize> = config
        .plugins
        .iter()
        .enumerate()
        .filter(|(_, p)| upstream_kind(&p.plugin_type) == Some(PluginKind::ProfileHandler))
        .map(|(i, _)| i)
        .collect();
    if let [_, second, ..] = handlers.as_slice() {
        return Err(ConfigError::invalid_at(
            text,
            &root().key("plugins").index(*second),
            "a second profile handler: only one is allowed",
        ));
    }
    if let [only] = handlers.as_slice()
        && let handler = config.plugins[*only].plugin_type.as_str()
        && [SINGLE_PROFILE_HANDLER, DATA_PARALLEL_PROFILE_HANDLER].contains(&handler)
        && config.scheduling_profiles.len() > 1
    {
        return Err(ConfigError::invalid_at(
            text,
            &root().key("schedulingProfiles").index(1),
            format!("{handler} runs one scheduling profile; this config has more"),
        ));
    }
    Ok(())
}
