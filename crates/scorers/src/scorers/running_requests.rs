//! `running-requests-size-scorer`: prefers endpoints running fewer requests.
//!
//! Min-max normalized over the candidates exactly like the
//! [`queue-scorer`](super::queue), on the model server's running-request count. A candidate
//! with stale metrics gets [`Score::NEUTRAL`] and is left out of the normalization.

use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};

use super::normalize::fewer_scraped;
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
        fewer_scraped(cycle, candidates, out, |m| m.running);
    }
}

/// Builds a `running-requests-size-scorer` (it takes no parameters).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    args.parse::<NoParameters>()?;
    Ok(PluginInstance::scorer(Arc::new(RunningRequestsScorer)))
}
