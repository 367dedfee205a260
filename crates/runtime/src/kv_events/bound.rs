//! A SUB socket Shepherd binds (upstream's `zmqEndpoint`, "global socket" mode): servers
//! connect to it and publish, each under a topic `kv@<ip[:port]>@<model>` that names it.
//!
//! The source in the topic is matched to a pool endpoint by its address, or by its IP when
//! exactly one endpoint has it. There is no replay here (Shepherd does not know the
//! publishers' replay sockets): a gap or a restart in a source's sequence drops that
//! endpoint's entries.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::kv_events::wire::{decode_sequence, parse_topic};
use shepherd_scheduler_core::kv_events::{ResetReason, SequenceTracker, SequenceVerdict};
use shepherd_scorers::producers::KvEventLimits;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;

use super::apply::Target;
use super::stats::KvEventStats;
use crate::shutdown::ShutdownSignal;
use crate::throttle::Throttle;
use crate::zmtp::{self, Connection, SocketType, ZmtpError};

/// Messages read from the peers and not yet applied (each at most `maxMessageBytes`).
const QUEUE: usize = 64;

/// A bound SUB socket for one precise producer.
#[derive(Debug)]
pub(crate) struct BoundSubscription {
    pub(crate) target: Target,
    /// Where to bind (`tcp://*:5557` binds every interface).
    pub(crate) bind: String,
    pub(crate) topic_filter: String,
    /// The bounds of its peers.
    pub(crate) limits: KvEventLimits,
}

/// Rate-limited logs shared by the peers' tasks.
#[derive(Debug, Default)]
struct Logs {
    oversized: Throttle,
    refused: Throttle,
    failed: Throttle,
}

impl BoundSubscription {
    /// Runs until `stop`. A bind failure is logged and retried every few seconds.
    pub(crate) async fn run(self, stop: ShutdownSignal) {
        let stats = Arc::clone(&self.target.stats);
        let listener = loop {
            match zmtp::endpoint::bind(&self.bind).await {
                Ok(listener) => {
                    let endpoint = listener
                        .local_addr()
                        .map_or_else(|_| self.bind.clone(), |a| format!("tcp://{a}"));
                    tracing::info!(
                        %endpoint,
                        max_connections = self.limits.max_connections,
                        "KV-event socket bound; servers may connect and publish"
                    );
                    break listener;
                }
                Err(error) => {
                    tracing::error!(bind = self.bind, %error, "cannot bind the KV-event socket; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(5)) => {}
                        () = stop.wait() => return,
                    }
                }
            }
        };
        stats
            .subscriptions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, mut rx) = mpsc::channel::<Vec<Bytes>>(QUEUE);
        let slots = Arc::new(Semaphore::new(self.limits.max_connections));
        let logs = Arc::new(Logs::default());
        let mut peers = JoinSet::new();
        let mut trackers: HashMap<String, SequenceTracker> = HashMap::new();
        let mut unrouted_logged = 0u64;
        loop {
            tokio::select! {
                accepted = listener.accept() => self.accept(accepted, &slots, &tx, &logs, &mut peers).await,
                Some(frames) = rx.recv() => self.handle(frames, &mut trackers, &mut unrouted_logged),
                Some(_) = peers.join_next(), if !peers.is_empty() => {}
                () = stop.wait() => break,
            }
        }
        peers.abort_all();
        while peers.join_next().await.is_some() {}
        stats
            .subscriptions
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// A new connection: served while there is a free slot, else refused (closed at once).
    async fn accept(
        &self,
        accepted: std::io::Result<(TcpStream, SocketAddr)>,
        slots: &Arc<Semaphore>,
        tx: &mpsc::Sender<Vec<Bytes>>,
        logs: &Arc<Logs>,
        peers: &mut JoinSet<()>,
    ) {
        let stats = &self.target.stats;
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, most likely: wait a little rather than spin.
                if let Some(suppressed) = logs.failed.allow() {
                    tracing::warn!(%error, suppressed, "KV-event socket cannot accept a connection");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                return;
            }
        };
        let Ok(permit) = Arc::clone(slots).try_acquire_owned() else {
            KvEventStats::bump(&stats.refused_connections);
            if let Some(suppressed) = logs.refused.allow() {
                tracing::warn!(
                    %peer,
                    suppressed,
                    max_connections = self.limits.max_connections,
                    "KV-event socket at kvEventsConfig.maxConnections; connection refused"
                );
            }
            drop(stream);
            return;
        };
        let _ = stream.set_nodelay(true);
        let peer_task = Peer {
            stats: Arc::clone(stats),
            logs: Arc::clone(logs),
            limits: self.limits,
            topic_filter: self.topic_filter.clone(),
            tx: tx.clone(),
            peer,
        };
        peers.spawn(peer_task.run(stream, permit));
    }

    /// One message from a peer: `[topic, seq, payload]`, the topic naming the endpoint.
    fn handle(
        &self,
        frames: Vec<Bytes>,
        trackers: &mut HashMap<String, SequenceTracker>,
        unrouted_logged: &mut u64,
    ) {
        let stats = &self.target.stats;
        let [topic, seq, payload] = frames.as_slice() else {
            KvEventStats::bump(&stats.undecodable);
            return;
        };
        let (Some(source), Some(seq)) = (
            parse_topic(topic).map(|t| t.source.to_string()),
            decode_sequence(seq)
                .ok()
                .and_then(|s| u64::try_from(s).ok()),
        ) else {
            KvEventStats::bump(&stats.undecodable);
            return;
        };
        let Some(endpoint) = self.resolve(&source) else {
            KvEventStats::bump(&stats.unrouted);
            *unrouted_logged += 1;
            if unrouted_logged.is_power_of_two() {
                tracing::warn!(
                    source,
                    count = *unrouted_logged,
                    "KV-event batch from no endpoint of the pool; skipped"
                );
            }
            return;
        };
        // Bounded: one tracker per source, and sources are matched to pool endpoints.
        let tracker = trackers.entry(endpoint.address().to_string()).or_default();
        match tracker.observe(seq) {
            SequenceVerdict::First | SequenceVerdict::InOrder => {}
            SequenceVerdict::Gap { from, to } => {
                KvEventStats::bump(&stats.gaps_lost);
                tracing::warn!(
                    endpoint = endpoint.address(),
                    from,
                    to,
                    "KV-event batches lost (no replay on a bound socket)"
                );
                self.target.reset(&endpoint, ResetReason::Gap);
            }
            SequenceVerdict::Restarted => {
                KvEventStats::bump(&stats.restarts);
                self.target.reset(&endpoint, ResetReason::Restarted);
            }
        }
        self.target.apply(&endpoint, payload);
        if trackers.len() > 4 * self.target.pool.snapshot().len() + 16 {
            let pool = self.target.pool.snapshot();
            trackers.retain(|address, _| pool.get_by_address(address).is_some());
        }
    }

    /// The endpoint a topic's source names: by address, else the only one with that IP.
    fn resolve(&self, source: &str) -> Option<Arc<Endpoint>> {
        let pool = self.target.pool.snapshot();
        if let Some(endpoint) = pool.get_by_address(source) {
            return Some(Arc::clone(endpoint));
        }
        let host = |address: &str| -> String {
            address
                .rsplit_once(':')
                .map_or(address, |(h, _)| h)
                .trim_matches(['[', ']'])
                .to_string()
        };
        let wanted = source.trim_matches(['[', ']']);
        let mut matching = pool
            .endpoints()
            .iter()
            .filter(|e| host(e.address()) == wanted);
        let first = matching.next()?;
        matching.next().is_none().then(|| Arc::clone(first))
    }
}

/// One peer of the bound socket: the handshake (within `handshakeTimeout`), the
/// subscription, then its messages onto the queue, until it leaves or breaks the protocol.
struct Peer {
    stats: Arc<KvEventStats>,
    logs: Arc<Logs>,
    limits: KvEventLimits,
    topic_filter: String,
    tx: mpsc::Sender<Vec<Bytes>>,
    peer: SocketAddr,
}

impl Peer {
    async fn run(self, stream: TcpStream, _slot: OwnedSemaphorePermit) {
        let limits = super::zmtp_limits(&self.limits);
        let mut connection = match Connection::handshake(stream, SocketType::Sub, limits).await {
            Ok(connection) => connection,
            Err(error) => {
                KvEventStats::bump(&self.stats.handshake_failures);
                if let Some(suppressed) = self.logs.failed.allow() {
                    tracing::warn!(peer = %self.peer, %error, suppressed, "KV-event peer failed its handshake; disconnected");
                }
                return;
            }
        };
        if connection
            .subscribe(self.topic_filter.as_bytes())
            .await
            .is_err()
        {
            return;
        }
        tracing::info!(peer = %self.peer, "KV-event publisher connected to the bound socket");
        self.stats
            .connected
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let error = loop {
            match connection.recv().await {
                Ok(frames) => {
                    if self.tx.send(frames).await.is_err() {
                        break None;
                    }
                }
                Err(error) => break Some(error),
            }
        };
        self.stats
            .connected
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        match error {
            Some(error) if error.is_oversized() => {
                KvEventStats::bump(&self.stats.oversized_bound);
                if let Some(suppressed) = self.logs.oversized.allow() {
                    tracing::warn!(
                        peer = %self.peer,
                        %error,
                        suppressed,
                        max_message_bytes = self.limits.max_message_bytes,
                        "KV-event peer declared a message over kvEventsConfig.maxMessageBytes; disconnected"
                    );
                }
            }
            Some(ZmtpError::Closed) | None => {
                tracing::info!(peer = %self.peer, "KV-event publisher left the bound socket");
            }
            Some(error) => {
                if let Some(suppressed) = self.logs.failed.allow() {
                    tracing::warn!(peer = %self.peer, %error, suppressed, "KV-event peer of the bound socket disconnected");
                }
            }
        }
    }
}
