use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::CycleState;
use crate::endpoint::Endpoint;
use crate::rng::PickRng;

/// What a scorer pulls traffic toward, which decides how adaptive weights treat it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// "Stick": prefix cache, LoRA, session affinity.
    Affinity,
    /// "Spread": KV utilization, queue depth, running and in-flight requests.
    Distribution,
    /// Left alone by the adaptive weights.
    Balance,
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Category::Affinity => "affinity",
            Category::Distribution => "distribution",
            Category::Balance => "balance",
        })
    }
}

/// One scorer's verdict on one candidate: a value in `[0, 1]`, higher is better.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Score {
    /// The score, in `[0, 1]` (the scheduler clamps it, and treats NaN as 0).
    pub value: f64,
    /// True when the scorer could not judge (stale or missing metrics) and gave a neutral value.
    pub neutral: bool,
}

impl Score {
    /// The neutral score given when a scorer cannot judge.
    pub const NEUTRAL: Score = Score {
        value: 0.5,
        neutral: true,
    };

    /// A judged score (clamped into `[0, 1]`, NaN becomes 0).
    #[inline]
    pub fn new(value: f64) -> Self {
        Score {
            value: if value.is_nan() {
                0.0
            } else {
                value.clamp(0.0, 1.0)
            },
            neutral: false,
        }
    }
}

impl Default for Score {
    fn default() -> Self {
        Score::NEUTRAL
    }
}

/// Narrows the candidate list.
pub trait Filter: Send + Sync {
    /// Removes the candidates that must not serve this request. The order of those kept must
    /// be preserved.
    fn filter(&self, cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>);
}

/// Scores every candidate in `[0, 1]`, higher is better. Must be deterministic for the same
/// inputs.
pub trait Scorer: Send + Sync {
    /// Whether this scorer pulls toward affinity, distribution, or neither.
    fn category(&self) -> Category;

    /// Writes one score per candidate into `out` (same length and order as `candidates`; every
    /// slot starts [`Score::NEUTRAL`]).
    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]);
}

/// Chooses the endpoints from the weighted totals.
pub trait Picker: Send + Sync {
    /// Returns up to `count` distinct indexes into `totals`, best first (the primary, then the
    /// fallbacks in order). Ties are broken uniformly at random with `rng`. Must return at
    /// least one index when `totals` is not empty and `count > 0`.
    fn pick(&self, totals: &[f64], count: usize, rng: &mut PickRng) -> Vec<usize>;

    /// [`pick`](Self::pick) into `out` (cleared first): what the scheduler calls, with a
    /// buffer it reuses from pick to pick. The default calls `pick`; a picker that can choose
    /// without allocating overrides it, with the same answers.
    fn pick_into(&self, totals: &[f64], count: usize, rng: &mut PickRng, out: &mut Vec<usize>) {
        out.clear();
        out.extend(self.pick(totals, count, rng));
    }

    /// The most endpoints this picker was configured to return (upstream's
    /// `maxNumOfEndpoints`), when set. The scheduler asks an encode profile's picker for that
    /// many encode servers (see [`crate::disagg`]); the default is `None`.
    fn max_endpoints(&self) -> Option<usize> {
        None
    }
}

/// Decides whether a request is served at all, before the profile's filters run: a request an
/// admitter refuses fails with
/// [`ScheduleError::Rejected`](crate::scheduler::ScheduleError::Rejected) (HTTP 429).
pub trait Admitter: Send + Sync {
    /// `Ok` to let the request of `cycle` through to `candidates`, else why it is refused.
    fn admit(
        &self,
        cycle: &mut CycleState<'_>,
        candidates: &[&Arc<Endpoint>],
    ) -> Result<(), String>;
}

/// Decides, once the decode profile has picked, whether the request's prefill runs on a
/// separate server (prefill/decode disaggregation, see [`crate::disagg`]).
pub trait Decider: Send + Sync {
    /// Whether to disaggregate the request of `cycle` (the decode profile's cycle, with its
    /// cached-prefix estimates) whose decode server is `decode`.
    fn disaggregate(&self, cycle: &CycleState<'_>, decode: &Arc<Endpoint>) -> bool;
}

/// Runs once an endpoint is picked, before the request is forwarded.
pub trait PickHook: Send + Sync {
    /// `picked` will serve the request of `cycle`.
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>);
}
