//! The scheduler: runs a profile over the pool and returns a [`Decision`].
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//!
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let profile = Profile::builder("default").build();
//! let scheduler = Scheduler::builder(Arc::clone(&pool)).profile(profile).build().unwrap();
//!
//! let request = InferenceRequest::new("r1", "llama", Prompt::Text("hi".into()));
//! let decision = scheduler.schedule(&request).unwrap();
//! assert_eq!(decision.primary().in_flight_requests(), 1);
//! println!("{}", decision.breakdown);
//! decision.finish(Completion::success(None)); // completion hooks run, counters released
//! ```
//!
//! Before a profile's own filters run, the scheduler narrows the pool to the gateway's subset
//! hint, drops endpoints that are draining or disabled
//! ([`EndpointHealth`](crate::endpoint::EndpointHealth)), and — unless
//! `scheduler.avoidStaleEndpoints` is off — drops endpoints whose metrics are stale while any
//! candidate has fresh ones, instead of scoring them as neutral.

mod builder;
mod candidates;
mod error;
mod observer;
mod profile_select;
pub(crate) mod spare;
mod stages;

use crate::report::AttributeReporter;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use builder::SchedulerBuilder;
pub use error::ScheduleError;
pub use observer::{ProfileOutcome, ScheduleObserver};
pub use profile_select::{DEFAULT_PROFILE_HEADER, DEFAULT_SELECTED_PROFILE, HeaderProfileSelector};

use crate::clock::{Clock, Timestamp};
use crate::completion::{Completer, RequestHandle};
use crate::decision::{Breakdown, Decision};
use crate::disagg::Disaggregation;
use crate::endpoint::{InFlightGuard, MembershipListener, Pool};
use crate::metrics::{BucketHistogram, PLUGIN_TIMING_SAMPLE};
use crate::metrics::{CoreMetrics, MetricsSource, MetricsVisitor, ProfileMetrics};
use crate::plugin::{CachedPrefix, CycleState, Score};
use crate::profile::Profile;
use crate::request::{InferenceRequest, ParserSet};
use crate::resources::Resources;
use crate::rng::PickRng;
use crate::shared::SharedState;
use stages::{Stage, Stages};

/// Per-request options.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScheduleOptions<'a> {
    /// Only these addresses (`ip:port`, or `ip` for any port) may be picked.
    pub subset: Option<&'a [String]>,
    /// Run this profile instead of the default one.
    pub profile: Option<&'a str>,
    /// Score and pick without running pick hooks (nothing is recorded in the prefix index or
    /// session tables) and without counting anything (no pick, nothing in flight): "which
    /// endpoint would serve this?", for explain views and benchmarks.
    pub dry_run: bool,
}

/// Runs scheduling profiles over a pool.
pub struct Scheduler {
    shared: SharedState,
    clock: Arc<dyn Clock>,
    profiles: Vec<Arc<Profile>>,
    profile_metrics: Vec<Arc<ProfileMetrics>>,
    /// Per profile, its plugins' duration histograms.
    plugin_timers: Vec<PluginTimers>,
    staleness_bound: Duration,
    avoid_stale: bool,
    max_endpoints: usize,
    seed: u64,
    picks: PickCounter,
    freshness: candidates::FreshnessCache,
    completer: Arc<Completer>,
    /// Kept alive here: the pool holds them weakly, so they go when the scheduler goes.
    #[expect(
        dead_code,
        reason = "held only to keep the pool's weak references alive"
    )]
    listeners: Vec<Arc<dyn MembershipListener>>,
    metric_sources: Vec<Arc<dyn MetricsSource>>,
    parsers: Arc<ParserSet>,
    reporters: Arc<[AttributeReporter]>,
    response_headers: Arc<[crate::response_headers::ResponseHeader]>,
    disaggregation: Option<Disaggregation>,
    profile_selector: Option<HeaderProfileSelector>,
}

/// One profile's plugin duration histograms, aligned with its filters and scorers.
#[derive(Debug)]
pub(crate) struct PluginTimers {
    pub(crate) filters: Vec<Arc<BucketHistogram>>,
    pub(crate) scorers: Vec<Arc<BucketHistogram>>,
    pub(crate) picker: Arc<BucketHistogram>,
}

impl PluginTimers {
    pub(crate) fn of(profile: &Profile, metrics: &crate::metrics::CoreMetrics) -> Self {
        PluginTimers {
            filters: profile
                .filters()
                .iter()
                .map(|f| metrics.plugin_timer("Filter", &f.name))
                .collect(),
            scorers: profile
                .scorers()
                .iter()
                .map(|s| metrics.plugin_timer("Scorer", &s.name))
                .collect(),
            picker: metrics.plugin_timer("Picker", profile.picker_name()),
        }
    }
}

impl Scheduler {
    /// The request parsers of the config this scheduler was built from: adapters read each
    /// request with them, so a reload changes both together.
    pub fn parsers(&self) -> &Arc<ParserSet> {
        &self.parsers
    }

    /// The `request-attribute-reporter`s of the config this scheduler was built from
    /// ([`crate::report`]): adapters evaluate them when a response ends.
    pub fn reporters(&self) -> &Arc<[AttributeReporter]> {
        &self.reporters
    }

    /// The response headers the plugins of the config this scheduler was built from ask for
    /// ([`crate::response_headers`]): adapters add them once the serving endpoint is known.
    pub fn response_headers(&self) -> &Arc<[crate::response_headers::ResponseHeader]> {
        &self.response_headers
    }

    /// Starts building a scheduler over `pool`, with fresh resources and metrics.
    pub fn builder(pool: Arc<Pool>) -> SchedulerBuilder {
        SchedulerBuilder::new(SharedState::new(pool))
    }

    /// Starts building a scheduler over `shared` (the pool, resources and metrics that
    /// outlive it: see [`SharedState`]).
    pub fn builder_in(shared: &SharedState) -> SchedulerBuilder {
        SchedulerBuilder::new(shared.clone())
    }

    /// The pool.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.shared.pool
    }

    /// The state shared with other schedulers over the same pool.
    pub fn shared(&self) -> &SharedState {
        &self.shared
    }

    /// The plugins' shared resources (the prefix index, the session table, ...).
    pub fn resources(&self) -> &Arc<Resources> {
        &self.shared.resources
    }

    /// The scheduler's counters.
    pub fn metrics(&self) -> &Arc<CoreMetrics> {
        &self.shared.metrics
    }

    /// The profiles, the default first.
    pub fn profiles(&self) -> &[Arc<Profile>] {
        &self.profiles
    }

    /// The profile called `name`.
    pub fn profile(&self, name: &str) -> Option<&Arc<Profile>> {
        self.profiles.iter().find(|p| p.name() == name)
    }

    /// The clock (the pool's).
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Metrics older than this are stale.
    pub fn staleness_bound(&self) -> Duration {
        self.staleness_bound
    }

    /// Picks an endpoint for `request` with the default profile.
    pub fn schedule(&self, request: &InferenceRequest) -> Result<Decision, ScheduleError> {
        self.schedule_with(request, ScheduleOptions::default())
    }

    /// Picks an endpoint for `request`.
    pub fn schedule_with(
        &self,
        request: &InferenceRequest,
        options: ScheduleOptions<'_>,
    ) -> Result<Decision, ScheduleError> {
        self.schedule_inner(request, options, None)
    }

    /// Picks an endpoint for `request`, telling `observer` about every profile and scorer it
    /// runs ([`ScheduleObserver`]: what tracing hangs its per-scorer spans on).
    pub fn schedule_observed(
        &self,
        request: &InferenceRequest,
        options: ScheduleOptions<'_>,
        observer: &dyn ScheduleObserver,
    ) -> Result<Decision, ScheduleError> {
        self.schedule_inner(request, options, Some(observer))
    }

    fn schedule_inner(
        &self,
        request: &InferenceRequest,
        options: ScheduleOptions<'_>,
        observer: Option<&dyn ScheduleObserver>,
    ) -> Result<Decision, ScheduleError> {
        let result = match (&self.disaggregation, options.profile) {
            (Some(d), None) => self.run_disaggregated(d, request, options, observer),
            _ => self
                .selected_profile(request, options.profile)
                .and_then(|i| self.run_observed(request, options, i, Stage::default(), observer))
                .map(|(decision, _)| decision),
        };
        if let Err(e) = &result {
            self.shared.metrics.record_error(e);
        }
        result
    }

    /// How this scheduler disaggregates, if it does (see [`crate::disagg`]).
    pub fn disaggregation(&self) -> Option<&Disaggregation> {
        self.disaggregation.as_ref()
    }

    /// How this scheduler chooses a request's profile from a header, if it does.
    pub fn profile_selector(&self) -> Option<&HeaderProfileSelector> {
        self.profile_selector.as_ref()
    }

    /// The profile `request` runs: the one named, else the header's (with a selector), else
    /// the default.
    fn selected_profile(
        &self,
        request: &InferenceRequest,
        name: Option<&str>,
    ) -> Result<usize, ScheduleError> {
        match (&self.profile_selector, name) {
            (Some(selector), None) => selector.select(request, &self.profiles),
            _ => self.profile_index(name),
        }
    }

    fn profile_index(&self, name: Option<&str>) -> Result<usize, ScheduleError> {
        match name {
            Some(name) => self
                .profiles
                .iter()
                .position(|p| p.name() == name)
                .ok_or_else(|| ScheduleError::UnknownProfile(name.to_string())),
            None if self.profiles.is_empty() => {
                Err(ScheduleError::UnknownProfile("default".into()))
            }
            None => Ok(0),
        }
    }

    /// [`Self::run`], with `observer` told the profile's start and outcome.
    fn run_observed(
        &self,
        request: &InferenceRequest,
        options: ScheduleOptions<'_>,
        profile_index: usize,
        stage: Stage<'_>,
        observer: Option<&dyn ScheduleObserver>,
    ) -> Result<(Decision, Stages), ScheduleError> {
        let Some(observer) = observer else {
            return self.run(request, options, profile_index, stage, None);
        };
        let name = self
            .profiles
            .get(profile_index)
            .map_or("default", |p| p.name());
        observer.profile_started(name);
        let result = self.run(request, options, profile_index, stage, Some(observer));
        if let Err(error) = &result {
            observer.profile_finished(&ProfileOutcome::failed(name, error));
        }
        result
    }

    /// Runs profile `profile_index` for `request` as `stage` says (its id, how many endpoints,
    /// and the deciders to ask about the pick). `observer` hears each scorer and a successful
    /// outcome.
    fn run(
        &self,
        request: &InferenceRequest,
        options: ScheduleOptions<'_>,
        profile_index: usize,
        stage: Stage<'_>,
        observer: Option<&dyn ScheduleObserver>,
    ) -> Result<(Decision, Stages), ScheduleError> {
        let started = self.clock.now();
        let profile = self
            .profiles
            .get(profile_index)
            .ok_or_else(|| ScheduleError::UnknownProfile("default".into()))?;
        let snapshot = self.shared.pool.load();
        if snapshot.is_empty() {
            return Err(ScheduleError::NoEndpoints);
        }
        let subset = options.subset.map(candidates::Subset::new);
        let narrowing = candidates::Narrowing {
            staleness: self.staleness_bound,
            avoid_stale: self.avoid_stale,
        };
        let mut candidates = candidates::initial(
            &snapshot,
            subset.as_ref(),
            started,
            narrowing,
            &self.freshness,
            spare::candidates(),
        )?;
        let before_filters = candidates.len();
        let mut cycle = match stage.id {
            Some(id) => CycleState::for_stage(request, started, self.staleness_bound, id),
            None => CycleState::new(request, started, self.staleness_bound),
        };
        cycle.extensions = spare::extensions();
        if let Some(peer) = stage.peer.clone() {
            cycle.extensions.insert(peer);
        }

        for entry in profile.admitters() {
            if let Err(reason) = entry.admitter.admit(&mut cycle, &candidates) {
                return Err(ScheduleError::Rejected {
                    plugin: entry.name.to_string(),
                    reason,
                });
            }
        }
        // One pick in PLUGIN_TIMING_SAMPLE times its plugins.
        let timers = self.plugin_timers.get(profile_index).filter(|_| {
            self.picks
                .0
                .load(Ordering::Relaxed)
                .is_multiple_of(PLUGIN_TIMING_SAMPLE)
                && !options.dry_run
        });
        let time = |timer: Option<&Arc<BucketHistogram>>, since: Timestamp| {
            if let Some(timer) = timer {
                timer.observe(self.clock.now().saturating_since(since).as_secs_f64());
            }
        };
        for (f, entry) in profile.filters().iter().enumerate() {
            let t0 = if timers.is_some() {
                self.clock.now()
            } else {
                started
            };
            entry.filter.filter(&mut cycle, &mut candidates);
            time(timers.and_then(|t| t.filters.get(f)), t0);
            if candidates.is_empty() {
                return Err(ScheduleError::NoCandidates {
                    model: request.target_model().to_string(),
                    filter: entry.name.to_string(),
                });
            }
        }

        let n = candidates.len();
        let weights = profile.weights().load();
        let scorers = profile.scorers();
        let mut scores = spare::scores();
        scores.resize(n * scorers.len(), Score::NEUTRAL);
        let mut totals = spare::floats();
        totals.resize(n, 0.0);
        for (s, entry) in scorers.iter().enumerate() {
            let column = &mut scores[s * n..(s + 1) * n];
            let t0 = if timers.is_some() {
                self.clock.now()
            } else {
                started
            };
            if let Some(observer) = observer {
                observer.scorer_started(entry);
            }
            entry.scorer.score(&mut cycle, &candidates, column);
            time(timers.and_then(|t| t.scorers.get(s)), t0);
            let w = weights.get(s);
            for (total, score) in totals.iter_mut().zip(column.iter_mut()) {
                *score = Score {
                    value: sanitize(score.value),
                    neutral: score.neutral,
                };
                *total += w * score.value;
            }
            if let Some(observer) = observer {
                observer.scorer_finished(entry, w, column);
            }
        }

        let pick_number = self.picks.0.fetch_add(1, Ordering::Relaxed);
        let mut rng =
            PickRng::seed_from(self.seed ^ pick_number.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let t0 = if timers.is_some() {
            self.clock.now()
        } else {
            started
        };
        let mut picked = spare::indexes();
        profile.picker().pick_into(
            &totals,
            stage.count.unwrap_or(self.max_endpoints),
            &mut rng,
            &mut picked,
        );
        time(timers.map(|t| &t.picker), t0);
        picked.retain(|&i| i < n);
        dedup_in_order(&mut picked);
        let Some(&primary_index) = picked.first() else {
            return Err(ScheduleError::PickerReturnedNothing(
                profile.picker_name().to_string(),
            ));
        };

        let primary = candidates[primary_index];
        let stages = Stages {
            encode: stage
                .encode_decider
                .is_some_and(|d| d.disaggregate(&cycle, primary)),
            prefill: stage
                .prefill_decider
                .is_some_and(|d| d.disaggregate(&cycle, primary)),
        };
        // The picked endpoint's pending prefill: what an affinity scorer believes it does not
        // cache of this prompt (all of it when nobody published an estimate).
        let prompt_tokens = request.prompt.estimated_tokens() as u64;
        let uncached =
            CachedPrefix::uncached_tokens_in(&cycle.extensions, primary.id(), prompt_tokens);
        let profile_metrics = self.profile_metrics.get(profile_index);
        if !options.dry_run {
            for hook in profile.pick_hooks() {
                hook.on_pick(&mut cycle, primary);
            }
            if let Some(m) = profile_metrics {
                m.prompt_tokens.add(prompt_tokens);
                let cached = prompt_tokens.saturating_sub(uncached);
                m.cached_tokens.add(cached);
                if prompt_tokens > 0 {
                    m.hit_ratio.observe(cached as f64 / prompt_tokens as f64);
                }
            }
        }
        let guard = if options.dry_run {
            InFlightGuard::uncounted(Arc::clone(primary))
        } else {
            primary.start_request_uncached(prompt_tokens, uncached)
        };
        let mut endpoints = spare::endpoints();
        endpoints.extend(picked.iter().map(|&i| Arc::clone(candidates[i])));
        let handle = RequestHandle::new(
            guard,
            endpoints,
            cycle.request_id(),
            request.target_model(),
            prompt_tokens,
            started,
            (!options.dry_run).then(|| Arc::clone(&self.completer)),
        );

        let mut weights_now = spare::floats();
        weights_now.extend_from_slice(weights.as_slice());
        let mut ids = spare::ids();
        ids.extend(candidates.iter().map(|e| e.id()));
        spare::give_candidates(candidates);
        let kv_cache_source = cycle
            .extensions
            .get::<crate::disagg::KvCacheSource>()
            .map(|s| s.0.clone());
        let CycleState {
            extensions,
            annotations,
            ..
        } = cycle;
        spare::give_extensions(extensions);
        let breakdown = Breakdown {
            candidates_before_filters: before_filters,
            profile: Arc::clone(profile),
            weights: weights_now,
            snapshot: Arc::clone(&snapshot),
            candidates: ids,
            scores,
            totals,
            picked,
            annotations,
        };
        if let Some(m) = profile_metrics {
            m.schedule_duration
                .observe(self.clock.now().saturating_since(started));
        }
        let decision = Decision::new(handle, breakdown).with_kv_cache_source(kv_cache_source);
        if let Some(observer) = observer {
            observer.profile_finished(&ProfileOutcome {
                profile: profile.name(),
                candidates: n,
                endpoint: Some(decision.primary().address()),
                endpoints: decision.endpoints().len(),
                prompt_tokens,
                cached_tokens: prompt_tokens.saturating_sub(uncached),
                disaggregate: stages.prefill,
                encode: stages.encode,
                error: None,
            });
        }
        Ok((decision, stages))
    }
}

impl MetricsSource for Scheduler {
    /// The shared counters, the pool's per-endpoint figures, then every plugin's.
    fn visit_metrics(&self, visitor: &mut dyn MetricsVisitor) {
        self.shared.metrics.visit_metrics(visitor);
        self.shared.pool.visit_metrics(visitor);
        for source in &self.metric_sources {
            source.visit_metrics(visitor);
        }
    }
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field(
                "profiles",
                &self.profiles.iter().map(|p| p.name()).collect::<Vec<_>>(),
            )
            .field("staleness_bound", &self.staleness_bound)
            .field("max_endpoints", &self.max_endpoints)
            .finish()
    }
}

fn sanitize(v: f64) -> f64 {
    if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) }
}

/// Drops repeated indexes, keeping the first of each, in place (pickers return a few).
fn dedup_in_order(v: &mut Vec<usize>) {
    let mut kept = 0;
    for i in 0..v.len() {
        let x = v[i];
        if !v[..kept].contains(&x) {
            v[kept] = x;
            kept += 1;
        }
    }
    v.truncate(kept);
}

/// The pick counter, on a cache line of its own: every pick writes it, and it must not evict
/// the scheduler fields every pick reads.
#[derive(Default)]
#[repr(align(128))]
struct PickCounter(AtomicU64);
