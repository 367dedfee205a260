//! Upstream's `k8s-notification-source`: a data-layer source that watches one Kubernetes
//! kind (group, version, kind) and hands every add, update and delete to the *notification
//! extractors* wired to it in `dataLayer.sources`.
//!
//! Upstream's extractors of that kind are Go plugins compiled into its picker; its in-tree
//! set has none. Shepherd has none either, so the source loads with upstream's checks
//! (`version` and `kind` required, one source per kind, only notification extractors wired
//! to it — none of Shepherd's types is one, so any extractor there is refused as upstream
//! refuses a non-notification extractor), watches nothing, and says so at start
//! ([`warnings`]): with no extractor, upstream's watch has no effect either.
//!
//! ```
//! use shepherd_runtime::config::notifications::NotificationSourceParams;
//!
//! let pods: NotificationSourceParams =
//!     serde_json::from_value(serde_json::json!({"group": "", "version": "v1", "kind": "Pod"})).unwrap();
//! assert_eq!(pods.gvk().unwrap(), "/v1, Kind=Pod");
//! let unnamed: NotificationSourceParams = serde_json::from_value(serde_json::json!({"kind": "Pod"})).unwrap();
//! assert!(unnamed.gvk().is_err());
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use shepherd_scheduler_core::config::EndpointPickerConfig;

/// The type name of the source.
pub const SOURCE_TYPE: &str = "k8s-notification-source";

/// The `k8s-notification-source` parameters, as upstream (strictly decoded; required).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotificationSourceParams {
    /// The API group (empty for the core group).
    pub group: String,
    /// The API version (`v1`).
    pub version: String,
    /// The kind (`Pod`).
    pub kind: String,
}

impl NotificationSourceParams {
    /// The watched kind in upstream's `GroupVersionKind` form (`apps/v1, Kind=Deployment`),
    /// or upstream's error when `version` or `kind` is missing.
    pub fn gvk(&self) -> Result<String, String> {
        if self.version.is_empty() || self.kind.is_empty() {
            return Err(format!("version and kind are required for {SOURCE_TYPE}"));
        }
        Ok(format!(
            "{}/{}, Kind={}",
            self.group, self.version, self.kind
        ))
    }
}

/// Checks every `k8s-notification-source` of `config` as upstream's factory and data-layer
/// runtime do; the error names the plugin's field.
pub fn check(config: &EndpointPickerConfig) -> Result<(), (String, String)> {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (i, plugin) in config.plugins.iter().enumerate() {
        if plugin.plugin_type != SOURCE_TYPE {
            continue;
        }
        let field = format!("plugins[{i}] ({SOURCE_TYPE})");
        if plugin.parameters.is_null() {
            return Err((
                field,
                format!("{SOURCE_TYPE} requires parameters (group, version, kind)"),
            ));
        }
        let params = NotificationSourceParams::deserialize(&plugin.parameters).map_err(|e| {
            (
                field.clone(),
                format!("failed to parse notification source parameters: {e}"),
            )
        })?;
        let gvk = params.gvk().map_err(|e| (field.clone(), e))?;
        if let Some(existing) = seen.get(&gvk) {
            return Err((
                field,
                format!(
                    "duplicate notification source GVK {gvk}: already used by source {existing}, \
                     cannot add {}",
                    plugin.name()
                ),
            ));
        }
        seen.insert(gvk, plugin.name().to_string());
    }
    let Some(layer) = &config.data_layer else {
        return Ok(());
    };
    for (i, source) in layer.sources.iter().enumerate() {
        let is_notification = config
            .plugins
            .iter()
            .any(|p| p.name() == source.plugin_ref && p.plugin_type == SOURCE_TYPE);
        if let (true, Some(extractor)) = (is_notification, source.extractors.first()) {
            return Err((
                format!("dataLayer.sources[{i}].extractors[0]"),
                format!(
                    "notification source {} requires a NotificationExtractor; extractor {} does \
                     not implement it (Shepherd has no notification extractors)",
                    source.plugin_ref, extractor.plugin_ref
                ),
            ));
        }
    }
    Ok(())
}

/// One start-up line per `k8s-notification-source`: what it would watch, and that nothing is
/// watched.
pub fn warnings(config: &EndpointPickerConfig) -> Vec<String> {
    config
        .plugins
        .iter()
        .filter(|p| p.plugin_type == SOURCE_TYPE)
        .filter_map(|p| {
            let params = NotificationSourceParams::deserialize(&p.parameters).ok()?;
            let gvk = params.gvk().ok()?;
            Some(format!(
                "`{}` ({SOURCE_TYPE}): {gvk} is not watched: Shepherd has no notification \
                 extractors to hand its events to (upstream's are compiled-in Go plugins, none \
                 in-tree), so the source has no effect",
                p.name()
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn config(yaml: &str) -> EndpointPickerConfig {
        EndpointPickerConfig::from_yaml(yaml).unwrap()
    }

    #[test]
    fn upstreams_factory_cases() {
        // factory.go: parameters required; version and kind required; strict keys.
        let ok = config(
            "plugins:\n- type: k8s-notification-source\n  parameters: {group: \"\", version: v1, kind: Pod}\n",
        );
        assert!(check(&ok).is_ok());
        assert_eq!(warnings(&ok).len(), 1);
        assert!(warnings(&ok)[0].contains("/v1, Kind=Pod is not watched"));

        let none = config("plugins:\n- type: k8s-notification-source\n");
        assert!(check(&none).unwrap_err().1.contains("requires parameters"));
        for params in ["{version: v1}", "{kind: Pod}", "{group: apps}"] {
            let c = config(&format!(
                "plugins:\n- type: k8s-notification-source\n  parameters: {params}\n"
            ));
            assert!(
                check(&c)
                    .unwrap_err()
                    .1
                    .contains("version and kind are required"),
                "{params}"
            );
        }
        let unknown = config(
            "plugins:\n- type: k8s-notification-source\n  parameters: {version: v1, kind: Pod, namespace: x}\n",
        );
        assert!(check(&unknown).unwrap_err().1.contains("namespace"));
    }

    #[test]
    fn one_source_per_kind_and_no_extractor_of_another_kind() {
        // runtime.go: duplicate GVKs are refused; a notification source takes only
        // notification extractors.
        let twice = config(
            "plugins:\n\
             - {type: k8s-notification-source, name: a, parameters: {group: apps, version: v1, kind: Deployment}}\n\
             - {type: k8s-notification-source, name: b, parameters: {group: apps, version: v1, kind: Deployment}}\n",
        );
        let err = check(&twice).unwrap_err().1;
        assert!(
            err.contains("duplicate notification source GVK apps/v1, Kind=Deployment"),
            "{err}"
        );
        assert!(err.contains("already used by source a"), "{err}");

        let wired = config(
            "plugins:\n\
             - {type: k8s-notification-source, name: pods, parameters: {version: v1, kind: Pod}}\n\
             - {type: topology-extractor}\n\
             dataLayer:\n  sources:\n  - pluginRef: pods\n    extractors:\n    - pluginRef: topology-extractor\n",
        );
        let (field, err) = check(&wired).unwrap_err();
        assert_eq!(field, "dataLayer.sources[0].extractors[0]");
        assert!(err.contains("requires a NotificationExtractor"), "{err}");
    }
}
