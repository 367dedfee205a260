//! `no-hit-lru-scorer`: spreads *cold* requests (no prefix-cache hit anywhere) over the
//! endpoints that served cold requests least recently, so new KV blocks grow evenly across the
//! pool.
//!
//! As upstream: a request is cold when no candidate holds even its first block, according to
//! a prefix producer. A warm request scores 0.5 everywhere, leaving the choice to the prefix
//! scorer. A cold request ranks the candidates: those that never served a cold request first
//! (in candidate order), then the others from least to most recently used; the rank `r` of
//! `n` candidates scores `1 − r / (n − 1)` (a lone candidate scores 1). After the pick, a cold
//! request moves the picked endpoint to the most recent place; warm requests do not touch the
//! order. At most `lruSize` endpoints are remembered.
//!
//! The producer is found by `prefixMatchInfoProducerName`; without it, the
//! `approx-prefix-cache-producer` when declared, else the index of the all-in-one
//! `prefix-cache-scorer` named `prefixPluginName` (see [`crate::prefix_cache`]). List the
//! prefix scorer before this one in the profile so the match is computed once.
//!
//! ## Parameters
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `prefixMatchInfoProducerName` | — | the prefix producer read for cache hits |
//! | `prefixPluginName` | `prefix-cache-scorer` | the all-in-one prefix scorer whose index is read when no producer is named or declared |
//! | `prefixPluginType` | `prefix-cache-scorer` | accepted; Shepherd finds the index by name alone |
//! | `lruSize` | 1024 | most endpoints remembered (0 or less = the default) |
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: approx-prefix-cache-producer
//! - type: prefix-cache-scorer
//! - type: no-hit-lru-scorer
//!   parameters:
//!     lruSize: 1024
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: prefix-cache-scorer
//!     weight: 3
//!   - pluginRef: no-hit-lru-scorer
//!     weight: 2
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! // Three different cold prompts go to three different endpoints.
//! let mut picked: Vec<String> = (0..3)
//!     .map(|i| {
//!         let prompt = Prompt::Text(format!("{i}").repeat(1024));
//!         let d = scheduler.schedule(&InferenceRequest::new(format!("r{i}"), "m", prompt)).unwrap();
//!         d.primary().address().to_string()
//!     })
//!     .collect();
//! picked.sort();
//! picked.dedup();
//! assert_eq!(picked.len(), 3);
//! ```

use std::sync::Arc;

use parking_lot::Mutex;
use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId, MembershipListener};
use shepherd_scheduler_core::plugin::{
    Category, CycleState, PickHook, PluginInstance, Score, Scorer,
};

use crate::prefix_cache;
use crate::producers::approx_prefix;
use crate::producers::link::ProducerLink;

/// Registry type name.
pub const TYPE_NAME: &str = "no-hit-lru-scorer";

/// Default `lruSize`.
pub const DEFAULT_LRU_SIZE: usize = 1024;

/// The `no-hit-lru-scorer` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct NoHitLruParameters {
    /// The prefix producer read for cache hits.
    pub prefix_match_info_producer_name: Option<String>,
    /// The all-in-one prefix scorer whose index is read otherwise.
    pub prefix_plugin_name: String,
    /// Accepted, not used.
    pub prefix_plugin_type: String,
    /// Most endpoints remembered.
    pub lru_size: i64,
}

impl Default for NoHitLruParameters {
    fn default() -> Self {
        NoHitLruParameters {
            prefix_match_info_producer_name: None,
            prefix_plugin_name: prefix_cache::TYPE_NAME.to_string(),
            prefix_plugin_type: prefix_cache::TYPE_NAME.to_string(),
            lru_size: DEFAULT_LRU_SIZE as i64,
        }
    }
}

/// Endpoints that served cold requests, least recently used first.
#[derive(Debug)]
pub struct ColdLru {
    order: Mutex<Vec<EndpointId>>,
    size: usize,
}

impl ColdLru {
    /// An empty order remembering at most `size` endpoints (at least 1).
    pub fn new(size: usize) -> Self {
        ColdLru {
            order: Mutex::new(Vec::new()),
            size: size.max(1),
        }
    }

    /// `endpoint` served a cold request: it becomes the most recently used.
    pub fn touch(&self, endpoint: EndpointId) {
        let mut order = self.order.lock();
        order.retain(|&e| e != endpoint);
        order.push(endpoint);
        if order.len() > self.size {
            let excess = order.len() - self.size;
            order.drain(..excess);
        }
    }

    /// Scores `candidates` for a cold request (see the module docs) into `out`.
    pub fn score_cold(&self, candidates: &[EndpointId], out: &mut [f64]) {
        let n = candidates.len();
        if n <= 1 {
            out.fill(1.0);
            return;
        }
        let order = self.order.lock();
        let position = |id: EndpointId| order.iter().position(|&e| e == id);
        let never_used = candidates
            .iter()
            .filter(|&&id| position(id).is_none())
            .count();
        let span = (n - 1) as f64;
        let mut fresh_rank = 0usize;
        for (slot, &id) in out.iter_mut().zip(candidates) {
            let rank = match position(id) {
                None => {
                    fresh_rank += 1;
                    fresh_rank - 1
                }
                Some(at) => never_used + at,
            };
            *slot = (1.0 - rank as f64 / span).max(0.0);
        }
    }

    /// Endpoints remembered, least recently used first.
    pub fn order(&self) -> Vec<EndpointId> {
        self.order.lock().clone()
    }
}

impl MembershipListener for ColdLru {
    fn on_removed(&self, removed: &[EndpointId]) {
        self.order.lock().retain(|e| !removed.contains(e));
    }
}

/// Whether this cycle's request was cold, per scorer instance (a cycle extension).
#[derive(Debug, Default)]
struct ColdVerdicts(Vec<(usize, bool)>);

/// The scorer, its pick hook and its LRU.
#[derive(Debug)]
pub struct NoHitLruScorer {
    link: ProducerLink,
    lru: Arc<ColdLru>,
}

impl NoHitLruScorer {
    fn key(&self) -> usize {
        Arc::as_ptr(&self.lru) as usize
    }
}

impl Scorer for NoHitLruScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let cold = match self.link.get().produce(cycle) {
            Some(info) => candidates.iter().all(|e| info.match_blocks(e) == 0),
            None => true,
        };
        let key = self.key();
        match cycle.extensions.get_mut::<ColdVerdicts>() {
            Some(v) => v.0.push((key, cold)),
            None => cycle.extensions.insert(ColdVerdicts(vec![(key, cold)])),
        }
        if !cold {
            out.fill(Score::new(0.5));
            return;
        }
        let ids: Vec<EndpointId> = candidates.iter().map(|e| e.id()).collect();
        let mut scores = vec![0.0; ids.len()];
        self.lru.score_cold(&ids, &mut scores);
        for (slot, s) in out.iter_mut().zip(scores) {
            *slot = Score::new(s);
        }
    }
}

impl PickHook for NoHitLruScorer {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        let key = self.key();
        let cold = cycle
            .extensions
            .get::<ColdVerdicts>()
            .and_then(|v| v.0.iter().find(|(k, _)| *k == key))
            .is_some_and(|&(_, cold)| cold);
        if cold {
            self.lru.touch(picked.id());
        }
    }
}

/// Builds a `no-hit-lru-scorer`; its LRU is kept in the shared resources under the plugin's
/// name, so a reload keeps it.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: NoHitLruParameters = args.parse()?;
    let size = usize::try_from(parameters.lru_size)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or(DEFAULT_LRU_SIZE);
    let names = match parameters.prefix_match_info_producer_name {
        Some(name) => vec![name],
        None => vec![
            approx_prefix::TYPE_NAME.to_string(),
            parameters.prefix_plugin_name,
        ],
    };
    let lru = args.resources.get_or_replace_with(
        args.name,
        |old: &ColdLru| old.size == size,
        || ColdLru::new(size),
    );
    let link = ProducerLink::new(args.resources, args.pool, names, None);
    let scorer = Arc::new(NoHitLruScorer {
        link,
        lru: Arc::clone(&lru),
    });
    Ok(PluginInstance::scorer(scorer.clone())
        .with_pick_hook(scorer)
        .with_membership_listener(lru))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ids(v: &[u32]) -> Vec<EndpointId> {
        v.iter().map(|&i| EndpointId(i)).collect()
    }

    fn cold(lru: &ColdLru, candidates: &[u32]) -> Vec<f64> {
        let mut out = vec![0.0; candidates.len()];
        lru.score_cold(&ids(candidates), &mut out);
        out
    }

    #[test]
    fn never_used_first_then_least_recently_used() {
        let lru = ColdLru::new(16);
        assert_eq!(cold(&lru, &[1, 2, 3]), vec![1.0, 0.5, 0.0]);
        lru.touch(EndpointId(1));
        lru.touch(EndpointId(2));
        // 3 never used (rank 0), then 1 (least recent, rank 1), then 2 (rank 2).
        assert_eq!(cold(&lru, &[1, 2, 3]), vec![0.5, 0.0, 1.0]);
        lru.touch(EndpointId(1));
        assert_eq!(cold(&lru, &[1, 2, 3]), vec![0.0, 0.5, 1.0]);
        assert_eq!(cold(&lru, &[2]), vec![1.0]);
    }

    #[test]
    fn the_lru_is_bounded_and_forgets_departed_endpoints() {
        let lru = ColdLru::new(2);
        for i in 1..=3 {
            lru.touch(EndpointId(i));
        }
        assert_eq!(lru.order(), ids(&[2, 3]));
        lru.on_removed(&ids(&[3]));
        assert_eq!(lru.order(), ids(&[2]));
    }

    #[test]
    fn positions_beyond_the_candidates_clamp_at_zero() {
        let lru = ColdLru::new(16);
        for i in 10..20 {
            lru.touch(EndpointId(i));
        }
        // Endpoint 19 is at position 9 of the LRU; with 2 candidates the rank exceeds n − 1.
        assert_eq!(cold(&lru, &[19, 5]), vec![0.0, 1.0]);
    }
}
