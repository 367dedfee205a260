//! `sglang-cache-aware-scorer`: SGLang's model gateway `cache_aware` policy as sglang-router
//! 0.3.2 (`sgl-model-gateway` in sgl-project/sglang) routes with its launch defaults, as a
//! sim-local plugin. `docs/peers.md` lists what is modelled, from which upstream file, and
//! what is not.
//!
//! Per request ([`decide`]): with each worker's load = requests the router has in flight
//! there, an imbalanced pool goes to the least-loaded worker; otherwise the worker holding the
//! longest prefix of the prompt in the router's [`tree::Tree`] (built from what it routed,
//! never from the servers) wins if the match covers more than `cacheThreshold` of the prompt,
//! else the least-loaded worker does. The routed prompt is then added to the tree for the
//! chosen worker. Every `evictionIntervalSecs` of simulated time, each worker's share of the
//! tree is cut back to `maxTreeSize` characters, least recently used leaves first.
//!
//! The chosen worker scores 1, every other 0 (use it alone with `max-score-picker`).
//!
//! Parameters (upstream's names in camelCase) default to the launcher's values
//! (`sglang_router.launch_router`, `RouterArgs`): `cacheThreshold` 0.3,
//! `balanceAbsThreshold` 64, `balanceRelThreshold` 1.5, `evictionIntervalSecs` 60,
//! `maxTreeSize` 2²⁶ characters per worker. `charsPerToken` (4, simulator only) converts the
//! character budget into the simulator's token prompts (set it to 1 for text prompts, whose
//! symbols are characters).

pub(crate) mod decide;
pub(crate) mod sweep;
#[cfg(test)]
mod tests;
pub(crate) mod tree;

use std::sync::Arc;

use parking_lot::Mutex;
use serde::Deserialize;
use shepherd_scheduler_core::clock::Clock;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId};
use shepherd_scheduler_core::plugin::{
    Category, CycleState, PickHook, PluginInstance, Score, Scorer,
};

use super::peer_index::prompt_symbols;
use decide::{Thresholds, decide};
use sweep::{Sweep, holder_rank};
use tree::Tree;

/// Registry type name.
pub(crate) const TYPE_NAME: &str = "sglang-cache-aware-scorer";

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct Params {
    cache_threshold: f32,
    balance_abs_threshold: usize,
    balance_rel_threshold: f32,
    eviction_interval_secs: u64,
    max_tree_size: usize,
    chars_per_token: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            cache_threshold: 0.3,
            balance_abs_threshold: 64,
            balance_rel_threshold: 1.5,
            eviction_interval_secs: 60,
            max_tree_size: 1 << 26,
            chars_per_token: 4,
        }
    }
}

struct State {
    tree: Tree,
    sweep: Sweep,
}

struct CacheAware {
    thresholds: Thresholds,
    /// `maxTreeSize` in the tree's symbols.
    max_tree_symbols: usize,
    seed: u64,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

impl CacheAware {
    /// A node's stable, arbitrary order of its tenants.
    fn rank(&self, salt: u64, t: EndpointId) -> u64 {
        holder_rank(self.seed, salt, t)
    }

    fn evict_if_due(&self, state: &mut State, now: u64) {
        for _ in 0..state.sweep.due(now) {
            state.tree.evict_tenant_by_size(self.max_tree_symbols);
        }
    }
}

/// The prompt's symbols, for the pick hook.
struct Symbols(Vec<u32>);

impl Scorer for CacheAware {
    fn category(&self) -> Category {
        Category::Balance
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        if candidates.is_empty() {
            return;
        }
        let loads: Vec<usize> = candidates
            .iter()
            .map(|e| e.in_flight_requests() as usize)
            .collect();
        let text = prompt_symbols(&cycle.request.prompt);
        let now = self.clock.now().as_nanos();
        let route = {
            let mut state = self.state.lock();
            self.evict_if_due(&mut state, now);
            decide(&loads, &self.thresholds, text.len(), || {
                let (matched, holder) = state
                    .tree
                    .prefix_match(&text, now, |salt, t| self.rank(salt, t));
                let index = holder.and_then(|h| candidates.iter().position(|e| e.id() == h));
                (matched, index)
            })
        };
        let chosen = route.index();
        for (i, slot) in out.iter_mut().enumerate() {
            *slot = Score::new(if i == chosen { 1.0 } else { 0.0 });
        }
        cycle.extensions.insert(Symbols(text));
    }
}

impl PickHook for CacheAware {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        let text = match cycle.extensions.remove::<Symbols>() {
            Some(s) => s.0,
            None => prompt_symbols(&cycle.request.prompt),
        };
        let now = self.clock.now().as_nanos();
        self.state.lock().tree.insert(&text, picked.id(), now);
    }
}

/// Builds the plugin from its config arguments.
pub(crate) fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params: Params = args.parse()?;
    if !(0.0..=1.0).contains(&params.cache_threshold) {
        return Err(PluginError::invalid("cacheThreshold", "must be in [0, 1]"));
    }
    if !params.balance_rel_threshold.is_finite() || params.balance_rel_threshold < 0.0 {
        return Err(PluginError::invalid(
            "balanceRelThreshold",
            "must be a finite number ≥ 0",
        ));
    }
    if params.chars_per_token == 0 {
        return Err(PluginError::invalid("charsPerToken", "must be at least 1"));
    }
    let interval_ns = params.eviction_interval_secs.saturating_mul(1_000_000_000);
    let plugin = Arc::new(CacheAware {
        thresholds: Thresholds {
            cache_threshold: params.cache_threshold,
            balance_abs_threshold: params.balance_abs_threshold,
            balance_rel_threshold: params.balance_rel_threshold,
        },
        max_tree_symbols: params.max_tree_size / params.chars_per_token,
        seed: args.seed,
        clock: Arc::clone(args.clock),
        state: Mutex::new(State {
            tree: Tree::default(),
            sweep: Sweep::new(args.clock.now().as_nanos(), interval_ns),
        }),
    });
    Ok(PluginInstance::scorer(plugin.clone()).with_pick_hook(plugin))
}
