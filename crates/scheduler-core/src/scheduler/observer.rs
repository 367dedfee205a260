//! The scheduler's observer hook ([`ScheduleObserver`]).

use crate::plugin::Score;
use crate::profile::ScorerEntry;

use super::ScheduleError;

/// Watching one scheduling call from the inside: which profile ran, each scorer's start and
/// end, what the profile picked.
///
/// [`Scheduler::schedule_observed`](super::Scheduler::schedule_observed) calls a
/// [`ScheduleObserver`] around every profile it runs and every scorer in it; plain
/// [`schedule_with`](super::Scheduler::schedule_with) has no observer and pays one branch per
/// scorer for the hook. The core reads no clock for the observer: an observer that wants
/// timings (a tracer building one span per scorer) takes them itself, so a request nobody
/// traces costs nothing.
///
/// ```
/// use std::sync::Arc;
/// use parking_lot::Mutex;
/// use shepherd_scheduler_core::prelude::*;
/// use shepherd_scheduler_core::profile::ScorerEntry;
/// use shepherd_scheduler_core::scheduler::{ProfileOutcome, ScheduleObserver, ScheduleOptions};
///
/// #[derive(Default)]
/// struct Log(Mutex<Vec<String>>);
///
/// impl ScheduleObserver for Log {
///     fn profile_started(&self, profile: &str) {
///         self.0.lock().push(format!("profile {profile}"));
///     }
///     fn scorer_started(&self, _scorer: &ScorerEntry) {}
///     fn scorer_finished(&self, scorer: &ScorerEntry, _weight: f64, scores: &[Score]) {
///         self.0.lock().push(format!("{} scored {}", scorer.plugin_type, scores.len()));
///     }
///     fn profile_finished(&self, outcome: &ProfileOutcome<'_>) {
///         self.0.lock().push(format!("picked {:?}", outcome.endpoint));
///     }
/// }
///
/// # struct Two;
/// # impl Scorer for Two {
/// #     fn category(&self) -> Category { Category::Distribution }
/// #     fn score(&self, _: &mut CycleState, c: &[&Arc<Endpoint>], out: &mut [Score]) {
/// #         for (i, s) in out.iter_mut().enumerate() { *s = Score::new(i as f64); }
/// #     }
/// # }
/// let pool = Arc::new(Pool::new());
/// pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
/// let profile = Profile::builder("default")
///     .typed_scorer("mine", "queue-scorer", Arc::new(Two), 1.0)
///     .build();
/// let scheduler = Scheduler::builder(Arc::clone(&pool)).profile(profile).build().unwrap();
/// let request = InferenceRequest::new("r1", "llama", Prompt::Text("hi".into()));
/// let log = Log::default();
/// let decision = scheduler
///     .schedule_observed(&request, ScheduleOptions::default(), &log)
///     .unwrap();
/// assert_eq!(
///     *log.0.lock(),
///     ["profile default", "queue-scorer scored 2", "picked Some(\"10.0.0.2:8000\")"]
/// );
/// # drop(decision);
/// ```
///
/// Told what one scheduling call does, in order: for each profile run (the decode profile,
/// then the encode and the prefill ones when a request is disaggregated), `profile_started`, then
/// `scorer_started` / `scorer_finished` for every scorer, then `profile_finished` (also when
/// the profile failed).
pub trait ScheduleObserver: Sync {
    /// Profile `profile` starts.
    fn profile_started(&self, profile: &str);
    /// `scorer` starts scoring the candidates.
    fn scorer_started(&self, scorer: &ScorerEntry);
    /// `scorer`, at `weight` in this pick, wrote `scores` (one per candidate, sanitized).
    fn scorer_finished(&self, scorer: &ScorerEntry, weight: f64, scores: &[Score]);
    /// The profile ended: what it picked, or why not.
    fn profile_finished(&self, outcome: &ProfileOutcome<'_>);
}

/// What one profile run decided, for [`ScheduleObserver::profile_finished`].
#[derive(Debug, Clone, Copy)]
pub struct ProfileOutcome<'a> {
    /// The profile's name.
    pub profile: &'a str,
    /// The candidates left after the filters (0 when it failed before them).
    pub candidates: usize,
    /// The picked endpoint's address.
    pub endpoint: Option<&'a str>,
    /// How many endpoints the decision carries (the primary and its fallbacks).
    pub endpoints: usize,
    /// The request's estimated prompt tokens.
    pub prompt_tokens: u64,
    /// The prompt tokens the picked endpoint is believed to cache (the affinity scorers'
    /// estimate; 0 when none published one).
    pub cached_tokens: u64,
    /// Whether the decider asked for a prefill stage (decode profile of a disaggregated
    /// scheduler only).
    pub disaggregate: bool,
    /// Whether the encode decider asked for an encode stage (decode profile of a scheduler
    /// that disaggregates encoding only).
    pub encode: bool,
    /// Why the profile picked nothing.
    pub error: Option<&'a ScheduleError>,
}

impl<'a> ProfileOutcome<'a> {
    /// The outcome of `profile` failing with `error`.
    pub fn failed(profile: &'a str, error: &'a ScheduleError) -> Self {
        ProfileOutcome {
            profile,
            candidates: 0,
            endpoint: None,
            endpoints: 0,
            prompt_tokens: 0,
            cached_tokens: 0,
            disaggregate: false,
            encode: false,
            error: Some(error),
        }
    }
}
