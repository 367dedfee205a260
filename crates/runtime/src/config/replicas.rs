//! The `replicas` section: how several active picker replicas share their in-flight load.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default time between two reports to the peers: 10 ms.
pub const DEFAULT_SYNC_INTERVAL_MS: u64 = 10;
/// Default age after which a peer's last report is forgotten (a dead or partitioned replica
/// stops weighing on the endpoints): 1 s.
pub const DEFAULT_PEER_EXPIRY_MS: u64 = 1_000;

/// Several `shepherd-epp` or `shepherd-gateway` replicas routing to the same servers each
/// count only the requests they sent. With this section each replica sends its per-endpoint
/// in-flight counts to its peers every `intervalMs` over UDP, and adds the peers' last
/// reports to its own when it balances load (`docs/replicas.md`). Reports are idempotent
/// (each carries the whole count, not a change), so a lost datagram costs one interval of
/// staleness; a peer silent for `expireMs` is forgotten. With precise prefix matching the
/// prefix index needs no exchange: every replica hears the servers' KV-cache events.
///
/// ```
/// use shepherd_runtime::config::ReplicasConfig;
///
/// let replicas: ReplicasConfig = serde_norway::from_str(
///     "listen: 10.0.0.5:9400\npeers: [10.0.0.6:9400, 10.0.0.7:9400]\n",
/// ).unwrap();
/// assert_eq!(replicas.peers.len(), 2);
/// assert_eq!(replicas.interval().as_millis(), 10);
/// assert_eq!(replicas.expiry().as_millis(), 1000);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplicasConfig {
    /// Where this replica receives its peers' reports (UDP).
    pub listen: SocketAddr,
    /// The other replicas' `listen` addresses.
    #[serde(default)]
    pub peers: Vec<SocketAddr>,
    /// Time between two reports, in milliseconds (default 10).
    #[serde(default = "default_interval")]
    pub interval_ms: u64,
    /// A peer silent this long is forgotten, in milliseconds (default 1000).
    #[serde(default = "default_expiry")]
    pub expire_ms: u64,
    /// Whether the replicas also send each other the block keys their picks record in the
    /// policy's approximate prefix indexes (default true; precise indexes need none).
    #[serde(default = "default_index_deltas")]
    pub index_deltas: bool,
}

fn default_index_deltas() -> bool {
    true
}

fn default_interval() -> u64 {
    DEFAULT_SYNC_INTERVAL_MS
}

fn default_expiry() -> u64 {
    DEFAULT_PEER_EXPIRY_MS
}

impl ReplicasConfig {
    /// Time between two reports.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    /// Age after which a peer's report is forgotten.
    pub fn expiry(&self) -> Duration {
        Duration::from_millis(self.expire_ms)
    }

    /// Why the section is invalid, if it is (field, reason).
    pub(crate) fn problem(&self) -> Option<(&'static str, String)> {
        if self.interval_ms == 0 {
            return Some(("replicas.intervalMs", "must be at least 1".into()));
        }
        if self.expire_ms <= self.interval_ms {
            return Some((
                "replicas.expireMs",
                format!(
                    "must be above intervalMs ({}): a peer would expire between its reports",
                    self.interval_ms
                ),
            ));
        }
        if let Some(peer) = self.peers.iter().find(|p| **p == self.listen) {
            return Some((
                "replicas.peers",
                format!("{peer} is this replica's own listen address"),
            ));
        }
        None
    }
}
