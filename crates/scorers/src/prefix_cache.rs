//! `prefix-cache-scorer`: scores endpoints by how much of the request's prompt prefix they are
//! believed to hold in their KV cache.
//!
//! The score mixes the matched *ratio* and the matched *length*, as upstream:
//!
//! ```text
//! score = matchLengthWeight × min(1, matchedTokens / matchLengthScaleTokens)²
//!       + (1 − matchLengthWeight) × matchedBlocks / totalBlocks
//! ```
//!
//! with `matchedTokens = matchedBlocks × blockSizeTokens`; a prompt shorter than one block
//! scores 0 everywhere. The square favours long matches, whose reuse saves the most prefill
//! (attention grows with the square of the prompt). With the default weight 0 the score is the
//! ratio alone.
//!
//! The match comes from a prefix producer ([`crate::producers`]): the scorer hashes nothing
//! itself. Three forms load:
//!
//! - **with a producer** (upstream's form): `prefixMatchInfoProducerName` names an
//!   `approx-prefix-cache-producer`; without the parameter, the producer named
//!   `approx-prefix-cache-producer` is used when the config declares one;
//! - **all in one** (the Gateway API Inference Extension's older form, and Shepherd's until
//!   now): the index parameters below are given to the scorer itself, which then keeps its own
//!   index under its own name in the shared resources;
//! - **bare** (`- type: prefix-cache-scorer` and no producer declared): its own index with the
//!   defaults below, exactly the all-in-one form.
//!
//! The picked endpoint's blocks are recorded by the scorer's pick hook (once per request, even
//! when other consumers of the same producer record too). Endpoints that leave the pool are
//! forgotten. Chains are seeded by the model and the LoRA adapter, so different models never
//! share blocks.
//!
//! ## Parameters
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `prefixMatchInfoProducerName` | `approx-prefix-cache-producer` | the producer whose match is read |
//! | `matchLengthWeight` | 0.0 | weight of the match length in the score, in [0, 1] |
//! | `matchLengthScaleTokens` | 8192 | matched tokens giving the full length score (must be above 0 when the weight is) |
//!
//! All-in-one parameters (not with `prefixMatchInfoProducerName`):
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `blockSize` (also `blockSizeTokens`, `hashBlockSize`) | 64 | tokens per hashed block; text is cut into pseudo tokens of 4 bytes, so 64 means 256 bytes. Always read as tokens. |
//! | `maxPrefixBlocksToMatch` | 2048 | most blocks hashed and indexed per request (2048 × 64 = 131,072 tokens); later blocks are ignored |
//! | `lruCapacityPerServer` | 31250 | blocks remembered per endpoint when its metrics do not give `num_gpu_blocks` and `block_size` |
//! | `autoTune` | true | size each endpoint's memory from its metrics (`num_gpu_blocks × block_size / blockSize`) when known; `false` always uses `lruCapacityPerServer` |
//!
//! Unknown parameter names are errors. Upstream's scorer no longer accepts the all-in-one
//! parameters; Shepherd keeps them so older configs load.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::config::PluginArgs;
//! use shepherd_scheduler_core::endpoint::Pool;
//! use shepherd_scheduler_core::prefix::PrefixIndex;
//! use shepherd_scheduler_core::shared::SharedState;
//! use shepherd_scorers::prefix_cache;
//!
//! let shared = SharedState::new(Arc::new(Pool::new()));
//! let parameters = serde_json::json!({"blockSize": 16, "lruCapacityPerServer": 10000});
//! let args = PluginArgs::new("prefix", prefix_cache::TYPE_NAME, &parameters, &shared, 1);
//! let plugin = prefix_cache::factory(&args).unwrap();
//! assert!(plugin.as_scorer().is_some());
//! assert!(plugin.as_pick_hook().is_some());
//! assert!(plugin.as_membership_listener().is_some());
//! // The index is reachable by name and type, for KV events, metrics and debug views.
//! let index = shared.resources.get::<PrefixIndex>("prefix").unwrap();
//! assert_eq!(index.config().layout.block_tokens(), 16);
//! ```
//!
//! Upstream's form, with two producers of different block sizes and a length-aware scorer:
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - name: gpuPrefixProducer
//!   type: approx-prefix-cache-producer
//!   parameters:
//!     blockSizeTokens: 64
//! - name: cpuPrefixProducer
//!   type: approx-prefix-cache-producer
//!   parameters:
//!     blockSizeTokens: 256
//! - name: gpuPrefixScorer
//!   type: prefix-cache-scorer
//!   parameters:
//!     prefixMatchInfoProducerName: gpuPrefixProducer
//!     matchLengthWeight: 0.5
//!     matchLengthScaleTokens: 16384
//! - name: cpuPrefixScorer
//!   type: prefix-cache-scorer
//!   parameters:
//!     prefixMatchInfoProducerName: cpuPrefixProducer
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: gpuPrefixScorer
//!     weight: 2
//!   - pluginRef: cpuPrefixScorer
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000"]);
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! assert_eq!(scheduler.profiles()[0].scorers().len(), 2);
//! ```

use std::sync::Arc;

use crate::error::ParameterError;
use crate::producers::link::ProducerLink;
use crate::producers::{PrefixMatchInfo, PrefixProducer, approx_prefix};
use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{
    Category, CycleState, PickHook, PluginInstance, Score, Scorer,
};
use shepherd_scheduler_core::prefix::{BlockLayout, PrefixIndex, PrefixIndexConfig};

/// Registry type name.
pub const TYPE_NAME: &str = "prefix-cache-scorer";

/// Default `matchLengthScaleTokens`.
pub const DEFAULT_MATCH_LENGTH_SCALE_TOKENS: i64 = 8192;

/// The `prefix-cache-scorer` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PrefixCacheParameters {
    /// The producer whose match is read.
    pub prefix_match_info_producer_name: Option<String>,
    /// Weight of the match length in the score, in [0, 1].
    pub match_length_weight: f64,
    /// Matched tokens that give the full length score.
    pub match_length_scale_tokens: i64,
    /// All in one: tokens per hashed block.
    #[serde(alias = "blockSizeTokens", alias = "hashBlockSize")]
    pub block_size: Option<usize>,
    /// All in one: most blocks hashed and indexed per request.
    pub max_prefix_blocks_to_match: Option<usize>,
    /// All in one: blocks remembered per endpoint when its metrics do not say.
    pub lru_capacity_per_server: Option<usize>,
    /// All in one: size each endpoint's memory from its KV-cache metrics when known.
    pub auto_tune: Option<bool>,
}

impl Default for PrefixCacheParameters {
    fn default() -> Self {
        PrefixCacheParameters {
            prefix_match_info_producer_name: None,
            match_length_weight: 0.0,
            match_length_scale_tokens: DEFAULT_MATCH_LENGTH_SCALE_TOKENS,
            block_size: None,
            max_prefix_blocks_to_match: None,
            lru_capacity_per_server: None,
            auto_tune: None,
        }
    }
}

impl PrefixCacheParameters {
    /// Whether any all-in-one (index) parameter is set.
    pub fn is_all_in_one(&self) -> bool {
        self.block_size.is_some()
            || self.max_prefix_blocks_to_match.is_some()
            || self.lru_capacity_per_server.is_some()
            || self.auto_tune.is_some()
    }

    /// The configuration of the scorer's own index (all-in-one and bare forms), or why the
    /// parameters are invalid.
    pub fn index_config(&self) -> Result<PrefixIndexConfig, ParameterError> {
        let defaults = PrefixIndexConfig::default();
        let block = self.block_size.unwrap_or(defaults.layout.block_tokens());
        let max_blocks = self
            .max_prefix_blocks_to_match
            .unwrap_or(defaults.layout.max_blocks());
        let capacity = self
            .lru_capacity_per_server
            .unwrap_or(defaults.default_capacity);
        ParameterError::require_positive("blockSize", block)?;
        ParameterError::require_positive("maxPrefixBlocksToMatch", max_blocks)?;
        ParameterError::require_positive("lruCapacityPerServer", capacity)?;
        Ok(PrefixIndexConfig {
            layout: BlockLayout::new(block, max_blocks),
            default_capacity: capacity,
        })
    }

    /// The score shape these parameters ask for, or why they are invalid.
    pub fn formula(&self) -> Result<MatchFormula, ParameterError> {
        let weight =
            ParameterError::require_range("matchLengthWeight", self.match_length_weight, 0.0, 1.0)?;
        if weight > 0.0 && self.match_length_scale_tokens <= 0 {
            return Err(ParameterError::OutOfRange {
                field: "matchLengthScaleTokens",
                value: self.match_length_scale_tokens as f64,
                min: 1.0,
                max: f64::MAX,
            });
        }
        Ok(MatchFormula {
            match_length_weight: weight,
            match_length_scale_tokens: self.match_length_scale_tokens.max(1) as f64,
        })
    }
}

/// The ratio-and-length score of a match (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatchFormula {
    /// Weight of the length term, in [0, 1].
    pub match_length_weight: f64,
    /// Matched tokens giving the full length term.
    pub match_length_scale_tokens: f64,
}

impl Default for MatchFormula {
    /// The ratio alone.
    fn default() -> Self {
        MatchFormula {
            match_length_weight: 0.0,
            match_length_scale_tokens: DEFAULT_MATCH_LENGTH_SCALE_TOKENS as f64,
        }
    }
}

impl MatchFormula {
    /// The score of `matched` of `total` blocks of `block_tokens` tokens each.
    pub fn score(&self, matched: usize, total: usize, block_tokens: usize) -> f64 {
        if total == 0 {
            return 0.0;
        }
        let ratio = matched as f64 / total as f64;
        let w = self.match_length_weight;
        if w <= 0.0 || block_tokens == 0 {
            return ratio;
        }
        let tokens = matched as f64 * block_tokens as f64;
        let length = (tokens / self.match_length_scale_tokens).min(1.0);
        w * length * length + (1.0 - w) * ratio
    }
}

/// Where the scorer's producer comes from.
#[derive(Debug)]
enum Source {
    /// Its own index (all-in-one form).
    Own(Arc<PrefixProducer>),
    /// A producer found by name on the first cycle.
    Linked(ProducerLink),
}

/// The scorer and pick hook over a prefix producer.
#[derive(Debug)]
pub struct PrefixCacheScorer {
    source: Source,
    formula: MatchFormula,
}

impl PrefixCacheScorer {
    /// An all-in-one scorer over a fresh index configured by `parameters`.
    pub fn new(parameters: &PrefixCacheParameters) -> Result<Self, ParameterError> {
        let config = parameters.index_config()?;
        Ok(Self::over(
            Arc::new(PrefixIndex::new(config)),
            parameters,
            TYPE_NAME,
        ))
    }

    /// An all-in-one scorer over an existing `index` (shared with other plugins or a KV-event
    /// feed). A `parameters` formula that is invalid gives the ratio alone.
    pub fn over(index: Arc<PrefixIndex>, parameters: &PrefixCacheParameters, name: &str) -> Self {
        let producer = PrefixProducer::new(index, parameters.auto_tune.unwrap_or(true), name);
        PrefixCacheScorer {
            source: Source::Own(Arc::new(producer)),
            formula: parameters.formula().unwrap_or_default(),
        }
    }

    /// A scorer over `producer` (owned by another plugin, e.g. the all-in-one
    /// `precise-prefix-cache-scorer`), scoring with `formula`.
    pub fn over_producer(producer: Arc<PrefixProducer>, formula: MatchFormula) -> Self {
        PrefixCacheScorer {
            source: Source::Own(producer),
            formula,
        }
    }

    /// The producer this scorer reads (for a linked scorer, resolved now if not yet).
    pub fn producer(&self) -> &Arc<PrefixProducer> {
        match &self.source {
            Source::Own(producer) => producer,
            Source::Linked(link) => link.get(),
        }
    }

    /// The index this scorer reads and its pick hook writes.
    pub fn index(&self) -> &Arc<PrefixIndex> {
        self.producer().index()
    }

    /// The score of one candidate given the producer's match.
    fn score_one(&self, info: &PrefixMatchInfo, endpoint: &Endpoint) -> f64 {
        self.formula.score(
            info.match_blocks(endpoint),
            info.total_blocks(),
            info.block_size_tokens(),
        )
    }
}

impl Scorer for PrefixCacheScorer {
    fn category(&self) -> Category {
        Category::Affinity
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let producer = self.producer();
        let Some(info) = producer.produce(cycle) else {
            out.fill(Score::new(0.0));
            return;
        };
        for (slot, endpoint) in out.iter_mut().zip(candidates) {
            *slot = Score::new(self.score_one(info, endpoint));
        }
    }
}

impl PickHook for PrefixCacheScorer {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        self.producer().record(cycle, picked);
    }
}

/// Builds a `prefix-cache-scorer` from its config arguments.
///
/// In the all-in-one and bare forms the index is kept in the shared
/// [`Resources`](shepherd_scheduler_core::resources::Resources) under the plugin's name: an
/// embedder (a KV-event feed, a debug view, metrics) reaches it with
/// `resources.get::<PrefixIndex>(name)`, and a reload that keeps the plugin with the same index
/// settings keeps what the index learned. An index put there before the build is used as is
/// when its settings match. With `prefixMatchInfoProducerName` the producer owns the index.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    factory_linking(args, &[approx_prefix::TYPE_NAME])
}

/// [`factory`], with a bare scorer reading the first of `default_producers` the config
/// declares (by plugin name) before falling back to an index of its own.
pub(crate) fn factory_linking(
    args: &PluginArgs<'_>,
    default_producers: &[&str],
) -> Result<PluginInstance, PluginError> {
    let parameters: PrefixCacheParameters = args.parse()?;
    let formula = parameters.formula()?;
    if let Some(producer_name) = &parameters.prefix_match_info_producer_name {
        if parameters.is_all_in_one() {
            return Err(PluginError::invalid(
                "prefixMatchInfoProducerName",
                "the index parameters (blockSize, maxPrefixBlocksToMatch, lruCapacityPerServer, \
                 autoTune) belong to the producer when a producer is named",
            ));
        }
        let link = ProducerLink::new(args.resources, args.pool, vec![producer_name.clone()], None);
        let scorer = Arc::new(PrefixCacheScorer {
            source: Source::Linked(link),
            formula,
        });
        return Ok(PluginInstance::scorer(scorer.clone()).with_pick_hook(scorer));
    }
    let config = parameters.index_config()?;
    let index = args.resources.get_or_replace_with(
        args.name,
        |existing: &PrefixIndex| *existing.config() == config,
        || PrefixIndex::new(config),
    );
    let own = Arc::new(PrefixProducer::new(
        Arc::clone(&index),
        parameters.auto_tune.unwrap_or(true),
        args.name,
    ));
    let source = if parameters.is_all_in_one() {
        Source::Own(Arc::clone(&own))
    } else {
        // Bare: upstream's default producer when the config declares one, else our own index.
        Source::Linked(ProducerLink::new(
            args.resources,
            args.pool,
            default_producers.iter().map(|n| (*n).to_string()).collect(),
            Some(Arc::clone(&own)),
        ))
    };
    let scorer = Arc::new(PrefixCacheScorer { source, formula });
    Ok(PluginInstance::scorer(scorer.clone())
        .with_pick_hook(scorer)
        .with_metrics_source(own)
        .with_membership_listener(index))
}

#[cfg(test)]
mod tests;
