//! `dynamo-kv-cost-scorer`: NVIDIA Dynamo's KV router (`--router-mode kv`) as
//! `dynamo-kv-router` 1.6.1 routes an aggregated pool with its launch defaults, as a sim-local
//! plugin. `docs/peers.md` lists what is modelled, from which upstream file, and what is not.
//!
//! Per request and worker, [`cost::worker_logit`] prices the prefill still to do there
//! (pending prefill plus this prompt, minus the blocks the worker caches) and the KV blocks
//! active there once this prompt joins them ([`sequences::ActiveSequences`], shared prompt
//! blocks counted once). The workers of lowest cost score 1, every other 0; with
//! `max-score-picker` that is upstream's temperature-0 choice, argmin with uniformly random
//! ties.
//!
//! What the worker caches comes from the engines' KV events, as Dynamo's default KV indexer
//! learns it. With `prefixMatchInfoProducerName` set (`policies/dynamo.yaml`), from that
//! producer: a `precise-prefix-cache-producer` fed by the engines' KV-cache events, delivered
//! with the simulation's event delay (`kvEventDelayMs`, 1 ms, as for Shepherd's precise
//! index). Without it (`policies/dynamo-oracle.yaml`, the `dynamo@oracle` row), the runner publishes each server's cached
//! leading prompt blocks in the [`EngineFeed`] before every pick: the events with no delay, a
//! bound. Either way the runner reports first tokens in the feed, which release a request's
//! pending prefill.
//!
//! Parameters (upstream's `KvRouterConfig` names in camelCase, upstream defaults):
//! `overlapScoreCredit` 1.0, `overlapScoreCreditDecay` 0.0, `prefillLoadScale` 1.0,
//! `decodeActiveRequestWeight` 0.0, `routerTemperature` 0.0 (only 0 is modelled),
//! `blockSize` the engines' KV block size (filled in before each run by
//! [`block_size::follow_engine_block_size`], as Dynamo takes it from the worker's
//! registration; 16 when the plugin is built alone); and the simulator's
//! `prefixMatchInfoProducerName` (default: none, the engines read at pick time).

pub(crate) mod block_size;
pub(crate) mod cost;
pub(crate) mod sequences;
#[cfg(test)]
mod tests;

use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId};
use shepherd_scheduler_core::plugin::{
    CachedPrefix, Category, CompletedRequest, Completion, CompletionHook, CycleState, PickHook,
    PluginInstance, Score, Scorer,
};
use shepherd_scheduler_core::resources::Resources;
use shepherd_scorers::producers::PrefixProducer;

use super::feed::{EngineFeed, FirstTokenListener};
use super::peer_index::prompt_blocks;
use cost::{Weights, WorkerInputs, effective_prefill_tokens, worker_logit};
use sequences::ActiveSequences;

/// Registry type name.
pub(crate) const TYPE_NAME: &str = "dynamo-kv-cost-scorer";

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct Params {
    overlap_score_credit: f64,
    overlap_score_credit_decay: f64,
    prefill_load_scale: f64,
    decode_active_request_weight: f64,
    router_temperature: f64,
    block_size: usize,
    prefix_match_info_producer_name: Option<String>,
}

impl Default for Params {
    fn default() -> Self {
        let w = Weights::default();
        Params {
            overlap_score_credit: w.overlap_score_credit,
            overlap_score_credit_decay: w.overlap_score_credit_decay,
            prefill_load_scale: w.prefill_load_scale,
            decode_active_request_weight: w.decode_active_request_weight,
            router_temperature: 0.0,
            block_size: w.block_size as usize,
            prefix_match_info_producer_name: None,
        }
    }
}

impl Params {
    fn weights(&self) -> Result<Weights, PluginError> {
        let non_negative = |name: &str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(PluginError::invalid(name, "must be a finite number ≥ 0"))
            }
        };
        if self.router_temperature != 0.0 {
            return Err(PluginError::invalid(
                "routerTemperature",
                "only 0 (argmin, upstream's default) is modelled",
            ));
        }
        if self.block_size == 0 {
            return Err(PluginError::invalid("blockSize", "must be at least 1"));
        }
        Ok(Weights {
            overlap_score_credit: non_negative("overlapScoreCredit", self.overlap_score_credit)?,
            overlap_score_credit_decay: non_negative(
                "overlapScoreCreditDecay",
                self.overlap_score_credit_decay,
            )?,
            prefill_load_scale: non_negative("prefillLoadScale", self.prefill_load_scale)?,
            decode_active_request_weight: non_negative(
                "decodeActiveRequestWeight",
                self.decode_active_request_weight,
            )?,
            block_size: self.block_size as u64,
        })
    }
}

/// What the score step learned, for the pick hook.
struct Routed {
    blocks: Vec<u64>,
    isl_tokens: u64,
    overlaps: Vec<(EndpointId, u64)>,
}

/// Where a worker's cached prompt blocks come from.
enum Overlap {
    /// The engines' prefix caches, looked up by the runner before each pick (what KV events
    /// report, without their delay: a bound on Dynamo's view).
    Engines,
    /// A prefix producer's index (a `precise-prefix-cache-producer` fed by the engines' KV
    /// events, with the simulation's event delay), found by name on the first pick.
    Producer {
        resources: Arc<Resources>,
        name: String,
        resolved: OnceLock<Option<Arc<PrefixProducer>>>,
    },
}

struct KvRouter {
    weights: Weights,
    feed: Arc<EngineFeed>,
    overlap: Overlap,
    sequences: Mutex<ActiveSequences>,
}

impl KvRouter {
    /// Each candidate's cached leading prompt blocks, by the configured [`Overlap`] source.
    fn cached_blocks(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>]) -> Vec<u64> {
        match &self.overlap {
            Overlap::Engines => {
                let id = cycle.request_id();
                candidates
                    .iter()
                    .map(|e| u64::from(self.feed.cached_blocks(id, e.id())))
                    .collect()
            }
            Overlap::Producer {
                resources,
                name,
                resolved,
            } => {
                let producer = resolved.get_or_init(|| resources.get::<PrefixProducer>(name));
                if let Some(producer) = producer {
                    // Publishes every endpoint's cached tokens as `CachedPrefix`.
                    let _ = producer.produce(cycle);
                }
                let cached = cycle.extensions.get::<CachedPrefix>();
                let bs = self.weights.block_size.max(1);
                candidates
                    .iter()
                    .map(|e| cached.map_or(0, |c| c.cached_tokens(e.id()) / bs))
                    .collect()
            }
        }
    }
}

impl Scorer for KvRouter {
    fn category(&self) -> Category {
        Category::Balance
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let bs = self.weights.block_size as usize;
        let blocks = prompt_blocks(&cycle.request.prompt, bs);
        let isl_tokens = cycle.request.prompt.estimated_tokens() as u64;
        let cached_blocks = self.cached_blocks(cycle, candidates);
        let inputs: Vec<WorkerInputs> = {
            let sequences = self.sequences.lock();
            candidates
                .iter()
                .zip(&cached_blocks)
                .map(|(e, &cached)| {
                    let p = sequences.project(e.id(), &blocks);
                    WorkerInputs {
                        active_prefill_tokens: p.active_prefill_tokens,
                        potential_decode_blocks: p.potential_decode_blocks,
                        active_requests: p.active_requests,
                        overlap_blocks: cached.min(blocks.len() as u64),
                    }
                })
                .collect()
        };
        let min_prefill = inputs
            .iter()
            .map(|w| w.active_prefill_tokens)
            .min()
            .unwrap_or(0);
        let costs: Vec<f64> = inputs
            .iter()
            .map(|w| worker_logit(&self.weights, isl_tokens, min_prefill, w))
            .collect();
        let best = costs.iter().copied().fold(f64::INFINITY, f64::min);
        for (slot, c) in out.iter_mut().zip(&costs) {
            *slot = Score::new(if *c <= best { 1.0 } else { 0.0 });
        }
        let overlaps = candidates
            .iter()
            .zip(&inputs)
            .map(|(e, w)| (e.id(), w.overlap_blocks))
            .collect();
        cycle.extensions.insert(Routed {
            blocks,
            isl_tokens,
            overlaps,
        });
    }
}

impl PickHook for KvRouter {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        let routed = cycle
            .extensions
            .remove::<Routed>()
            .unwrap_or_else(|| Routed {
                blocks: prompt_blocks(&cycle.request.prompt, self.weights.block_size as usize),
                isl_tokens: cycle.request.prompt.estimated_tokens() as u64,
                overlaps: Vec::new(),
            });
        let overlap = routed
            .overlaps
            .iter()
            .find(|(e, _)| *e == picked.id())
            .map_or(0, |(_, o)| *o);
        let pending = effective_prefill_tokens(routed.isl_tokens, overlap, self.weights.block_size);
        self.sequences
            .lock()
            .add(cycle.request_id(), picked.id(), routed.blocks, pending);
    }
}

impl CompletionHook for KvRouter {
    fn on_complete(&self, request: &CompletedRequest<'_>, _: &Completion) {
        self.sequences.lock().free(request.id);
    }
}

impl FirstTokenListener for KvRouter {
    fn on_first_token(&self, request_id: &str) {
        self.sequences.lock().prefill_done(request_id);
    }
}

/// Builds the plugin from its config arguments.
pub(crate) fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params: Params = args.parse()?;
    let feed = EngineFeed::from_resources(args.resources);
    let overlap = match &params.prefix_match_info_producer_name {
        Some(name) if name.is_empty() => {
            return Err(PluginError::invalid(
                "prefixMatchInfoProducerName",
                "must name a prefix producer",
            ));
        }
        Some(name) => Overlap::Producer {
            resources: Arc::clone(args.resources),
            name: name.clone(),
            resolved: OnceLock::new(),
        },
        None => Overlap::Engines,
    };
    let reads_engines = matches!(overlap, Overlap::Engines);
    let plugin = Arc::new(KvRouter {
        weights: params.weights()?,
        feed: Arc::clone(&feed),
        overlap,
        sequences: Mutex::new(ActiveSequences::default()),
    });
    let listener: Arc<dyn FirstTokenListener> = plugin.clone();
    feed.listen(Arc::downgrade(&listener) as Weak<dyn FirstTokenListener>);
    if reads_engines {
        feed.read_cached_blocks();
    }
    Ok(PluginInstance::scorer(plugin.clone())
        .with_pick_hook(plugin.clone())
        .with_completion_hook(plugin))
}
