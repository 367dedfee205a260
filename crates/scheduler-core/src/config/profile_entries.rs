//! Scheduling-profile entries that upstream's loader ignores: a profile may list any declared
//! plugin, but only filters, scorers and pickers (and, in Shepherd, producers and admitters)
//! take part in a profile. Upstream adds nothing for a parser, a profile handler or a
//! data-layer plugin listed there; Shepherd does the same and says so in a warning, where it
//! used to refuse the file.
//!
//! ```
//! use shepherd_scheduler_core::config::{EndpointPickerConfig, PluginKind};
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: single-profile-handler
//! - type: openai-parser
//! - type: queue-scorer
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: single-profile-handler
//!   - pluginRef: openai-parser
//!   - pluginRef: queue-scorer
//! ").unwrap();
//! let ignored = config.ignored_profile_entries();
//! assert_eq!(ignored.len(), 2);
//! assert_eq!(ignored[0].kind, PluginKind::ProfileHandler);
//! assert_eq!(ignored[1].plugin_ref, "openai-parser");
//! ```

use super::{EndpointPickerConfig, PluginKind, framework_plugin};

/// One profile entry that names a plugin which is not a scheduling plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredEntry {
    /// The profile listing it.
    pub profile: String,
    /// The entry's `pluginRef`.
    pub plugin_ref: String,
    /// What the plugin is.
    pub kind: PluginKind,
}

impl EndpointPickerConfig {
    /// The profile entries naming a declared plugin that Shepherd honours outside the
    /// scheduler and that is not a scheduling plugin (a parser, a profile handler, a data-layer
    /// or flow-control plugin): built schedulers skip them, as upstream's loader does.
    pub fn ignored_profile_entries(&self) -> Vec<IgnoredEntry> {
        let mut ignored = Vec::new();
        for profile in &self.scheduling_profiles {
            for entry in &profile.plugins {
                if let Some(kind) = self.outside_profiles(&entry.plugin_ref) {
                    ignored.push(IgnoredEntry {
                        profile: profile.name.clone(),
                        plugin_ref: entry.plugin_ref.clone(),
                        kind,
                    });
                }
            }
        }
        ignored
    }

    /// The kind of the declared plugin `name` when a profile entry naming it is ignored.
    pub(crate) fn outside_profiles(&self, name: &str) -> Option<PluginKind> {
        let spec = self.plugins.iter().find(|p| p.name() == name)?;
        framework_plugin(&spec.plugin_type)
            .map(|f| f.kind)
            .filter(|kind| !kind.in_profiles())
    }
}
