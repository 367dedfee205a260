//! Discovery from a fixed list: the config file's `endpoints` section.

use std::sync::Arc;

use tokio::sync::watch;

use super::{Discovery, EndpointSet};

/// Endpoints from a list the embedder (or the config file) gives; [`replace`](Self::replace)
/// publishes a new list, which the runtime does when the config file's `endpoints` change.
///
/// ```
/// use shepherd_runtime::config::RuntimeConfig;
/// use shepherd_runtime::discovery::{Discovery, EndpointSet, StaticDiscovery};
///
/// let config = RuntimeConfig::from_yaml("endpoints: [127.0.0.1:8000]").unwrap();
/// let discovery = StaticDiscovery::from_config(&config);
/// let watch = discovery.subscribe();
/// assert_eq!(watch.borrow().addresses(), ["127.0.0.1:8000"]);
/// assert!(!discovery.replace(EndpointSet::new(config.endpoints.clone()))); // same set
/// assert!(discovery.replace(EndpointSet::default()));
/// assert!(watch.borrow().is_empty());
/// ```
#[derive(Debug)]
pub struct StaticDiscovery {
    tx: watch::Sender<Arc<EndpointSet>>,
}

impl StaticDiscovery {
    /// Discovery of exactly `set`.
    pub fn new(set: EndpointSet) -> Self {
        let (tx, _rx) = watch::channel(Arc::new(set));
        StaticDiscovery { tx }
    }

    /// Discovery of a config's `endpoints`.
    pub fn from_config(config: &crate::config::RuntimeConfig) -> Self {
        StaticDiscovery::new(EndpointSet::new(config.endpoints.iter().cloned()))
    }

    /// Publishes `set`; returns whether it differs from the current one (subscribers are only
    /// woken when it does).
    pub fn replace(&self, set: EndpointSet) -> bool {
        self.tx.send_if_modified(|current| {
            if **current == set {
                false
            } else {
                *current = Arc::new(set);
                true
            }
        })
    }

    /// The current set.
    pub fn current(&self) -> Arc<EndpointSet> {
        Arc::clone(&self.tx.borrow())
    }
}

impl Discovery for StaticDiscovery {
    fn name(&self) -> &str {
        "static"
    }

    fn subscribe(&self) -> watch::Receiver<Arc<EndpointSet>> {
        self.tx.subscribe()
    }
}
