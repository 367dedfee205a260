//! `active-request-scorer`: prefers endpoints with fewer requests in flight from this
//! scheduler.
//!
//! Unlike the scraped queue and running counts, the in-flight count
//! ([`Endpoint::in_flight_requests`]) is the scheduler's own and always fresh: it rises the
//! moment a pick is made and falls when the response ends. It is therefore the signal that
//! spreads a burst of simultaneous requests before any scrape can see them. With several
//! picker replicas exchanging their counts, the count is this scheduler's plus what its peers
//! last reported ([`Endpoint::total_in_flight_requests`]).
//!
//! As upstream: a candidate with at most `idleThreshold` requests in flight scores 1; a busier
//! one scores `(max − count) / max × maxBusyScore`, where `max` is the busiest candidate's
//! count, so the busiest scores 0. With the defaults (0 and 1) that is `1 − count / max`, all
//! idle = 1; never neutral.
//!
//! ## Parameters
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `idleThreshold` | 0 | in-flight count at or below which a candidate is idle and scores 1 (negative = 0) |
//! | `maxBusyScore` | 1.0 | the most a busy candidate scores; outside [0, 1] the default is used, as upstream |
//! | `requestTimeout` | — | deprecated upstream and ignored (a duration string); Shepherd's in-flight counts are released when the response ends |
//! | `inFlightLoadProducerName` | — | accepted and ignored: the in-flight counts are the endpoints' own, no producer is needed |
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: active-request-scorer
//!   name: active-tracker
//!   parameters:
//!     idleThreshold: 2
//!     maxBusyScore: 0.5
//!     requestTimeout: 2m
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: active-tracker
//!     weight: 5
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000"]);
//! assert!(build_scheduler(&config, &builtin_registry(), pool).is_ok());
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};

/// Registry type name.
pub const TYPE_NAME: &str = "active-request-scorer";

/// The `active-request-scorer` parameters (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ActiveRequestParameters {
    /// In-flight count at or below which a candidate is idle.
    pub idle_threshold: i64,
    /// The most a busy candidate scores.
    pub max_busy_score: Option<f64>,
    /// Deprecated upstream; ignored.
    pub request_timeout: Option<String>,
    /// Ignored: in-flight counts need no producer in Shepherd.
    pub in_flight_load_producer_name: Option<String>,
}

/// Scores fewest in-flight requests highest (a [`Category::Distribution`] scorer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActiveRequestScorer {
    idle_threshold: u64,
    max_busy_score: f64,
}

impl Default for ActiveRequestScorer {
    fn default() -> Self {
        ActiveRequestScorer {
            idle_threshold: 0,
            max_busy_score: 1.0,
        }
    }
}

impl ActiveRequestScorer {
    /// A scorer with upstream's handling of `parameters`: a negative threshold is 0, a
    /// `maxBusyScore` outside [0, 1] is 1.
    pub fn new(parameters: &ActiveRequestParameters) -> Self {
        let max_busy_score = parameters
            .max_busy_score
            .filter(|s| (0.0..=1.0).contains(s))
            .unwrap_or(1.0);
        ActiveRequestScorer {
            idle_threshold: u64::try_from(parameters.idle_threshold).unwrap_or(0),
            max_busy_score,
        }
    }

    /// The score of a candidate with `count` in flight when the busiest has `max`.
    pub fn score_of(&self, count: u64, max: u64) -> f64 {
        if count <= self.idle_threshold || max == 0 {
            1.0
        } else {
            (max - count.min(max)) as f64 / max as f64 * self.max_busy_score
        }
    }
}

impl Scorer for ActiveRequestScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, _cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let max = candidates
            .iter()
            .map(|e| e.total_in_flight_requests())
            .max()
            .unwrap_or(0);
        for (slot, endpoint) in out.iter_mut().zip(candidates) {
            *slot = Score::new(self.score_of(endpoint.total_in_flight_requests(), max));
        }
    }
}

/// Builds an `active-request-scorer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: ActiveRequestParameters = args.parse()?;
    Ok(PluginInstance::scorer(Arc::new(ActiveRequestScorer::new(
        &parameters,
    ))))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn scorer(json: serde_json::Value) -> ActiveRequestScorer {
        ActiveRequestScorer::new(&serde_json::from_value(json).unwrap())
    }

    #[test]
    fn defaults_score_one_minus_count_over_max() {
        let s = scorer(serde_json::json!({}));
        assert_eq!(s.score_of(0, 4), 1.0);
        assert_eq!(s.score_of(1, 4), 0.75);
        assert_eq!(s.score_of(4, 4), 0.0);
        assert_eq!(s.score_of(0, 0), 1.0);
    }

    #[test]
    fn idle_candidates_score_one_and_busy_ones_at_most_max_busy_score() {
        // Upstream's README example: idleThreshold 2, maxBusyScore 0.5.
        let s = scorer(serde_json::json!({"idleThreshold": 2, "maxBusyScore": 0.5}));
        assert_eq!(s.score_of(2, 10), 1.0);
        assert_eq!(s.score_of(3, 10), 0.35);
        assert_eq!(s.score_of(10, 10), 0.0);
    }

    #[test]
    fn out_of_range_values_fall_back_as_upstream() {
        assert_eq!(
            scorer(serde_json::json!({"maxBusyScore": 1.5, "idleThreshold": -3})),
            ActiveRequestScorer::default()
        );
        assert_eq!(
            scorer(serde_json::json!({"requestTimeout": "2m", "inFlightLoadProducerName": "x"})),
            ActiveRequestScorer::default()
        );
        assert!(
            serde_json::from_value::<ActiveRequestParameters>(serde_json::json!({"idle": 1}))
                .is_err()
        );
    }
}
