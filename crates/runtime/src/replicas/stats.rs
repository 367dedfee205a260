//! The load exchange's counters, on `/metrics`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use tokio::time::Instant;

use super::gate::Rejection;

/// What the load exchange with peer replicas did.
#[derive(Debug, Default)]
pub struct ReplicaStats {
    pub(crate) peers: AtomicI64,
    pub(crate) reports_sent: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) send_errors: AtomicU64,
    pub(crate) received: AtomicU64,
    /// Datagrams dropped, by [`Rejection::ALL`]'s order.
    rejected: [AtomicU64; 7],
    /// When each reason was last logged (a flood logs once a second).
    logged: Mutex<[Option<Instant>; 7]>,
    pub(crate) unknown_endpoints: AtomicU64,
    pub(crate) expired: AtomicU64,
    pub(crate) deltas_sent: AtomicU64,
    pub(crate) delta_bytes_sent: AtomicU64,
    pub(crate) keys_sent: AtomicU64,
    pub(crate) keys_dropped: AtomicU64,
    pub(crate) deltas_received: AtomicU64,
    pub(crate) keys_received: AtomicU64,
    pub(crate) deltas_ignored: AtomicU64,
    pub(crate) deltas_unknown_index: AtomicU64,
    pub(crate) deltas_other_blocks: AtomicU64,
    /// Peers the discovery lists now (`replicas.peers: {kubernetes: ...}`).
    pub(crate) discovered: AtomicI64,
    /// Discovered peers without a slot (past `maxPeers`).
    pub(crate) over_limit: AtomicI64,
    /// Whether the peer discovery cannot reach the API server (the last peers stay).
    pub(crate) discovery_stale: AtomicBool,
    /// Whether the peers are discovered (the three figures above are exported then only).
    pub(crate) discovering: AtomicBool,
}

impl ReplicaStats {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Peers whose reports count now.
    pub fn live_peers(&self) -> i64 {
        self.peers.load(Ordering::Relaxed)
    }

    /// Peers the discovery lists now.
    pub fn discovered_peers(&self) -> i64 {
        self.discovered.load(Ordering::Relaxed)
    }

    /// Whether the peer discovery is stale (the API server does not answer).
    pub fn discovery_stale(&self) -> bool {
        self.discovery_stale.load(Ordering::Relaxed)
    }

    /// Datagrams received from peers and taken in.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Bytes of load reports sent to peers.
    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent.load(Ordering::Relaxed)
    }

    /// Datagrams dropped for `why`.
    pub fn rejected(&self, why: Rejection) -> u64 {
        self.rejected[why as usize].load(Ordering::Relaxed)
    }

    /// Counts a datagram dropped for `why` from `from`, and logs it unless that reason was
    /// logged less than a second ago.
    pub(crate) fn reject(&self, why: Rejection, from: SocketAddr) {
        let total = self.rejected[why as usize].fetch_add(1, Ordering::Relaxed) + 1;
        let now = Instant::now();
        let mut logged = self.logged.lock();
        let last = &mut logged[why as usize];
        if last.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1)) {
            *last = Some(now);
            drop(logged);
            tracing::warn!(
                %from,
                reason = why.as_str(),
                total,
                "dropped a replica exchange datagram (logged at most once a second per reason)"
            );
        }
    }
}

const PEERS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_live_peers",
    "Peer replicas whose load reports count now (reported within the expiry).",
);
const SENT: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_reports_sent_total",
    "Load report datagrams sent to peer replicas.",
);
const BYTES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_sent_bytes_total",
    "Bytes of load reports sent to peer replicas.",
);
const SEND_ERRORS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_send_errors_total",
    "Load reports that could not be sent.",
);
const RECEIVED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_reports_received_total",
    "Load report datagrams received from peer replicas and taken in.",
);
const REJECTED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_rejected_datagrams_total",
    "Datagrams dropped, by reason: unknown_peer (a source or sender not in replicas.peers), truncated, oversized, bad_mac (not sealed with the replicas' key), replayed, stale (sealed over 60 s from this clock), malformed.",
);
const UNKNOWN_ENDPOINTS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_unknown_endpoints_total",
    "Endpoints named in a peer's load report or index delta that are not in this replica's pool (ignored).",
);
const EXPIRED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_expired_peers_total",
    "Peers forgotten after falling silent for the expiry.",
);

const DELTAS_SENT: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_index_deltas_sent_total",
    "Index delta datagrams sent to peer replicas (the block keys this replica's picks recorded).",
);
const DELTA_BYTES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_index_delta_bytes_sent_total",
    "Bytes of index deltas sent to peer replicas.",
);
const KEYS_SENT: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_index_keys_sent_total",
    "Block keys sent to peer replicas (each key counted once per peer).",
);
const KEYS_DROPPED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_index_keys_dropped_total",
    "Block keys not sent because an interval's journal was full.",
);
const DELTAS_RECEIVED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_index_deltas_received_total",
    "Index delta datagrams received from peer replicas and recorded.",
);
const KEYS_RECEIVED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_index_keys_received_total",
    "Block keys recorded from peer replicas' index deltas.",
);
const DELTAS_REFUSED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_index_deltas_refused_total",
    "Index deltas not recorded, by reason: index deltas are off here, no index of that name, or an index with other blocks.",
);

const DISCOVERED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_discovered_peers",
    "Peer replicas the Kubernetes peer discovery lists now (Ready pods of the selector, this replica excluded).",
);
const OVER_LIMIT: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_peers_over_limit",
    "Discovered peer replicas not heard because replicas.peers.kubernetes.maxPeers slots are taken.",
);
const DISCOVERY_STALE: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_peer_discovery_stale",
    "1 while the peer discovery cannot watch the API server (the last known peers stay).",
);

impl MetricsSource for ReplicaStats {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        v.gauge(PEERS, &[], self.peers.load(Ordering::Relaxed) as f64);
        v.counter(SENT, &[], get(&self.reports_sent));
        v.counter(BYTES, &[], get(&self.bytes_sent));
        v.counter(SEND_ERRORS, &[], get(&self.send_errors));
        v.counter(RECEIVED, &[], get(&self.received));
        for why in Rejection::ALL {
            v.counter(REJECTED, &[("reason", why.as_str())], self.rejected(why));
        }
        v.counter(UNKNOWN_ENDPOINTS, &[], get(&self.unknown_endpoints));
        v.counter(EXPIRED, &[], get(&self.expired));
        v.counter(DELTAS_SENT, &[], get(&self.deltas_sent));
        v.counter(DELTA_BYTES, &[], get(&self.delta_bytes_sent));
        v.counter(KEYS_SENT, &[], get(&self.keys_sent));
        v.counter(KEYS_DROPPED, &[], get(&self.keys_dropped));
        v.counter(DELTAS_RECEIVED, &[], get(&self.deltas_received));
        v.counter(KEYS_RECEIVED, &[], get(&self.keys_received));
        for (reason, counter) in [
            ("off", &self.deltas_ignored),
            ("unknown_index", &self.deltas_unknown_index),
            ("other_blocks", &self.deltas_other_blocks),
        ] {
            v.counter(DELTAS_REFUSED, &[("reason", reason)], get(counter));
        }
        if self.discovering.load(Ordering::Relaxed) {
            v.gauge(
                DISCOVERED,
                &[],
                self.discovered.load(Ordering::Relaxed) as f64,
            );
            v.gauge(
                OVER_LIMIT,
                &[],
                self.over_limit.load(Ordering::Relaxed) as f64,
            );
            v.gauge(
                DISCOVERY_STALE,
                &[],
                f64::from(u8::from(self.discovery_stale())),
            );
        }
    }
}
