//! `sglang-cache-aware-scorer`: SGLang router's cache-aware policy, reimplemented from its
//! published description, as a sim-local plugin.
//!
//! Per request, with each worker's load = requests the router has in flight there:
//! 1. if `max − min > balance_abs_threshold` and `max > balance_rel_threshold × min`, the
//!    system is imbalanced: route to the least-loaded worker;
//! 2. else find the worker whose (approximate, routing-history) prefix tree matches the most
//!    of the prompt; if the match rate exceeds `cache_threshold`, route there;
//! 3. else route to the least-loaded worker.
//!
//! The chosen worker scores 1, every other 0 (use it alone with `max-score-picker`). Its tree
//! records each routed prompt (the router never hears about server-side eviction).

use std::sync::Arc;

use parking_lot::Mutex;
use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{
    Category, CycleState, PickHook, PluginInstance, Score, Scorer,
};

use super::peer_index::{PeerIndex, prompt_blocks};

/// Registry type name.
pub(crate) const TYPE_NAME: &str = "sglang-cache-aware-scorer";

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct Params {
    balance_abs_threshold: f64,
    balance_rel_threshold: f64,
    cache_threshold: f64,
    block_size: usize,
    max_tree_blocks: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            balance_abs_threshold: 32.0,
            balance_rel_threshold: 1.1,
            cache_threshold: 0.5,
            block_size: 16,
            max_tree_blocks: 1 << 20,
        }
    }
}

struct Blocks(Vec<u64>);

struct CacheAware {
    params: Params,
    trees: Mutex<PeerIndex>,
}

impl Scorer for CacheAware {
    fn category(&self) -> Category {
        Category::Balance
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let n = candidates.len();
        if n == 0 {
            return;
        }
        let loads: Vec<f64> = candidates
            .iter()
            .map(|e| e.in_flight_requests() as f64)
            .collect();
        let least_loaded = argmin(&loads);
        let (min, max) = loads.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &l| {
            (lo.min(l), hi.max(l))
        });
        let blocks = prompt_blocks(&cycle.request.prompt, self.params.block_size);
        let chosen = if max - min > self.params.balance_abs_threshold
            && max > self.params.balance_rel_threshold * min
        {
            least_loaded
        } else {
            let trees = self.trees.lock();
            let matched: Vec<usize> = candidates
                .iter()
                .map(|e| trees.matched(e.id(), &blocks))
                .collect();
            drop(trees);
            let best = matched
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
                .map_or(0, |(i, _)| i);
            let rate = if blocks.is_empty() {
                0.0
            } else {
                matched[best] as f64 / blocks.len() as f64
            };
            if rate > self.params.cache_threshold {
                best
            } else {
                least_loaded
            }
        };
        for (i, slot) in out.iter_mut().enumerate() {
            *slot = Score::new(if i == chosen { 1.0 } else { 0.0 });
        }
        cycle.extensions.insert(Blocks(blocks));
    }
}

impl PickHook for CacheAware {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        let blocks = match cycle.extensions.remove::<Blocks>() {
            Some(b) => b.0,
            None => prompt_blocks(&cycle.request.prompt, self.params.block_size),
        };
        self.trees.lock().insert(picked.id(), &blocks);
    }
}

pub(crate) fn argmin(values: &[f64]) -> usize {
    values
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1).then(a.0.cmp(&b.0)))
        .map_or(0, |(i, _)| i)
}

/// Builds the plugin from its config arguments.
pub(crate) fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params: Params = args.parse()?;
    let plugin = Arc::new(CacheAware {
        trees: Mutex::new(PeerIndex::new(params.max_tree_blocks)),
        params,
    });
    Ok(PluginInstance::scorer(plugin.clone()).with_pick_hook(plugin))
}
