//! `topology-affinity-filter`: in a later stage of a disaggregated request (prefill, encode),
//! keeps the candidates co-located with the decode pick at `minAffinity` or tighter.
//!
//! Parameters, as upstream: `minAffinity` (`host`, `rack`, `zone` or `region`; default
//! `host`) and `topologyProducerName` (the `topology-extractor` to read; default the unnamed
//! one). It fails open: with no peer topology (not a later stage, no extractor, or a decode
//! server without topology labels) or when no candidate qualifies, every candidate passes. A
//! candidate without topology never qualifies.

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{CycleState, Filter, PluginInstance};

use super::{Level, TopologySource, compare, topology_of};

/// The type name.
pub const TYPE_NAME: &str = "topology-affinity-filter";

/// The filter's parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct TopologyFilterParameters {
    /// The loosest tier a candidate may share with the peer (default `host`).
    pub min_affinity: String,
    /// The extractor to read.
    pub topology_producer_name: String,
}

/// The filter.
#[derive(Debug)]
pub struct TopologyAffinityFilter {
    source: TopologySource,
    min_affinity: Level,
}

impl Filter for TopologyAffinityFilter {
    fn filter(&self, cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>) {
        let Some(labels) = self.source.labels() else {
            return;
        };
        let Some(peer) = self.source.peer(&labels, cycle) else {
            return;
        };
        let near = |e: &&Arc<Endpoint>| {
            topology_of(&labels, e).is_some_and(|t| compare(&peer, &t) <= self.min_affinity)
        };
        if candidates.iter().any(near) {
            candidates.retain(near);
        }
    }
}

/// Builds a `topology-affinity-filter`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let p: TopologyFilterParameters = args.parse()?;
    let min_affinity = match p.min_affinity.as_str() {
        "" => Level::Host,
        level => level
            .parse()
            .map_err(|e: String| PluginError::invalid("minAffinity", e))?,
    };
    Ok(PluginInstance::filter(Arc::new(TopologyAffinityFilter {
        source: TopologySource::new(args.resources, &p.topology_producer_name),
        min_affinity,
    })))
}
