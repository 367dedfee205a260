//! `mm-embeddings-cache-scorer`: the share of a request's distinct media items each candidate
//! is believed to hold in its encoder cache (`matched / total`, every item of size 1, as
//! upstream), read from an `mm-embeddings-cache-producer`'s [`EncoderCache`].
//!
//! Parameter, as upstream: `producerName` (default: the producer's type name, i.e. an unnamed
//! producer). A request without media scores 0 everywhere, as upstream. Category: affinity.
//!
//! Upstream's producer records the primary profile's picks in a PreRequest step; in Shepherd
//! the scorer records the picks of the profile it is listed in (its pick hook), into the same
//! cache. With no producer declared under that name, the scorer keeps a cache of the default
//! size itself.

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{
    Category, CycleState, PickHook, PluginInstance, Score, Scorer,
};

use super::producer::{self, entries_per_endpoint};
use super::{EncoderCache, MediaItem, cache_resource_name, media_items};

/// The type name.
pub const TYPE_NAME: &str = "mm-embeddings-cache-scorer";

/// The scorer's parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct MmCacheScorerParameters {
    /// The producer's name (empty: `mm-embeddings-cache-producer`).
    pub producer_name: String,
}

/// The scorer, over one producer's cache.
#[derive(Debug)]
pub struct MmCacheScorer {
    cache: Arc<EncoderCache>,
}

/// The request's items, computed once per cycle.
struct CycleItems(Vec<MediaItem>);

impl MmCacheScorer {
    /// A scorer over `cache`.
    pub fn new(cache: Arc<EncoderCache>) -> Self {
        MmCacheScorer { cache }
    }

    fn items<'c>(cycle: &'c mut CycleState<'_>) -> &'c [MediaItem] {
        let request = cycle.request;
        if cycle.extensions.get::<CycleItems>().is_none() {
            cycle.extensions.insert(CycleItems(media_items(request)));
        }
        cycle
            .extensions
            .get::<CycleItems>()
            .map_or(&[], |items| items.0.as_slice())
    }
}

impl Scorer for MmCacheScorer {
    fn category(&self) -> Category {
        Category::Affinity
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let items = Self::items(cycle);
        for (slot, endpoint) in out.iter_mut().zip(candidates) {
            *slot = if items.is_empty() {
                Score::new(0.0)
            } else {
                let matched = self.cache.matched(endpoint.id(), items);
                Score::new(matched as f64 / items.len() as f64)
            };
        }
    }
}

impl PickHook for MmCacheScorer {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        let items = Self::items(cycle);
        self.cache.record(picked.id(), items);
    }
}

/// Builds an `mm-embeddings-cache-scorer` over the cache of the producer it names (created
/// here when the producer is declared later, which then sets its size).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: MmCacheScorerParameters = args.parse()?;
    let producer_name = match parameters.producer_name.trim() {
        "" => producer::TYPE_NAME,
        name => name,
    };
    let cache = args
        .resources
        .get_or_insert_with(&cache_resource_name(producer_name), || {
            EncoderCache::named(producer_name, entries_per_endpoint(0))
        });
    let scorer = Arc::new(MmCacheScorer::new(cache));
    Ok(PluginInstance::scorer(scorer.clone()).with_pick_hook(scorer))
}
