//! Finding the approximate prefix indexes a scheduler's plugins registered, for code outside
//! the plugins that shares what they learn (picker replicas exchanging their inserts).

use std::sync::Arc;

use shepherd_scheduler_core::prefix::PrefixIndex;
use shepherd_scheduler_core::resources::Resources;

use super::PrefixProducer;

/// Every approximate prefix index in `resources` — a `prefix-cache-scorer`'s own (kept under
/// the scorer's name) or an `approx-prefix-cache-producer`'s (under the producer's) — once each
/// (under the first of its names), ordered by name, so that replicas built from one config
/// list them alike. Precise indexes (fed by KV events) are not among them.
///
/// ```
/// use std::sync::Arc;
/// use shepherd_scheduler_core::prelude::*;
/// use shepherd_scheduler_core::config::build_scheduler_in;
/// use shepherd_scorers::builtin_registry;
/// use shepherd_scorers::producers::approximate_indexes;
///
/// let config = EndpointPickerConfig::from_yaml("
/// plugins:
/// - type: prefix-cache-scorer
/// - type: max-score-picker
/// schedulingProfiles:
/// - name: default
///   plugins: [{pluginRef: prefix-cache-scorer}, {pluginRef: max-score-picker}]
/// ").unwrap();
/// let shared = SharedState::new(Arc::new(Pool::new()));
/// let _scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
/// let indexes = approximate_indexes(&shared.resources);
/// assert_eq!(indexes.len(), 1);
/// assert_eq!(indexes[0].0, "prefix-cache-scorer");
/// ```
pub fn approximate_indexes(resources: &Resources) -> Vec<(String, Arc<PrefixIndex>)> {
    let mut named: Vec<(String, Arc<PrefixIndex>)> = resources.all::<PrefixIndex>();
    named.extend(
        resources
            .all::<PrefixProducer>()
            .into_iter()
            .filter(|(_, producer)| !producer.is_precise())
            .map(|(name, producer)| (name, Arc::clone(producer.index()))),
    );
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<(String, Arc<PrefixIndex>)> = Vec::new();
    for (name, index) in named {
        if !out.iter().any(|(_, known)| Arc::ptr_eq(known, &index)) {
            out.push((name, index));
        }
    }
    out
}
