//! [`LatencyLink`]: how a consumer (the `latency-scorer`, the `slo-headroom-tier-filter`, the
//! `latency-slo-admitter`) finds the `predicted-latency-producer` it reads, by name, on its
//! first cycle (plugins may be declared in any order). When the config declares none under that
//! name, a producer with the default settings is created under it and shared by every consumer
//! that names it, as upstream creates a default producer for a consumer that has none.
//!
//! A link is also the consumer's pick and completion hook: it forwards both to the producer,
//! so the producer learns whether or not it is declared; it keeps one context per request, so
//! several consumers forwarding the same pick or completion teach it once.

use std::sync::{Arc, OnceLock};

use shepherd_scheduler_core::completion::{CompletedRequest, Completion, CompletionHook};
use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
use shepherd_scheduler_core::plugin::{CycleState, PickHook};
use shepherd_scheduler_core::resources::Resources;

use super::{LatencyProducer, LatencyProducerSettings};
use crate::producers::link::ProducerLink;

/// Upstream's default producer name (and type).
pub const DEFAULT_PRODUCER: &str = "predicted-latency-producer";

/// A consumer's lazily resolved latency producer. See the [module docs](self).
#[derive(Debug)]
pub struct LatencyLink {
    resources: Arc<Resources>,
    pool: Arc<Pool>,
    name: String,
    resolved: OnceLock<Arc<LatencyProducer>>,
}

impl LatencyLink {
    /// A link to the producer called `name` (`None`: [`DEFAULT_PRODUCER`]).
    pub fn new(resources: &Arc<Resources>, pool: &Arc<Pool>, name: Option<&str>) -> Self {
        LatencyLink {
            resources: Arc::clone(resources),
            pool: Arc::clone(pool),
            name: name.unwrap_or(DEFAULT_PRODUCER).to_string(),
            resolved: OnceLock::new(),
        }
    }

    /// The producer (resolved, or created, on the first call).
    pub fn get(&self) -> &Arc<LatencyProducer> {
        self.resolved.get_or_init(|| {
            self.resources.get_or_insert_with(&self.name, || {
                LatencyProducer::new(
                    &self.name,
                    LatencyProducerSettings::default(),
                    Some(default_prefix_link(&self.resources, &self.pool, None)),
                )
            })
        })
    }
}

impl PickHook for LatencyLink {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        self.get().record_pick(cycle, picked);
    }
}

impl CompletionHook for LatencyLink {
    fn on_complete(&self, request: &CompletedRequest<'_>, completion: &Completion) {
        self.get().record_completion(request, completion);
    }
}

/// The prefix producer a latency producer reads: `name`, else the declared
/// `approx-prefix-cache-producer`, else the index of an all-in-one `prefix-cache-scorer`
/// (never one created for it).
pub(crate) fn default_prefix_link(
    resources: &Arc<Resources>,
    pool: &Arc<Pool>,
    name: Option<&str>,
) -> ProducerLink {
    let names = match name {
        Some(name) => vec![name.to_string()],
        None => vec![
            crate::producers::approx_prefix::TYPE_NAME.to_string(),
            crate::prefix_cache::TYPE_NAME.to_string(),
        ],
    };
    ProducerLink::new(resources, pool, names, None)
}
