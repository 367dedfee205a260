//! `topology-extractor`: which endpoint labels hold the host, rack, zone and region.
//!
//! Parameters, as upstream: `hostname`, `rack`, `zone`, `region`, each a label name,
//! defaulting to `kubernetes.io/hostname`, `topology.kubernetes.io/rack`,
//! `topology.kubernetes.io/zone` and `topology.kubernetes.io/region`. Upstream stamps the
//! attribute when an endpoint appears; Shepherd reads the labels when a filter or scorer
//! asks, so a label changed by discovery counts at once.
//!
//! ```
//! use shepherd_scorers::topology::TopologyLabels;
//!
//! let labels: TopologyLabels = serde_json::from_value(serde_json::json!({"zone": "example.com/zone"})).unwrap();
//! assert_eq!(labels.zone(), "example.com/zone");
//! assert_eq!(labels.hostname(), "kubernetes.io/hostname");
//! ```

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::PluginInstance;

use super::{Topology, labels_resource_name};

/// The type name.
pub const TYPE_NAME: &str = "topology-extractor";

/// Upstream's default label names.
pub const DEFAULT_LABELS: [&str; 4] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/rack",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// The label names the extractor reads (its parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TopologyLabels {
    hostname: String,
    rack: String,
    zone: String,
    region: String,
}

impl TopologyLabels {
    fn or_default(name: &str, i: usize) -> &str {
        if name.is_empty() {
            DEFAULT_LABELS[i]
        } else {
            name
        }
    }

    /// The hostname label.
    pub fn hostname(&self) -> &str {
        Self::or_default(&self.hostname, 0)
    }

    /// The rack label.
    pub fn rack(&self) -> &str {
        Self::or_default(&self.rack, 1)
    }

    /// The zone label.
    pub fn zone(&self) -> &str {
        Self::or_default(&self.zone, 2)
    }

    /// The region label.
    pub fn region(&self) -> &str {
        Self::or_default(&self.region, 3)
    }

    /// `endpoint`'s topology, `None` when it carries none of the four labels (upstream sets
    /// no attribute then).
    pub fn topology_of(&self, endpoint: &Endpoint) -> Option<Topology> {
        let labels = endpoint.labels();
        let read = |name: &str| labels.get(name).cloned().unwrap_or_default();
        let topology = Topology {
            hostname: read(self.hostname()),
            rack: read(self.rack()),
            zone: read(self.zone()),
            region: read(self.region()),
        };
        (!topology.is_empty()).then_some(topology)
    }
}

/// The warning the runtime logs at start for every `topology-extractor`.
pub const WARNING: &str = "topology-extractor reads the endpoints' labels only: upstream's \
    fallback to the pod's `spec.hostname` when the hostname label is absent is not applied \
    (give the label in the `endpoints` section, or on the pods)";

/// Builds a `topology-extractor`: its label names, kept in the shared resources for the
/// topology filter and scorer that name it.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let labels: TopologyLabels = args.parse()?;
    args.resources
        .insert(labels_resource_name(args.name), std::sync::Arc::new(labels));
    Ok(PluginInstance::default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn unknown_keys_are_refused_as_upstreams_strict_decoder() {
        assert!(
            serde_json::from_value::<TopologyLabels>(serde_json::json!({"host": "x"})).is_err()
        );
        let l: TopologyLabels = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(
            [l.hostname(), l.rack(), l.zone(), l.region()],
            DEFAULT_LABELS
        );
    }
}
