//! Topology-aware scheduling: upstream's `topology-extractor`, `topology-affinity-filter` and
//! `topology-affinity-scorer`.
//!
//! For a disaggregated request the decode server is picked first; the prefill (or encode)
//! stage then prefers servers close to it, so the KV-cache transfer takes the fastest path:
//! the same host (NVLink), then the same rack, zone, region. An endpoint's [`Topology`] is
//! read from its labels by the extractor ([`TopologyLabels`]: `kubernetes.io/hostname`,
//! `topology.kubernetes.io/rack`, `topology.kubernetes.io/zone`,
//! `topology.kubernetes.io/region` by default); the stage's cycle carries the decode pick
//! ([`PeerEndpoint`]).
//!
//! ```
//! use shepherd_scorers::topology::{Level, Topology, compare};
//!
//! let decode = Topology { hostname: "node-1".into(), rack: "r1".into(), zone: "z".into(), region: String::new() };
//! let same_rack = Topology { hostname: "node-2".into(), rack: "r1".into(), zone: "z".into(), region: String::new() };
//! assert_eq!(compare(&decode, &same_rack), Level::Rack);
//! // An empty value never matches, not even another empty one.
//! assert_eq!(compare(&Topology::default(), &Topology::default()), Level::None);
//! assert_eq!("zone".parse::<Level>(), Ok(Level::Zone));
//! ```
//!
//! Upstream falls back to the pod's `spec.hostname` when the hostname label is absent;
//! Shepherd reads labels only (the `endpoints` section's, or the pods' labels under Kubernetes
//! discovery), so an endpoint without the label has no hostname.

pub mod extractor;
pub mod filter;
pub mod scorer;

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use shepherd_scheduler_core::disagg::PeerEndpoint;
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::CycleState;
use shepherd_scheduler_core::resources::Resources;

pub use extractor::TopologyLabels;

/// An endpoint's locality; an empty field is unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// The node it runs on.
    pub hostname: String,
    /// Its rack.
    pub rack: String,
    /// Its zone.
    pub zone: String,
    /// Its region.
    pub region: String,
}

impl Topology {
    /// Whether every field is empty (upstream then sets no attribute).
    pub fn is_empty(&self) -> bool {
        self.hostname.is_empty()
            && self.rack.is_empty()
            && self.zone.is_empty()
            && self.region.is_empty()
    }
}

/// A topology tier, tightest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// The same host.
    Host,
    /// The same rack.
    Rack,
    /// The same zone.
    Zone,
    /// The same region.
    Region,
    /// Nothing in common.
    None,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Host => "host",
            Level::Rack => "rack",
            Level::Zone => "zone",
            Level::Region => "region",
            Level::None => "none",
        })
    }
}

impl FromStr for Level {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "host" => Ok(Level::Host),
            "rack" => Ok(Level::Rack),
            "zone" => Ok(Level::Zone),
            "region" => Ok(Level::Region),
            _ => Err(format!(
                "invalid topology level {s:?}, must be one of host, rack, zone, region"
            )),
        }
    }
}

/// The tightest tier at which `peer` and `candidate` share a non-empty, equal value.
pub fn compare(peer: &Topology, candidate: &Topology) -> Level {
    let same = |a: &str, b: &str| !a.is_empty() && a == b;
    if same(&peer.hostname, &candidate.hostname) {
        Level::Host
    } else if same(&peer.rack, &candidate.rack) {
        Level::Rack
    } else if same(&peer.zone, &candidate.zone) {
        Level::Zone
    } else if same(&peer.region, &candidate.region) {
        Level::Region
    } else {
        Level::None
    }
}

/// The [`Resources`] name of the label names an extractor named `producer` reads.
pub fn labels_resource_name(producer: &str) -> String {
    format!("shepherd.topology/{producer}")
}

/// What a filter or scorer reads topology through: the named extractor's label names, found
/// when the scheduler runs (the extractor may be declared after its readers). Without such an
/// extractor no endpoint has a topology, as upstream without the attribute.
#[derive(Debug)]
pub(crate) struct TopologySource {
    resources: Arc<Resources>,
    producer: String,
    /// The extractor's labels once found (a reload builds new readers with new lookups).
    found: OnceLock<Arc<TopologyLabels>>,
}

impl TopologySource {
    /// The source of extractor `producer` (empty: `topology-extractor`).
    pub(crate) fn new(resources: &Arc<Resources>, producer: &str) -> Self {
        let producer = match producer.trim() {
            "" => extractor::TYPE_NAME,
            name => name,
        };
        TopologySource {
            resources: Arc::clone(resources),
            producer: producer.to_string(),
            found: OnceLock::new(),
        }
    }

    /// The extractor's label names, when one is declared.
    pub(crate) fn labels(&self) -> Option<Arc<TopologyLabels>> {
        if let Some(labels) = self.found.get() {
            return Some(Arc::clone(labels));
        }
        let labels = self
            .resources
            .get::<TopologyLabels>(&labels_resource_name(&self.producer))?;
        Some(Arc::clone(self.found.get_or_init(|| labels)))
    }

    /// The decode pick's topology, when the cycle is a later stage's and it has one.
    pub(crate) fn peer(&self, labels: &TopologyLabels, cycle: &CycleState<'_>) -> Option<Topology> {
        let peer = cycle.extensions.get::<PeerEndpoint>()?;
        labels.topology_of(&peer.0)
    }
}

/// `endpoint`'s topology through `labels`, `None` when it has no topology label.
pub(crate) fn topology_of(labels: &TopologyLabels, endpoint: &Endpoint) -> Option<Topology> {
    labels.topology_of(endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(h: &str, r: &str, z: &str, g: &str) -> Topology {
        Topology {
            hostname: h.into(),
            rack: r.into(),
            zone: z.into(),
            region: g.into(),
        }
    }

    #[test]
    fn levels_as_upstream_compares_them() {
        let peer = t("h1", "r1", "z1", "g1");
        assert_eq!(compare(&peer, &t("h1", "", "", "")), Level::Host);
        assert_eq!(compare(&peer, &t("h2", "r1", "z9", "")), Level::Rack);
        assert_eq!(compare(&peer, &t("", "", "z1", "g1")), Level::Zone);
        assert_eq!(compare(&peer, &t("", "", "", "g1")), Level::Region);
        assert_eq!(compare(&peer, &t("h9", "r9", "z9", "g9")), Level::None);
        assert_eq!(compare(&t("", "", "", ""), &t("", "", "", "")), Level::None);
        assert!("nvlink".parse::<Level>().is_err());
        assert!(Level::Host < Level::Rack && Level::Region < Level::None);
    }
}
