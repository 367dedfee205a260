//! `dynamo-kv-cost-scorer`: NVIDIA Dynamo's KV-router cost, reimplemented from its published
//! description, as a sim-local plugin.
//!
//! For each worker: `cost = overlap_score_weight × prefill_blocks + decode_blocks`, where
//! `prefill_blocks` are the request's blocks the worker does not already hold (overlap
//! credited, from the router's own approximate index of what it sent where) and
//! `decode_blocks` are the KV blocks of the requests the router has active there. The lowest
//! cost wins (temperature 0): those workers score 1, the others 0.

use std::sync::Arc;

use ahash::AHashMap;
use parking_lot::Mutex;
use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId};
use shepherd_scheduler_core::plugin::{
    Category, CompletedRequest, Completion, CompletionHook, CycleState, PickHook, PluginInstance,
    Score, Scorer,
};

use super::peer_index::{PeerIndex, prompt_blocks};

/// Registry type name.
pub(crate) const TYPE_NAME: &str = "dynamo-kv-cost-scorer";

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct Params {
    overlap_score_weight: f64,
    block_size: usize,
    max_index_blocks: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            overlap_score_weight: 1.0,
            block_size: 16,
            max_index_blocks: 1 << 20,
        }
    }
}

#[derive(Default)]
struct State {
    active_blocks: AHashMap<EndpointId, u64>,
    requests: AHashMap<String, (EndpointId, u64)>,
}

struct Blocks(Vec<u64>);

struct KvCost {
    params: Params,
    index: Mutex<PeerIndex>,
    state: Mutex<State>,
}

impl Scorer for KvCost {
    fn category(&self) -> Category {
        Category::Balance
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let blocks = prompt_blocks(&cycle.request.prompt, self.params.block_size);
        let total = cycle
            .request
            .prompt
            .estimated_tokens()
            .div_ceil(self.params.block_size.max(1)) as f64;
        let costs: Vec<f64> = {
            let index = self.index.lock();
            let state = self.state.lock();
            candidates
                .iter()
                .map(|e| {
                    let overlap = index.matched(e.id(), &blocks) as f64;
                    let decode = state.active_blocks.get(&e.id()).copied().unwrap_or(0) as f64;
                    self.params.overlap_score_weight * (total - overlap).max(0.0) + decode
                })
                .collect()
        };
        let best = costs.iter().copied().fold(f64::INFINITY, f64::min);
        for (slot, c) in out.iter_mut().zip(&costs) {
            *slot = Score::new(if *c <= best { 1.0 } else { 0.0 });
        }
        cycle.extensions.insert(Blocks(blocks));
    }
}

impl PickHook for KvCost {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        let blocks = match cycle.extensions.remove::<Blocks>() {
            Some(b) => b.0,
            None => prompt_blocks(&cycle.request.prompt, self.params.block_size),
        };
        self.index.lock().insert(picked.id(), &blocks);
        let request = cycle.request;
        let size = (request.prompt.estimated_tokens() + request.max_tokens.unwrap_or(0) as usize)
            .div_ceil(self.params.block_size.max(1)) as u64;
        let mut state = self.state.lock();
        *state.active_blocks.entry(picked.id()).or_default() += size;
        state
            .requests
            .insert(cycle.request_id().to_string(), (picked.id(), size));
    }
}

impl CompletionHook for KvCost {
    fn on_complete(&self, request: &CompletedRequest<'_>, _: &Completion) {
        let mut state = self.state.lock();
        if let Some((endpoint, size)) = state.requests.remove(request.id)
            && let Some(active) = state.active_blocks.get_mut(&endpoint)
        {
            *active = active.saturating_sub(size);
        }
    }
}

/// Builds the plugin from its config arguments.
pub(crate) fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params: Params = args.parse()?;
    let plugin = Arc::new(KvCost {
        index: Mutex::new(PeerIndex::new(params.max_index_blocks)),
        params,
        state: Mutex::new(State::default()),
    });
    Ok(PluginInstance::scorer(plugin.clone())
        .with_pick_hook(plugin.clone())
        .with_completion_hook(plugin))
}
