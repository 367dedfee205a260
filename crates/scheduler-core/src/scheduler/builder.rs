use std::sync::Arc;
use std::time::Duration;

use crate::report::AttributeReporter;
use crate::response_headers::ResponseHeader;

use super::{HeaderProfileSelector, PickCounter, ScheduleError, Scheduler};
use crate::completion::{Completer, CompletionHook};
use crate::config::SchedulerSettings;
use crate::disagg::Disaggregation;
use crate::endpoint::MembershipListener;
use crate::metrics::MetricsSource;
use crate::profile::Profile;
use crate::request::ParserSet;
use crate::shared::SharedState;

/// Builds a [`Scheduler`].
pub struct SchedulerBuilder {
    shared: SharedState,
    profiles: Vec<Arc<Profile>>,
    settings: SchedulerSettings,
    completion_hooks: Vec<Arc<dyn CompletionHook>>,
    listeners: Vec<Arc<dyn MembershipListener>>,
    metric_sources: Vec<Arc<dyn MetricsSource>>,
    parsers: ParserSet,
    reporters: Vec<AttributeReporter>,
    response_headers: Vec<ResponseHeader>,
    disaggregation: Option<Disaggregation>,
    profile_selector: Option<HeaderProfileSelector>,
}

impl SchedulerBuilder {
    pub(super) fn new(shared: SharedState) -> Self {
        SchedulerBuilder {
            shared,
            profiles: Vec::new(),
            // One source of defaults: the config schema's.
            settings: SchedulerSettings::default(),
            completion_hooks: Vec::new(),
            listeners: Vec::new(),
            metric_sources: Vec::new(),
            parsers: ParserSet::upstream_default(),
            reporters: Vec::new(),
            response_headers: Vec::new(),
            disaggregation: None,
            profile_selector: None,
        }
    }

    /// Schedules every request that names no profile with several profiles: decode, then
    /// (when its decider says so and the profile exists) encode, then (when the decider says
    /// so) prefill (see [`crate::disagg`]). The decode profile must be added, and the prefill
    /// one when there is a prefill decider.
    pub fn disaggregation(mut self, disaggregation: Disaggregation) -> Self {
        self.disaggregation = Some(disaggregation);
        self
    }

    /// Chooses the profile of every request that names none from a request header (see
    /// [`HeaderProfileSelector`]).
    pub fn profile_selector(mut self, selector: HeaderProfileSelector) -> Self {
        self.profile_selector = Some(selector);
        self
    }

    /// Sets the request parsers adapters read requests with (default:
    /// [`ParserSet::upstream_default`]).
    pub fn parsers(mut self, parsers: ParserSet) -> Self {
        self.parsers = parsers;
        self
    }

    /// Sets the `request-attribute-reporter`s adapters evaluate when a response ends (default:
    /// none).
    pub fn reporters(mut self, reporters: Vec<AttributeReporter>) -> Self {
        self.reporters = reporters;
        self
    }

    /// Sets the response headers adapters add once the serving endpoint is known (default:
    /// none; see [`crate::response_headers`]).
    pub fn response_headers(mut self, headers: Vec<ResponseHeader>) -> Self {
        self.response_headers = headers;
        self
    }

    /// Adds a profile (the first added is the default).
    pub fn profile(mut self, profile: Profile) -> Self {
        self.profiles.push(Arc::new(profile));
        self
    }

    /// Takes every setting of the config's `scheduler` section.
    pub fn settings(mut self, settings: &SchedulerSettings) -> Self {
        self.settings = settings.clone();
        self
    }

    /// Metrics older than this are stale (default 200 ms).
    pub fn staleness_bound(mut self, bound: Duration) -> Self {
        self.settings.staleness_ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX).max(1);
        self
    }

    /// Whether endpoints with stale metrics are left out while others have fresh ones
    /// (default true).
    pub fn avoid_stale_endpoints(mut self, avoid: bool) -> Self {
        self.settings.avoid_stale_endpoints = avoid;
        self
    }

    /// How many endpoints a decision names: the primary plus fallbacks (default 3, at least 1).
    pub fn max_endpoints(mut self, n: usize) -> Self {
        self.settings.max_endpoints = n.max(1);
        self
    }

    /// Seed for tie-breaking and random pickers.
    pub fn seed(mut self, seed: u64) -> Self {
        self.settings.seed = seed;
        self
    }

    /// Adds a completion hook.
    pub fn completion_hook(mut self, hook: Arc<dyn CompletionHook>) -> Self {
        self.completion_hooks.push(hook);
        self
    }

    /// Registers a membership listener with the pool and keeps it alive for as long as the
    /// scheduler lives (the pool only holds it weakly).
    pub fn membership_listener(mut self, listener: Arc<dyn MembershipListener>) -> Self {
        self.listeners.push(listener);
        self
    }

    /// Adds a metrics source visited with the scheduler's own metrics.
    pub fn metrics_source(mut self, source: Arc<dyn MetricsSource>) -> Self {
        self.metric_sources.push(source);
        self
    }

    /// Finishes the scheduler; fails when no profile was added.
    pub fn build(self) -> Result<Scheduler, ScheduleError> {
        if self.profiles.is_empty() {
            return Err(ScheduleError::UnknownProfile("default".into()));
        }
        if let Some(d) = &self.disaggregation {
            // Without a decider the prefill profile never runs (P/D is off, as upstream turns
            // it off), so only the decode profile must exist.
            let needed = match d.decider {
                Some(_) => [Some(d.decode_profile()), Some(d.prefill_profile())],
                None => [Some(d.decode_profile()), None],
            };
            for name in needed.into_iter().flatten() {
                if !self.profiles.iter().any(|p| p.name() == name) {
                    return Err(ScheduleError::UnknownProfile(name.to_string()));
                }
            }
        }
        let clock = Arc::clone(self.shared.pool.clock());
        for listener in &self.listeners {
            self.shared.pool.add_listener(listener);
        }
        let profile_metrics = self
            .profiles
            .iter()
            .map(|p| self.shared.metrics.profile(p.name()))
            .collect();
        let plugin_timers = self
            .profiles
            .iter()
            .map(|p| super::PluginTimers::of(p, &self.shared.metrics))
            .collect();
        let mut hooks = self.completion_hooks;
        // The flow controller's program-aware ledger, charged when each request completes.
        if let Some(ledger) = self
            .shared
            .resources
            .get::<crate::flow::ProgramLedger>(crate::flow::program_aware::PROGRAM_LEDGER)
        {
            hooks.push(ledger);
        }
        let completer = Arc::new(Completer {
            hooks,
            metrics: Arc::clone(&self.shared.metrics),
            clock: Arc::clone(&clock),
        });
        Ok(Scheduler {
            clock,
            profiles: self.profiles,
            profile_metrics,
            plugin_timers,
            staleness_bound: Duration::from_millis(self.settings.staleness_ms.max(1)),
            avoid_stale: self.settings.avoid_stale_endpoints,
            max_endpoints: self.settings.max_endpoints.max(1),
            seed: self.settings.seed,
            picks: PickCounter::default(),
            freshness: Default::default(),
            completer,
            listeners: self.listeners,
            metric_sources: self.metric_sources,
            parsers: Arc::new(self.parsers),
            reporters: self.reporters.into(),
            response_headers: self.response_headers.into(),
            disaggregation: self.disaggregation,
            profile_selector: self.profile_selector,
            shared: self.shared,
        })
    }
}

impl std::fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field("profiles", &self.profiles.len())
            .field("settings", &self.settings)
            .finish()
    }
}
