//! `rendezvous-affinity-scorer` (Shepherd's extension): gives every prefix a home that every
//! scheduler replica agrees on without talking to the others.
//!
//! Several picker replicas each keep their own prefix index, so a prefix none of them has seen
//! would otherwise get a home per replica. This scorer derives the home from the request alone:
//! the *key* is the chained hash of the request's first `prefixBlocks` blocks (seeded by the
//! model and LoRA adapter, cut exactly as the prefix index cuts them), and each candidate's
//! weight is a 64-bit hash of (key, endpoint address) — highest-random-weight (rendezvous)
//! hashing. The hash is XXH3 with the key as its seed: no process-random state, so the same
//! request ranks the same candidates the same way in every replica and after every restart.
//!
//! Scores go by rank among the candidates: the highest weight scores 1, the lowest 0, linearly
//! in between (`1 − rank / (n − 1)`; a lone candidate scores 1). Blended with the profile's
//! other scorers, the home wins while the prefix is unseen and the load is even; a replica's
//! prefix affinity for a prefix it has seen, and load scorers when a server is busy, can still
//! outvote it. When an endpoint leaves, only the keys whose home it was move (to their
//! second-ranked candidate); the others keep their home.
//!
//! ## Bounded load (optional)
//!
//! With `loadFactor` set, a home that is already busy is passed over, as in consistent hashing
//! with bounded loads. A candidate's *load* is the requests this scheduler has sent to it that
//! have not finished ([`Endpoint::in_flight_requests`]): exact at every pick, where scraped
//! queue lengths lag by a scrape interval and would let a burst herd onto one home between
//! scrapes. With `mean` the mean load over the candidates, the bound is
//! `loadFactor × (mean + 1)` (the `+ 1` keeps an idle pool from passing everyone over), and a
//! candidate whose load *exceeds* the bound is overloaded. The ranking is then: the candidates
//! under the bound in rendezvous order, followed by the overloaded ones in rendezvous order;
//! scores are `1 − rank / (n − 1)` over that order as above. So the first candidate under the
//! bound in rendezvous order scores 1, and with no candidate overloaded the ranking is exactly
//! the unbounded one. Since `loadFactor ≥ 1` and the least-loaded candidate is never above the
//! mean, some candidate is always under the bound. Replicas whose in-flight counts agree rank
//! identically; where they differ (each replica counts only what it sent), they may disagree
//! on a busy home but still agree on every idle one. Without `loadFactor` (the default) load is
//! not read at all.
//!
//! A request with fewer prompt tokens than one block (a passthrough request has none) has no
//! block the caches could share: every candidate gets [`Score::NEUTRAL`]. It is an
//! [`Category::Affinity`] scorer.
//!
//! ## Parameters
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `prefixBlocks` | 1 | blocks of the prompt the key covers; a prompt with fewer complete blocks uses all it has |
//! | `blockSize` (also `blockSizeTokens`, `hashBlockSize`) | 64 | tokens per block, as `prefix-cache-scorer` reads it (pseudo tokens of 4 bytes for text) |
//! | `loadFactor` | none | bounded load: pass over candidates with more than `loadFactor × (mean + 1)` requests in flight (at least 1; e.g. 1.25–2) |
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: rendezvous-affinity-scorer
//!   parameters:
//!     prefixBlocks: 1
//!     blockSize: 16
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: rendezvous-affinity-scorer
//! ").unwrap();
//! let homes: Vec<String> = (0..2)
//!     .map(|_| {
//!         // Two independent schedulers, as two replicas would be.
//!         let pool = Arc::new(Pool::new());
//!         pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
//!         let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//!         let request = InferenceRequest::new("r", "m", Prompt::Text("system prompt ".repeat(20)));
//!         scheduler.schedule(&request).unwrap().primary().address().to_string()
//!     })
//!     .collect();
//! assert_eq!(homes[0], homes[1]);
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};
use shepherd_scheduler_core::prefix::{BlockChain, BlockLayout, chain_seed};
use shepherd_scheduler_core::request::InferenceRequest;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::error::ParameterError;

/// Registry type name.
pub const TYPE_NAME: &str = "rendezvous-affinity-scorer";

/// Default `prefixBlocks`.
pub const DEFAULT_PREFIX_BLOCKS: usize = 1;

/// The `rendezvous-affinity-scorer` parameters (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct RendezvousParameters {
    /// Blocks of the prompt the key covers (at least 1).
    pub prefix_blocks: usize,
    /// Tokens per block (at least 1).
    #[serde(alias = "blockSizeTokens", alias = "hashBlockSize")]
    pub block_size: usize,
    /// Bounded load: candidates above `loadFactor × (mean in-flight + 1)` are passed over
    /// (at least 1); `None` ranks by hash alone.
    pub load_factor: Option<f64>,
}

impl Default for RendezvousParameters {
    fn default() -> Self {
        RendezvousParameters {
            prefix_blocks: DEFAULT_PREFIX_BLOCKS,
            block_size: BlockLayout::default().block_tokens(),
            load_factor: None,
        }
    }
}

/// Scores candidates by their rendezvous rank for the request's first blocks.
#[derive(Debug, Clone, Copy)]
pub struct RendezvousAffinityScorer {
    layout: BlockLayout,
    load_factor: Option<f64>,
}

impl RendezvousAffinityScorer {
    /// A scorer with these parameters, or why they are invalid.
    pub fn new(params: RendezvousParameters) -> Result<Self, ParameterError> {
        let blocks = ParameterError::require_positive("prefixBlocks", params.prefix_blocks)?;
        let block = ParameterError::require_positive("blockSize", params.block_size)?;
        let load_factor = params
            .load_factor
            .map(|f| ParameterError::require_range("loadFactor", f, 1.0, f64::MAX))
            .transpose()?;
        Ok(RendezvousAffinityScorer {
            layout: BlockLayout::new(block, blocks),
            load_factor,
        })
    }

    /// The request's key: the chained hash of its first `prefixBlocks` blocks (or of all its
    /// complete blocks when it has fewer); `None` when it has no complete block.
    pub fn key(&self, request: &InferenceRequest) -> Option<u64> {
        let seed = chain_seed(&request.model, request.lora.as_deref(), "");
        BlockChain::last_key(&self.layout, seed, &request.prompt).map(|k| k.get())
    }

    /// The rendezvous weight of `address` for `key`: the same everywhere, always.
    pub fn weight(key: u64, address: &str) -> u64 {
        xxh3_64_with_seed(address.as_bytes(), key)
    }

    /// Whether each of `loads` is above the bound `load_factor × (mean + 1)`; all `false`
    /// without a load factor.
    pub fn overloaded(&self, loads: &[u64]) -> Vec<bool> {
        let Some(factor) = self.load_factor.filter(|_| !loads.is_empty()) else {
            return vec![false; loads.len()];
        };
        let mean = loads.iter().map(|&l| l as f64).sum::<f64>() / loads.len() as f64;
        let bound = factor * (mean + 1.0);
        loads.iter().map(|&l| l as f64 > bound).collect()
    }
}

impl Default for RendezvousAffinityScorer {
    fn default() -> Self {
        RendezvousAffinityScorer {
            layout: BlockLayout::new(BlockLayout::default().block_tokens(), DEFAULT_PREFIX_BLOCKS),
            load_factor: None,
        }
    }
}

impl Scorer for RendezvousAffinityScorer {
    fn category(&self) -> Category {
        Category::Affinity
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let Some(key) = self.key(cycle.request) else {
            out.iter_mut().for_each(|s| *s = Score::NEUTRAL);
            return;
        };
        let over = match self.load_factor {
            Some(_) => {
                let loads: Vec<u64> = candidates
                    .iter()
                    .map(|e| e.total_in_flight_requests())
                    .collect();
                self.overloaded(&loads)
            }
            None => vec![false; candidates.len()],
        };
        let mut ranked: Vec<(bool, u64, &str, usize)> = candidates
            .iter()
            .enumerate()
            .map(|(i, ep)| {
                let over = over.get(i).copied().unwrap_or(false);
                (over, Self::weight(key, ep.address()), ep.address(), i)
            })
            .collect();
        // Under the bound first; then highest weight first; equal weights (equal addresses) by
        // address, then position.
        ranked.sort_unstable_by(|a, b| {
            (a.0.cmp(&b.0))
                .then(b.1.cmp(&a.1))
                .then(a.2.cmp(b.2))
                .then(a.3.cmp(&b.3))
        });
        let last = ranked.len().saturating_sub(1).max(1) as f64;
        for (rank, &(_, _, _, i)) in ranked.iter().enumerate() {
            if let Some(slot) = out.get_mut(i) {
                *slot = Score::new(1.0 - rank as f64 / last);
            }
        }
    }
}

/// Builds a `rendezvous-affinity-scorer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params = args.parse::<RendezvousParameters>()?;
    let scorer = RendezvousAffinityScorer::new(params)?;
    Ok(PluginInstance::scorer(Arc::new(scorer)))
}
