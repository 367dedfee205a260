//! `active-request-scorer`: prefers endpoints with fewer requests in flight from this
//! scheduler.
//!
//! Unlike the scraped queue and running counts, the in-flight count
//! ([`Endpoint::in_flight_requests`]) is the scheduler's own and always fresh: it rises the
//! moment a pick is made and falls when the response ends. It is therefore the signal that
//! spreads a burst of simultaneous requests before any scrape can see them. Normalized relative
//! to the busiest candidate, `1 − in_flight / max_in_flight` (all idle = 1), so two busy
//! endpoints a couple of requests apart score nearly alike while a hot spot scores far below
//! the rest; never neutral.

use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};

use super::normalize::fewer_relative_to_busiest;
use crate::params::NoParameters;

/// Registry type name.
pub const TYPE_NAME: &str = "active-request-scorer";

/// Scores fewest in-flight requests highest (a [`Category::Distribution`] scorer).
#[derive(Debug, Clone, Copy, Default)]
pub struct ActiveRequestScorer;

impl Scorer for ActiveRequestScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, _cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        fewer_relative_to_busiest(out, |i| candidates[i].in_flight_requests());
    }
}

/// Builds an `active-request-scorer` (it takes no parameters).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    args.parse::<NoParameters>()?;
    Ok(PluginInstance::scorer(Arc::new(ActiveRequestScorer)))
}
