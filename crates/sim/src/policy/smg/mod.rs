//! `smg-cache-aware-scorer`: SGLang Model Gateway 1.13's `cache_aware` policy (crate `smg`
//! 1.13.0, `model_gateway/src/policies/cache_aware.rs`) as it routes HTTP requests with its
//! launch defaults, as a sim-local plugin. `docs/peers.md` lists what is modelled, from which
//! upstream file, and what is not.
//!
//! Per request:
//!
//! 1. the prompt's longest prefix in the router's character radix tree (built from what it
//!    routed, never from the servers; [`Tree`](super::sglang::tree::Tree)); above
//!    `cacheThreshold` of the prompt, the **holders** of the deepest matched node (at most 8)
//!    are the candidates, else nobody is (a miss);
//! 2. the **spill gate** ([`gate`]): holders with more requests in flight than
//!    `balanceRelThreshold` × the fleet mean and the absolute margin above it are passed
//!    over; if every holder is, the request spills to the fleet's workers under the gate;
//!    a miss takes the whole fleet;
//! 3. the **expected-wait** pick among those ([`expected_wait`]), on the servers' loads as
//!    the last poll of their load endpoints read them (every `loadMonitorIntervalSecs`,
//!    through the runner's [`EngineFeed`]) plus what this router dispatched since.
//!
//! The routed prompt is then inserted into the tree for the chosen worker, and the chosen
//! worker is credited with `leastLoadMeanPrefillTokens` since-poll tokens (the HTTP path
//! knows no token counts). Every `evictionIntervalSecs` of simulated time the whole tree is
//! cut back to `maxTreeSize` characters, least recently used leaves first, across workers.
//!
//! The chosen worker scores 1, every other 0 (use it alone with `max-score-picker`).
//! Parameters (upstream's flag names in camelCase) default to the `smg` CLI's launch values:
//! `cacheThreshold` 0.3, `balanceAbsThreshold` 64, `balanceRelThreshold` 1.5,
//! `evictionIntervalSecs` 120, `maxTreeSize` 2²⁶ characters, `loadMonitorIntervalSecs` 10,
//! `leastLoadKvPressureWeight` 0.15, `leastLoadMeanPrefillTokens` 1024,
//! `leastLoadDefaultThroughput` 2000; `charsPerToken` (4, simulator only) converts the
//! character budget into the simulator's token prompts.

pub(crate) mod expected_wait;
pub(crate) mod gate;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use parking_lot::Mutex;
use serde::Deserialize;
use shepherd_scheduler_core::clock::Clock;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId};
use shepherd_scheduler_core::plugin::{
    Category, CycleState, PickHook, PluginInstance, Score, Scorer,
};

use super::feed::EngineFeed;
use super::peer_index::prompt_symbols;
use super::sglang::sweep::{Sweep, holder_rank};
use super::sglang::tree::Tree;
use expected_wait::{Candidate, Knobs, Selector};
use gate::Gate;

/// Registry type name.
pub(crate) const TYPE_NAME: &str = "smg-cache-aware-scorer";

/// Holders of the deepest matched node the tree reports at most (`MATCHED_TENANTS_CAP`).
pub(crate) const MATCHED_TENANTS_CAP: usize = 8;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct Params {
    cache_threshold: f32,
    balance_abs_threshold: usize,
    balance_rel_threshold: f32,
    eviction_interval_secs: u64,
    max_tree_size: usize,
    load_monitor_interval_secs: u64,
    least_load_kv_pressure_weight: f64,
    least_load_mean_prefill_tokens: u32,
    least_load_default_throughput: f64,
    chars_per_token: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            cache_threshold: 0.3,
            balance_abs_threshold: 64,
            balance_rel_threshold: 1.5,
            eviction_interval_secs: 120,
            max_tree_size: 1 << 26,
            load_monitor_interval_secs: 10,
            least_load_kv_pressure_weight: 0.15,
            least_load_mean_prefill_tokens: 1024,
            least_load_default_throughput: 2000.0,
            chars_per_token: 4,
        }
    }
}

struct State {
    tree: Tree,
    sweep: Sweep,
    selector: Selector,
}

struct CacheAware {
    cache_threshold: f32,
    gate: Gate,
    /// `maxTreeSize` in the tree's symbols.
    max_tree_symbols: usize,
    mean_prefill_tokens: u64,
    seed: u64,
    clock: Arc<dyn Clock>,
    feed: Arc<EngineFeed>,
    state: Mutex<State>,
}

impl CacheAware {
    /// A node's stable, arbitrary order of its holders.
    fn rank(&self, salt: u64, t: EndpointId) -> u64 {
        holder_rank(self.seed, salt, t)
    }

    fn evict_if_due(&self, state: &mut State, now: u64) {
        for _ in 0..state.sweep.due(now) {
            state.tree.evict_total_by_size(self.max_tree_symbols);
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
        let poll = self.feed.last_load_poll();
        let chosen = {
            let mut state = self.state.lock();
            self.evict_if_due(&mut state, now);
            if let Some(poll) = &poll {
                state.selector.apply_poll(poll);
            }
            let (matched, holders) =
                state
                    .tree
                    .prefix_match_holders(&text, MATCHED_TENANTS_CAP, |salt, t| self.rank(salt, t));
            let rate = if text.is_empty() {
                0.0
            } else {
                matched as f32 / text.len() as f32
            };
            let holder_idx: Vec<usize> = if rate > self.cache_threshold {
                holders
                    .iter()
                    .filter_map(|h| candidates.iter().position(|e| e.id() == *h))
                    .collect()
            } else {
                Vec::new()
            };
            let finals = self.gate.final_candidates(&loads, &holder_idx);
            let pool: Vec<Candidate> = finals
                .iter()
                .map(|&i| Candidate {
                    id: candidates[i].id(),
                    in_flight: loads[i],
                })
                .collect();
            state
                .selector
                .select(&pool)
                .and_then(|p| finals.get(p).copied())
                .unwrap_or(0)
        };
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
        let mut state = self.state.lock();
        state.tree.insert(&text, picked.id(), now);
        state
            .selector
            .credit(picked.id(), now, self.mean_prefill_tokens);
    }
}

/// Builds the plugin from its config arguments.
pub(crate) fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params: Params = args.parse()?;
    if !(0.0..=1.0).contains(&params.cache_threshold) {
        return Err(PluginError::invalid("cacheThreshold", "must be in [0, 1]"));
    }
    if !params.balance_rel_threshold.is_finite() || params.balance_rel_threshold < 1.0 {
        return Err(PluginError::invalid(
            "balanceRelThreshold",
            "must be a finite number ≥ 1",
        ));
    }
    if params.chars_per_token == 0 {
        return Err(PluginError::invalid("charsPerToken", "must be at least 1"));
    }
    if params.load_monitor_interval_secs == 0 {
        return Err(PluginError::invalid(
            "loadMonitorIntervalSecs",
            "must be at least 1",
        ));
    }
    if !params.least_load_kv_pressure_weight.is_finite()
        || params.least_load_kv_pressure_weight < 0.0
    {
        return Err(PluginError::invalid(
            "leastLoadKvPressureWeight",
            "must be a finite number ≥ 0",
        ));
    }
    if !params.least_load_default_throughput.is_finite()
        || params.least_load_default_throughput <= 0.0
    {
        return Err(PluginError::invalid(
            "leastLoadDefaultThroughput",
            "must be a finite number > 0",
        ));
    }
    let interval_ns = params.eviction_interval_secs.saturating_mul(1_000_000_000);
    let feed = EngineFeed::from_resources(args.resources);
    feed.poll_loads_every(
        params
            .load_monitor_interval_secs
            .saturating_mul(1_000_000_000),
    );
    let mean_prefill_tokens = params.least_load_mean_prefill_tokens.max(1);
    let knobs = Knobs {
        kv_pressure_weight: params.least_load_kv_pressure_weight,
        mean_prefill_tokens,
        default_throughput: params.least_load_default_throughput,
    };
    let plugin = Arc::new(CacheAware {
        cache_threshold: params.cache_threshold,
        gate: Gate {
            balance_abs_threshold: params.balance_abs_threshold,
            balance_rel_threshold: params.balance_rel_threshold,
        },
        max_tree_symbols: params.max_tree_size / params.chars_per_token,
        mean_prefill_tokens: u64::from(mean_prefill_tokens),
        seed: args.seed,
        clock: Arc::clone(args.clock),
        feed,
        state: Mutex::new(State {
            tree: Tree::default(),
            sweep: Sweep::new(args.clock.now().as_nanos(), interval_ns),
            selector: Selector::new(knobs, args.seed),
        }),
    });
    Ok(PluginInstance::scorer(plugin.clone()).with_pick_hook(plugin))
}
