//! `approx-prefix-cache-producer`: the prefix index and its hashing settings, read by the
//! `prefix-cache-scorer`, the `prefix-cache-affinity-filter` and the `no-hit-lru-scorer`.
//!
//! Upstream moved the hashing and memory parameters off `prefix-cache-scorer` onto this
//! producer: it cuts the prompt into blocks, hashes them, looks up which endpoints recently
//! served the same leading blocks, and hands every consumer the match (matched blocks, total
//! blocks, tokens per block); after the pick, the picked endpoint's blocks are recorded. In
//! Shepherd the producer owns a [`PrefixIndex`], kept in the shared resources under the
//! plugin's name as a [`PrefixProducer`]; consumers find it by name (`prefixMatchInfoProducerName`,
//! default `approx-prefix-cache-producer`) on their first cycle, compute the match once per
//! request through it, and record the pick from their pick hooks (once per request). A
//! producer is declared in `plugins` and, as upstream, need not appear in a profile.
//!
//! ## Parameters
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `autoTune` | `true` | size each endpoint's memory from its metrics (`num_gpu_blocks × block_size / blockSizeTokens` blocks); `false` always uses `lruCapacityPerServer` |
//! | `blockSizeTokens` | 16 | tokens per hashed block; values under 64 are raised to 64, as upstream does, so the default hashes 64-token blocks |
//! | `blockSize` | — | deprecated: used as `blockSizeTokens` when that is left at its default |
//! | `maxPrefixTokensToMatch` | 131072 | most prompt tokens hashed per request (`/ blockSizeTokens` blocks); wins over `maxPrefixBlocksToMatch` when above 0 |
//! | `maxPrefixBlocksToMatch` | 2048 | most blocks per request, used only when `maxPrefixTokensToMatch` is 0; both 0 = the whole prompt |
//! | `lruCapacityPerServer` | 31250 | blocks remembered per endpoint when its metrics do not say (0 = the default) |
//!
//! Differences from upstream: the block size is fixed when the plugin is built (upstream may
//! take it from the first candidate's `block_size` metric per request; Shepherd's index needs
//! one layout); auto-tuned memory converts the server's blocks to index blocks (upstream takes
//! `num_gpu_blocks` as a count of index blocks); text prompts are cut into pseudo tokens of 4
//! bytes unless the request carries token ids (see `token-producer`).
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//! use shepherd_scorers::producers::PrefixProducer;
//! use shepherd_scheduler_core::config::build_scheduler_in;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: approx-prefix-cache-producer
//!   parameters:
//!     maxPrefixTokensToMatch: 16384
//!     lruCapacityPerServer: 31250
//! - type: prefix-cache-scorer
//! - type: max-score-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: prefix-cache-scorer
//!     weight: 2
//!   - pluginRef: max-score-picker
//! ").unwrap();
//! let shared = SharedState::new(Arc::new(Pool::new()));
//! shared.pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
//! let prompt = Prompt::Text("x".repeat(4096)); // 1024 pseudo tokens = 16 blocks of 64
//! let first = scheduler.schedule(&InferenceRequest::new("a", "m", prompt.clone())).unwrap();
//! let producer = shared.resources.get::<PrefixProducer>("approx-prefix-cache-producer").unwrap();
//! assert_eq!(producer.index().config().layout.block_tokens(), 64);
//! assert_eq!(producer.index().config().layout.max_blocks(), 256); // 16384 / 64
//! assert_eq!(producer.index().entries(), 16);
//! let again = scheduler.schedule(&InferenceRequest::new("b", "m", prompt)).unwrap();
//! assert_eq!(again.primary().address(), first.primary().address());
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{CycleState, PickHook, PluginInstance};
use shepherd_scheduler_core::prefix::{BlockLayout, PrefixIndex, PrefixIndexConfig};

use super::PrefixProducer;
use crate::error::ParameterError;

/// Registry type name.
pub const TYPE_NAME: &str = "approx-prefix-cache-producer";

/// The smallest block size used, whatever is configured (upstream's floor, which bounds the
/// index's memory).
pub const MIN_BLOCK_SIZE_TOKENS: usize = 64;

const DEFAULT_BLOCK_SIZE_TOKENS: usize = 16;

/// The `approx-prefix-cache-producer` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ApproxPrefixParameters {
    /// Size endpoint memory from metrics.
    pub auto_tune: bool,
    /// Tokens per block (raised to [`MIN_BLOCK_SIZE_TOKENS`]).
    pub block_size_tokens: usize,
    /// Deprecated spelling of `blockSizeTokens`.
    pub block_size: usize,
    /// Most blocks per request when `maxPrefixTokensToMatch` is 0.
    pub max_prefix_blocks_to_match: usize,
    /// Most tokens per request (0 = use `maxPrefixBlocksToMatch`).
    pub max_prefix_tokens_to_match: usize,
    /// Blocks per endpoint when its metrics do not say (0 = the default).
    pub lru_capacity_per_server: usize,
}

impl Default for ApproxPrefixParameters {
    fn default() -> Self {
        ApproxPrefixParameters {
            auto_tune: true,
            block_size_tokens: DEFAULT_BLOCK_SIZE_TOKENS,
            block_size: 0,
            max_prefix_blocks_to_match: 2048,
            max_prefix_tokens_to_match: 131_072,
            lru_capacity_per_server: 31_250,
        }
    }
}

impl ApproxPrefixParameters {
    /// Tokens per block actually hashed.
    pub fn effective_block_tokens(&self) -> usize {
        let configured =
            if self.block_size > 0 && self.block_size_tokens == DEFAULT_BLOCK_SIZE_TOKENS {
                self.block_size
            } else {
                self.block_size_tokens
            };
        configured.max(MIN_BLOCK_SIZE_TOKENS)
    }

    /// The index configuration these parameters ask for, or why they are invalid.
    pub fn index_config(&self) -> Result<PrefixIndexConfig, ParameterError> {
        if !self.auto_tune && self.block_size_tokens == 0 && self.block_size == 0 {
            return Err(ParameterError::ZeroCount {
                field: "blockSizeTokens",
            });
        }
        let block = self.effective_block_tokens();
        let max_blocks = if self.max_prefix_tokens_to_match > 0 {
            self.max_prefix_tokens_to_match / block
        } else if self.max_prefix_blocks_to_match == 0 {
            usize::MAX
        } else {
            self.max_prefix_blocks_to_match
        };
        let default_capacity = if self.lru_capacity_per_server > 0 {
            self.lru_capacity_per_server
        } else {
            ApproxPrefixParameters::default().lru_capacity_per_server
        };
        Ok(PrefixIndexConfig {
            layout: BlockLayout::new(block, max_blocks),
            default_capacity,
        })
    }
}

/// A producer named `name` with `parameters`, over `index` when given (its settings are the
/// caller's business), else over a fresh index.
pub(crate) fn producer(
    parameters: &ApproxPrefixParameters,
    name: &str,
    index: Option<Arc<PrefixIndex>>,
) -> PrefixProducer {
    let index = index.unwrap_or_else(|| {
        let config = parameters.index_config().unwrap_or_default();
        Arc::new(PrefixIndex::new(config))
    });
    PrefixProducer::new(index, parameters.auto_tune, name)
}

impl PickHook for PrefixProducer {
    /// Recording the pick, for a config that lists the producer in a profile (harmless: a
    /// request is recorded once).
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        self.record(cycle, picked);
    }
}

/// Builds an `approx-prefix-cache-producer`: a [`PrefixProducer`] kept in the shared resources
/// under the plugin's name. A reload with the same index settings keeps what the index
/// learned.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: ApproxPrefixParameters = args.parse()?;
    let config = parameters.index_config()?;
    let kept = args
        .resources
        .get::<PrefixProducer>(args.name)
        .map(|old| Arc::clone(old.index()))
        .filter(|index| *index.config() == config);
    let index = kept.unwrap_or_else(|| Arc::new(PrefixIndex::new(config)));
    let producer = Arc::new(producer(&parameters, args.name, Some(Arc::clone(&index))));
    args.resources.insert(args.name, Arc::clone(&producer));
    Ok(PluginInstance::default()
        .with_pick_hook(Arc::clone(&producer) as Arc<dyn PickHook>)
        .with_membership_listener(index)
        .with_metrics_source(producer))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn parse(json: serde_json::Value) -> Result<ApproxPrefixParameters, String> {
        serde_json::from_value(json).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_upstreams() {
        let p = ApproxPrefixParameters::default();
        assert!(p.auto_tune);
        assert_eq!(p.block_size_tokens, 16);
        assert_eq!(p.max_prefix_blocks_to_match, 2048);
        assert_eq!(p.max_prefix_tokens_to_match, 131_072);
        assert_eq!(p.lru_capacity_per_server, 31_250);
        let config = p.index_config().unwrap();
        // 16 is raised to 64; 131072 tokens / 64 = 2048 blocks.
        assert_eq!(config.layout.block_tokens(), 64);
        assert_eq!(config.layout.max_blocks(), 2048);
        assert_eq!(config.default_capacity, 31_250);
    }

    #[test]
    fn the_token_cap_wins_and_zero_caps_mean_the_whole_prompt() {
        let p = parse(serde_json::json!({"blockSizeTokens": 128, "maxPrefixTokensToMatch": 1000, "maxPrefixBlocksToMatch": 3})).unwrap();
        assert_eq!(p.index_config().unwrap().layout.max_blocks(), 7);
        let p =
            parse(serde_json::json!({"maxPrefixTokensToMatch": 0, "maxPrefixBlocksToMatch": 3}))
                .unwrap();
        assert_eq!(p.index_config().unwrap().layout.max_blocks(), 3);
        let p =
            parse(serde_json::json!({"maxPrefixTokensToMatch": 0, "maxPrefixBlocksToMatch": 0}))
                .unwrap();
        assert_eq!(p.index_config().unwrap().layout.max_blocks(), usize::MAX);
        // A token cap under one block hashes nothing (upstream: a misconfiguration, not "all").
        let p = parse(serde_json::json!({"maxPrefixTokensToMatch": 10})).unwrap();
        assert_eq!(p.index_config().unwrap().layout.max_blocks(), 0);
    }

    #[test]
    fn deprecated_block_size_maps_to_block_size_tokens() {
        let p = parse(serde_json::json!({"blockSize": 256})).unwrap();
        assert_eq!(p.effective_block_tokens(), 256);
        let p = parse(serde_json::json!({"blockSize": 256, "blockSizeTokens": 128})).unwrap();
        assert_eq!(p.effective_block_tokens(), 128);
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(parse(serde_json::json!({"blockSizeToken": 16})).is_err());
        assert!(parse(serde_json::json!({"maxPrefixTokensToMatch": -1})).is_err());
        let p = parse(serde_json::json!({"autoTune": false, "blockSizeTokens": 0})).unwrap();
        assert!(p.index_config().is_err());
        let p = parse(serde_json::json!({"lruCapacityPerServer": 0})).unwrap();
        assert_eq!(p.index_config().unwrap().default_capacity, 31_250);
    }
}
