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
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use thiserror::Error;

use crate::clock::{Clock, SystemClock};
use crate::config::SchedulerSettings;
use crate::decision::{Breakdown, Decision};
use crate::endpoint::{Endpoint, Pool};
use crate::plugin::{CachedPrefix, Completion, CompletionHook, CycleState, Score};
use crate::profile::Profile;
use crate::request::InferenceRequest;
use crate::rng::PickRng;

/// Why no endpoint could be picked.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The pool has no endpoints.
    #[error("no endpoints in the pool")]
    NoEndpoints,
    /// The gateway's subset hint matched no pool member.
    #[error("the endpoint subset hint matches no endpoint in the pool")]
    EmptySubset,
    /// Filters removed every candidate.
    #[error(
        "no endpoint can serve model `{model}` (filter `{filter}` removed the last candidates)"
    )]
    NoCandidates {
        /// Requested model.
        model: String,
        /// Filter that removed the last candidates.
        filter: String,
    },
    /// The named profile does not exist.
    #[error("unknown scheduling profile `{0}`")]
    UnknownProfile(String),
    /// The picker returned nothing usable (a plugin bug).
    #[error("picker `{0}` returned no valid endpoint")]
    PickerReturnedNothing(String),
}

impl ScheduleError {
    /// The HTTP status an adapter should answer with.
    pub fn http_status(&self) -> u16 {
        match self {
            ScheduleError::UnknownProfile(_) | ScheduleError::PickerReturnedNothing(_) => 500,
            _ => 503,
        }
    }
}

/// Per-request options.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScheduleOptions<'a> {
    /// Only these addresses (`ip:port`, or `ip` for any port) may be picked.
    pub subset: Option<&'a [String]>,
    /// Run this profile instead of the default one.
    pub profile: Option<&'a str>,
    /// Score and pick without running pick hooks (nothing is recorded in the prefix index or
    /// session tables): "which endpoint would serve this?", for explain views and benchmarks.
    /// The decision still holds an in-flight guard; drop it at once.
    pub dry_run: bool,
}

/// Runs scheduling profiles over a pool.
pub struct Scheduler {
    pool: Arc<Pool>,
    profiles: Vec<Arc<Profile>>,
    clock: Arc<dyn Clock>,
    staleness_bound: Duration,
    max_endpoints: usize,
    seed: u64,
    picks: PickCounter,
    completion_hooks: Vec<Arc<dyn CompletionHook>>,
}

impl Scheduler {
    /// Starts building a scheduler over `pool`.
    pub fn builder(pool: Arc<Pool>) -> SchedulerBuilder {
        // One source of defaults: the config schema's.
        let defaults = SchedulerSettings::default();
        SchedulerBuilder {
            pool,
            profiles: Vec::new(),
            clock: Arc::new(SystemClock::new()),
            staleness_bound: Duration::from_millis(defaults.staleness_ms),
            max_endpoints: defaults.max_endpoints,
            seed: defaults.seed,
            completion_hooks: Vec::new(),
        }
    }

    /// The pool.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// The profiles, the default first.
    pub fn profiles(&self) -> &[Arc<Profile>] {
        &self.profiles
    }

    /// The profile called `name`.
    pub fn profile(&self, name: &str) -> Option<&Arc<Profile>> {
        self.profiles.iter().find(|p| p.name() == name)
    }

    /// The clock.
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
        let profile = match options.profile {
            Some(name) => self
                .profile(name)
                .ok_or_else(|| ScheduleError::UnknownProfile(name.to_string()))?,
            None => self
                .profiles
                .first()
                .ok_or_else(|| ScheduleError::UnknownProfile("default".into()))?,
        };
        let snapshot = self.pool.load();
        if snapshot.is_empty() {
            return Err(ScheduleError::NoEndpoints);
        }
        let mut candidates: Vec<&Arc<Endpoint>> = match options.subset {
            None => snapshot.endpoints().iter().collect(),
            Some(subset) => snapshot
                .endpoints()
                .iter()
                .filter(|e| in_subset(e.address(), subset))
                .collect(),
        };
        if candidates.is_empty() {
            return Err(ScheduleError::EmptySubset);
        }
        let before_filters = candidates.len();
        let mut cycle = CycleState::new(request, self.clock.now(), self.staleness_bound);

        for entry in profile.filters() {
            entry.filter.filter(&mut cycle, &mut candidates);
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
        let mut scores = vec![Score::NEUTRAL; n * scorers.len()];
        let mut totals = vec![0.0f64; n];
        for (s, entry) in scorers.iter().enumerate() {
            let column = &mut scores[s * n..(s + 1) * n];
            entry.scorer.score(&mut cycle, &candidates, column);
            let w = weights.get(s);
            for (total, score) in totals.iter_mut().zip(column.iter_mut()) {
                *score = Score {
                    value: sanitize(score.value),
                    neutral: score.neutral,
                };
                *total += w * score.value;
            }
        }

        let pick_number = self.picks.0.fetch_add(1, Ordering::Relaxed);
        let mut rng =
            PickRng::seed_from(self.seed ^ pick_number.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut picked = profile.picker().pick(&totals, self.max_endpoints, &mut rng);
        picked.retain(|&i| i < n);
        dedup_in_order(&mut picked);
        let Some(&primary_index) = picked.first() else {
            return Err(ScheduleError::PickerReturnedNothing(
                profile.picker_name().to_string(),
            ));
        };

        let primary = candidates[primary_index];
        if !options.dry_run {
            for hook in profile.pick_hooks() {
                hook.on_pick(&mut cycle, primary);
            }
        }
        // The picked endpoint's pending prefill: what an affinity scorer believes it does not
        // cache of this prompt (all of it when nobody published an estimate).
        let prompt_tokens = request.prompt.estimated_tokens() as u64;
        let uncached =
            CachedPrefix::uncached_tokens_in(&cycle.extensions, primary.id(), prompt_tokens);
        let guard = primary.start_request_uncached(prompt_tokens, uncached);

        let breakdown = Breakdown {
            candidates_before_filters: before_filters,
            profile: Arc::clone(profile),
            weights: weights.as_slice().to_vec(),
            snapshot: Arc::clone(&snapshot),
            candidates: candidates.iter().map(|e| e.id()).collect(),
            scores,
            totals,
            picked: picked.clone(),
        };
        Ok(Decision {
            endpoints: picked.iter().map(|&i| Arc::clone(candidates[i])).collect(),
            guard,
            breakdown,
        })
    }

    /// Runs the completion hooks for `request`, served by `endpoint`.
    pub fn complete(
        &self,
        request: &InferenceRequest,
        endpoint: &Arc<Endpoint>,
        completion: &Completion,
    ) {
        for hook in &self.completion_hooks {
            hook.on_complete(request, endpoint, completion);
        }
    }
}

fn sanitize(v: f64) -> f64 {
    if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) }
}

fn dedup_in_order(v: &mut Vec<usize>) {
    let mut seen = Vec::with_capacity(v.len());
    v.retain(|i| {
        if seen.contains(i) {
            false
        } else {
            seen.push(*i);
            true
        }
    });
}

/// Whether `address` (`ip:port`) is named by the subset (entries `ip:port` or bare `ip`).
fn in_subset(address: &str, subset: &[String]) -> bool {
    subset.iter().any(|s| {
        s == address
            || (!s.contains(':') || s.starts_with('['))
                && address.rsplit_once(':').is_some_and(|(host, _)| {
                    host == s || host.trim_matches(['[', ']']) == s.trim_matches(['[', ']'])
                })
    })
}

/// The pick counter, on a cache line of its own: every pick writes it, and it must not evict
/// the scheduler fields every pick reads.
#[derive(Default)]
#[repr(align(128))]
struct PickCounter(AtomicU64);

/// Builds a [`Scheduler`].
pub struct SchedulerBuilder {
    pool: Arc<Pool>,
    profiles: Vec<Arc<Profile>>,
    clock: Arc<dyn Clock>,
    staleness_bound: Duration,
    max_endpoints: usize,
    seed: u64,
    completion_hooks: Vec<Arc<dyn CompletionHook>>,
}

impl SchedulerBuilder {
    /// Adds a profile (the first added is the default).
    pub fn profile(mut self, profile: Profile) -> Self {
        self.profiles.push(Arc::new(profile));
        self
    }

    /// Uses `clock` for the time (default: the system's monotonic clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Metrics older than this are stale (default 200 ms).
    pub fn staleness_bound(mut self, bound: Duration) -> Self {
        self.staleness_bound = bound;
        self
    }

    /// How many endpoints a decision names: the primary plus fallbacks (default 3, at least 1).
    pub fn max_endpoints(mut self, n: usize) -> Self {
        self.max_endpoints = n.max(1);
        self
    }

    /// Seed for tie-breaking and random pickers.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Adds a completion hook.
    pub fn completion_hook(mut self, hook: Arc<dyn CompletionHook>) -> Self {
        self.completion_hooks.push(hook);
        self
    }

    /// Finishes the scheduler; fails when no profile was added.
    pub fn build(self) -> Result<Scheduler, ScheduleError> {
        if self.profiles.is_empty() {
            return Err(ScheduleError::UnknownProfile("default".into()));
        }
        Ok(Scheduler {
            pool: self.pool,
            profiles: self.profiles,
            clock: self.clock,
            staleness_bound: self.staleness_bound,
            max_endpoints: self.max_endpoints,
            seed: self.seed,
            picks: PickCounter::default(),
            completion_hooks: self.completion_hooks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_matches_ip_and_ip_port() {
        let s = vec!["10.0.0.1".to_string(), "10.0.0.2:9000".to_string()];
        assert!(in_subset("10.0.0.1:8000", &s));
        assert!(in_subset("10.0.0.2:9000", &s));
        assert!(!in_subset("10.0.0.2:8000", &s));
        assert!(!in_subset("10.0.0.3:8000", &s));
    }
}
