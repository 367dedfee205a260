//! [`LatencyProducer`]: the in-process `predicted-latency-producer`. It owns a
//! [`LatencyModel`], predicts every candidate's TTFT and TPOT for the current request once per
//! cycle, judges them against the request's [`Objectives`], and learns from the scheduler's
//! own finished requests.
//!
//! **Per cycle** ([`LatencyProducer::produce`]): the first consumer that asks (the
//! `latency-slo-admitter`, the `slo-headroom-tier-filter`, the `latency-scorer`) makes the
//! producer compute the request's prefix match through the config's prefix producer (if it
//! has one, so the uncached tokens are known), read each candidate's [`LatencyFeatures`], and
//! leave a [`LatencyPredictions`] in the cycle; later consumers, and candidates already
//! predicted, reuse it. Each candidate's predicted TTFT (and TPOT, in streaming mode) is shown
//! in the pick's breakdown as `<name>/ttft_ms` and `<name>/tpot_ms`. Until the model is ready
//! (see [`LatencyModel`]) there are no predictions, and every consumer falls back.
//!
//! **Judging**, as upstream: the TTFT is valid when under the request's TTFT objective
//! (headroom `objective − predicted`). In streaming mode the TPOT is judged against
//! `tpotObjective × sloBufferFactor`, lowered to the tightest TPOT objective of the requests
//! this producer has running on that candidate (× the same factor), so a new request does not
//! break a running one's objective. Out of streaming mode, on an endpoint whose
//! `endpointRoleLabel` label is `prefill`, or while the TPOT model is not ready, the TPOT is
//! not judged (valid, headroom 0). A request without any objective is measured against 0, as
//! upstream (every headroom is `−predicted`, which ranks by predicted latency). One
//! difference: a request that carries only one of the two objectives is not judged on the
//! other (upstream measures the missing one against 0, so a request with only a TTFT objective
//! could never be predicted to meet it in streaming mode).
//!
//! **Learning**: the pick keeps the picked candidate's features (bounded by `maxTracked`;
//! entries older than `contextTTL` make room); a successful request that was not moved to a
//! fallback teaches the model. In streaming mode the TTFT is the first token's time and the
//! TPOT the rest of the answer over its tokens; otherwise, as upstream, the "TTFT" learned is
//! the whole request's latency and no TPOT is learned.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ahash::AHashMap;
use parking_lot::Mutex;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::completion::{CompletedRequest, Completion, CompletionHook};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId};
use shepherd_scheduler_core::plugin::{CachedPrefix, CycleState, PickHook};

use super::judge::Judge;
use super::prediction_info::{PredictionTable, Produced};
use super::request_predictor::RequestPredictor;
use super::{
    LatencyFeatures, LatencyModel, LatencyModelParameters, LatencyPredictionInfo,
    LatencyPredictions, MAX_AGE_NANOS, Objectives, RawFeatures,
};
use crate::producers::PrefixProducer;
use crate::producers::link::ProducerLink;

/// How a [`LatencyProducer`] judges and learns (validated by the plugin's factory).
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyProducerSettings {
    /// Multiplier of the TPOT objective.
    pub slo_buffer_factor: f64,
    /// TTFT at the first token and TPOT learned and judged (else end-to-end latency only).
    pub streaming_mode: bool,
    /// Label whose value `prefill` marks a prefill-only endpoint (TPOT not judged there).
    pub endpoint_role_label: Option<String>,
    /// Whether predictions are made at all (`false`: learn only).
    pub predict_in_produce: bool,
    /// Most requests in flight whose features are kept.
    pub max_tracked: usize,
    /// Age after which a kept request's features may be dropped to make room.
    pub context_ttl: Duration,
    /// The model's parameters.
    pub model: LatencyModelParameters,
}

impl Default for LatencyProducerSettings {
    fn default() -> Self {
        LatencyProducerSettings {
            slo_buffer_factor: 1.0,
            streaming_mode: false,
            endpoint_role_label: None,
            predict_in_produce: true,
            max_tracked: 1 << 16,
            context_ttl: Duration::from_secs(300),
            model: LatencyModelParameters::default(),
        }
    }
}

/// A picked request's learning context.
#[derive(Debug, Clone, Copy)]
struct Tracked {
    features: LatencyFeatures,
    endpoint: EndpointId,
    /// Its TPOT objective, counted on `endpoint` while it runs (streaming mode only).
    tpot_objective: Option<f64>,
    at: Timestamp,
}

#[derive(Debug, Default)]
struct Tracking {
    requests: AHashMap<String, Tracked>,
    /// TPOT objectives of the tracked requests running on each endpoint.
    tpot_objectives: AHashMap<EndpointId, Vec<f64>>,
}

impl Tracking {
    fn min_tpot_objective(&self, endpoint: EndpointId) -> Option<f64> {
        self.tpot_objectives
            .get(&endpoint)
            .and_then(|v| v.iter().copied().reduce(f64::min))
    }

    fn remove(&mut self, id: &str) -> Option<Tracked> {
        let tracked = self.requests.remove(id)?;
        if let Some(objective) = tracked.tpot_objective
            && let Some(list) = self.tpot_objectives.get_mut(&tracked.endpoint)
        {
            if let Some(i) = list.iter().position(|&o| o == objective) {
                list.swap_remove(i);
            }
            if list.is_empty() {
                self.tpot_objectives.remove(&tracked.endpoint);
            }
        }
        Some(tracked)
    }

    /// Drops the entries older than `ttl` at `now` (requests whose completion never came).
    fn expire(&mut self, now: Timestamp, ttl: Duration) {
        let old: Vec<String> = self
            .requests
            .iter()
            .filter(|(_, t)| now.saturating_since(t.at) > ttl)
            .map(|(id, _)| id.clone())
            .collect();
        for id in old {
            self.remove(&id);
        }
    }
}

/// The `predicted-latency-producer` (see the [module docs](self)).
#[derive(Debug)]
pub struct LatencyProducer {
    settings: LatencyProducerSettings,
    model: LatencyModel,
    prefix: Option<ProducerLink>,
    prefix_resolved: OnceLock<Option<Arc<PrefixProducer>>>,
    tracking: Mutex<Tracking>,
    /// The breakdown's columns: the TTFT alone, and TTFT and TPOT.
    ttft_column: Arc<[Arc<str>]>,
    both_columns: Arc<[Arc<str>]>,
}

impl LatencyProducer {
    /// A producer named `name` (the breakdown's column prefix), reading the prefix match of
    /// the producer `prefix` finds, if any.
    pub(crate) fn new(
        name: &str,
        settings: LatencyProducerSettings,
        prefix: Option<ProducerLink>,
    ) -> Self {
        let ttft: Arc<str> = Arc::from(format!("{name}/ttft_ms"));
        LatencyProducer {
            model: LatencyModel::new(settings.model),
            settings,
            prefix,
            prefix_resolved: OnceLock::new(),
            tracking: Mutex::new(Tracking::default()),
            ttft_column: Arc::from([Arc::clone(&ttft)]),
            both_columns: Arc::from([ttft, Arc::from(format!("{name}/tpot_ms"))]),
        }
    }

    /// A producer with `settings` and no prefix producer (every prompt token counts as
    /// uncached unless a prefix scorer ran earlier in the cycle).
    pub fn standalone(name: &str, settings: LatencyProducerSettings) -> Self {
        LatencyProducer::new(name, settings, None)
    }

    /// Its settings.
    pub fn settings(&self) -> &LatencyProducerSettings {
        &self.settings
    }

    /// The model (for reports: its errors, its predictions).
    pub fn model(&self) -> &LatencyModel {
        &self.model
    }

    fn key(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// The predictions this producer left in `cycle` (without computing any).
    pub fn find<'c>(&self, cycle: &'c CycleState<'_>) -> Option<&'c LatencyPredictions> {
        let key = self.key();
        cycle.extensions.get::<Produced>().and_then(|p| p.find(key))
    }

    /// Every candidate's predictions for the request of `cycle`: computed for candidates not
    /// predicted yet this cycle, reused for the others. `None` while the model is not ready
    /// or when `predictInProduce` is off.
    pub fn produce<'c>(
        &self,
        cycle: &'c mut CycleState<'_>,
        candidates: &[&Arc<Endpoint>],
    ) -> Option<&'c LatencyPredictions> {
        if !self.settings.predict_in_produce {
            return None;
        }
        let predictor = self.model.predictor();
        if !predictor.ttft_ready() {
            return None;
        }
        if let Some(prefix) = self.prefix_producer() {
            prefix.produce(cycle);
        }
        let missing: Cow<'_, [&Arc<Endpoint>]> = match self.find(cycle) {
            Some(done) => Cow::Owned(done.missing(candidates)),
            None => Cow::Borrowed(candidates),
        };
        if !missing.is_empty() {
            let judged = self.judge_all(cycle, &predictor, &missing);
            let key = self.key();
            if cycle.extensions.get::<Produced>().is_none() {
                cycle.extensions.insert(Produced::default());
            }
            // The breakdown reads the predictions themselves (no copy per pick).
            let columns = Arc::clone(if self.judges_tpot(&predictor) {
                &self.both_columns
            } else {
                &self.ttft_column
            });
            let produced = cycle.extensions.get_mut::<Produced>()?;
            let table = match produced.find_mut(key) {
                Some(entry) => {
                    entry.extend(judged, columns);
                    Arc::clone(&entry.table)
                }
                None => {
                    let table = Arc::new(PredictionTable {
                        columns,
                        by_endpoint: judged,
                    });
                    produced.push(LatencyPredictions {
                        key,
                        table: Arc::clone(&table),
                    });
                    table
                }
            };
            cycle.annotations.record_table(table);
        }
        self.find(cycle)
    }

    /// Predicts and judges each of `endpoints` for the request of `cycle`.
    fn judge_all(
        &self,
        cycle: &CycleState<'_>,
        predictor: &super::Predictor,
        endpoints: &[&Arc<Endpoint>],
    ) -> Vec<(EndpointId, LatencyPredictionInfo)> {
        let reader = FeatureReader::of(cycle);
        let Some(request) = predictor.for_request(reader.prompt) else {
            return Vec::new();
        };
        let judge = Judge::new(
            &Objectives::of(cycle.request),
            self.settings.slo_buffer_factor,
        );
        if !self.judges_tpot(predictor) {
            return judge_each::<false>(&reader, &request, &judge, endpoints, |_| (false, None));
        }
        // The TPOT objectives of running requests matter only where the TPOT is judged.
        let tracking = Some(self.tracking.lock()).filter(|t| !t.tpot_objectives.is_empty());
        let role = self.settings.endpoint_role_label.as_deref();
        if tracking.is_none() && role.is_none() {
            // Every candidate judged alike (the common case: one loop without lookups).
            return judge_each::<true>(&reader, &request, &judge, endpoints, |_| (true, None));
        }
        judge_each::<true>(&reader, &request, &judge, endpoints, |ep| {
            // Not judged on a prefill-only endpoint.
            let here = !role.is_some_and(|label| is_prefill_only(ep, label));
            let min_running = tracking
                .as_ref()
                .and_then(|t| t.min_tpot_objective(ep.id()));
            (here, min_running)
        })
    }

    fn judges_tpot(&self, predictor: &super::Predictor) -> bool {
        self.settings.streaming_mode && predictor.tpot_ready()
    }

    fn prefix_producer(&self) -> Option<&Arc<PrefixProducer>> {
        self.prefix_resolved
            .get_or_init(|| self.prefix.as_ref().and_then(ProducerLink::find_existing))
            .as_ref()
    }

    /// Keeps the picked candidate's features for learning when the request finishes (called
    /// by every consumer's pick hook: once per request is kept).
    pub fn record_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        let features = FeatureReader::of(cycle).read(picked);
        let tpot_objective = if self.settings.streaming_mode {
            Objectives::of(cycle.request).tpot_ms
        } else {
            None
        };
        let mut tracking = self.tracking.lock();
        if tracking.requests.contains_key(cycle.request_id()) {
            return;
        }
        if tracking.requests.len() >= self.settings.max_tracked {
            tracking.expire(cycle.now, self.settings.context_ttl);
            if tracking.requests.len() >= self.settings.max_tracked {
                return;
            }
        }
        tracking.requests.insert(
            cycle.request_id().to_owned(),
            Tracked {
                features,
                endpoint: picked.id(),
                tpot_objective,
                at: cycle.now,
            },
        );
        if let Some(objective) = tpot_objective {
            tracking
                .tpot_objectives
                .entry(picked.id())
                .or_default()
                .push(objective);
        }
    }

    /// Learns a finished request (called by every consumer's completion hook: the first call
    /// learns, later ones find nothing).
    pub fn record_completion(&self, request: &CompletedRequest<'_>, completion: &Completion) {
        let Some(tracked) = self.tracking.lock().remove(request.id) else {
            return;
        };
        if !completion.is_success() || request.used_fallback {
            return;
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        if !self.settings.streaming_mode {
            let e2e = ms(request.finished_at.saturating_since(request.scheduled_at));
            self.model.learn(&tracked.features, Some(e2e), None);
            return;
        }
        let Some(first) = request.first_token_at else {
            return;
        };
        let ttft = ms(first.saturating_since(request.scheduled_at));
        let tpot = completion
            .usage
            .map(|u| u.completion_tokens)
            .filter(|&n| n > 1)
            .map(|n| ms(request.finished_at.saturating_since(first)) / (n - 1) as f64);
        self.model.learn(&tracked.features, Some(ttft), tpot);
    }

    /// Requests whose features are kept.
    pub fn tracked(&self) -> usize {
        self.tracking.lock().requests.len()
    }
}

impl PickHook for LatencyProducer {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        self.record_pick(cycle, picked);
    }
}

impl CompletionHook for LatencyProducer {
    fn on_complete(&self, request: &CompletedRequest<'_>, completion: &Completion) {
        self.record_completion(request, completion);
    }
}

/// Predicts (the TPOT too with `TPOT`) and judges each of `endpoints`; `per_candidate`
/// says of each whether its TPOT is judged, and the tightest TPOT objective running there.
#[inline(always)]
fn judge_each<const TPOT: bool>(
    reader: &FeatureReader<'_>,
    request: &RequestPredictor,
    judge: &Judge,
    endpoints: &[&Arc<Endpoint>],
    per_candidate: impl Fn(&Endpoint) -> (bool, Option<f64>),
) -> Vec<(EndpointId, LatencyPredictionInfo)> {
    endpoints
        .iter()
        .map(|ep| {
            let (raw, dispatched) = reader.raw(ep);
            let [ttft, tpot] = request.predict::<TPOT>(&raw);
            let (tpot_here, min_running) = per_candidate(ep);
            let tpot = (TPOT && tpot_here).then_some(tpot);
            (ep.id(), judge.info(ttft, tpot, min_running, dispatched))
        })
        .collect()
}

/// Whether `endpoint`'s `label` says it only prefills.
fn is_prefill_only(endpoint: &Endpoint, label: &str) -> bool {
    endpoint.labels().get(label).is_some_and(|v| v == "prefill")
}

/// What the model reads about each candidate for the request of one cycle: the cycle's
/// figures (prompt tokens, cached-prefix estimates, time) looked up once.
#[derive(Debug, Clone, Copy)]
pub struct FeatureReader<'c> {
    prompt: u64,
    cached: Option<&'c CachedPrefix>,
    now: Timestamp,
}

impl<'c> FeatureReader<'c> {
    /// The reader for the request of `cycle`.
    pub fn of(cycle: &'c CycleState<'_>) -> Self {
        FeatureReader {
            prompt: cycle.request.prompt.estimated_tokens() as u64,
            cached: cycle.extensions.get::<CachedPrefix>(),
            now: cycle.now,
        }
    }

    /// `endpoint`'s figures, and the requests this scheduler itself has in flight there (the
    /// scorer's "dispatched"): every counter read once.
    #[inline]
    pub fn raw(&self, endpoint: &Endpoint) -> (RawFeatures, u64) {
        let uncached = self.cached.map_or(self.prompt, |c| {
            c.uncached_tokens(endpoint.id(), self.prompt)
        });
        let metrics = endpoint.load_metrics();
        // Never scraped: as old as the model takes.
        let metrics_age_nanos = metrics.scraped_at.map_or(MAX_AGE_NANOS, |at| {
            self.now.as_nanos().saturating_sub(at.as_nanos())
        });
        let pending = endpoint.pending_prefill_tokens();
        // The clock sums are read only when some prefill is pending.
        let pending_age_nanos = if pending == 0 {
            0
        } else {
            endpoint.pending_prefill_elapsed_nanos(self.now)
        };
        let dispatched = endpoint.in_flight_requests();
        let raw = RawFeatures {
            prompt_tokens: self.prompt,
            uncached_tokens: uncached,
            pending_prefill_tokens: pending,
            pending_prefill_age_nanos: pending_age_nanos,
            waiting: metrics.waiting,
            running: metrics.running,
            in_flight: dispatched.saturating_add(endpoint.peer_in_flight_requests()),
            kv_utilization: metrics.kv_utilization,
            metrics_age_nanos,
        };
        (raw, dispatched)
    }

    /// `endpoint`'s features.
    pub fn read(&self, endpoint: &Endpoint) -> LatencyFeatures {
        LatencyFeatures::from(self.raw(endpoint).0)
    }
}
