//! `running-requests-size-scorer`: prefers endpoints running fewer requests.
//!
//! Min-max normalized over the candidates exactly like the
//! [`queue-scorer`](super::queue), on the model server's running-request count. A candidate
//! with stale metrics gets [`Score::NEUTRAL`] and is left out of the normalization.

use std::sync::Arc;

use shepherd_scheduler_core::config::PluginArgs;
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};

use super::normalize::fewer_is_better;
use crate::params::NoParameters;

/// Registry type name.
pub const TYPE_NAME: &str = "running-requests-size-scorer";

/// Scores fewest running requests highest (a [`Category::Distribution`] scorer).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunningRequestsScorer;

impl Scorer for RunningRequestsScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        fewer_is_better(out, |i| {
            let metrics = candidates[i].load_metrics();
            (!metrics.is_stale(cycle.now, cycle.staleness_bound))
                .then(|| u64::from(metrics.running))
        });
    }
}

/// Builds a `running-requests-size-scorer` (it takes no parameters).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, String> {
    args.parse::<NoParameters>()?;
    Ok(PluginInstance::scorer(Arc::new(RunningRequestsScorer)))
}
