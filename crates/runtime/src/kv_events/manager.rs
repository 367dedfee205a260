//! Which subscriptions run: one per (precise producer, endpoint) and one per bound socket,
//! following the endpoint set and config reloads.

use std::collections::BTreeMap;
use std::sync::Arc;

use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::resources::Resources;
use shepherd_scorers::producers::precise_prefix::{
    PUBLISHER_LABEL, REPLAY_LABEL, SCORER_TYPE_NAME, TYPE_NAME,
};
use shepherd_scorers::producers::{KvEventLimits, PreciseKvEvents};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

use super::apply::Target;
use super::bound::BoundSubscription;
use super::stats::KvEventStats;
use super::subscriber::EndpointSubscription;
use crate::config::{EndpointSpec, RuntimeConfig};
use crate::discovery::EndpointSet;
use crate::shutdown::ShutdownSignal;

/// What identifies one running subscription: when any part changes it is restarted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Endpoint {
        plugin: String,
        address: String,
        publisher: String,
        replay: Option<String>,
        filter: String,
        limits: KvEventLimits,
        feed: usize,
    },
    Bound {
        plugin: String,
        bind: String,
        filter: String,
        limits: KvEventLimits,
        feed: usize,
    },
}

/// Runs the KV-event subscriptions of every precise producer of the policy in force.
#[derive(Debug)]
pub(crate) struct KvEventsManager {
    pub(crate) resources: Arc<Resources>,
    pub(crate) pool: Arc<Pool>,
    pub(crate) sets: watch::Receiver<Arc<EndpointSet>>,
    pub(crate) configs: watch::Receiver<Arc<RuntimeConfig>>,
    pub(crate) stats: Arc<KvEventStats>,
}

impl KvEventsManager {
    /// Runs until `stop`.
    pub(crate) async fn run(mut self, stop: ShutdownSignal) {
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut running: BTreeMap<Key, AbortHandle> = BTreeMap::new();
        let (mut sets_open, mut configs_open) = (true, true);
        loop {
            let set = Arc::clone(&self.sets.borrow_and_update());
            let config = Arc::clone(&self.configs.borrow_and_update());
            let desired = self.desired(&set, &config);
            running.retain(|key, handle| {
                let keep = desired.contains_key(key);
                if !keep {
                    handle.abort();
                }
                keep
            });
            for (key, start) in desired {
                if running.contains_key(&key) {
                    continue;
                }
                let handle = match start {
                    Start::Endpoint(sub) => tasks.spawn(sub.run(stop.clone())),
                    Start::Bound(sub) => tasks.spawn(sub.run(stop.clone())),
                };
                running.insert(key, handle);
            }
            tokio::select! {
                changed = self.sets.changed(), if sets_open => sets_open = changed.is_ok(),
                changed = self.configs.changed(), if configs_open => configs_open = changed.is_ok(),
                Some(ended) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    let id = match &ended {
                        Ok((id, ())) => *id,
                        Err(error) => error.id(),
                    };
                    if let Err(error) = &ended && error.is_panic() {
                        tracing::error!(%error, "KV-event subscription panicked; restarting it");
                    }
                    running.retain(|_, handle| handle.id() != id);
                }
                () = stop.wait() => break,
            }
        }
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }

    /// The subscriptions the policy and the endpoint set ask for.
    fn desired(&self, set: &EndpointSet, config: &RuntimeConfig) -> BTreeMap<Key, Start> {
        let mut desired = BTreeMap::new();
        let feeds = config.policy.plugins.iter().filter_map(|spec| {
            let precise = matches!(spec.plugin_type.as_str(), TYPE_NAME | SCORER_TYPE_NAME);
            let name = spec
                .name
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(&spec.plugin_type);
            precise.then(|| {
                self.resources.get::<PreciseKvEvents>(
                    &shepherd_scorers::producers::precise_prefix::feed_name(name),
                )
            })?
        });
        for feed in feeds {
            // The feed's identity: a reload that rebuilt its index restarts its subscriptions.
            let id = Arc::as_ptr(&feed.index) as usize;
            let target = Target {
                feed: Arc::clone(&feed),
                pool: Arc::clone(&self.pool),
                stats: Arc::clone(&self.stats),
            };
            let subscription = &feed.subscription;
            if let Some(sockets) = subscription.per_endpoint {
                for spec in set.endpoints() {
                    let (publisher, replay) = sockets_of(spec, sockets.port, sockets.replay_port);
                    let key = Key::Endpoint {
                        plugin: feed.name.clone(),
                        address: spec.address(),
                        publisher: publisher.clone(),
                        replay: replay.clone(),
                        filter: subscription.topic_filter.clone(),
                        limits: subscription.limits,
                        feed: id,
                    };
                    let start = Start::Endpoint(EndpointSubscription {
                        target: target.clone(),
                        address: spec.address(),
                        publisher,
                        replay,
                        topic_filter: subscription.topic_filter.clone(),
                        limits: subscription.limits,
                    });
                    desired.insert(key, start);
                }
            }
            if let Some(bind) = &subscription.bind {
                let key = Key::Bound {
                    plugin: feed.name.clone(),
                    bind: bind.clone(),
                    filter: subscription.topic_filter.clone(),
                    limits: subscription.limits,
                    feed: id,
                };
                let start = Start::Bound(BoundSubscription {
                    target: target.clone(),
                    bind: bind.clone(),
                    topic_filter: subscription.topic_filter.clone(),
                    limits: subscription.limits,
                });
                desired.insert(key, start);
            }
        }
        desired
    }
}

/// A subscription to start.
enum Start {
    Endpoint(EndpointSubscription),
    Bound(BoundSubscription),
}

/// An endpoint's publisher and replay addresses: its labels when they name them, else its IP
/// at the configured ports.
fn sockets_of(
    spec: &EndpointSpec,
    port: u16,
    replay_port: Option<u16>,
) -> (String, Option<String>) {
    let ip = spec.addr.ip();
    let host = if ip.is_ipv6() {
        format!("[{ip}]")
    } else {
        ip.to_string()
    };
    let publisher = spec
        .label(PUBLISHER_LABEL)
        .map_or_else(|| format!("tcp://{host}:{port}"), str::to_string);
    let replay = spec
        .label(REPLAY_LABEL)
        .map(str::to_string)
        .or_else(|| replay_port.map(|p| format!("tcp://{host}:{p}")));
    (publisher, replay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_come_from_labels_or_the_endpoint_ip() {
        let plain = EndpointSpec::new("10.1.2.3:8000".parse().unwrap());
        assert_eq!(
            sockets_of(&plain, 5557, Some(5558)),
            (
                "tcp://10.1.2.3:5557".into(),
                Some("tcp://10.1.2.3:5558".into())
            )
        );
        assert_eq!(sockets_of(&plain, 5557, None).1, None);
        let labelled = plain
            .clone()
            .with_label(PUBLISHER_LABEL, "tcp://127.0.0.1:7000")
            .with_label(REPLAY_LABEL, "tcp://127.0.0.1:7001");
        assert_eq!(
            sockets_of(&labelled, 5557, None),
            (
                "tcp://127.0.0.1:7000".into(),
                Some("tcp://127.0.0.1:7001".into())
            )
        );
        let v6 = EndpointSpec::new("[::1]:8000".parse().unwrap());
        assert_eq!(sockets_of(&v6, 5557, None).0, "tcp://[::1]:5557");
    }
}
