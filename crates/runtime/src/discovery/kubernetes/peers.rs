//! The direct exchange's peers found on Kubernetes (`replicas.peers: {kubernetes: ...}`): the
//! picker's own pods, by label selector in its namespace, watched live.
//!
//! A pod is a peer at `podIP:port` when it is Ready, not being deleted and has an IP (the
//! same rule as a serving pod, [`ServingPod`]); this replica is not its own peer (its pod
//! name from `POD_NAME`, or its own address). Pods rather than a headless Service's
//! endpoints: the picker already lists and watches pods for its pool, so no other resource
//! nor permission is needed, and a Service's `ready` endpoints follow the same pods' Ready
//! condition anyway.
//!
//! Like the pool's discovery: watches resume from their resourceVersion, a 410 Gone
//! relists (the relisted pods replace the known ones in one step), errors back off
//! ([`WatchBackoff`]), and **an unreachable API server never changes the peers**: the last
//! list stays, `shepherd_replicas_peer_discovery_stale` is 1 and the log says so once.
//!
//! ```
//! use std::net::SocketAddr;
//! use k8s_openapi::api::core::v1::Pod;
//! use shepherd_runtime::discovery::kubernetes::peer_address;
//!
//! let pod: Pod = serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": "epp-1", "labels": {"app": "epp"}},
//!     "status": {"podIP": "10.0.0.7", "conditions": [{"type": "Ready", "status": "True"}]},
//! })).unwrap();
//! let me: SocketAddr = "10.0.0.5:9400".parse().unwrap();
//! assert_eq!(peer_address(&pod, 9400, me, None), Some("10.0.0.7:9400".parse().unwrap()));
//! // The replica's own pod, by name or by address, is not a peer.
//! assert_eq!(peer_address(&pod, 9400, me, Some("epp-1")), None);
//! assert_eq!(peer_address(&pod, 9400, "10.0.0.7:9400".parse().unwrap(), None), None);
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use super::{KubernetesError, ServingPod, WatchBackoff, resolve_namespace};
use crate::config::ReplicasConfig;
use crate::replicas::{DiscoveredPeers, ReplicaStats};

/// How long one watch request lasts before it is renewed, in seconds.
const WATCH_TIMEOUT_SECS: u32 = 290;

/// The peer address of `pod`: `podIP:port` when it is Ready, not being deleted and has an
/// IP, and is neither this replica's pod (`own_name`) nor its address (`me`).
pub fn peer_address(
    pod: &Pod,
    port: u16,
    me: SocketAddr,
    own_name: Option<&str>,
) -> Option<SocketAddr> {
    if own_name.is_some_and(|own| pod.metadata.name.as_deref() == Some(own)) {
        return None;
    }
    let serving = ServingPod::from_pod(pod)?;
    let address = SocketAddr::new(serving.ip, port);
    (address != me).then_some(address)
}

/// Starts watching the peers of `config` (whose `peers` must be `{kubernetes: ...}`); the
/// figures go to `stats`. The task stops when the returned value is dropped.
pub(crate) async fn start_peer_discovery(
    config: &ReplicasConfig,
    stats: Arc<ReplicaStats>,
) -> Result<DiscoveredPeers, KubernetesError> {
    let Some(kubernetes) = config.peers.kubernetes() else {
        return Err(KubernetesError::Config(
            "replicas.peers names no `kubernetes` section".into(),
        ));
    };
    let kube_config = match &kubernetes.kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                KubernetesError::Config(format!(
                    "replicas.peers.kubernetes.kubeconfig {}: {e}",
                    path.display()
                ))
            })?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| {
                    KubernetesError::Config(format!(
                        "replicas.peers.kubernetes.kubeconfig {}: {e}",
                        path.display()
                    ))
                })?
        }
        None => kube::Config::infer()
            .await
            .map_err(KubernetesError::Credentials)?,
    };
    let namespace = resolve_namespace(
        kubernetes.namespace.as_deref(),
        &kube_config.default_namespace,
    );
    let client = Client::try_from(kube_config).map_err(KubernetesError::Client)?;
    let own_name = std::env::var("POD_NAME")
        .ok()
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty());
    let (tx, rx) = watch::channel(Arc::new(Vec::new()));
    let watch = PeerWatch {
        client,
        namespace,
        selector: kubernetes.selector.clone(),
        port: config.peer_port(),
        me: config.identity(),
        own_name,
        backoff: WatchBackoff::new(
            Duration::from_millis(kubernetes.backoff_initial_ms),
            Duration::from_millis(kubernetes.backoff_max_ms),
        ),
        tx,
        stats,
    };
    tracing::info!(
        selector = %watch.selector,
        namespace = %watch.namespace,
        port = watch.port,
        me = %watch.me,
        pod = watch.own_name.as_deref().unwrap_or("-"),
        max_peers = kubernetes.max_peers,
        "finding peer replicas among the pods of the selector"
    );
    Ok(DiscoveredPeers {
        rx,
        max: kubernetes.max_peers,
        task: Some(tokio::spawn(watch.run())),
    })
}

/// The watch task.
struct PeerWatch {
    client: Client,
    namespace: String,
    selector: String,
    port: u16,
    me: SocketAddr,
    own_name: Option<String>,
    backoff: WatchBackoff,
    tx: watch::Sender<Arc<Vec<SocketAddr>>>,
    stats: Arc<ReplicaStats>,
}

impl PeerWatch {
    async fn run(self) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let config = watcher::Config::default()
            .labels(&self.selector)
            .timeout(WATCH_TIMEOUT_SECS);
        let mut events = Box::pin(watcher::watcher(api, config).backoff(self.backoff.clone()));
        let probe_every = self
            .backoff
            .clone()
            .next()
            .unwrap_or(Duration::from_millis(500))
            .max(Duration::from_millis(100));
        // Pod name → its peer address (None: listed, but not a peer now).
        let mut pods: BTreeMap<String, Option<SocketAddr>> = BTreeMap::new();
        let mut relisting: Option<BTreeMap<String, Option<SocketAddr>>> = None;
        loop {
            let stale = self.stats.discovery_stale();
            tokio::select! {
                event = events.next() => match event {
                    Some(Ok(event)) => {
                        self.fresh();
                        let changed = self.on_event(event, &mut pods, &mut relisting);
                        if changed {
                            self.publish(&pods);
                        }
                    }
                    Some(Err(error)) => self.failed(&error),
                    None => return,
                },
                () = tokio::time::sleep(probe_every), if stale => self.probe().await,
            }
        }
    }

    /// Applies one event; returns whether the peers may have changed.
    fn on_event(
        &self,
        event: Event<Pod>,
        pods: &mut BTreeMap<String, Option<SocketAddr>>,
        relisting: &mut Option<BTreeMap<String, Option<SocketAddr>>>,
    ) -> bool {
        let name = |pod: &Pod| pod.metadata.name.clone().unwrap_or_default();
        match event {
            Event::Init => {
                *relisting = Some(BTreeMap::new());
                false
            }
            Event::InitApply(pod) => {
                if let Some(listed) = relisting {
                    listed.insert(name(&pod), self.address(&pod));
                }
                false
            }
            Event::InitDone => {
                if let Some(listed) = relisting.take() {
                    *pods = listed;
                }
                true
            }
            Event::Apply(pod) => {
                let address = self.address(&pod);
                pods.insert(name(&pod), address) != Some(address)
            }
            Event::Delete(pod) => pods.remove(&name(&pod)).is_some(),
        }
    }

    fn address(&self, pod: &Pod) -> Option<SocketAddr> {
        peer_address(pod, self.port, self.me, self.own_name.as_deref())
    }

    fn publish(&self, pods: &BTreeMap<String, Option<SocketAddr>>) {
        let mut peers: Vec<SocketAddr> = pods.values().flatten().copied().collect();
        peers.sort_unstable();
        peers.dedup();
        let changed = self.tx.send_if_modified(|current| {
            if **current == peers {
                false
            } else {
                *current = Arc::new(peers);
                true
            }
        });
        if changed {
            tracing::debug!(peers = ?self.tx.borrow(), "peer replicas listed");
        }
    }

    fn failed(&self, error: &watcher::Error) {
        if !self.stats.discovery_stale.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                %error,
                peers = self.tx.borrow().len(),
                "peer replica discovery is stale: the API server cannot be watched; the last peers stay while retrying"
            );
        } else {
            tracing::debug!(%error, "peer replica watch still failing");
        }
    }

    fn fresh(&self) {
        if self.stats.discovery_stale.swap(false, Ordering::Relaxed) {
            tracing::info!("peer replica discovery resumed: the API server answers again");
        }
    }

    /// While stale: asks the API server for one pod (a watch that resumes with nothing to
    /// report yields no event).
    async fn probe(&self) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let params = ListParams::default().labels(&self.selector).limit(1);
        let answered = tokio::time::timeout(Duration::from_secs(2), api.list(&params))
            .await
            .is_ok_and(|r| r.is_ok());
        if answered {
            self.fresh();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pod(name: &str, ip: &str, ready: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]},
        }))
        .unwrap()
    }

    #[test]
    fn only_other_ready_pods_with_an_ip_are_peers() {
        let me: SocketAddr = "10.0.0.1:9400".parse().unwrap();
        assert_eq!(
            peer_address(&pod("a", "10.0.0.1", true), 9400, me, None),
            None
        );
        assert_eq!(
            peer_address(&pod("a", "10.0.0.1", true), 9401, me, None),
            Some("10.0.0.1:9401".parse().unwrap()),
            "another port of the same IP is another replica"
        );
        assert_eq!(
            peer_address(&pod("b", "10.0.0.2", false), 9400, me, None),
            None
        );
        assert_eq!(
            peer_address(&pod("b", "not-an-ip", true), 9400, me, None),
            None
        );
    }
}
