//! `queue-scorer`: prefers endpoints with fewer requests waiting in their queue.
//!
//! Min-max normalized over the candidates: the fewest waiting scores 1, the most waiting 0, and
//! when all wait equally every candidate scores 1. A candidate with stale metrics gets
//! [`Score::NEUTRAL`] and is left out of the normalization.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::scorers::QueueScorer;
//!
//! let pool = Pool::with_clock(Arc::new(ManualClock::default()));
//! pool.set_members(["127.0.0.1:8000", "127.0.0.1:8001", "127.0.0.1:8002"]);
//! let eps = pool.snapshot().endpoints().to_vec();
//! for (ep, waiting) in eps.iter().zip([0, 4, 8]) {
//!     ep.set_metrics(EndpointMetrics { waiting, ..Default::default() });
//! }
//! let candidates: Vec<&Arc<Endpoint>> = eps.iter().collect();
//! let request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_millis(200));
//! let mut out = [Score::NEUTRAL; 3];
//! QueueScorer.score(&mut cycle, &candidates, &mut out);
//! assert_eq!([out[0].value, out[1].value, out[2].value], [1.0, 0.5, 0.0]);
//! ```

use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};

use super::normalize::fewer_scraped;
use crate::params::NoParameters;

/// Registry type name.
pub const TYPE_NAME: &str = "queue-scorer";

/// Scores fewest waiting requests highest (a [`Category::Distribution`] scorer).
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueScorer;

impl Scorer for QueueScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        fewer_scraped(cycle, candidates, out, |m| m.waiting);
    }
}

/// Builds a `queue-scorer` (it takes no parameters).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    args.parse::<NoParameters>()?;
    Ok(PluginInstance::scorer(Arc::new(QueueScorer)))
}
