use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::{
    BucketHistogram, LatencyHistogram, MetricDesc, MetricsSource, MetricsVisitor, StripedCounter,
};
use crate::completion::Outcome;
use crate::scheduler::ScheduleError;

const PICKS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_picks_total",
    "Requests scheduled, by scheduling profile.",
);
const SCHEDULE_DURATION: MetricDesc<'static> = MetricDesc::new(
    "shepherd_schedule_duration_seconds",
    "Time to pick an endpoint (filters, scorers, picker, pick hooks), by profile.",
);
const PROMPT_TOKENS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_picked_prompt_tokens_total",
    "Prompt tokens of the requests picked, by profile.",
);
const CACHED_TOKENS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_picked_cached_tokens_total",
    "Prompt tokens believed cached on the picked endpoint, by profile (over prompt tokens: the estimated hit rate).",
);
const HIT_RATIO: MetricDesc<'static> = MetricDesc::new(
    "shepherd_picked_prefix_hit_ratio",
    "Per pick, the share of the prompt's tokens believed cached on the picked endpoint, by profile.",
);
/// Bounds of the per-pick prefix hit ratio (upstream's `prefix_indexer_hit_ratio` buckets).
pub static HIT_RATIO_BOUNDS: [f64; 11] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
const PLUGIN_DURATION: MetricDesc<'static> = MetricDesc::new(
    "shepherd_plugin_duration_seconds",
    "Time a filter, scorer or picker took for one request (one pick in PLUGIN_TIMING_SAMPLE is timed), by extension point, plugin type and name.",
);
/// Bounds of the plugin durations (upstream's `plugin_duration_seconds` buckets, 100 µs to
/// 100 ms).
pub static PLUGIN_DURATION_BOUNDS: [f64; 10] = [
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
];
/// One pick in this many times its plugins (a clock read around each costs more than most
/// scorers take on a small pool).
pub const PLUGIN_TIMING_SAMPLE: u64 = 8;
const ERRORS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_schedule_errors_total",
    "Requests no endpoint could be picked for, by reason.",
);
const FALLBACKS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_fallbacks_used_total",
    "Requests moved to a fallback endpoint after the primary could not take them.",
);
const COMPLETIONS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_completions_total",
    "Scheduled requests that ended, by outcome.",
);

/// Counters of one scheduling profile, kept across config reloads (looked up by name).
#[derive(Debug)]
pub struct ProfileMetrics {
    /// Pick latency; its count is the number of picks.
    pub schedule_duration: LatencyHistogram,
    /// Prompt tokens of the requests picked (dry runs excluded).
    pub prompt_tokens: StripedCounter,
    /// Of those, the tokens an affinity scorer believed the picked endpoint already cached
    /// (see [`CachedPrefix`](crate::plugin::CachedPrefix)): with `prompt_tokens`, the
    /// estimated prefix-cache hit rate of the picks.
    pub cached_tokens: StripedCounter,
    /// Per pick, cached ÷ prompt tokens (see `cached_tokens`), over [`HIT_RATIO_BOUNDS`].
    pub hit_ratio: BucketHistogram,
}

impl Default for ProfileMetrics {
    fn default() -> Self {
        ProfileMetrics {
            schedule_duration: LatencyHistogram::default(),
            prompt_tokens: StripedCounter::default(),
            cached_tokens: StripedCounter::default(),
            hit_ratio: BucketHistogram::striped(&HIT_RATIO_BOUNDS, 1e6),
        }
    }
}

/// `(extension point, plugin name)`.
type PluginKey = (&'static str, Arc<str>);

/// The scheduler's own counters: picks and latency per profile, errors by reason, fallbacks
/// used, completions by outcome.
///
/// Create one per process (or per pool) and pass it to every scheduler built over the pool
/// (through [`SharedState`](crate::shared::SharedState)); the counters then survive reloads.
#[derive(Debug, Default)]
pub struct CoreMetrics {
    profiles: Mutex<BTreeMap<Arc<str>, Arc<ProfileMetrics>>>,
    errors: [AtomicU64; ERROR_REASONS.len()],
    fallbacks_used: AtomicU64,
    completions: [StripedCounter; 3],
    /// `(extension point, plugin name)` → its durations; kept across reloads.
    plugin_timers: Mutex<BTreeMap<PluginKey, Arc<BucketHistogram>>>,
    /// Plugin name → its registered type, as the config builder saw them.
    plugin_types: Mutex<BTreeMap<Arc<str>, Arc<str>>>,
}

/// Reason labels of [`ScheduleError`], in the order of the error counters.
const ERROR_REASONS: [&str; 9] = [
    "no_endpoints",
    "empty_subset",
    "no_candidates",
    "no_healthy_endpoint",
    "unknown_profile",
    "picker_returned_nothing",
    "other",
    "rejected",
    "profile_not_selected",
];

impl CoreMetrics {
    /// Fresh counters.
    pub fn new() -> Self {
        CoreMetrics::default()
    }

    /// The counters of profile `name` (created on first use; the same ones every time after).
    pub fn profile(&self, name: &str) -> Arc<ProfileMetrics> {
        let mut profiles = self.profiles.lock();
        if let Some(p) = profiles.get(name) {
            return Arc::clone(p);
        }
        let p = Arc::new(ProfileMetrics::default());
        profiles.insert(Arc::from(name), Arc::clone(&p));
        p
    }

    /// The duration histogram of plugin `name` at `extension_point` (`Filter`, `Scorer`,
    /// `Picker`): created on first use, the same one every time after.
    pub fn plugin_timer(&self, extension_point: &'static str, name: &str) -> Arc<BucketHistogram> {
        let mut timers = self.plugin_timers.lock();
        let key = (extension_point, Arc::<str>::from(name));
        Arc::clone(
            timers.entry(key).or_insert_with(|| {
                Arc::new(BucketHistogram::striped(&PLUGIN_DURATION_BOUNDS, 1e9))
            }),
        )
    }

    /// Notes that plugin `name` is of type `plugin_type` (for the duration's labels).
    pub fn note_plugin_type(&self, name: &str, plugin_type: &str) {
        self.plugin_types
            .lock()
            .insert(Arc::from(name), Arc::from(plugin_type));
    }

    /// Counts a failed schedule.
    pub fn record_error(&self, error: &ScheduleError) {
        let i = error_reason_index(error);
        self.errors[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Schedules that failed with `reason` (a label of `shepherd_schedule_errors_total`, such
    /// as `no_candidates`).
    pub fn errors(&self, reason: &str) -> u64 {
        ERROR_REASONS
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.errors[i].load(Ordering::Relaxed))
    }

    /// Counts a request moved to a fallback endpoint.
    pub fn record_fallback(&self) {
        self.fallbacks_used.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests moved to a fallback endpoint.
    pub fn fallbacks_used(&self) -> u64 {
        self.fallbacks_used.load(Ordering::Relaxed)
    }

    /// Counts an ended request.
    pub fn record_completion(&self, outcome: Outcome) {
        self.completions[outcome as usize].add(1);
    }

    /// Requests that ended with `outcome`.
    pub fn completions(&self, outcome: Outcome) -> u64 {
        self.completions[outcome as usize].get()
    }

    /// Picks made with profile `name`.
    pub fn picks(&self, name: &str) -> u64 {
        self.profiles
            .lock()
            .get(name)
            .map_or(0, |p| p.schedule_duration.count())
    }
}

fn error_reason_index(error: &ScheduleError) -> usize {
    match error {
        ScheduleError::NoEndpoints => 0,
        ScheduleError::EmptySubset => 1,
        ScheduleError::NoCandidates { .. } => 2,
        ScheduleError::NoHealthyEndpoint => 3,
        ScheduleError::UnknownProfile(_) => 4,
        ScheduleError::PickerReturnedNothing(_) => 5,
        ScheduleError::Rejected { .. } => 7,
        ScheduleError::ProfileNotSelected(_) => 8,
    }
}

impl MetricsSource for CoreMetrics {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let profiles: Vec<(Arc<str>, Arc<ProfileMetrics>)> = self
            .profiles
            .lock()
            .iter()
            .map(|(k, p)| (Arc::clone(k), Arc::clone(p)))
            .collect();
        for (name, p) in &profiles {
            let snapshot = p.schedule_duration.snapshot();
            v.counter(PICKS, &[("profile", name)], snapshot.count);
        }
        for (name, p) in &profiles {
            let snapshot = p.schedule_duration.snapshot();
            v.histogram(SCHEDULE_DURATION, &[("profile", name)], &snapshot);
            v.counter(PROMPT_TOKENS, &[("profile", name)], p.prompt_tokens.get());
            v.counter(CACHED_TOKENS, &[("profile", name)], p.cached_tokens.get());
            v.histogram(HIT_RATIO, &[("profile", name)], &p.hit_ratio.snapshot());
        }
        for (reason, count) in ERROR_REASONS.iter().zip(&self.errors) {
            v.counter(ERRORS, &[("reason", reason)], count.load(Ordering::Relaxed));
        }
        v.counter(FALLBACKS, &[], self.fallbacks_used());
        let timers: Vec<_> = self
            .plugin_timers
            .lock()
            .iter()
            .map(|(k, h)| (k.clone(), Arc::clone(h)))
            .collect();
        let types = self.plugin_types.lock().clone();
        for ((point, name), h) in timers {
            let plugin_type = types.get(&name).map_or(&*name, |t| &**t);
            v.histogram(
                PLUGIN_DURATION,
                &[
                    ("extension_point", point),
                    ("plugin_type", plugin_type),
                    ("plugin_name", &name),
                ],
                &h.snapshot(),
            );
        }
        for outcome in [Outcome::Success, Outcome::Failed, Outcome::Cancelled] {
            v.counter(
                COMPLETIONS,
                &[("outcome", outcome.as_str())],
                self.completions(outcome),
            );
        }
    }
}
