//! `replicas.peers`: who the direct exchange talks to. Either a fixed list of addresses, or
//! the picker's own pods found on Kubernetes by a label selector (`{kubernetes: {...}}`).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::DEFAULT_MAX_PEERS;

/// The peers of the direct exchange: `[ip:port, ...]` or `{kubernetes: {...}}`.
///
/// ```
/// use shepherd_runtime::config::ReplicaPeers;
///
/// let fixed: ReplicaPeers = serde_norway::from_str("[10.0.0.6:9400, 10.0.0.7:9400]").unwrap();
/// assert_eq!(fixed.fixed().len(), 2);
/// let found: ReplicaPeers =
///     serde_norway::from_str("kubernetes: {selector: app=shepherd-epp, port: 9400}").unwrap();
/// let kubernetes = found.kubernetes().unwrap();
/// assert_eq!((kubernetes.selector.as_str(), kubernetes.port), ("app=shepherd-epp", Some(9400)));
/// assert_eq!(kubernetes.max_peers, 64);
/// assert!(found.fixed().is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ReplicaPeers {
    /// The other replicas' `listen` addresses, written out.
    Fixed(Vec<SocketAddr>),
    /// The picker's own pods, watched through the API server.
    Discovered {
        /// Where and which pods.
        kubernetes: KubernetesPeers,
    },
}

impl Default for ReplicaPeers {
    fn default() -> Self {
        ReplicaPeers::Fixed(Vec::new())
    }
}

impl ReplicaPeers {
    /// The written-out addresses (none when the peers are discovered).
    pub fn fixed(&self) -> &[SocketAddr] {
        match self {
            ReplicaPeers::Fixed(peers) => peers,
            ReplicaPeers::Discovered { .. } => &[],
        }
    }

    /// The Kubernetes discovery of the peers, when configured.
    pub fn kubernetes(&self) -> Option<&KubernetesPeers> {
        match self {
            ReplicaPeers::Fixed(_) => None,
            ReplicaPeers::Discovered { kubernetes } => Some(kubernetes),
        }
    }

    /// Whether no peer is named and none is to be discovered.
    pub fn is_empty(&self) -> bool {
        matches!(self, ReplicaPeers::Fixed(peers) if peers.is_empty())
    }
}

/// Default first wait after a failed watch of the peer pods: 500 ms.
pub const DEFAULT_PEER_BACKOFF_INITIAL_MS: u64 = 500;
/// Default longest wait between two tries: 10 s.
pub const DEFAULT_PEER_BACKOFF_MAX_MS: u64 = 10_000;

/// The picker's own pods as its peers: every pod of `namespace` whose labels match `selector`,
/// that is Ready, not being deleted and has an IP, is a peer at `podIP:port`, except this
/// replica itself. Kept live through a watch; an unreachable API server keeps the last peers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesPeers {
    /// A label selector (`app=shepherd-epp`, `app=epp,tier in (a,b)`): the replicas' pods.
    pub selector: String,
    /// The UDP port every replica listens on (default: `listen`'s port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The namespace (default: `NAMESPACE`, `POD_NAMESPACE`, the service account's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The most peers kept (default 64): pods past it are counted and not heard.
    #[serde(default = "default_max_peers")]
    pub max_peers: usize,
    /// A kubeconfig file to reach the API server with (default: the pod's service account,
    /// else `KUBECONFIG` or `~/.kube/config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    /// First wait after a failed watch, in milliseconds (default 500, doubling).
    #[serde(default = "default_backoff_initial")]
    pub backoff_initial_ms: u64,
    /// Longest wait between two tries, in milliseconds (default 10000).
    #[serde(default = "default_backoff_max")]
    pub backoff_max_ms: u64,
}

fn default_max_peers() -> usize {
    DEFAULT_MAX_PEERS
}

fn default_backoff_initial() -> u64 {
    DEFAULT_PEER_BACKOFF_INITIAL_MS
}

fn default_backoff_max() -> u64 {
    DEFAULT_PEER_BACKOFF_MAX_MS
}

/// The largest `maxPeers`: the exchange keeps a table slot and a replay window per peer.
pub const MAX_DISCOVERED_PEERS: usize = 4_096;

impl KubernetesPeers {
    /// Why the subsection is invalid, if it is (field, reason).
    pub(crate) fn problem(&self) -> Option<(&'static str, String)> {
        if self.selector.trim().is_empty() {
            return Some((
                "replicas.peers.kubernetes.selector",
                "is empty: name the replicas' pods (`app=shepherd-epp`)".into(),
            ));
        }
        if let Err(error) = self.selector.parse::<crate::discovery::LabelSelector>() {
            return Some(("replicas.peers.kubernetes.selector", error.to_string()));
        }
        if self.port == Some(0) {
            return Some(("replicas.peers.kubernetes.port", "must not be 0".into()));
        }
        if self.max_peers == 0 || self.max_peers > MAX_DISCOVERED_PEERS {
            return Some((
                "replicas.peers.kubernetes.maxPeers",
                format!("must be between 1 and {MAX_DISCOVERED_PEERS}"),
            ));
        }
        None
    }
}

impl<'de> Deserialize<'de> for ReplicaPeers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(PeersVisitor)
    }
}

struct PeersVisitor;

/// The mapping form, with its one key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Discovered {
    kubernetes: KubernetesPeers,
}

impl<'de> Visitor<'de> for PeersVisitor {
    type Value = ReplicaPeers;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of ip:port addresses, or {kubernetes: {selector: ..., port: ...}}")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ReplicaPeers, A::Error> {
        let peers = Vec::<SocketAddr>::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
        Ok(ReplicaPeers::Fixed(peers))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ReplicaPeers, A::Error> {
        let found = Discovered::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(ReplicaPeers::Discovered {
            kubernetes: found.kubernetes,
        })
    }

    fn visit_unit<E: de::Error>(self) -> Result<ReplicaPeers, E> {
        Ok(ReplicaPeers::default())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_two_forms_and_their_mistakes() {
        let peers: ReplicaPeers = serde_norway::from_str("[]").unwrap();
        assert!(peers.is_empty());
        let found: ReplicaPeers = serde_norway::from_str(
            "kubernetes: {selector: 'app=epp', namespace: inference, maxPeers: 8}",
        )
        .unwrap();
        let k = found.kubernetes().unwrap();
        assert_eq!((k.port, k.max_peers), (None, 8));
        assert!(k.problem().is_none());
        let error = serde_norway::from_str::<ReplicaPeers>("kubernetes: {selector: a, prot: 1}")
            .unwrap_err()
            .to_string();
        assert!(error.contains("prot"), "{error}");
        let error = serde_norway::from_str::<ReplicaPeers>("consul: {}")
            .unwrap_err()
            .to_string();
        assert!(error.contains("consul"), "{error}");
        assert!(serde_norway::from_str::<ReplicaPeers>("[not-an-address]").is_err());
        let bad: ReplicaPeers =
            serde_norway::from_str("kubernetes: {selector: 'app=x', maxPeers: 0}").unwrap();
        assert_eq!(
            bad.kubernetes().unwrap().problem().unwrap().0,
            "replicas.peers.kubernetes.maxPeers"
        );
        // Written back as read.
        let text = serde_norway::to_string(&found).unwrap();
        assert_eq!(
            serde_norway::from_str::<ReplicaPeers>(&text).unwrap(),
            found
        );
    }
}
