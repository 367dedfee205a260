//! The subscriptions' counters, exported on the admin `/metrics`.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};

/// What the KV-event subscriptions did: connections, gaps and how they ended, restarts,
/// messages that could not be read or routed. Relaxed atomics; read by `/metrics`.
#[derive(Debug, Default)]
pub struct KvEventStats {
    pub(crate) connected: AtomicI64,
    pub(crate) subscriptions: AtomicI64,
    pub(crate) batches: AtomicU64,
    pub(crate) gaps_replayed: AtomicU64,
    pub(crate) gaps_lost: AtomicU64,
    pub(crate) restarts: AtomicU64,
    pub(crate) undecodable: AtomicU64,
    pub(crate) unrouted: AtomicU64,
    pub(crate) replay_requests: AtomicU64,
    pub(crate) replayed_batches: AtomicU64,
    pub(crate) oversized_publisher: AtomicU64,
    pub(crate) oversized_bound: AtomicU64,
    pub(crate) oversized_replay: AtomicU64,
    pub(crate) replays_abandoned: AtomicU64,
    pub(crate) refused_connections: AtomicU64,
    pub(crate) handshake_failures: AtomicU64,
}

impl KvEventStats {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Publishers currently connected.
    pub fn connected_publishers(&self) -> i64 {
        self.connected.load(Ordering::Relaxed)
    }

    /// Batches applied so far.
    pub fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    /// Gaps filled by a replay.
    pub fn gaps_replayed(&self) -> u64 {
        self.gaps_replayed.load(Ordering::Relaxed)
    }

    /// Gaps no replay filled (the endpoint's entries were dropped).
    pub fn gaps_lost(&self) -> u64 {
        self.gaps_lost.load(Ordering::Relaxed)
    }

    /// Peers disconnected for declaring a frame or message over `maxMessageBytes` (publishers,
    /// peers of the bound socket, replay sockets).
    pub fn oversized_peers(&self) -> u64 {
        self.oversized_publisher.load(Ordering::Relaxed)
            + self.oversized_bound.load(Ordering::Relaxed)
            + self.oversized_replay.load(Ordering::Relaxed)
    }

    /// Replays abandoned for carrying more than `maxReplayBytes` or `maxReplayBatches`.
    pub fn replays_abandoned(&self) -> u64 {
        self.replays_abandoned.load(Ordering::Relaxed)
    }

    /// Connections the bound socket refused at its `maxConnections`.
    pub fn refused_connections(&self) -> u64 {
        self.refused_connections.load(Ordering::Relaxed)
    }

    /// Publishers seen restarting (sequence going back).
    pub fn publisher_restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }
}

const CONNECTED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_connected_publishers",
    "Model-server KV-event publishers currently connected.",
);
const SUBSCRIPTIONS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_subscriptions",
    "KV-event subscriptions running (one per endpoint and precise producer, or per bound socket).",
);
const BATCHES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_batches_total",
    "KV-event batches applied to a precise index.",
);
const GAPS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_gaps_total",
    "Sequence gaps in a publisher's KV-event stream, by outcome (replayed, or lost: the \
     endpoint's entries were dropped).",
);
const RESTARTS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_publisher_restarts_total",
    "Publishers whose sequence went back (a restarted engine): the endpoint's entries were dropped.",
);
const UNDECODABLE: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_undecodable_total",
    "KV-event messages that could not be decoded (skipped).",
);
const UNROUTED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_unrouted_batches_total",
    "KV-event batches for no endpoint of the pool (unknown topic, or an endpoint not yet in the pool).",
);
const REPLAYS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_replay_requests_total",
    "Replay requests sent to publishers (after a connection, or to fill a gap).",
);
const REPLAYED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_replayed_batches_total",
    "Batches received from replay sockets and applied.",
);

const OVERSIZED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_oversized_total",
    "ZeroMQ peers disconnected for declaring a frame or message over kvEventsConfig.maxMessageBytes, \
     by socket (publisher: a subscription's publisher; bound: a peer of zmqEndpoint; replay: a replay socket).",
);
const ABANDONED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_replays_abandoned_total",
    "Replays abandoned for carrying more than kvEventsConfig.maxReplayBytes or maxReplayBatches \
     (handled as a failed replay).",
);
const REFUSED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_refused_connections_total",
    "Connections to the bound zmqEndpoint refused at kvEventsConfig.maxConnections.",
);
const HANDSHAKES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_handshake_failures_total",
    "ZMTP handshakes that failed or timed out (kvEventsConfig.handshakeTimeout), on every KV-event socket.",
);

impl MetricsSource for KvEventStats {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        v.gauge(
            CONNECTED,
            &[],
            self.connected.load(Ordering::Relaxed) as f64,
        );
        v.gauge(
            SUBSCRIPTIONS,
            &[],
            self.subscriptions.load(Ordering::Relaxed) as f64,
        );
        v.counter(BATCHES, &[], get(&self.batches));
        v.counter(GAPS, &[("outcome", "replayed")], get(&self.gaps_replayed));
        v.counter(GAPS, &[("outcome", "lost")], get(&self.gaps_lost));
        v.counter(RESTARTS, &[], get(&self.restarts));
        v.counter(UNDECODABLE, &[], get(&self.undecodable));
        v.counter(UNROUTED, &[], get(&self.unrouted));
        v.counter(REPLAYS, &[], get(&self.replay_requests));
        v.counter(REPLAYED, &[], get(&self.replayed_batches));
        for (socket, counter) in [
            ("publisher", &self.oversized_publisher),
            ("bound", &self.oversized_bound),
            ("replay", &self.oversized_replay),
        ] {
            v.counter(OVERSIZED, &[("socket", socket)], get(counter));
        }
        v.counter(ABANDONED, &[], get(&self.replays_abandoned));
        v.counter(REFUSED, &[], get(&self.refused_connections));
        v.counter(HANDSHAKES, &[], get(&self.handshake_failures));
    }
}
