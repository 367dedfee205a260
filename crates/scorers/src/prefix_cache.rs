//! `prefix-cache-scorer`: scores endpoints by how much of the request's prompt prefix they are
//! believed to hold in their KV cache.
//!
//! Each candidate scores `matched blocks / total blocks` from the shared
//! [`PrefixIndex`]. The lookup hashes the prompt only as far as some endpoint still matches; the
//! partial chain is kept in the cycle, and once an endpoint is picked the plugin's pick hook
//! finishes hashing and records the whole prompt for that endpoint. Endpoints that leave the pool
//! are forgotten. Chains are seeded by the model and the LoRA adapter, so different models never
//! share blocks.
//!
//! ## Parameters
//!
//! Names follow the Gateway API Inference Extension's prefix plugin, so its configs load:
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `blockSize` (also `blockSizeTokens`, `hashBlockSize`) | 64 | tokens per hashed block; text is cut into pseudo tokens of 4 bytes, so 64 means 256 bytes. Always read as tokens. |
//! | `maxPrefixBlocksToMatch` | 2048 | most blocks hashed and indexed per request (2048 × 64 = 131,072 tokens); later blocks are ignored |
//! | `lruCapacityPerServer` | 31250 | blocks remembered per endpoint when its metrics do not give `num_gpu_blocks` and `block_size` |
//! | `autoTune` | true | size each endpoint's memory from its metrics (`num_gpu_blocks × block_size / blockSize`) when known; `false` always uses `lruCapacityPerServer` |
//!
//! Unknown parameter names are errors.
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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ParameterError;
use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use shepherd_scheduler_core::plugin::{
    CachedPrefix, Category, CycleState, PickHook, PluginInstance, Score, Scorer,
};
use shepherd_scheduler_core::prefix::{
    BlockChain, BlockLayout, PrefixIndex, PrefixIndexConfig, PrefixMatch, chain_seed,
};

/// Registry type name.
pub const TYPE_NAME: &str = "prefix-cache-scorer";

/// The `prefix-cache-scorer` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PrefixCacheParameters {
    /// Tokens per hashed block.
    #[serde(alias = "blockSizeTokens", alias = "hashBlockSize")]
    pub block_size: usize,
    /// Most blocks hashed and indexed per request.
    pub max_prefix_blocks_to_match: usize,
    /// Blocks remembered per endpoint when its metrics do not say.
    pub lru_capacity_per_server: usize,
    /// Size each endpoint's memory from its KV-cache metrics when known.
    pub auto_tune: bool,
}

impl Default for PrefixCacheParameters {
    fn default() -> Self {
        let config = PrefixIndexConfig::default();
        PrefixCacheParameters {
            block_size: config.layout.block_tokens(),
            max_prefix_blocks_to_match: config.layout.max_blocks(),
            lru_capacity_per_server: config.default_capacity,
            auto_tune: true,
        }
    }
}

impl PrefixCacheParameters {
    /// The index configuration these parameters ask for, or why they are invalid.
    pub fn index_config(&self) -> Result<PrefixIndexConfig, ParameterError> {
        ParameterError::require_positive("blockSize", self.block_size)?;
        ParameterError::require_positive(
            "maxPrefixBlocksToMatch",
            self.max_prefix_blocks_to_match,
        )?;
        ParameterError::require_positive("lruCapacityPerServer", self.lru_capacity_per_server)?;
        Ok(PrefixIndexConfig {
            layout: BlockLayout::new(self.block_size, self.max_prefix_blocks_to_match),
            default_capacity: self.lru_capacity_per_server,
        })
    }
}

/// Distinguishes plugin instances, so two prefix scorers in one profile keep their own chains.
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(0);

/// The request's partly hashed chain, left in the cycle by the scorer for its pick hook.
struct PendingChain {
    instance: u64,
    chain: BlockChain,
}

/// The scorer and pick hook over one shared index.
#[derive(Debug)]
pub struct PrefixCacheScorer {
    index: Arc<PrefixIndex>,
    auto_tune: bool,
    instance: u64,
    name: Arc<str>,
}

impl PrefixCacheScorer {
    /// A scorer over a fresh index configured by `parameters`.
    pub fn new(parameters: &PrefixCacheParameters) -> Result<Self, ParameterError> {
        let config = parameters.index_config()?;
        Ok(Self::over(
            Arc::new(PrefixIndex::new(config)),
            parameters,
            TYPE_NAME,
        ))
    }

    /// A scorer over an existing `index` (shared with other plugins or a KV-event feed).
    pub fn over(index: Arc<PrefixIndex>, parameters: &PrefixCacheParameters, name: &str) -> Self {
        PrefixCacheScorer {
            index,
            auto_tune: parameters.auto_tune,
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            name: Arc::from(name),
        }
    }

    /// The index this scorer reads and its pick hook writes.
    pub fn index(&self) -> &Arc<PrefixIndex> {
        &self.index
    }

    fn fresh_chain(&self, cycle: &CycleState<'_>) -> BlockChain {
        let request = cycle.request;
        let seed = chain_seed(&request.model, request.lora.as_deref(), "");
        self.index.chain(seed, &request.prompt)
    }
}

impl Scorer for PrefixCacheScorer {
    fn category(&self) -> Category {
        Category::Affinity
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let mut chain = self.fresh_chain(cycle);
        let mut found = PrefixMatch::new();
        self.index
            .match_into(&mut chain, &cycle.request.prompt, &mut found);
        for (slot, endpoint) in out.iter_mut().zip(candidates) {
            *slot = Score::new(found.score(endpoint.id()));
        }
        // Publish each candidate's estimated cached prompt tokens (see `CachedPrefix`).
        let block_tokens = self.index.config().layout.block_tokens() as u64;
        // Only endpoints with a match: everyone else is believed to cache nothing anyway.
        let cached = found
            .matches()
            .iter()
            .map(|&(id, blocks)| (id, blocks as u64 * block_tokens));
        CachedPrefix::publish(&mut cycle.extensions, cached);
        cycle.extensions.insert(PendingChain {
            instance: self.instance,
            chain,
        });
    }
}

impl PickHook for PrefixCacheScorer {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        let mut chain = match cycle.extensions.remove::<PendingChain>() {
            Some(pending) if pending.instance == self.instance => pending.chain,
            Some(other) => {
                // Another prefix scorer's chain: give it back and hash our own.
                cycle.extensions.insert(other);
                self.fresh_chain(cycle)
            }
            None => self.fresh_chain(cycle),
        };
        let capacity = if self.auto_tune {
            self.index.config().capacity_for(&picked.metrics())
        } else {
            self.index.config().default_capacity
        };
        self.index.insert_chain(
            picked.id(),
            &mut chain,
            &cycle.request.prompt,
            Some(capacity),
        );
    }
}

const ENTRIES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_prefix_index_entries",
    "(block, endpoint) entries held by the prefix-cache index.",
);
const ENDPOINTS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_prefix_index_endpoints",
    "Endpoints the prefix-cache index remembers blocks for.",
);
const INSERTED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_prefix_index_inserted_blocks_total",
    "(block, endpoint) entries added to the prefix-cache index.",
);
const EVICTIONS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_prefix_index_evictions_total",
    "Entries evicted to keep endpoints within their capacity.",
);

impl MetricsSource for PrefixCacheScorer {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let labels = [("plugin", &*self.name)];
        let stats = self.index.stats();
        v.gauge(ENTRIES, &labels, stats.entries as f64);
        v.gauge(ENDPOINTS, &labels, stats.endpoints as f64);
        v.counter(INSERTED, &labels, stats.inserted_blocks);
        v.counter(EVICTIONS, &labels, stats.evictions);
    }
}

/// Builds a `prefix-cache-scorer` from its config arguments.
///
/// The index is kept in the shared [`Resources`](shepherd_scheduler_core::resources::Resources)
/// under the plugin's name: an embedder (a KV-event feed, a debug view, metrics) reaches it with
/// `resources.get::<PrefixIndex>(name)`, and a reload that keeps the plugin with the same index
/// settings keeps what the index learned. An index put there before the build is used as is
/// when its settings match.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: PrefixCacheParameters = args.parse()?;
    let config = parameters.index_config()?;
    let index = args.resources.get_or_replace_with(
        args.name,
        |existing: &PrefixIndex| *existing.config() == config,
        || PrefixIndex::new(config),
    );
    let scorer = Arc::new(PrefixCacheScorer::over(
        Arc::clone(&index),
        &parameters,
        args.name,
    ));
    Ok(PluginInstance::scorer(scorer.clone())
        .with_pick_hook(scorer.clone())
        .with_metrics_source(scorer)
        .with_membership_listener(index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use shepherd_scheduler_core::clock::Timestamp;
    use shepherd_scheduler_core::endpoint::{EndpointMetrics, Pool};
    use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
    use std::time::Duration;

    fn parse(json: serde_json::Value) -> Result<PrefixCacheParameters, String> {
        serde_json::from_value(json).map_err(|e| e.to_string())
    }

    fn scorer(block_size: usize) -> PrefixCacheScorer {
        PrefixCacheScorer::new(&PrefixCacheParameters {
            block_size,
            ..Default::default()
        })
        .unwrap()
    }

    fn request(prompt: &str, lora: Option<&str>) -> InferenceRequest {
        let mut r = InferenceRequest::new("r", "model", Prompt::Text(prompt.into()));
        r.lora = lora.map(str::to_string);
        r
    }

    /// Scores `request` over the pool, then picks `pick` (when given); returns the scores.
    fn schedule(
        scorer: &PrefixCacheScorer,
        pool: &Pool,
        request: &InferenceRequest,
        pick: Option<usize>,
    ) -> Vec<f64> {
        let snapshot = pool.snapshot();
        let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
        let mut out = vec![Score::NEUTRAL; candidates.len()];
        let mut cycle = CycleState::new(request, Timestamp::ZERO, Duration::from_millis(200));
        scorer.score(&mut cycle, &candidates, &mut out);
        if let Some(i) = pick {
            scorer.on_pick(&mut cycle, candidates[i]);
        }
        out.iter().map(|s| s.value).collect()
    }

    fn pool(n: usize) -> Pool {
        let pool = Pool::new();
        pool.set_members((0..n).map(|i| format!("10.0.0.{i}:8000")));
        pool
    }

    #[test]
    fn the_picked_endpoint_scores_its_prefix_next_time() {
        let scorer = scorer(4); // 16-byte blocks
        let pool = pool(2);
        let first = request(&"a".repeat(64), None);
        assert_eq!(schedule(&scorer, &pool, &first, Some(1)), vec![0.0, 0.0]);
        let second = request(&format!("{}{}", "a".repeat(64), "b".repeat(64)), None);
        assert_eq!(schedule(&scorer, &pool, &second, None), vec![0.0, 0.5]);
        assert_eq!(schedule(&scorer, &pool, &first, None), vec![0.0, 1.0]);
    }

    #[test]
    fn adapters_do_not_share_prefixes() {
        let scorer = scorer(4);
        let pool = pool(1);
        schedule(
            &scorer,
            &pool,
            &request(&"a".repeat(64), Some("x")),
            Some(0),
        );
        assert_eq!(
            schedule(&scorer, &pool, &request(&"a".repeat(64), None), None),
            vec![0.0]
        );
        assert_eq!(
            schedule(&scorer, &pool, &request(&"a".repeat(64), Some("x")), None),
            vec![1.0]
        );
    }

    #[test]
    fn the_pick_hook_sizes_memory_from_metrics() {
        let scorer = scorer(4);
        let pool = pool(1);
        let endpoint = Arc::clone(&pool.snapshot().endpoints()[0]);
        endpoint.set_metrics(EndpointMetrics {
            num_gpu_blocks: Some(3),
            block_size: Some(8),
            ..Default::default()
        });
        schedule(&scorer, &pool, &request(&"c".repeat(200), None), Some(0));
        // 3 server blocks of 8 tokens = 24 tokens = 6 index blocks of 4 tokens.
        assert_eq!(scorer.index().capacity_of(endpoint.id()), Some(6));
        assert_eq!(scorer.index().endpoint_entries(endpoint.id()), 6);
    }

    #[test]
    fn endpoints_leaving_the_pool_are_forgotten() {
        let pool = Arc::new(pool(2));
        let shared = shepherd_scheduler_core::shared::SharedState::new(Arc::clone(&pool));
        let parameters = serde_json::json!({"blockSize": 4});
        let args = PluginArgs::new("p", TYPE_NAME, &parameters, &shared, 0);
        let plugin = factory(&args).unwrap();
        pool.add_listener(plugin.as_membership_listener().unwrap());
        let scorer = plugin.as_scorer().unwrap();
        let hook = plugin.as_pick_hook().unwrap();
        let snapshot = pool.snapshot();
        let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
        let req = request(&"d".repeat(64), None);
        for picked in &candidates {
            let mut cycle = CycleState::new(&req, Timestamp::ZERO, Duration::ZERO);
            let mut out = vec![Score::NEUTRAL; 2];
            scorer.score(&mut cycle, &candidates, &mut out);
            hook.on_pick(&mut cycle, picked);
        }
        let mut cycle = CycleState::new(&req, Timestamp::ZERO, Duration::ZERO);
        let mut out = vec![Score::NEUTRAL; 2];
        scorer.score(&mut cycle, &candidates, &mut out);
        assert_eq!(
            out.iter().map(|s| s.value).collect::<Vec<_>>(),
            vec![1.0, 1.0]
        );
        assert!(pool.remove("10.0.0.0:8000"));
        let mut cycle = CycleState::new(&req, Timestamp::ZERO, Duration::ZERO);
        let mut out = vec![Score::NEUTRAL; 2];
        scorer.score(&mut cycle, &candidates, &mut out);
        assert_eq!(out[0].value, 0.0);
        assert_eq!(out[1].value, 1.0);
    }

    proptest::proptest! {
        #[test]
        fn scores_stay_in_range(
            prompts in proptest::collection::vec(("[ab]{0,200}", 0usize..3), 1..20),
        ) {
            let scorer = scorer(2);
            let pool = pool(3);
            for (text, pick) in prompts {
                let scores = schedule(&scorer, &pool, &request(&text, None), Some(pick));
                proptest::prop_assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)));
            }
        }
    }

    #[test]
    fn gateway_parameter_names_are_accepted() {
        let p = parse(serde_json::json!({
            "blockSize": 16, "maxPrefixBlocksToMatch": 10, "lruCapacityPerServer": 5, "autoTune": false
        }))
        .unwrap();
        assert_eq!(p.block_size, 16);
        assert_eq!(p.max_prefix_blocks_to_match, 10);
        assert_eq!(p.lru_capacity_per_server, 5);
        assert!(!p.auto_tune);
        assert_eq!(
            parse(serde_json::json!({"hashBlockSize": 8}))
                .unwrap()
                .block_size,
            8
        );
        assert_eq!(
            parse(serde_json::json!({"blockSizeTokens": 32}))
                .unwrap()
                .block_size,
            32
        );
        assert_eq!(
            parse(serde_json::json!({})).unwrap(),
            PrefixCacheParameters::default()
        );
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(parse(serde_json::json!({"blockSise": 16})).is_err());
        assert!(parse(serde_json::json!({"blockSize": -1})).is_err());
        let zero = parse(serde_json::json!({"blockSize": 0})).unwrap();
        assert!(PrefixCacheScorer::new(&zero).is_err());
        let zero = parse(serde_json::json!({"lruCapacityPerServer": 0})).unwrap();
        assert!(PrefixCacheScorer::new(&zero).is_err());
    }
}
