//! The `replicas` section: how several active picker replicas share their in-flight load.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use super::replicas_redis::{
    DEFAULT_HISTORY_ENTRIES, DEFAULT_MAX_PEERS, DEFAULT_REDIS_PREFIX, DEFAULT_REDIS_TIMEOUT_MS,
    RedisReplicasConfig, RedisTls,
};
use super::{ReplicaPeers, Secret};
use crate::replicas::key::{MIN_SECRET_BYTES, MacKey};

/// What the replicas exchange their load and index inserts through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ReplicaBackend {
    /// Authenticated UDP datagrams straight to the configured `peers` (the default).
    #[default]
    Direct,
    /// Two bounded streams in a Redis or Valkey server that every replica reads and writes
    /// (the `redis` subsection).
    Redis,
}

impl ReplicaBackend {
    fn is_direct(&self) -> bool {
        *self == ReplicaBackend::Direct
    }
}

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
/// Every datagram is authenticated with `key`, a secret the replicas share (inline,
/// `{env: NAME}` or `{file: path}`; at least 16 bytes), and carries its sender (the address
/// its peers list it under: `advertise`, default `listen`) and a sequence number in a replay
/// window: only the configured `peers` are heard. Without a key the section is refused,
/// unless `insecure: true` is written out.
///
/// ```
/// use shepherd_runtime::config::{ReplicasConfig, Secret};
///
/// let replicas: ReplicasConfig = serde_norway::from_str(
///     "listen: 10.0.0.5:9400\npeers: [10.0.0.6:9400, 10.0.0.7:9400]\nkey: {env: SHEPHERD_REPLICAS_KEY}\n",
/// ).unwrap();
/// assert_eq!(replicas.peers.fixed().len(), 2);
/// assert_eq!(replicas.interval().as_millis(), 10);
/// assert_eq!(replicas.expiry().as_millis(), 1000);
/// assert_eq!(replicas.key, Some(Secret::Env { env: "SHEPHERD_REPLICAS_KEY".into() }));
/// assert_eq!(replicas.identity(), "10.0.0.5:9400".parse().unwrap());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplicasConfig {
    /// The medium: `direct` (UDP to `peers`, the default) or `redis`.
    #[serde(default, skip_serializing_if = "ReplicaBackend::is_direct")]
    pub backend: ReplicaBackend,
    /// The Redis or Valkey server of `backend: redis`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisReplicasConfig>,
    /// Where this replica receives its peers' reports (UDP; `backend: direct` only, where it
    /// is required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// The other replicas' `listen` addresses, or `{kubernetes: {selector, port}}` to find
    /// them among the picker's own pods ([`ReplicaPeers`]).
    #[serde(default)]
    pub peers: ReplicaPeers,
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
    /// The shared secret every datagram is authenticated with (required unless `insecure`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<Secret>,
    /// Run without a key: anyone who reaches `listen` can forge load and index entries
    /// (default false; a warning at every start).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// The address this replica's peers list it under, when it is not `listen` (a replica
    /// listening on `0.0.0.0` must name it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertise: Option<SocketAddr>,
}

/// Why the `replicas` key could not be read.
#[derive(Debug, thiserror::Error)]
#[error("replicas.key: {0}")]
pub struct ReplicasKeyError(String);

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

    /// The address this replica names itself by in its datagrams: `advertise`, else
    /// `listen` (the unspecified address `0.0.0.0:0` when neither is set, as with
    /// `backend: redis`). With peers found on Kubernetes and `listen` on an unspecified
    /// address, the pod's IP from the `POD_IP` variable (the downward API's `status.podIP`)
    /// with `listen`'s port.
    pub fn identity(&self) -> SocketAddr {
        if let Some(advertise) = self.advertise {
            return advertise;
        }
        let listen = self.listen_addr();
        if listen.ip().is_unspecified()
            && self.peers.kubernetes().is_some()
            && let Some(ip) = std::env::var("POD_IP")
                .ok()
                .and_then(|ip| ip.trim().parse::<std::net::IpAddr>().ok())
        {
            return SocketAddr::new(ip, listen.port());
        }
        listen
    }

    /// The UDP port the discovered peers listen on: `peers.kubernetes.port`, else `listen`'s.
    pub fn peer_port(&self) -> u16 {
        self.peers
            .kubernetes()
            .and_then(|k| k.port)
            .unwrap_or(self.listen_addr().port())
    }

    /// Where the direct exchange's UDP socket binds (`0.0.0.0:0` when `listen` is not set,
    /// which the config check refuses for `backend: direct`).
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen.unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// The key the datagrams are sealed and checked with: derived from `key` (its variable or
    /// file read now), or the public key of `insecure: true`.
    ///
    /// # Errors
    ///
    /// When `key` cannot be read or is shorter than 16 bytes, or there is none and
    /// `insecure` is not set.
    pub fn mac_key(&self) -> Result<MacKey, ReplicasKeyError> {
        match (&self.key, self.insecure) {
            (Some(secret), _) => {
                let value = secret
                    .resolve()
                    .map_err(|e| ReplicasKeyError(e.to_string()))?;
                if value.len() < MIN_SECRET_BYTES {
                    return Err(ReplicasKeyError(format!(
                        "{} bytes; at least {MIN_SECRET_BYTES} are needed (`openssl rand -hex 32` makes one)",
                        value.len()
                    )));
                }
                Ok(MacKey::derive(&value))
            }
            (None, true) => Ok(MacKey::insecure()),
            (None, false) => Err(ReplicasKeyError(MISSING_KEY.to_owned())),
        }
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
        match self.backend {
            ReplicaBackend::Redis => self.redis_problem(),
            ReplicaBackend::Direct => self.direct_problem(),
        }
    }

    fn redis_problem(&self) -> Option<(&'static str, String)> {
        let Some(redis) = &self.redis else {
            return Some((
                "replicas.redis",
                "required with `backend: redis` (at least `url: redis://host:6379`)".into(),
            ));
        };
        for (field, given) in [
            ("replicas.listen", self.listen.is_some()),
            ("replicas.peers", !self.peers.is_empty()),
            ("replicas.key", self.key.is_some()),
            ("replicas.insecure", self.insecure),
            ("replicas.advertise", self.advertise.is_some()),
        ] {
            if given {
                return Some((
                    field,
                    "belongs to `backend: direct`; with `backend: redis` the replicas find each other through the Redis server, and its ACL user and password admit them".into(),
                ));
            }
        }
        redis.problem()
    }

    fn direct_problem(&self) -> Option<(&'static str, String)> {
        if self.redis.is_some() {
            return Some((
                "replicas.redis",
                "given without `backend: redis` (the default backend is `direct`)".into(),
            ));
        }
        let Some(listen) = self.listen else {
            return Some((
                "replicas.listen",
                "required with `backend: direct`: the UDP address this replica receives its peers' reports on".into(),
            ));
        };
        match (&self.key, self.insecure) {
            (None, false) => return Some(("replicas.key", MISSING_KEY.to_owned())),
            (Some(_), true) => {
                return Some((
                    "replicas.insecure",
                    "given with a key: remove `insecure: true` (the key is used) or the key"
                        .to_owned(),
                ));
            }
            (Some(Secret::Value(value)), false) if value.len() < MIN_SECRET_BYTES => {
                return Some((
                    "replicas.key",
                    format!(
                        "{} bytes; at least {MIN_SECRET_BYTES} are needed (`openssl rand -hex 32` makes one)",
                        value.len()
                    ),
                ));
            }
            (Some(Secret::Env { env }), false) if env.is_empty() => {
                return Some(("replicas.key", "`env` names no variable".to_owned()));
            }
            (Some(Secret::File { file }), false) if file.as_os_str().is_empty() => {
                return Some(("replicas.key", "`file` names no file".to_owned()));
            }
            _ => {}
        }
        if let Some(kubernetes) = self.peers.kubernetes() {
            if let Some(problem) = kubernetes.problem() {
                return Some(problem);
            }
            if self.peer_port() == 0 {
                return Some((
                    "replicas.peers.kubernetes.port",
                    "required when `listen` has no port".into(),
                ));
            }
        }
        // With peers on Kubernetes the pod's IP comes from `POD_IP` at start (checked there).
        if self.identity().ip().is_unspecified() && self.peers.kubernetes().is_none() {
            return Some((
                "replicas.advertise",
                format!("listen is {listen}: name the address the peers list for this replica"),
            ));
        }
        if let Some(peer) = self
            .peers
            .fixed()
            .iter()
            .find(|p| **p == listen || **p == self.identity())
        {
            return Some((
                "replicas.peers",
                format!("{peer} is this replica's own address"),
            ));
        }
        None
    }
}

const MISSING_KEY: &str = "required: the replicas authenticate every datagram with a shared secret \
     (`key: {env: NAME}`, `key: {file: path}`, or inline); `insecure: true` runs without one, \
     letting anyone who reaches `listen` write load and index entries";
