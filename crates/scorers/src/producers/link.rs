//! [`ProducerLink`]: how a consumer finds the prefix producer it reads, by name, once.
//!
//! Plugins are built in the order the config lists them, and upstream configs may list a
//! consumer before its producer. So a consumer does not look its producer up while it is
//! built: it looks it up in the shared resources on its first scheduling cycle, when every
//! plugin of the config exists, and keeps what it found. Names are tried in order, each as a
//! [`PrefixProducer`] (an `approx-prefix-cache-producer`) or as a bare [`PrefixIndex`] (the
//! index of a `prefix-cache-scorer` in its all-in-one form); then the consumer's own fallback;
//! and when there is none, a producer with the default parameters is created under the first
//! name, as upstream creates a default producer for a consumer that has none.

use std::sync::{Arc, OnceLock};

use shepherd_scheduler_core::endpoint::{MembershipListener, Pool};
use shepherd_scheduler_core::resources::Resources;

use super::PrefixProducer;
use super::approx_prefix::{self, ApproxPrefixParameters};

/// A consumer's lazily resolved prefix producer. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct ProducerLink {
    resources: Arc<Resources>,
    pool: Arc<Pool>,
    names: Vec<String>,
    fallback: Option<Arc<PrefixProducer>>,
    resolved: OnceLock<Arc<PrefixProducer>>,
}

impl ProducerLink {
    /// A link trying `names` in order, then `fallback`.
    pub(crate) fn new(
        resources: &Arc<Resources>,
        pool: &Arc<Pool>,
        names: Vec<String>,
        fallback: Option<Arc<PrefixProducer>>,
    ) -> Self {
        ProducerLink {
            resources: Arc::clone(resources),
            pool: Arc::clone(pool),
            names,
            fallback,
            resolved: OnceLock::new(),
        }
    }

    /// The producer (resolved on the first call).
    pub(crate) fn get(&self) -> &Arc<PrefixProducer> {
        self.resolved.get_or_init(|| self.resolve())
    }

    /// The producer found under one of the names or the fallback, never creating one (for a
    /// consumer that reads a prefix match only when the config has one). Not memoized: call
    /// it from a consumer's own once-resolved slot.
    pub(crate) fn find_existing(&self) -> Option<Arc<PrefixProducer>> {
        if let Some(found) = self.resolved.get() {
            return Some(Arc::clone(found));
        }
        self.find().or_else(|| self.fallback.clone())
    }

    fn find(&self) -> Option<Arc<PrefixProducer>> {
        for name in &self.names {
            if let Some(producer) = self.resources.get::<PrefixProducer>(name) {
                return Some(producer);
            }
            if let Some(index) = self.resources.get(name) {
                return Some(Arc::new(PrefixProducer::new(index, true, name)));
            }
        }
        None
    }

    fn resolve(&self) -> Arc<PrefixProducer> {
        if let Some(found) = self.find() {
            return found;
        }
        if let Some(fallback) = &self.fallback {
            return Arc::clone(fallback);
        }
        let name = self
            .names
            .first()
            .map_or(approx_prefix::TYPE_NAME, String::as_str);
        let producer = self.resources.get_or_insert_with(name, || {
            approx_prefix::producer(&ApproxPrefixParameters::default(), name, None)
        });
        let listener: Arc<dyn MembershipListener> = Arc::clone(producer.index()) as _;
        self.pool.add_listener(&listener);
        producer
    }
}
