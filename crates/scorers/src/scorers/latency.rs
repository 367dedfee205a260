//! `latency-scorer`: ranks candidates by the TTFT (and, weighted, TPOT) a [`LatencyModel`]
//! learned online predicts for this request on each of them.
//!
//! At every pick the scorer reads each candidate's features ([`LatencyFeatures`]: the
//! prompt's tokens and the part the candidate is not believed to cache — from the profile's
//! prefix scorer, so list it after `prefix-cache-scorer` —, the prefill work this scheduler
//! has pending there, its scraped waiting and running requests and KV use, this scheduler's
//! requests in flight there) and asks the model. The cost of a candidate is
//! `TTFT + tpotWeight × TPOT`; scores go from 1 for the cheapest to 0 for the dearest,
//! linearly (all equal: all 1). When the model is not ready (cold start, or its recent error
//! above `maxError`) every candidate scores [`Score::NEUTRAL`] and the other scorers decide.
//!
//! The model learns from the scheduler's own requests: the pick hook keeps the picked
//! candidate's features (bounded by `maxTracked`), the completion hook turns a successful
//! request's first-token and finish times into its TTFT and TPOT and learns them. It is a
//! [`Category::Distribution`] scorer (it prefers the candidate that would answer soonest,
//! whatever it caches).
//!
//! ## Parameters
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `tpotWeight` | 0 | weight of the predicted TPOT (ms) in the cost, beside the TTFT (ms); e.g. the expected output tokens |
//! | `window` | 4096 | finished requests kept for fitting |
//! | `minSamples` | 200 | samples before the model is used |
//! | `maxError` | 0.3 | largest recent MAPE at which it is used |
//! | `maxTracked` | 65536 | most requests in flight whose features are kept |

use std::sync::Arc;

use ahash::AHashMap;
use parking_lot::Mutex;
use serde::Deserialize;
use shepherd_scheduler_core::completion::{CompletedRequest, Completion, CompletionHook};
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{
    CachedPrefix, Category, CycleState, PickHook, PluginInstance, Score, Scorer,
};

use crate::error::ParameterError;
use crate::latency::{LatencyFeatures, LatencyModel, LatencyModelParameters};

/// Registry type name.
pub const TYPE_NAME: &str = "latency-scorer";

/// The `latency-scorer` parameters (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LatencyScorerParameters {
    /// Weight of the predicted TPOT in the cost.
    pub tpot_weight: f64,
    /// Finished requests kept for fitting.
    pub window: usize,
    /// Samples before the model is used.
    pub min_samples: usize,
    /// Largest recent MAPE at which the model is used.
    pub max_error: f64,
    /// Most requests in flight whose features are kept.
    pub max_tracked: usize,
}

impl Default for LatencyScorerParameters {
    fn default() -> Self {
        let model = LatencyModelParameters::default();
        LatencyScorerParameters {
            tpot_weight: 0.0,
            window: model.window,
            min_samples: model.min_samples,
            max_error: model.max_error,
            max_tracked: 1 << 16,
        }
    }
}

/// Scores candidates by predicted latency (see the module docs).
#[derive(Debug)]
pub struct LatencyScorer {
    params: LatencyScorerParameters,
    model: LatencyModel,
    tpot_weight: f64,
    max_tracked: usize,
    picked: Mutex<AHashMap<String, LatencyFeatures>>,
}

impl LatencyScorer {
    /// A scorer with these parameters, or why they are invalid.
    pub fn new(params: LatencyScorerParameters) -> Result<Self, ParameterError> {
        let tpot_weight =
            ParameterError::require_range("tpotWeight", params.tpot_weight, 0.0, 1e9)?;
        let window = ParameterError::require_positive("window", params.window)?;
        let min_samples = ParameterError::require_positive("minSamples", params.min_samples)?;
        let max_error = ParameterError::require_range("maxError", params.max_error, 0.0, 1e9)?;
        let max_tracked = ParameterError::require_positive("maxTracked", params.max_tracked)?;
        Ok(LatencyScorer {
            params,
            model: LatencyModel::new(LatencyModelParameters {
                window,
                min_samples,
                max_error,
                ..LatencyModelParameters::default()
            }),
            tpot_weight,
            max_tracked,
            picked: Mutex::new(AHashMap::new()),
        })
    }

    /// The model (for reports: its recent errors, its predictions).
    pub fn model(&self) -> &LatencyModel {
        &self.model
    }

    /// What the model reads about `endpoint` for the request of `cycle`.
    pub fn features(cycle: &CycleState<'_>, endpoint: &Endpoint) -> LatencyFeatures {
        let prompt = cycle.request.prompt.estimated_tokens() as u64;
        Self::features_with(prompt, cycle.extensions.get::<CachedPrefix>(), endpoint)
    }

    /// [`LatencyScorer::features`] with the prompt's tokens and the cycle's cached-prefix
    /// estimates already looked up.
    fn features_with(
        prompt: u64,
        cached: Option<&CachedPrefix>,
        endpoint: &Endpoint,
    ) -> LatencyFeatures {
        let uncached = cached.map_or(prompt, |c| c.uncached_tokens(endpoint.id(), prompt));
        let metrics = endpoint.load_metrics();
        LatencyFeatures {
            prompt_tokens: prompt as f64,
            uncached_tokens: uncached as f64,
            pending_prefill_tokens: endpoint.pending_prefill_tokens() as f64,
            waiting: f64::from(metrics.waiting),
            running: f64::from(metrics.running),
            in_flight: endpoint.total_in_flight_requests() as f64,
            kv_utilization: metrics.kv_utilization,
        }
    }
}

impl Default for LatencyScorer {
    fn default() -> Self {
        LatencyScorer {
            params: LatencyScorerParameters::default(),
            model: LatencyModel::default(),
            tpot_weight: 0.0,
            max_tracked: 1 << 16,
            picked: Mutex::new(AHashMap::new()),
        }
    }
}

impl Scorer for LatencyScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let predictor = self.model.predictor();
        let with_tpot = self.tpot_weight > 0.0;
        if !predictor.ttft_ready() || (with_tpot && !predictor.tpot_ready()) {
            out.iter_mut().for_each(|s| *s = Score::NEUTRAL);
            return;
        }
        let prompt = cycle.request.prompt.estimated_tokens() as u64;
        let cached = cycle.extensions.get::<CachedPrefix>();
        // Costs first, in the output slots; then scaled to scores.
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for (slot, ep) in out.iter_mut().zip(candidates) {
            let features = Self::features_with(prompt, cached, ep);
            let cost = if with_tpot {
                let p = predictor.predict(&features);
                p.ttft_ms.unwrap_or(0.0) + self.tpot_weight * p.tpot_ms.unwrap_or(0.0)
            } else {
                predictor.ttft_ms(&features).unwrap_or(0.0)
            };
            lo = lo.min(cost);
            hi = hi.max(cost);
            slot.value = cost;
        }
        for slot in out.iter_mut() {
            let v = if hi > lo {
                1.0 - (slot.value - lo) / (hi - lo)
            } else {
                1.0
            };
            *slot = Score::new(v);
        }
    }
}

impl PickHook for LatencyScorer {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        let features = Self::features(cycle, picked);
        let mut map = self.picked.lock();
        if map.len() < self.max_tracked {
            map.insert(cycle.request_id().to_owned(), features);
        }
    }
}

impl CompletionHook for LatencyScorer {
    fn on_complete(&self, request: &CompletedRequest<'_>, completion: &Completion) {
        let Some(features) = self.picked.lock().remove(request.id) else {
            return;
        };
        if !completion.is_success() || request.used_fallback {
            return;
        }
        let Some(first) = request.first_token_at else {
            return;
        };
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let ttft = ms(first.saturating_since(request.scheduled_at));
        let tpot = completion
            .usage
            .map(|u| u.completion_tokens)
            .filter(|&n| n > 1)
            .map(|n| ms(request.finished_at.saturating_since(first)) / (n - 1) as f64);
        self.model.learn(&features, Some(ttft), tpot);
    }
}

/// Builds a `latency-scorer`, kept in the shared resources under the plugin's name (so a
/// report can read its model's errors); a reload with the same parameters keeps what the
/// model learned.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params = args.parse::<LatencyScorerParameters>()?;
    let scorer = match args.resources.get::<LatencyScorer>(args.name) {
        Some(old) if old.params == params => old,
        _ => Arc::new(LatencyScorer::new(params)?),
    };
    args.resources.insert(args.name, Arc::clone(&scorer));
    Ok(PluginInstance::scorer(scorer.clone())
        .with_pick_hook(scorer.clone())
        .with_completion_hook(scorer))
}
