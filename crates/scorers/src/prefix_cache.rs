//! `prefix-cache-scorer`: scores endpoints by how much of the request's prompt prefix they are
//! believed to hold in their KV cache. (Placeholder until the prefix-cache index lands: every
//! endpoint scores neutral.)

use std::sync::Arc;

use shepherd_scheduler_core::config::PluginArgs;
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};

/// Registry type name.
pub const TYPE_NAME: &str = "prefix-cache-scorer";

struct Placeholder;

impl Scorer for Placeholder {
    fn category(&self) -> Category {
        Category::Affinity
    }
    fn score(&self, _: &mut CycleState<'_>, _: &[&Arc<Endpoint>], out: &mut [Score]) {
        out.fill(Score::NEUTRAL);
    }
}

/// Builds a `prefix-cache-scorer` from its config arguments.
pub fn factory(_args: &PluginArgs<'_>) -> Result<PluginInstance, String> {
    Ok(PluginInstance::scorer(Arc::new(Placeholder)))
}
