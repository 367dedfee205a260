//! `topology-affinity-scorer`: in a later stage of a disaggregated request (prefill, encode),
//! grades each candidate by the tightest tier it shares with the decode pick, on upstream's
//! fixed curve: host 1.0, rack 0.2, zone 0.05, region 0.02, none 0.
//!
//! Parameter, as upstream: `topologyProducerName`. Every candidate scores 0 when there is no
//! peer topology, and a candidate without topology scores 0. Category: affinity.

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};

use super::{Level, TopologySource, compare, topology_of};

/// The type name.
pub const TYPE_NAME: &str = "topology-affinity-scorer";

/// The score of each tier, as upstream.
pub fn level_score(level: Level) -> f64 {
    match level {
        Level::Host => 1.0,
        Level::Rack => 0.2,
        Level::Zone => 0.05,
        Level::Region => 0.02,
        Level::None => 0.0,
    }
}

/// The scorer's parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct TopologyScorerParameters {
    /// The extractor to read.
    pub topology_producer_name: String,
}

/// The scorer.
#[derive(Debug)]
pub struct TopologyAffinityScorer {
    source: TopologySource,
}

impl Scorer for TopologyAffinityScorer {
    fn category(&self) -> Category {
        Category::Affinity
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let peer = self
            .source
            .labels()
            .and_then(|labels| Some((self.source.peer(&labels, cycle)?, labels)));
        for (slot, endpoint) in out.iter_mut().zip(candidates) {
            let level = peer.as_ref().map_or(Level::None, |(peer, labels)| {
                topology_of(labels, endpoint).map_or(Level::None, |t| compare(peer, &t))
            });
            *slot = Score::new(level_score(level));
        }
    }
}

/// Builds a `topology-affinity-scorer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let p: TopologyScorerParameters = args.parse()?;
    Ok(PluginInstance::scorer(Arc::new(TopologyAffinityScorer {
        source: TopologySource::new(args.resources, &p.topology_producer_name),
    })))
}
